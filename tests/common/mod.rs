//! Shared helpers of the CPU numerics tests (issue 2): building small problems, running the CPU
//! reference, analytic solutions and error norms.

#![allow(dead_code)]

use seismic_run::backend::cpu::{CpuSolver, Real};
use seismic_run::config::Config;
use seismic_run::problem::Problem;
use std::f64::consts::PI;

/// A homogeneous (or user-velocity) run described in grid indices, turned into a `Problem`
/// through the same path as the CLI (`Config::from_toml` then `Problem::build`).
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
             [boundary]\nkind = \"{}\"\nwidth = {}\nfree_surface = {}\n",
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
    problem.source.wavelet.at(t - r / c) / (4.0 * PI * r)
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
