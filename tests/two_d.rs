//! 2D runs (grid.shape = [nx, nz]) on the CPU: a line source against the 2D Green's function,
//! CPML reflection on the x and z faces, the free surface, the stencil's symmetry, a density
//! interface's reflection coefficient, and the 2D forms' input errors.

use seismic_run::backend::cpu::{PlaneSolver, Real};
use seismic_run::config::Config;
use seismic_run::problem::Problem;
use std::f64::consts::PI;

/// A 2D run described in metres: the input's text is built from it and goes the CLI's way
/// (`Config::from_toml`, the model sampled by the model code, `Problem::build`).
#[derive(Clone, Debug)]
struct Plane {
    shape: [usize; 2],
    spacing: f64,
    /// The body of `[model]`.
    model: String,
    radius: usize,
    frequency: f64,
    delay: f64,
    cfl_safety: f64,
    duration: f64,
    source: [f64; 2],
    receivers: Vec<[f64; 2]>,
    /// "sinc", "trilinear" or "nearest", for the source and every receiver.
    method: &'static str,
    boundary: &'static str,
    width: usize,
    free_surface: bool,
}

impl Plane {
    fn toml(&self) -> String {
        let h = self.spacing;
        let v = |p: [f64; 2]| format!("[{}, {}]", p[0], p[1]);
        let mut s = format!(
            "[grid]\nshape = [{}, {}]\nspacing = [{h}, {h}]\n\n[model]\n{}\n\n[stencil]\nradius = {}\n\n\
             [time]\nduration = {}\ncfl_safety = {}\n\n\
             [source]\nposition = {}\nfrequency = {}\ndelay = {}\ninjection = \"{}\"\n\n\
             [boundary]\nkind = \"{}\"\nwidth = {}\nfree_surface = {}\nplacement = \"inside\"\n",
            self.shape[0],
            self.shape[1],
            self.model,
            self.radius,
            self.duration,
            self.cfl_safety,
            v(self.source),
            self.frequency,
            self.delay,
            self.method,
            self.boundary,
            self.width,
            self.free_surface,
        );
        for &r in &self.receivers {
            s += &format!("\n[[receivers]]\nposition = {}\ninterpolation = \"{}\"\n", v(r), self.method);
        }
        s
    }

    fn problem(&self) -> Problem {
        let cfg = Config::from_toml(&self.toml()).expect("test configuration parses");
        let vp = seismic_run::model::load(&cfg, std::path::Path::new(".")).expect("test model");
        Problem::build(&cfg, vp).expect("test problem builds")
    }
}

/// Runs every step of a 2D problem on the CPU and returns its traces in f64.
fn run<T: Real>(problem: &Problem) -> Vec<Vec<f64>> {
    let mut solver = PlaneSolver::<T>::new(problem).expect("2D CPU solver");
    for n in 0..problem.steps {
        solver.advance(n);
    }
    solver.traces_native().iter().map(|t| t.iter().map(|v| v.f64()).collect()).collect()
}

/// The 2D Green's function of (1/c^2) p_tt - lap p = s(t) delta(x) delta(z) (a line source)
/// convolved with the source: p(r, t) = (1 / 2 pi) int_0^{acosh(c t / r)} s(t - (r / c) cosh u) du
/// (the substitution t - tau = (r / c) cosh u removes the 1 / sqrt singularity at the arrival),
/// composite Simpson over u.
fn line_source_pressure(problem: &Problem, r: f64, c: f64, t: f64) -> f64 {
    let x = c * t / r;
    if x <= 1.0 {
        return 0.0;
    }
    let top = x.acosh();
    let n = 4000;
    let h = top / n as f64;
    let f = |u: f64| problem.source().wavelet.at(t - r / c * u.cosh());
    let mut sum = f(0.0) + f(top);
    for i in 1..n {
        sum += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    sum * h / 3.0 / (2.0 * PI)
}

/// ||a - b||_2 / ||b||_2 over the first `n` samples.
fn relative_l2(a: &[f64], b: &[f64], n: usize) -> f64 {
    let num: f64 = a[..n].iter().zip(&b[..n]).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b[..n].iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

fn dist(a: [f64; 2], b: [f64; 2]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

/// An off-grid line source near the centre of a 401 x 401 grid (10 m, 2000 m/s, 10 Hz: 8 points
/// per minimum wavelength, R = 4, no absorber: the walls are 2 km away) and off-grid receivers
/// 100 to 400 m away in several directions, windowed sinc positioning.
fn off_grid_line_source() -> Plane {
    let source = [2003.7, 1996.2];
    let receivers = [(100.0, 0.3), (170.0, 1.2), (240.0, 2.5), (310.0, 4.0), (400.0, 5.3)]
        .map(|(r, a): (f64, f64)| [source[0] + r * a.cos() + 1.37, source[1] + r * a.sin() - 2.91])
        .to_vec();
    Plane {
        shape: [401, 401],
        spacing: 10.0,
        model: "kind = \"constant\"\nvp = 2000.0".into(),
        radius: 4,
        frequency: 10.0,
        delay: 0.15,
        cfl_safety: 0.2,
        duration: 0.15 + 0.2 + 410.0 / 2000.0,
        source,
        receivers,
        method: "sinc",
        boundary: "none",
        width: 0,
        free_surface: false,
    }
}

#[test]
fn line_source_matches_the_2d_green_function_off_grid() {
    let g = off_grid_line_source();
    let p = g.problem();
    assert!(p.is_2d());
    let traces = run::<f32>(&p);
    let c = 2000.0;
    for (rec, trace) in g.receivers.iter().zip(&traces) {
        let r = dist(g.source, *rec);
        // The window: the direct wavelet and 0.2 s of its tail, long before the walls' reflections.
        let t_end = r / c + g.delay + 0.2;
        assert!(t_end < (2.0 * 1990.0 - r) / c);
        let samples = ((t_end / p.dt) as usize).min(trace.len());
        let exact: Vec<f64> = (0..samples).map(|i| line_source_pressure(&p, r, c, (i + 1) as f64 * p.dt)).collect();
        let err = relative_l2(trace, &exact, samples);
        eprintln!("2D analytic: r = {r:6.1} m, relative L2 error {err:.3e}");
        assert!(err <= 3e-3, "receiver {rec:?} at {r} m: relative L2 error {err}");
    }
}
