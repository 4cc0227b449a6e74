//! Reflection at a plane interface with a density contrast against (Z2 - Z1) / (Z2 + Z1), Z = rho c,
//! for any backend (a runner gives a problem's traces): tests/density.rs runs it on the CPU
//! reference, tests/gpu_density.rs on the GPU.
//!
//! Reflection coefficients are fitted as R = <d, g> / <g, g> over the trace, d the reflected
//! wave (the run with the interface minus a run of the upper medium alone, at a receiver above
//! the interface) and g the wave of that reference run at the receiver's mirror image across the
//! interface, which has travelled as far through the same medium:
//! - a density contrast alone (equal velocities): a point source. Its reflection is exactly the
//!   image source's wave times R at every angle and frequency, so g is the reflected wave's shape.
//! - both contrasts: a point source's reflection is not the image's where the velocities differ,
//!   so the source is a plane wave: a source at every grid point of a plane z = zs, the CPML of
//!   the side faces inert for a field uniform along them, so that the centre column sees a plane
//!   wave at normal incidence, and g is the plane wave delayed by the extra path.
//!
//! The interface lies halfway between two planes of grid points: the density and the velocity
//! are sampled at the points, the operator's pair weights average the buoyancy across the cut.

use seismic_run::config::Config;
use seismic_run::problem::Problem;
use std::path::Path;

/// The problem of an input, its model (and density) sampled as a run samples it, relative paths
/// from `dir`.
pub fn problem_in(toml: &str, dir: &Path) -> anyhow::Result<Problem> {
    let cfg = Config::from_toml(toml)?;
    let model = seismic_run::model::sample(&cfg, dir)?;
    Problem::build_with_density(&cfg, model.vp, model.rho)
}

pub fn problem(toml: &str) -> Problem {
    problem_in(toml, Path::new(".")).unwrap_or_else(|e| panic!("{e:#}\n{toml}"))
}

/// R = <d, g> / <g, g> over the samples `window`, with d = `with - scale alone` and
/// g = `scale mirror` (see the module docs; `scale` is the source's density over the model's
/// lowest: a source is injected with the stiffness K, so its wave in a medium of density rho is
/// rho / rho_ref times the constant-density run's).
fn fitted_r(with: &[f64], alone: &[f64], mirror: &[f64], scale: f64, window: std::ops::Range<usize>) -> f64 {
    let (mut dg, mut gg) = (0.0, 0.0);
    for i in window {
        let (d, g) = (with[i] - scale * alone[i], scale * mirror[i]);
        dg += d * g;
        gg += g * g;
    }
    dg / gg
}

/// The samples within `half` seconds of `t` at time step `dt` (sample i is at (i + 1) dt).
fn around(t: f64, half: f64, dt: f64, len: usize) -> std::ops::Range<usize> {
    (((t - half) / dt) as usize).min(len)..(((t + half) / dt) as usize).min(len)
}

fn impedance_r(vp: [f64; 2], rho: [f64; 2]) -> f64 {
    let z = [vp[0] * rho[0], vp[1] * rho[1]];
    (z[1] - z[0]) / (z[1] + z[0])
}

/// A point source at z = 150 m over a density interface at z = 405 m (equal velocities), the
/// receiver at z = 250 m on the same vertical, its mirror image at z = 560 m; one time step for
/// every run (a density contrast lowers the stability limit).
fn point_source_input(density: &str) -> String {
    format!(
        "[grid]\nshape = [40, 40, 64]\nspacing = [10.0, 10.0, 10.0]\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n{density}\n\
         [stencil]\nradius = 4\n[time]\nduration = 0.75\ndt = 1.5e-3\n\
         [source]\nposition = [200.0, 200.0, 150.0]\nfrequency = 5.0\n\
         [boundary]\nkind = \"cpml\"\nwidth = 10\n\
         [[receivers]]\nposition = [200.0, 200.0, 250.0]\n\
         [[receivers]]\nposition = [200.0, 200.0, 560.0]\n"
    )
}

/// A density contrast alone (equal velocities) against (Z2 - Z1) / (Z2 + Z1), for two contrasts,
/// each run by `run`: asserts the fitted R within 2% of it.
pub fn a_density_contrast_reflects_with_the_impedance_coefficient(run: &dyn Fn(&Problem) -> Vec<Vec<f64>>) {
    let alone = run(&problem(&point_source_input("")));
    for rho in [[1000.0f64, 2500.0], [2400.0, 1500.0]] {
        let density = format!("density = {{ depths = [405.0], values = [{}, {}] }}", rho[0], rho[1]);
        let p = problem(&point_source_input(&density));
        let scale = p.stiffness_at([30, 30, 25]) / p.vel2dt2_at([30, 30, 25]);
        assert_eq!(scale, rho[0] / rho[0].min(rho[1]), "the source point's density over the lowest");
        let with = run(&p);
        // The reflection: 410 m at 2000 m/s after the wavelet's peak at 0.2 s.
        let window = around(0.2 + 0.205, 0.25, p.dt, with[0].len());
        let r = fitted_r(&with[0], &alone[0], &alone[1], scale, window);
        let want = impedance_r([2000.0; 2], rho);
        eprintln!("density {rho:?}: fitted R = {r:.5}, (Z2 - Z1) / (Z2 + Z1) = {want:.5}");
        assert!((r - want).abs() < 0.02 * want.abs(), "R = {r}, expected {want}");
    }
}

/// A plane wave from sources at every grid point of z = 400 m, an interface at z = 705 m, the
/// receiver at z = 500 m in the centre column and its mirror image at z = 910 m: the top and
/// bottom layers' reflections of a wave the fit sees arrive after its window. The side layers are
/// 30 points wide: the grid's zero halo beyond them is felt by a wave uniform along them, and
/// narrower layers (10, 20 points) let enough of that into the centre to move R by 2-8%.
fn plane_wave_input(model: &str, dt: f64) -> String {
    let (n, h) = (64, 10.0);
    let mut sources = String::new();
    for iy in 0..n {
        for ix in 0..n {
            sources += &format!(
                "[[source]]\nposition = [{}, {}, 400.0]\nfrequency = 10.0\ninjection = \"nearest\"\n",
                ix as f64 * h,
                iy as f64 * h
            );
        }
    }
    format!(
        "[grid]\nshape = [{n}, {n}, 145]\nspacing = [{h}, {h}, {h}]\n[model]\n{model}\n\
         [stencil]\nradius = 4\n[time]\nduration = 0.55\ndt = {dt:e}\n{sources}\
         [boundary]\nkind = \"cpml\"\nwidth = 30\nplacement = \"inside\"\n\
         [[receivers]]\nposition = [320.0, 320.0, 500.0]\n\
         [[receivers]]\nposition = [320.0, 320.0, 910.0]\n"
    )
}

/// Both contrasts, a plane wave at normal incidence, for two models, each run by `run`: asserts
/// the fitted R within 2% of (Z2 - Z1) / (Z2 + Z1).
pub fn both_contrasts_reflect_a_plane_wave_with_the_impedance_coefficient(run: &dyn Fn(&Problem) -> Vec<Vec<f64>>) {
    // One time step for every run, within the stability limit of the fastest medium, 3000 m/s.
    let dt = 1e-3;
    let alone = run(&problem(&plane_wave_input("kind = \"constant\"\nvp = 2000.0", dt)));
    for (vp, rho) in [([2000.0, 3000.0], [1000.0f64, 2000.0]), ([2000.0, 2400.0], [2400.0, 1200.0])] {
        let model = format!(
            "kind = \"layered\"\ndepths = [705.0]\nvelocities = [{}, {}]\ndensity = [{}, {}]",
            vp[0], vp[1], rho[0], rho[1]
        );
        let p = problem(&plane_wave_input(&model, dt));
        let with = run(&p);
        // The reflection: 510 m at 2000 m/s after the wavelet's peak at 0.1 s.
        let window = around(0.1 + 0.255, 0.15, dt, with[0].len());
        let r = fitted_r(&with[0], &alone[0], &alone[1], rho[0] / rho[0].min(rho[1]), window);
        let want = impedance_r(vp, rho);
        eprintln!("vp {vp:?}, density {rho:?}: fitted R = {r:.5}, (Z2 - Z1) / (Z2 + Z1) = {want:.5}");
        assert!((r - want).abs() < 0.02 * want.abs(), "R = {r}, expected {want}");
    }
}
