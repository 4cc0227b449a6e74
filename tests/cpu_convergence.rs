//! Refining the grid at a fixed dt reduces the error at the stencil's order 2R.
//!
//! A point source is not resolved by any grid (its spectrum is flat), so the order is measured on
//! a smooth initial-value problem instead: a Gaussian pressure pulse p(r, 0) = exp(-r^2/sigma^2),
//! at rest, in a box large enough that nothing reaches the walls. To take the time error out of
//! play at any dt, the reference is the leapfrog applied to the exact Laplacian: mode k evolves as
//! cos(n theta), cos(theta) = 1 - (c dt |k|)^2 / 2, started from p^{-1} = p^0 + (c dt)^2/2 lap p^0.
//! The solver differs from it only by its spatial symbol, so the difference is the spatial error.
//! For the radial Gaussian, the reference is a 1D integral (the 3D inverse Fourier transform):
//! p^n(r) = 1 / (2 pi^2 r) int_0^inf F(k) k sin(k r) cos(n theta(k)) dk,
//! F(k) = pi^(3/2) sigma^3 exp(-k^2 sigma^2 / 4).

mod common;

use seismic_run::backend::cpu::CpuSolver;
use seismic_run::boundary::Boundary;
use seismic_run::grid::Layout;
use seismic_run::numerics::{Ricker, Stencil};
use seismic_run::problem::{PointSource, Positioning, Problem};
use std::f64::consts::PI;

const SIGMA: f64 = 1.0;
const C: f64 = 1.0;
/// Half-width of the box; the pulse at r = c T +- 5 sigma never reaches it.
const HALF_WIDTH: f64 = 7.0;
/// Simulated time.
const T: f64 = 2.0;

/// The reference p^n(r) by composite Simpson quadrature over k in [0, 12 / sigma].
fn reference(r: f64, n: usize, dt: f64) -> f64 {
    let m = 20_000; // even
    let kmax = 12.0 / SIGMA;
    let dk = kmax / m as f64;
    let mut sum = 0.0;
    for j in 0..=m {
        let k = j as f64 * dk;
        let w = if j == 0 || j == m {
            1.0
        } else if j % 2 == 1 {
            4.0
        } else {
            2.0
        };
        let f = PI.powf(1.5) * SIGMA.powi(3) * (-(k * SIGMA).powi(2) / 4.0).exp();
        let theta = (1.0 - (C * dt * k).powi(2) / 2.0).acos();
        // sin(k r) / r, with its limit k at r = 0.
        let sinc = if r < 1e-12 { k } else { (k * r).sin() / r };
        sum += w * f * k * sinc * (n as f64 * theta).cos();
    }
    sum * dk / 3.0 / (2.0 * PI * PI)
}

/// RMS error over three lines through the centre (an axis, a face diagonal and the body
/// diagonal) after T, on a grid of 2m+1 points per axis, at time step dt.
fn error(radius: usize, m: usize, dt: f64, steps: usize) -> f64 {
    let n = 2 * m + 1;
    let shape = [n; 3];
    let h = HALF_WIDTH / m as f64;
    let problem = Problem {
        layout: Layout::new(shape, radius),
        spacing: [h; 3],
        origin: [-HALF_WIDTH; 3],
        stencil: Stencil::new(radius),
        dt,
        steps,
        vp: vec![C as f32; n * n * n],
        vp_first: 0,
        vp_range: [C as f32; 2],
        boundary: Boundary::none(shape),
        sources: vec![PointSource {
            position: [0.0; 3],
            wavelet: Ricker::new(1.0, 0.0, None).into(),
            injection: Positioning::Nearest,
            taps: vec![],
            samples: vec![],
        }],
        receivers: vec![],
        warnings: vec![],
        precision: seismic_run::config::Precision::F32,
        density: None,
    };
    let mut p0 = vec![0.0f64; n * n * n];
    let mut pm1 = vec![0.0f64; n * n * n];
    for iz in 0..n {
        for iy in 0..n {
            for ix in 0..n {
                let x = problem.coordinate([ix, iy, iz]);
                let r2 = (x[0] * x[0] + x[1] * x[1] + x[2] * x[2]) / (SIGMA * SIGMA);
                let f = (-r2).exp();
                let lap = (4.0 * r2 - 6.0) / (SIGMA * SIGMA) * f;
                let i = (iz * n + iy) * n + ix;
                p0[i] = f;
                pm1[i] = f + 0.5 * (C * dt).powi(2) * lap;
            }
        }
    }
    let mut solver = CpuSolver::<f64>::new(&problem).expect("solver");
    solver.set_state(&p0, &pm1);
    for step in 0..steps {
        solver.advance(step);
    }
    let layout = *solver.layout();
    let field = solver.field();
    let (mut sum, mut count) = (0.0, 0usize);
    for dir in [[1isize, 0, 0], [1, 1, 0], [1, 1, 1]] {
        for i in -(m as isize)..=(m as isize) {
            let p = dir.map(|d| (m as isize + d * i) as usize);
            let r = h * i.unsigned_abs() as f64 * ((dir.iter().map(|d| d * d).sum::<isize>()) as f64).sqrt();
            let got = field[layout.index(p[0] as isize, p[1] as isize, p[2] as isize)];
            sum += (got - reference(r, steps, dt)).powi(2);
            count += 1;
        }
    }
    (sum / count as f64).sqrt()
}

fn measured_order(radius: usize) -> f64 {
    let (coarse, fine) = (60, 90);
    // One dt for both grids: half the CFL limit of the finer grid.
    let h_fine = HALF_WIDTH / fine as f64;
    let dt_max = 0.5 * Stencil::new(radius).cfl_limit([h_fine; 3], C);
    let steps = (T / dt_max).ceil() as usize;
    let dt = T / steps as f64;
    let e_coarse = error(radius, coarse, dt, steps);
    let e_fine = error(radius, fine, dt, steps);
    let order = (e_coarse / e_fine).ln() / (fine as f64 / coarse as f64).ln();
    eprintln!(
        "convergence: R = {radius}: RMS error {e_coarse:.3e} (h = sigma/{:.1}) -> {e_fine:.3e} (h = sigma/{:.1}), \
         order {order:.2} (formal {})",
        coarse as f64 / HALF_WIDTH,
        fine as f64 / HALF_WIDTH,
        2 * radius
    );
    order
}

#[test]
fn reference_quadrature_reproduces_the_initial_pulse() {
    for r in [0.0, 0.5, 1.0, 2.5] {
        let got = reference(r, 0, 0.01);
        assert!((got - (-(r * r)).exp()).abs() < 1e-12, "r = {r}: {got}");
    }
}

#[test]
fn order_is_2r_for_radius_1_2_4() {
    for radius in [1, 2, 4] {
        let order = measured_order(radius);
        let formal = 2.0 * radius as f64;
        assert!((order - formal).abs() <= 0.1 * formal, "R = {radius}: measured order {order}, formal {formal}");
    }
}
