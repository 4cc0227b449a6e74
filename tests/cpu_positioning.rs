//! Sources and receivers off the grid: Kaiser-windowed sinc positioning against exact solutions,
//! with the trilinear figure printed beside it. Free space (a dozen seeded receivers around an
//! off-grid source), just below a free surface (the image source), and the amplitude of the
//! reflection from a plane interface and from the free surface.

mod common;

use common::{Geometry, dist, off_grid_free_space, off_grid_free_space_errors, relative_l2, run};
use seismic_run::problem::Problem;
use std::f64::consts::PI;

const C: f64 = 2000.0;
const H: f64 = 10.0;
/// 10 Hz peak, 25 Hz maximum: 8 points per minimum wavelength at 10 m.
const F0: f64 = 10.0;
const DELAY: f64 = 1.5 / F0;
/// The Ricker wavelet is below 2% of its peak beyond 0.9 / F0 from it: 18 points of path at C.
const HALF_WAVELET: f64 = 0.9 / F0;

fn constant(c: f64) -> String {
    format!("kind = \"constant\"\nvp = {c}")
}

/// Relative L2 error of each trace against `exact(r index, t)` over samples up to `t_end[i]`.
fn errors(p: &Problem, traces: &[Vec<f64>], t_end: &[f64], exact: impl Fn(usize, f64) -> f64) -> Vec<f64> {
    traces
        .iter()
        .enumerate()
        .map(|(i, trace)| {
            let n = ((t_end[i] / p.dt) as usize).min(trace.len());
            let e: Vec<f64> = (0..n).map(|k| exact(i, (k + 1) as f64 * p.dt)).collect();
            relative_l2(trace, &e, n)
        })
        .collect()
}

/// Checks that no reflection from the rigid walls (zero halo one point outside the grid on every
/// face but a free surface) reaches a receiver before its window ends at r_end / C + DELAY + 0.15
/// (r_end: the latest arrival compared). A wall's arrival starts HALF_WAVELET before its peak.
fn assert_walls_silent(g: &Geometry, receiver: [f64; 3], r_end: f64) {
    for a in 0..3 {
        let faces = [-g.spacing, g.shape[a] as f64 * g.spacing];
        for (k, wall) in faces.into_iter().enumerate() {
            if a == 2 && k == 0 && g.free_surface {
                continue;
            }
            let mut image = g.source;
            image[a] = 2.0 * wall - image[a];
            let path = dist(image, receiver);
            assert!(
                path - C * HALF_WAVELET > r_end + C * 0.15,
                "receiver {receiver:?}: the wall at {wall} m along axis {a} reflects into the window"
            );
        }
    }
}

fn ricker_at(p: &Problem, t: f64) -> f64 {
    p.source().wavelet.at(t)
}

fn free_space_errors(method: &'static str) -> Vec<(f64, f64)> {
    let g = off_grid_free_space(method);
    let p = g.problem();
    let traces = run::<f32>(&p);
    for &x in &g.receivers {
        assert_walls_silent(&g, x, dist(x, g.source));
    }
    off_grid_free_space_errors(&g, &p, &traces)
}

#[test]
fn off_grid_source_and_receivers_match_the_free_space_solution() {
    let p = off_grid_free_space("sinc").problem();
    assert_eq!(p.source().taps.len(), 512);
    assert!(p.receivers.iter().all(|r| r.taps.len() == 512));
    let ppw = C / p.source().wavelet.max_frequency() / H;
    assert!(ppw >= 8.0, "{ppw} points per minimum wavelength");
    let sinc = free_space_errors("sinc");
    let trilinear = free_space_errors("trilinear");
    for ((r, s), (_, t)) in sinc.iter().zip(&trilinear) {
        eprintln!("free space: r = {r:5.1} m: relative L2 error sinc {s:.2e}, trilinear {t:.2e}");
    }
    let worst = |v: &[(f64, f64)]| v.iter().map(|x| x.1).fold(0.0, f64::max);
    eprintln!("free space: worst of 12: sinc {:.2e}, trilinear {:.2e}", worst(&sinc), worst(&trilinear));
    assert!(worst(&sinc) <= 3e-3, "sinc: worst relative L2 error {}", worst(&sinc));
}

/// A source 1.4 points below the free surface and receivers 0.3 to 1.9 points below it, off the
/// grid in every axis: the exact solution is the direct wave minus its image above the surface.
fn below_surface(method: &'static str, half_width: Option<usize>) -> (Vec<[f64; 3]>, Vec<f64>) {
    let n = 91;
    let source = [455.3, 452.6, 14.0];
    let receivers = vec![[555.7, 452.6, 17.2], [455.3, 603.1, 3.1], [342.4, 380.9, 19.0], [590.8, 560.2, 8.6]];
    let g = Geometry {
        shape: [n, n, 40],
        spacing: H,
        model: constant(C),
        frequency: F0,
        delay: DELAY,
        dt: None,
        cfl_safety: 0.2,
        duration: DELAY + 0.15 + 200.0 / C,
        source,
        receivers: receivers.clone(),
        method,
        half_width,
        boundary: "none",
        free_surface: true,
    };
    let p = g.problem();
    let traces = run::<f64>(&p);
    let image = [source[0], source[1], -source[2]];
    let (r1, r2): (Vec<f64>, Vec<f64>) = receivers.iter().map(|&x| (dist(x, source), dist(x, image))).unzip();
    for (&x, &r) in receivers.iter().zip(&r2) {
        assert_walls_silent(&g, x, r);
    }
    let t_end: Vec<f64> = r2.iter().map(|r| r / C + DELAY + 0.15).collect();
    let e = errors(&p, &traces, &t_end, |i, t| {
        ricker_at(&p, t - r1[i] / C) / (4.0 * PI * r1[i]) - ricker_at(&p, t - r2[i] / C) / (4.0 * PI * r2[i])
    });
    (receivers, e)
}

/// The pressure vanishes at the surface, so a receiver a fraction of a point below it records a
/// small signal, and the sinc's error, a fraction of the field's amplitude, is a larger fraction of
/// that signal: at r = 4, up to 1.6% at 0.1 point and 0.6% at 0.3 (1D, Hicks' b, <= 8 points per
/// wavelength), under 0.3% from 0.5 point down; at r = 6 under 0.06% everywhere.
#[test]
fn off_grid_source_and_receivers_below_a_free_surface_match_the_image_source() {
    let (receivers, sinc) = below_surface("sinc", None);
    let (_, sinc6) = below_surface("sinc", Some(6));
    let (_, trilinear) = below_surface("trilinear", None);
    for (i, x) in receivers.iter().enumerate() {
        eprintln!(
            "below the free surface: source 14.0 m deep, receiver {x:?}: relative L2 error sinc {:.2e} (r = 6: {:.2e}), \
             trilinear {:.2e}",
            sinc[i], sinc6[i], trilinear[i]
        );
    }
    for (i, x) in receivers.iter().enumerate() {
        if x[2] >= 0.5 * H {
            assert!(sinc[i] <= 3e-3, "sinc r = 4: relative L2 error {} at {x:?}", sinc[i]);
        }
        assert!(sinc6[i] <= 3e-3, "sinc r = 6: relative L2 error {} at {x:?}", sinc6[i]);
    }
}

/// Least-squares amplitude of `trace` on `model` over samples whose time lies in `window`.
fn fitted_amplitude(p: &Problem, trace: &[f64], model: impl Fn(f64) -> f64, window: (f64, f64)) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (k, v) in trace.iter().enumerate() {
        let t = (k + 1) as f64 * p.dt;
        if t >= window.0 && t <= window.1 {
            let m = model(t);
            num += v * m;
            den += m * m;
        }
    }
    num / den
}

/// Normal incidence on a plane interface (2000 over 3000 m/s, constant density) below a free
/// surface; the off-grid receiver sits 45.5 m above the off-grid source on one vertical.
/// The interface reflection is the difference between the layered run and the same run on the
/// upper velocity alone (same dt), which cancels the direct wave, the surface reflection and every
/// wall reflection of the direct wave exactly. For a point source the reflected wave is not just
/// R0 s(t - L/c1) / (4 pi L): at normal incidence the exact (Cagniard-de Hoop) reflection is
/// (1 / 4 pi L) d/dt [H(t - L/c1) R(t / L)], with R(q) the plane-wave coefficient at vertical
/// slowness q, R(1/c1) = R0 = (c2 - c1) / (c2 + c1); its tail makes the fitted amplitude 2.5% low
/// at this L = 690 m. The test fits the simulated reflection on that exact waveform and asks for
/// R0 within 2%; the surface reflection (an exact image, R = -1) within 2% of -1 likewise.
#[test]
fn reflection_amplitudes_at_normal_incidence() {
    let (c1, c2) = (C, 3000.0);
    let n = 81;
    let (zs, zr, zi) = (233.0, 187.5, 555.0);
    let source = [403.7, 406.2, zs];
    let receiver = [403.7, 406.2, zr];
    let layered = Geometry {
        shape: [n, n, 84],
        spacing: H,
        model: format!("kind = \"layered\"\ndepths = [{zi}]\nvelocities = [{c1}, {c2}]"),
        frequency: F0,
        delay: DELAY,
        dt: None,
        // Leapfrog phase error grows with path: 0.3 of the limit keeps it near 0.5% at 700 m.
        cfl_safety: 0.3,
        duration: DELAY + HALF_WAVELET + 700.0 / c1,
        source,
        receivers: vec![receiver],
        method: "sinc",
        half_width: None,
        boundary: "none",
        free_surface: true,
    };
    let pl = layered.problem();
    let upper = Geometry { model: constant(c1), dt: Some(pl.dt), ..layered.clone() };
    let pu = upper.problem();
    assert_eq!((pl.dt, pl.steps), (pu.dt, pu.steps));
    let (tl, tu) = (run::<f64>(&pl).remove(0), run::<f64>(&pu).remove(0));
    let reflected: Vec<f64> = tl.iter().zip(&tu).map(|(a, b)| a - b).collect();

    // The interface reflection, path L = (zi - zs) + (zi - zr); every other difference arrives
    // later: the surface multiples after 2 zr more, the bottom wall (at 840 m) after 2 x 285 m at c2.
    let l = (zi - zs) + (zi - zr);
    let r0 = (c2 - c1) / (c2 + c1);
    let slowness2 = 1.0 / (c1 * c1) - 1.0 / (c2 * c2);
    // dR/dq: R(q) = (q - w) / (q + w), w = sqrt(q^2 - (1/c1^2 - 1/c2^2)).
    let dr = |q: f64| {
        let w = (q * q - slowness2).sqrt();
        -2.0 * slowness2 / (w * (q + w).powi(2))
    };
    let w = |t: f64| pl.source().wavelet.at(t);
    let exact = |t: f64| {
        // R0 s(t - L/c1) + (1/L) int_{L/c1}^{t} R'(tau / L) s(t - tau) d tau, by the midpoint rule.
        let t0 = l / c1;
        let steps = (((t - t0) / 2e-5).ceil() as usize).max(1);
        let d = (t - t0).max(0.0) / steps as f64;
        let tail: f64 = (0..steps).map(|k| t0 + (k as f64 + 0.5) * d).map(|tau| dr(tau / l) * w(t - tau)).sum();
        (r0 * w(t - t0) + tail * d / l) / (4.0 * PI * l)
    };
    let arrival = l / c1 + DELAY;
    let window = (arrival - HALF_WAVELET, arrival + HALF_WAVELET);
    assert!(2.0 * zr > C * HALF_WAVELET * 2.0 && 2.0 * (840.0 - zi) / c2 > 2.0 * HALF_WAVELET);
    let a = fitted_amplitude(&pl, &reflected, exact, window);
    let plane = fitted_amplitude(&pl, &reflected, |t| r0 * w(t - l / c1) / (4.0 * PI * l), window);
    let exact_on_plane = {
        let (mut num, mut den) = (0.0, 0.0);
        for k in 0..pl.steps {
            let t = (k + 1) as f64 * pl.dt;
            if t >= window.0 && t <= window.1 {
                let m = r0 * w(t - l / c1) / (4.0 * PI * l);
                num += exact(t) * m;
                den += m * m;
            }
        }
        num / den
    };
    eprintln!(
        "interface reflection: L = {l} m, R0 = {r0}: measured R = {:.4} ({:+.2}% of R0) on the exact point-source \
         waveform; fitted on R0 s(t - L/c1) / (4 pi L) alone: {:.4} (the exact waveform itself fits there at {:.4})",
        a * r0,
        (a - 1.0) * 100.0,
        plane * r0,
        exact_on_plane * r0
    );
    assert!((a - 1.0).abs() <= 0.02, "interface reflection coefficient {} against {r0}", a * r0);

    // The free surface in the run on c1 alone: the image at path zs + zr, reflection coefficient -1.
    let ls = zs + zr;
    let arrival = ls / c1 + DELAY;
    let window = (arrival - HALF_WAVELET, arrival + HALF_WAVELET);
    assert!(ls - (zs - zr) > 2.0 * C * HALF_WAVELET, "surface reflection separate from the direct wave");
    let s = fitted_amplitude(&pu, &tu, |t| w(t - ls / c1) / (4.0 * PI * ls), window);
    eprintln!("free-surface reflection: path {ls} m: measured R = {s:.4} ({:+.2}% of -1)", (-s - 1.0) * 100.0);
    assert!((s + 1.0).abs() <= 0.02, "free-surface reflection coefficient {s}");
}
