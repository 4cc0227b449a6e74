//! The boundaries: CPML reflection against a run on a larger domain, the
//! sponge against no absorption at all, and the free surface against the image-source solution.

mod common;

use common::reflection::{self, Case, Incidence, db, default_width, measure};
use common::{
    Setup, distance, long_run_problem, max_abs, max_abs_diff, peak_and_late, point_source_pressure, relative_l2, run,
};
use seismic_run::backend::cpu::CpuSolver;

const C: f64 = 2000.0;
const H: f64 = 10.0;
/// 8 Hz peak, 20 Hz maximum: 10 points per minimum wavelength at 10 m.
const F0: f64 = 8.0;
const DELAY: f64 = 1.2 / F0;
/// Small domain: 70 points a side, the source in the middle, layers of 20 points.
const SMALL: usize = 70;
const WIDTH: usize = 20;
/// Receivers, relative to the source: 5 points before a face's layer, before an edge, a corner.
const OFFSETS: [[isize; 3]; 4] = [[10, 0, 0], [0, 0, -10], [10, 10, 0], [10, 10, 10]];
/// End of the window: the wavelet has passed every receiver after its reflection from the outer
/// edge of the small domain (source -> edge -> receiver is at most 60 points).
const T_END: f64 = DELAY + 0.15 + 60.0 * H / C;

fn setup(n: usize, boundary: &'static str) -> Setup {
    let centre = n / 2;
    let at = |o: [isize; 3]| o.map(|d| (centre as isize + d) as usize);
    Setup {
        shape: [n; 3],
        spacing: H,
        vp: C,
        radius: 4,
        frequency: F0,
        delay: DELAY,
        cfl_safety: 0.8,
        duration: T_END,
        source: [centre; 3],
        receivers: OFFSETS.iter().map(|&o| at(o)).collect(),
        boundary,
        width: WIDTH,
        free_surface: false,
    }
}

/// Traces of the small domain with `boundary` and of a domain so large that nothing comes back
/// from its walls before T_END; both f32, same dt and steps.
fn small_and_reference(boundary: &'static str) -> (Vec<Vec<f64>>, Vec<Vec<f64>>, usize) {
    let small = setup(SMALL, boundary).problem();
    // Walls of the large domain: 2 D - r > c T_END for every receiver.
    let half = ((C * T_END + 18.0 * H) / (2.0 * H)).ceil() as usize + 2;
    let large = setup(2 * half + 1, "none").problem();
    assert_eq!(small.dt, large.dt);
    assert_eq!(small.steps, large.steps);
    let window = ((T_END / small.dt) as usize).min(small.steps);
    (run::<f32>(&small), run::<f32>(&large), window)
}

/// max |small - reference| / max |reference| over the window, per receiver.
fn reflections(small: &[Vec<f64>], reference: &[Vec<f64>], window: usize) -> Vec<f64> {
    small.iter().zip(reference).map(|(s, r)| max_abs_diff(s, r, 0..window) / max_abs(&r[..window])).collect()
}

/// The default CPML reflects at most -60 dB (small domain against large, f32) at 10 points per
/// minimum wavelength, R = 4, before a face, an edge and a corner.
#[test]
fn default_cpml_reflects_under_minus_60_db_at_normal_incidence() {
    default_cpml_reflects_under_minus_60_db(Incidence::Normal);
}

/// As above, along a face: the reflection off it at 59 to 79 degrees from the normal, and off
/// the x faces near the ends.
#[test]
fn default_cpml_reflects_under_minus_60_db_at_grazing_incidence() {
    default_cpml_reflects_under_minus_60_db(Incidence::Grazing);
}

fn default_cpml_reflects_under_minus_60_db(incidence: Incidence) {
    let case = Case { points_per_wavelength: 10.0, radius: 4, incidence };
    let width = default_width(case.radius);
    for (i, r) in measure(&case, width, run::<f32>).into_iter().enumerate() {
        eprintln!("cpml: width {width}, {incidence:?} incidence, receiver {i}: reflection {r:.2e} ({:.1} dB)", db(r));
        assert!(db(r) <= -60.0, "CPML reflection {r:.2e} ({:.1} dB) at receiver {i}, {incidence:?}", db(r));
    }
}

/// The tables of docs/numerics.md ("Absorbing boundaries") behind the default width by radius
/// (`boundary::default_width`): per case (stencil radius, points per minimum wavelength,
/// incidence), the largest reflection over its receivers with the default profiles in layers of
/// each width, printed as the tables' rows, a radius's rows together. The lists come from the
/// environment, comma-separated: `RADII` (default 1 to 8) and `WIDTHS` (default 8,12,16; the
/// R = 1 table is `RADII=1 WIDTHS=20,24,28,32,36,40`). The window makes room for the widest layer
/// of the list (and for 20 points at least, as the other reflection tests' does).
#[test]
#[ignore = "measurement, about 20 minutes on two cores with the default lists"]
fn cpml_reflection_by_width() {
    let radii: Vec<usize> = env_list("RADII", "1,2,3,4,5,6,7,8");
    let widths: Vec<usize> = env_list("WIDTHS", "8,12,16");
    let widest = widths.iter().copied().fold(reflection::MAX_WIDTH, usize::max);
    let names: Vec<String> = widths.iter().map(|w| w.to_string()).collect();
    println!("| R | points per wavelength | incidence | {} |", names.join(" | "));
    for &radius in &radii {
        for points_per_wavelength in [5.0, 10.0, 15.0] {
            for incidence in [Incidence::Normal, Incidence::Grazing] {
                let case = Case { points_per_wavelength, radius, incidence };
                let reference = run::<f32>(&case.large_in(widest));
                let worst: Vec<String> = widths
                    .iter()
                    .map(|&w| {
                        let r = reflection::reflections(&run::<f32>(&case.small_in(w, widest)), &reference);
                        format!("{:.0}", db(r.into_iter().fold(0.0, f64::max)))
                    })
                    .collect();
                println!("| {radius} | {points_per_wavelength} | {incidence:?} | {} |", worst.join(" | "));
            }
        }
    }
}

/// The comma-separated list `name` from the environment, or `default`.
fn env_list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    let text = std::env::var(name).unwrap_or_else(|_| default.into());
    text.split(',').map(|s| s.trim().parse().unwrap_or_else(|_| panic!("{name}: cannot parse {s:?}"))).collect()
}

#[test]
fn sponge_absorbs_most_of_the_reflection() {
    let (sponge, reference, window) = small_and_reference("sponge");
    let bare = run::<f32>(&setup(SMALL, "none").problem());
    let with = reflections(&sponge, &reference, window);
    let without = reflections(&bare, &reference, window);
    for ((o, s), n) in OFFSETS.iter().zip(with).zip(without) {
        eprintln!(
            "sponge: width {WIDTH}, receiver at {o:?}: reflection {s:.2e} ({:.1} dB), without absorption {n:.2e} ({:.1} dB)",
            db(s),
            db(n)
        );
        // Cerjan's sponge is a crude absorber (about -20 dB here); ask for 12 dB better than none.
        assert!(s < 0.25 * n, "sponge reflection {s} not 4x below the rigid wall's {n} at {o:?}");
    }
}

#[test]
fn free_surface_matches_the_image_source() {
    // Source 8 points below z = 0; walls far enough that only the surface reflects in the window.
    let (half, depth) = (57, 8);
    let src = [half, half, depth];
    let receivers =
        vec![[half + 10, half, depth], [half + 15, half, 4], [half, half + 20, 16], [half - 8, half + 8, 12]];
    let f0 = 10.0; // 8 points per minimum wavelength, as in the free-space test
    let delay = 1.5 / f0;
    let t_end = delay + 0.15 + 320.0 / C;
    let setup = Setup {
        shape: [2 * half + 1, 2 * half + 1, depth + half + 1],
        spacing: H,
        vp: C,
        radius: 4,
        frequency: f0,
        delay,
        cfl_safety: 0.2,
        duration: t_end,
        source: src,
        receivers: receivers.clone(),
        boundary: "none",
        width: 0,
        free_surface: true,
    };
    let p = setup.problem();
    let traces = run::<f64>(&p);
    let image = [src[0], src[1], 0];
    for (rec, trace) in receivers.iter().zip(&traces) {
        let r1 = distance(&p, src, *rec);
        // Distance to the image at z = -depth: the receiver's distance to (xs, ys, 0) mirrored.
        let mirrored = {
            let d = distance(&p, image, *rec);
            let dz = (rec[2] + depth) as f64 * H;
            let horiz2 = d * d - (rec[2] as f64 * H).powi(2);
            (horiz2 + dz * dz).sqrt()
        };
        let t = r1.max(mirrored) / C + delay + 0.15;
        assert!(t < (2.0 * half as f64 * H - r1) / C, "window overlaps a wall reflection");
        let samples = (t / p.dt) as usize;
        let exact: Vec<f64> = (0..samples)
            .map(|i| {
                let t = (i + 1) as f64 * p.dt;
                point_source_pressure(&p, r1, C, t) - point_source_pressure(&p, mirrored, C, t)
            })
            .collect();
        let err = relative_l2(trace, &exact, samples);
        eprintln!(
            "free surface: receiver {rec:?}, r = {r1:.0} m, image at {mirrored:.0} m: relative L2 error {err:.3e}"
        );
        assert!(err <= 0.01, "free surface: relative L2 error {err} at {rec:?}");
    }
}

/// CPML stays stable over a long run at 0.9 of the CFL limit: a thin 4-point layer on a 16^3 grid
/// under a free surface, 10,000 steps (the case where the product-rule form grows to 1e11,
/// docs/design/boundary-layers.md). The field must stay finite and decay to under 1e-6 of its peak
/// (measured with the self-adjoint form: about 1e-10 of the peak).
#[test]
fn cpml_long_run_is_stable() {
    let p = long_run_problem();
    let mut s = CpuSolver::<f32>::new(&p).expect("CPU solver");
    let (peak, late) = peak_and_late(p.steps, |n| {
        s.advance(n);
        s.field().iter().fold(0.0f32, |m, v| m.max(v.abs()))
    });
    eprintln!("f32 10,000 steps: peak {peak:.3e}, last 100 steps {late:.3e}");
    assert!(late <= peak * 1e-6, "the field did not decay: {late} of peak {peak}");
}
