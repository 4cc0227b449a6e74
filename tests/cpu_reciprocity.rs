//! Swapping source and receiver in a heterogeneous model gives the same trace.
//! With M = diag(1/c^2) and the symmetric discrete Laplacian L, the scheme is
//! M (p^{n+1} - 2 p^n + p^{n-1}) = dt^2 (L p^n + e_s s^n), whose Green's function is symmetric:
//! exact in exact arithmetic, so the f32 traces agree to rounding. Off the grid the source spreads
//! over the same taps and weights as a receiver at its position reads (e_s becomes sum w_k e_k),
//! which keeps the symmetry; with a free surface the mirrored weights do the same on both sides.

mod common;

use common::{Geometry, Lcg, Setup, max_abs, run};

fn heterogeneous(n: usize) -> Vec<f32> {
    // Three layers with a smooth random perturbation (a sum of a few random plane waves).
    let mut rng = Lcg(7);
    let waves: Vec<([f64; 3], f64)> =
        (0..6).map(|_| ([rng.next() * 0.4, rng.next() * 0.4, rng.next() * 0.4], rng.next() * 3.0)).collect();
    let mut vp = Vec::with_capacity(n * n * n);
    for iz in 0..n {
        for iy in 0..n {
            for ix in 0..n {
                let base = if iz < n / 3 {
                    1800.0
                } else if iz < 2 * n / 3 {
                    2600.0
                } else {
                    3400.0
                };
                let x = [ix as f64, iy as f64, iz as f64];
                let wiggle: f64 =
                    waves.iter().map(|(k, ph)| (k[0] * x[0] + k[1] * x[1] + k[2] * x[2] + ph).sin()).sum();
                vp.push((base + 60.0 * wiggle) as f32);
            }
        }
    }
    vp
}

fn trace(n: usize, src: [usize; 3], rec: [usize; 3], vp: Vec<f32>, f32_run: bool) -> Vec<f64> {
    let setup = Setup {
        shape: [n; 3],
        spacing: 10.0,
        // The constant model's key must be valid; problem_with uses the heterogeneous velocities given.
        vp: 2000.0,
        radius: 4,
        frequency: 12.0,
        delay: 0.1,
        cfl_safety: 0.8,
        duration: 0.5,
        source: src,
        receivers: vec![rec],
        // The zero-halo box is exactly reciprocal; reflections from it only make the test harder.
        boundary: "none",
        width: 0,
        free_surface: false,
    };
    let p = setup.problem_with(vp);
    let mut t = if f32_run { run::<f32>(&p) } else { run::<f64>(&p) };
    t.remove(0)
}

#[test]
fn swapping_source_and_receiver_gives_the_same_trace_to_rounding() {
    let n = 60;
    let vp = heterogeneous(n);
    let (a, b) = ([12, 20, 8], [45, 38, 50]);
    for (label, single, tol) in [("f32", true, 2e-5), ("f64", false, 1e-12)] {
        let ab = trace(n, a, b, vp.clone(), single);
        let ba = trace(n, b, a, vp.clone(), single);
        let scale = max_abs(&ab);
        let diff = ab.iter().zip(&ba).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale;
        eprintln!("reciprocity ({label}): max |G(b,a) - G(a,b)| / max |G| = {diff:.2e} over {} samples", ab.len());
        assert!(scale > 0.0 && diff <= tol, "{label}: reciprocity error {diff}");
    }
}

fn off_grid_trace(n: usize, src: [f64; 3], rec: [f64; 3], vp: Vec<f32>, f32_run: bool, free_surface: bool) -> Vec<f64> {
    let g = Geometry {
        shape: [n; 3],
        spacing: 10.0,
        model: "kind = \"constant\"\nvp = 2000.0".into(),
        frequency: 12.0,
        delay: 0.1,
        dt: None,
        cfl_safety: 0.8,
        duration: 0.5,
        source: src,
        receivers: vec![rec],
        method: "sinc",
        half_width: None,
        boundary: "none",
        free_surface,
    };
    let p = g.problem_with(vp);
    // Within 4 points of the surface the z weights fold onto 5 points below it.
    assert_eq!(p.source().taps.len(), if src[2] < 40.0 { 320 } else { 512 });
    let mut t = if f32_run { run::<f32>(&p) } else { run::<f64>(&p) };
    t.remove(0)
}

#[test]
fn swapping_off_grid_sinc_source_and_receiver_gives_the_same_trace_to_rounding() {
    let n = 60;
    let vp = heterogeneous(n);
    // Off the grid on every axis; with the free surface the source sits 1.3 points below it.
    for free_surface in [false, true] {
        let (a, b) = ([123.4, 201.7, if free_surface { 13.0 } else { 84.6 }], [447.2, 383.9, 496.1]);
        for (label, single, tol) in [("f32", true, 2e-5), ("f64", false, 1e-12)] {
            let ab = off_grid_trace(n, a, b, vp.clone(), single, free_surface);
            let ba = off_grid_trace(n, b, a, vp.clone(), single, free_surface);
            let scale = max_abs(&ab);
            let diff = ab.iter().zip(&ba).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale;
            eprintln!(
                "reciprocity off the grid, sinc ({label}, free surface {free_surface}): max |G(b,a) - G(a,b)| / max |G| \
                 = {diff:.2e}"
            );
            assert!(scale > 0.0 && diff <= tol, "{label}: reciprocity error {diff}");
        }
    }
}
