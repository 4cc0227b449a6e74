//! The leapfrog is stable up to exactly `Stencil::cfl_limit` and no further.
//! A closed box (zero halo) with a random initial field runs 10,000 steps at 0.9 of the limit and
//! stays bounded; at 1.05 of it the same run blows up.

mod common;

use common::Lcg;
use seismic_run::backend::cpu::CpuSolver;
use seismic_run::boundary::Boundary;
use seismic_run::grid::Layout;
use seismic_run::numerics::{Ricker, Stencil};
use seismic_run::problem::{PointSource, Positioning, Problem};

/// A closed box with no source and no receivers: only the initial condition drives it.
pub fn closed_box(shape: [usize; 3], spacing: [f64; 3], radius: usize, vp: Vec<f32>, dt: f64, steps: usize) -> Problem {
    let vp_range = vp.iter().fold([f32::INFINITY, 0.0f32], |[lo, hi], &v| [lo.min(v), hi.max(v)]);
    Problem {
        layout: Layout::new(shape, radius),
        spacing,
        origin: [0.0; 3],
        stencil: Stencil::new(radius),
        dt,
        steps,
        vp,
        vp_first: 0,
        vp_range,
        boundary: Boundary::none(shape),
        sources: vec![PointSource {
            position: [0.0; 3],
            wavelet: Ricker::new(1.0, 0.0, None).into(),
            injection: Positioning::Nearest,
            taps: Vec::new(),
            samples: Vec::new(),
        }],
        receivers: Vec::new(),
        warnings: Vec::new(),
        precision: seismic_run::config::Precision::F32,
        density: None,
    }
}

/// Largest |p| after `steps` steps from a random p^0 = p^{-1}, relative to the initial largest.
fn growth(radius: usize, fraction: f64, steps: usize) -> f64 {
    let shape = [16, 16, 16];
    let spacing = [10.0, 12.0, 8.0];
    let n: usize = shape.iter().product();
    // Heterogeneous velocity: the limit is set by the fastest point.
    let mut rng = Lcg(42);
    let vp: Vec<f32> = (0..n).map(|_| (2500.0 + 500.0 * rng.next()) as f32).collect();
    let vmax = vp.iter().fold(0.0f32, |a, &b| a.max(b)) as f64;
    let mut fill = vp.clone();
    fill.iter_mut().for_each(|v| *v = vmax as f32);
    // The blow-up run uses the homogeneous vmax model (its limit is exactly the formula's); the
    // bounded run keeps the heterogeneous one, which only lowers the largest eigenvalue.
    let model = if fraction > 1.0 { fill } else { vp };
    let dt = fraction * Stencil::new(radius).cfl_limit(spacing, vmax);
    let p = closed_box(shape, spacing, radius, model, dt, steps);
    let mut solver = CpuSolver::<f64>::new(&p).expect("solver");
    let init: Vec<f64> = (0..n).map(|_| rng.next()).collect();
    solver.set_state(&init, &init);
    let mut peak = 0.0f64;
    for step in 0..steps {
        solver.advance(step);
        if step % 100 == 99 {
            peak = solver.field().iter().fold(peak, |m, v| if v.is_finite() { m.max(v.abs()) } else { f64::INFINITY });
            if !peak.is_finite() || peak > 1e30 {
                return peak;
            }
        }
    }
    peak / init.iter().fold(0.0f64, |m, v| m.max(v.abs()))
}

#[test]
fn bounded_at_nine_tenths_of_the_cfl_limit() {
    for radius in [1, 4, 8] {
        let g = growth(radius, 0.9, 10_000);
        eprintln!("stability: R = {radius}, dt = 0.9 x limit, 10000 steps: max |p| grew by {g:.3}");
        assert!(g.is_finite() && g < 10.0, "R = {radius}: grew by {g}");
    }
}

#[test]
fn blows_up_above_the_cfl_limit() {
    for radius in [1, 4, 8] {
        let g = growth(radius, 1.05, 10_000);
        eprintln!("stability: R = {radius}, dt = 1.05 x limit: max |p| grew by {g:.3e}");
        assert!(g > 1e6, "R = {radius}: grew only by {g}");
    }
}
