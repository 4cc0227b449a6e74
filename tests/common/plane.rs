//! 2D runs (grid.shape = [nx, nz]) described in metres, for any backend: the input text built from
//! them, the analytic line source, and the CPML's small-domain-against-large-domain reflection.
//! tests/two_d.rs runs them on the CPU reference, tests/gpu_plane.rs on the GPU.

use seismic_run::backend::cpu::{PlaneSolver, Real};
use seismic_run::config::Config;
use seismic_run::problem::Problem;
use std::f64::consts::PI;

/// A 2D run described in metres: the input's text is built from it and goes the CLI's way
/// (`Config::from_toml`, the model sampled by the model code, `Problem::build`).
#[derive(Clone, Debug)]
pub struct Plane {
    pub shape: [usize; 2],
    pub spacing: f64,
    /// The body of `[model]`.
    pub model: String,
    pub radius: usize,
    pub frequency: f64,
    pub delay: f64,
    pub cfl_safety: f64,
    pub duration: f64,
    pub source: [f64; 2],
    pub receivers: Vec<[f64; 2]>,
    /// "sinc", "trilinear" or "nearest", for the source and every receiver.
    pub method: &'static str,
    pub boundary: &'static str,
    pub width: usize,
    pub free_surface: bool,
}

impl Plane {
    pub fn toml(&self) -> String {
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

    pub fn problem(&self) -> Problem {
        let cfg = Config::from_toml(&self.toml()).expect("test configuration parses");
        let vp = seismic_run::model::load(&cfg, std::path::Path::new(".")).expect("test model");
        Problem::build(&cfg, vp).expect("test problem builds")
    }
}

/// Runs every step of a 2D problem on the CPU and returns its traces in f64.
pub fn run<T: Real>(problem: &Problem) -> Vec<Vec<f64>> {
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
pub fn line_source_pressure(problem: &Problem, r: f64, c: f64, t: f64) -> f64 {
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
pub fn relative_l2(a: &[f64], b: &[f64], n: usize) -> f64 {
    let num: f64 = a[..n].iter().zip(&b[..n]).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b[..n].iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

pub fn dist(a: [f64; 2], b: [f64; 2]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

/// An off-grid line source near the centre of a 401 x 401 grid (10 m, 2000 m/s, 10 Hz: 8 points
/// per minimum wavelength, R = 4, no absorber: the walls are 2 km away) and off-grid receivers
/// 100 to 400 m away in several directions, windowed sinc positioning.
pub fn off_grid_line_source() -> Plane {
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

/// A run on grid points: `shape` the run grid (layers inside it), the source and receivers at
/// grid indices (x, z), nearest-point injection, 10 m spacing, 2000 m/s.
#[allow(clippy::too_many_arguments)]
pub fn on_grid(
    shape: [usize; 2],
    radius: usize,
    frequency: f64,
    duration: f64,
    source: [usize; 2],
    receivers: &[[usize; 2]],
    boundary: &'static str,
    width: usize,
) -> Plane {
    let at = |p: [usize; 2]| p.map(|i| i as f64 * 10.0);
    Plane {
        shape,
        spacing: 10.0,
        model: "kind = \"constant\"\nvp = 2000.0".into(),
        radius,
        frequency,
        delay: 1.2 / frequency,
        cfl_safety: 0.8,
        duration,
        source: at(source),
        receivers: receivers.iter().map(|&r| at(r)).collect(),
        method: "nearest",
        boundary,
        width,
        free_surface: false,
    }
}

/// max |a - b| over all samples.
pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

pub fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// The CPML's reflection in 2D, small domain against large domain: an interior of `interior`
/// points closed by layers of the radius's default width, receivers 6 points before the layers, against
/// the same receivers in a grid so large that its walls send nothing back within the window.
/// `run` gives a problem's traces. Returns the reflection in dB (the difference's largest value relative to the reference's).
pub fn reflection_db(
    run: &dyn Fn(&Problem) -> Vec<Vec<f64>>,
    interior: [usize; 2],
    source: [usize; 2],
    receivers: &[[usize; 2]],
    ppw: f64,
    radius: usize,
) -> f64 {
    let w = seismic_run::boundary::default_width(radius);
    let f0 = 2000.0 / (2.5 * 10.0 * ppw);
    let farthest = receivers
        .iter()
        .map(|r| ((r[0] as f64 - source[0] as f64).powi(2) + (r[1] as f64 - source[1] as f64).powi(2)).sqrt())
        .fold(0.0, f64::max);
    // The wavelet (2.4 / f0 long) after the longest path through a reflection off a layer.
    let duration = 2.4 / f0 + (farthest + 2.0 * (7 + w) as f64) * 10.0 / 2000.0;
    let shift = |p: [usize; 2], by: usize| p.map(|i| i + by);
    let small_shape = interior.map(|n| n + 2 * w);
    let moved: Vec<[usize; 2]> = receivers.iter().map(|&r| shift(r, w)).collect();
    let small = on_grid(small_shape, radius, f0, duration, shift(source, w), &moved, "cpml", w);
    // Far enough that the walls' first reflection comes back after the window.
    let margin = (2000.0 * duration / 20.0).ceil() as usize + 4;
    let big_shape = interior.map(|n| n + 2 * margin);
    let far: Vec<[usize; 2]> = receivers.iter().map(|&r| shift(r, margin)).collect();
    let big = on_grid(big_shape, radius, f0, duration, shift(source, margin), &far, "none", 0);
    let (a, b) = (run(&small.problem()), run(&big.problem()));
    let worst = a.iter().zip(&b).map(|(a, b)| max_abs_diff(a, b) / max_abs(b)).fold(0.0, f64::max);
    20.0 * worst.log10()
}
