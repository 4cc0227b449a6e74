//! Shared helpers of the CPU numerics tests: building small problems, running the CPU
//! reference, analytic solutions and error norms.

#![allow(dead_code)]

pub mod compare;
pub mod imaging;
pub mod impedance;
pub mod plane;
pub mod reflection;

use seismic_run::backend::cpu::{CpuSolver, Real};
use seismic_run::config::Config;
use seismic_run::problem::Problem;
use std::f64::consts::PI;

/// A homogeneous (or user-velocity) run described in grid indices, turned into a `Problem`
/// through the same path as the CLI (`Config::from_toml` then `Problem::build`). Its absorbing
/// layers lie inside the grid (`placement = "inside"`), so that `shape` is the run grid the
/// measured cases were measured on (tests/layer_placement.rs shows a run with the layers outside
/// equal to one with them inside a grid enlarged by them).
#[derive(Clone, Debug)]
pub struct Setup {
    pub shape: [usize; 3],
    pub spacing: f64,
    pub vp: f64,
    pub radius: usize,
    pub frequency: f64,
    /// Peak time of the Ricker wavelet, s.
    pub delay: f64,
    pub cfl_safety: f64,
    pub duration: f64,
    /// Source grid point.
    pub source: [usize; 3],
    /// Receiver grid points.
    pub receivers: Vec<[usize; 3]>,
    /// "cpml", "sponge" or "none".
    pub boundary: &'static str,
    pub width: usize,
    pub free_surface: bool,
}

impl Setup {
    pub fn toml(&self) -> String {
        let h = self.spacing;
        let pos = |p: [usize; 3]| format!("[{}, {}, {}]", p[0] as f64 * h, p[1] as f64 * h, p[2] as f64 * h);
        let mut s = format!(
            "[grid]\nshape = [{}, {}, {}]\nspacing = [{h}, {h}, {h}]\n\n\
             [model]\nkind = \"constant\"\nvp = {}\n\n\
             [stencil]\nradius = {}\n\n\
             [time]\nduration = {}\ncfl_safety = {}\n\n\
             [source]\nposition = {}\nfrequency = {}\ndelay = {}\ninjection = \"nearest\"\n\n\
             [boundary]\nkind = \"{}\"\nwidth = {}\nfree_surface = {}\nplacement = \"inside\"\n",
            self.shape[0],
            self.shape[1],
            self.shape[2],
            self.vp,
            self.radius,
            self.duration,
            self.cfl_safety,
            pos(self.source),
            self.frequency,
            self.delay,
            self.boundary,
            self.width,
            self.free_surface,
        );
        for &r in &self.receivers {
            s += &format!("\n[[receivers]]\nposition = {}\n", pos(r));
        }
        s
    }

    /// The problem on a homogeneous model.
    pub fn problem(&self) -> Problem {
        let n: usize = self.shape.iter().product();
        self.problem_with(vec![self.vp as f32; n])
    }

    /// The problem on a given velocity model (dense, (nz, ny, nx)).
    pub fn problem_with(&self, vp: Vec<f32>) -> Problem {
        let cfg = Config::from_toml(&self.toml()).expect("test configuration parses");
        Problem::build(&cfg, vp).expect("test problem builds")
    }
}

/// The analytic point-source case the CPU and GPU tests share: 2000 m/s, 10 Hz peak (25 Hz
/// maximum frequency, 80 m minimum wavelength: 8 points at 10 m), R = 4, the source at the centre
/// of a 121^3 box with no absorber, receivers 100 to 300 m away (on axis, diagonal, off axis).
/// Leapfrog phase error grows like (w dt)^2 / 24 per radian: 0.2 of the CFL limit keeps it well
/// under 1% over the ~0.45 s simulated (the limit itself would give ~1%). Measured on the CPU:
/// errors 2.3e-4..7.0e-4 here, 5.5e-5..1.7e-4 at 0.1 of the limit (4.2x less, i.e. ~dt^2), so what
/// remains is time error and the spatial error at 8 points per wavelength is below 2e-5.
pub fn free_space_point_source() -> Setup {
    let (c, f0) = (2000.0, 10.0);
    let delay = 1.5 / f0; // the wavelet is ~1e-10 of its peak at t = 0: no step at switch-on
    let half = 60; // points from the source to each face
    Setup {
        shape: [2 * half + 1; 3],
        spacing: 10.0,
        vp: c,
        radius: 4,
        frequency: f0,
        delay,
        cfl_safety: 0.2,
        duration: delay + 0.15 + 300.0 / c,
        source: [half; 3],
        receivers: vec![
            [half + 10, half, half],
            [half + 20, half, half],
            [half + 30, half, half],
            [half, half, half - 25],
            [half + 12, half + 12, half + 12],
            [half + 15, half - 20, half],
        ],
        boundary: "none",
        width: 0,
        free_surface: false,
    }
}

/// Relative L2 error of each receiver's trace against s(t - r/c) / (4 pi r), over the direct
/// wavelet (which must end before the first reflection from the box's walls); (r, error) per
/// receiver. Trace sample i is at time (i + 1) dt.
pub fn green_function_errors(setup: &Setup, problem: &Problem, traces: &[Vec<f64>]) -> Vec<(f64, f64)> {
    let wall = setup.source[0].min(setup.shape[0] - 1 - setup.source[0]) as f64 * setup.spacing;
    let c = setup.vp;
    setup
        .receivers
        .iter()
        .zip(traces)
        .map(|(rec, trace)| {
            let r = distance(problem, setup.source, *rec);
            let t_end = r / c + setup.delay + 0.15;
            assert!(t_end < (2.0 * wall - r) / c, "receiver {rec:?}: window overlaps the wall reflection");
            let samples = ((t_end / problem.dt) as usize).min(trace.len());
            let exact: Vec<f64> =
                (0..samples).map(|i| point_source_pressure(problem, r, c, (i + 1) as f64 * problem.dt)).collect();
            (r, relative_l2(trace, &exact, samples))
        })
        .collect()
}

/// Runs every step of `problem` on the CPU reference and returns the traces in f64.
pub fn run<T: Real>(problem: &Problem) -> Vec<Vec<f64>> {
    let mut solver = CpuSolver::<T>::new(problem).expect("CPU solver");
    for n in 0..problem.steps {
        solver.advance(n);
    }
    solver.traces_native().iter().map(|t| t.iter().map(|v| v.f64()).collect()).collect()
}

/// Free-space Green's function of (1/c^2) p_tt - lap p = s(t) delta(x) convolved with the source:
/// p(r, t) = s(t - r/c) / (4 pi r).
pub fn point_source_pressure(problem: &Problem, r: f64, c: f64, t: f64) -> f64 {
    problem.source().wavelet.at(t - r / c) / (4.0 * PI * r)
}

/// Distance between two grid points of a problem, m.
pub fn distance(problem: &Problem, a: [usize; 3], b: [usize; 3]) -> f64 {
    let (pa, pb) = (problem.coordinate(a), problem.coordinate(b));
    (0..3).map(|i| (pa[i] - pb[i]).powi(2)).sum::<f64>().sqrt()
}

/// ||a - b||_2 / ||b||_2 over the first `n` samples.
pub fn relative_l2(a: &[f64], b: &[f64], n: usize) -> f64 {
    let num: f64 = a[..n].iter().zip(&b[..n]).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b[..n].iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// max |a - b| over samples `range`.
pub fn max_abs_diff(a: &[f64], b: &[f64], range: std::ops::Range<usize>) -> f64 {
    range.map(|i| (a[i] - b[i]).abs()).fold(0.0, f64::max)
}

pub fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// Deterministic uniform numbers in [-1, 1) (a 64-bit LCG), so tests need no extra crate.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

/// A run described in metres (off-grid source and receivers), through the CLI's path: the TOML
/// text, `Config::from_toml`, then `Problem::build` on a velocity sampled by the model code.
#[derive(Clone, Debug)]
pub struct Geometry {
    pub shape: [usize; 3],
    pub spacing: f64,
    /// The body of the `[model]` table, e.g. `kind = "constant"\nvp = 2000.0`.
    pub model: String,
    pub frequency: f64,
    pub delay: f64,
    /// `time.dt` when given, else `cfl_safety` of the CFL limit.
    pub dt: Option<f64>,
    pub cfl_safety: f64,
    pub duration: f64,
    pub source: [f64; 3],
    pub receivers: Vec<[f64; 3]>,
    /// "sinc", "trilinear" or "nearest", for the source and every receiver.
    pub method: &'static str,
    /// `sinc_half_width` of the source and every receiver (method "sinc" only).
    pub half_width: Option<usize>,
    pub boundary: &'static str,
    pub free_surface: bool,
}

impl Geometry {
    pub fn toml(&self) -> String {
        let v = |p: [f64; 3]| format!("[{}, {}, {}]", p[0], p[1], p[2]);
        let h = self.spacing;
        let time = match self.dt {
            Some(dt) => format!("dt = {dt:e}"),
            None => format!("cfl_safety = {}", self.cfl_safety),
        };
        let hw = self.half_width.map(|r| format!("sinc_half_width = {r}\n")).unwrap_or_default();
        let mut s = format!(
            "[grid]\nshape = [{}, {}, {}]\nspacing = [{h}, {h}, {h}]\n\n[model]\n{}\n\n[stencil]\nradius = 4\n\n\
             [time]\nduration = {}\n{time}\n\n\
             [source]\nposition = {}\nfrequency = {}\ndelay = {}\ninjection = \"{}\"\n{hw}\n\
             [boundary]\nkind = \"{}\"\nwidth = 0\nfree_surface = {}\n",
            self.shape[0],
            self.shape[1],
            self.shape[2],
            self.model,
            self.duration,
            v(self.source),
            self.frequency,
            self.delay,
            self.method,
            self.boundary,
            self.free_surface,
        );
        for &r in &self.receivers {
            s += &format!("\n[[receivers]]\nposition = {}\ninterpolation = \"{}\"\n{hw}", v(r), self.method);
        }
        s
    }

    pub fn problem(&self) -> Problem {
        let cfg = Config::from_toml(&self.toml()).expect("test configuration parses");
        let vp = seismic_run::model::load(&cfg, std::path::Path::new(".")).expect("test model");
        Problem::build(&cfg, vp).expect("test problem builds")
    }

    /// The problem on a given velocity model (dense, (nz, ny, nx)) instead of `model`.
    pub fn problem_with(&self, vp: Vec<f32>) -> Problem {
        let cfg = Config::from_toml(&self.toml()).expect("test configuration parses");
        Problem::build(&cfg, vp).expect("test problem builds")
    }
}

/// Distance (m) between two positions.
pub fn dist(a: [f64; 3], b: [f64; 3]) -> f64 {
    (0..3).map(|i| (a[i] - b[i]).powi(2)).sum::<f64>().sqrt()
}

/// An off-grid source near the centre of a 111^3 box and 12 receivers 100 to 280 m away in
/// seeded random directions and positions; no absorber: the walls (550 m away) reflect nothing
/// into the window, which ends 0.15 s after the direct wavelet's peak.
pub fn off_grid_free_space(method: &'static str) -> Geometry {
    let mut rng = Lcg(20);
    let n = 111;
    let centre = 55.0 * 10.0;
    let source = [0; 3].map(|_| centre + (0.5 + 0.35 * rng.next()) * 10.0);
    let receivers = (0..12)
        .map(|_| {
            let mut d = [rng.next(), rng.next(), rng.next()];
            let norm = dist(d, [0.0; 3]).max(1e-3);
            let r = 190.0 + 90.0 * rng.next();
            d = d.map(|x| x / norm * r);
            std::array::from_fn(|a| source[a] + d[a])
        })
        .collect();
    Geometry {
        shape: [n; 3],
        spacing: 10.0,
        model: "kind = \"constant\"\nvp = 2000.0".into(),
        frequency: 10.0,
        delay: 0.15,
        dt: None,
        // Leapfrog time error at 0.2 of the CFL limit: 2e-4..7e-4 on grid points (common.rs).
        cfl_safety: 0.2,
        duration: 0.15 + 0.15 + 280.0 / 2000.0,
        source,
        receivers,
        method,
        half_width: None,
        boundary: "none",
        free_surface: false,
    }
}

/// (distance, relative L2 error) of each trace of [`off_grid_free_space`] against
/// s(t - r/c) / (4 pi r), over the direct wavelet (up to 0.15 s after its peak).
pub fn off_grid_free_space_errors(g: &Geometry, p: &Problem, traces: &[Vec<f64>]) -> Vec<(f64, f64)> {
    let c = 2000.0;
    g.receivers
        .iter()
        .zip(traces)
        .map(|(&x, trace)| {
            let r = dist(x, g.source);
            let n = (((r / c + g.delay + 0.15) / p.dt) as usize).min(trace.len());
            let exact: Vec<f64> = (0..n).map(|k| point_source_pressure(p, r, c, (k + 1) as f64 * p.dt)).collect();
            (r, relative_l2(trace, &exact, n))
        })
        .collect()
}

/// The long-run stability case: a 16^3 grid with a thin 4-point CPML under a free surface,
/// R = 4, at 0.9 of the CFL limit, run for 10,000 steps.
pub fn long_run_problem() -> Problem {
    let setup = Setup {
        shape: [16, 16, 16],
        spacing: 10.0,
        vp: 2000.0,
        radius: 4,
        frequency: 15.0,
        delay: 0.08,
        cfl_safety: 0.9,
        duration: 1.0,
        source: [8, 8, 5],
        receivers: vec![[8, 8, 8]],
        boundary: "cpml",
        width: 4,
        free_surface: true,
    };
    let mut p = setup.problem();
    p.steps = 10_000;
    p
}

/// The largest |p| over a run of `steps` steps and over its last 100 steps; `step(n)` advances
/// step n and returns the field's largest |p|, which must stay finite.
pub fn peak_and_late(steps: usize, mut step: impl FnMut(usize) -> f32) -> (f32, f32) {
    let (mut peak, mut late) = (0.0f32, 0.0f32);
    for n in 0..steps {
        let m = step(n);
        assert!(m.is_finite(), "step {n}: field not finite");
        peak = peak.max(m);
        if n + 100 >= steps {
            late = late.max(m);
        }
    }
    (peak, late)
}
