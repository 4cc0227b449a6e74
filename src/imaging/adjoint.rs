//! The adjoint of the forward modelling operator F (the sources' samples -> the receivers'
//! traces), made from the forward code itself.
//!
//! # Why running the forward step on another problem is the exact transpose
//!
//! Step n of the forward scheme (backend module docs), with u^n the field after step n - 1,
//! K the stiffness (diagonal: c^2 dt^2, or c^2 dt^2 rho / rho_ref), L the spatial operator, G the
//! sponge factor (diagonal, 1 outside the sponge and without one), S the source taps and R the
//! receiver taps:
//!
//! ```text
//! u^{n+1} = G (2 + K L) u^n - G^2 u^{n-1} + K S^T x^n,      d^n = R u^{n+1},   u^0 = u^{-1} = 0.
//! ```
//!
//! L is symmetric: the star stencil is, the variable-density operator is
//! ([`crate::problem::Density`]), and so is the free surface's odd mirror (the entry between
//! depths i and j becomes c_{|i-j|} - c_{i+j}; z = 0 is held at zero and holds no tap). Stacking
//! the steps, F = R M^{-1} K S^T with M block lower triangular (I on the diagonal, -G (2 + K L)
//! below it, G^2 below that). Then F^T = S K M^{-T} R^T, and M^T is block upper triangular:
//! mu^n = (2 + L K) G mu^{n+1} - G^2 mu^{n+2} + R^T y^n, run backward from mu^N = mu^{N+1} = 0.
//! Writing nu^n = G K mu^n (K, G diagonal, so they commute) turns it into
//!
//! ```text
//! nu^n = G (2 + K L) nu^{n+1} - G^2 nu^{n+2} + K (G R^T) y^n,      (F^T y)^n = (S G^{-1}) nu^n,
//! ```
//!
//! the forward step again, in reversed time, with the receivers as sources (their taps weighted by
//! G there) and the sources as receivers (weighted by 1 / G): [`adjoint_problem`] builds that
//! problem and any backend runs it unchanged. Step m of the reversed run injects y^{N-1-m} and
//! records nu^{N-1-m}, so its traces, reversed, are F^T y.
//!
//! The sinc taps are the same weights both ways (the free surface's mirrored ones included), and
//! the injected samples are [`PointSource::samples`] (the wavelet over the cell volume): F maps
//! those to traces, and its transpose gives them back in the same units.
//!
//! # CPML: a transposed step of its own ([`super::transposed`])
//!
//! Per axis (src/backend/cpu/cpml.rs has the arithmetic; the axes' terms add), with the
//! diagonals a, b (the profile's coefficients), P the restriction to the axis's computed layer
//! points (both layers, but the top z one under a free surface, which is none), D1 and D2 the
//! axis's centred first and second derivatives, A = D(a D) the compact operator and D1' the first
//! derivative of phi within its own layer (phi is zero outside it), the step maps (p^n, p^{n-1},
//! phi^n, zeta^n) to
//!
//! ```text
//! ds         = P A p^n + D1' phi^n
//! phi^{n+1}  = b (phi^n + a P D1 p^n)
//! zeta^{n+1} = b zeta^n + a (P D2 p^n + ds)
//! p^{n+1}    = (2 + K L) p^n - p^{n-1} + K bh P^T (ds + zeta^{n+1}) + K S^T x^n
//! ```
//!
//! Its transpose, run backward with mu, lambda, eta the adjoints of p, phi, zeta: at the layer
//! points eta~ = eta^{n+1} + K bh mu^{n+1} is the adjoint of zeta^{n+1} (which p^{n+1} reads too)
//! and sigma = K bh mu^{n+1} + a eta~ that of ds, and
//!
//! ```text
//! mu^n     = (2 + L K) mu^{n+1} - mu^{n+2} + A P^T sigma + D1^T P^T (a b lambda^{n+1}) + D2 P^T (a eta~) + R^T y^n
//! lambda^n = b lambda^{n+1} + D1'^T sigma        (D1'^T = -D1')
//! eta^n    = b eta~
//! ```
//!
//! with P^T spreading the layer points' values over the grid (zero elsewhere). The rows of the
//! layers' operators are taken at the layer points only, so A P^T is not P A (A is symmetric
//! over the whole axis, its rows at the points just inside a layer are not computed), D1^T = -D1
//! reaches past the layer, and the coefficients sit on the other side of each derivative: the
//! backward step is not the forward step on another problem with CPML. Written for nu = K mu, it
//! is the interior's step without an absorber, (2 + K L) nu^{n+1} - nu^{n+2}, plus K times the
//! layers' terms (K bh mu = bh nu): [`adjoint_problem`] gives the problem the boundary
//! [`BoundaryKind::CpmlTransposed`], whose step every 3D f32 and f64 backend runs
//! ([`crate::backend::cpml_transposed`] has the terms and their order). [`super::transposed`]
//! applies the transposes of the forward step's own terms one by one: the reference that the
//! backends' transposed step is tested against.

use crate::backend::cpu::{CpuSolver, Real};
use crate::boundary::BoundaryKind;
use crate::problem::{PointSource, Problem, Receiver, Tap};
use anyhow::{Result, ensure};

/// The sponge factor G at each grid point (1 without a sponge): what the step multiplies there.
pub(super) fn sponge_factor(problem: &Problem, [x, y, z]: [usize; 3]) -> f64 {
    match problem.boundary.kind {
        BoundaryKind::Sponge => {
            let p = &problem.boundary.profiles;
            p[0].damp[x] * p[1].damp[y] * p[2].damp[z]
        }
        _ => 1.0,
    }
}

/// Refuses a backward pass that no backend runs: with CPML on a 2D grid (its transposed layer
/// step is built for 3D grids) or with f16 storage.
pub fn check_backward_supported(problem: &Problem) -> Result<()> {
    if problem.boundary.kind == BoundaryKind::Cpml {
        ensure!(
            !problem.is_2d(),
            "the backward pass (migration, gradient) with boundary.kind = \"cpml\" runs on 3D grids: use \
             boundary.kind = \"sponge\" on a 2D grid"
        );
        ensure!(
            problem.precision != crate::config::Precision::F16,
            "the backward pass (migration, gradient) with boundary.kind = \"cpml\" runs in f32: use run.precision = \"f32\""
        );
    }
    Ok(())
}

/// Refuses what the backward pass does not cover.
pub fn check_adjoint_supported(problem: &Problem) -> Result<()> {
    ensure!(problem.vp_first == 0, "the adjoint runs on a whole grid, not on one rank's part of it");
    ensure!(!problem.receivers.is_empty(), "the adjoint needs receivers (their traces are its sources)");
    Ok(())
}

/// Refuses `traces` that are not one trace of `problem.steps` samples per receiver of `problem`.
pub fn check_traces(problem: &Problem, traces: &[Vec<f64>]) -> Result<()> {
    ensure!(
        traces.len() == problem.receivers.len(),
        "{} traces for {} receivers",
        traces.len(),
        problem.receivers.len()
    );
    for t in traces {
        ensure!(t.len() == problem.steps, "a trace of {} samples for {} steps", t.len(), problem.steps);
    }
    Ok(())
}

/// The problem whose forward run is the transpose of `problem`'s F (module docs): its sources are
/// `problem`'s receivers, injecting `traces` (one per receiver, `problem.steps` samples, in the
/// units of the traces) reversed in time, and its receivers are `problem`'s sources. Its traces,
/// each reversed, are F^T applied to `traces`, one row per source of `problem`
/// ([`reversed_traces`]). Same grid, model, boundary, dt and steps.
pub fn adjoint_problem(problem: &Problem, traces: &[Vec<f64>]) -> Result<Problem> {
    check_adjoint_supported(problem)?;
    check_backward_supported(problem)?;
    check_traces(problem, traces)?;
    let scaled = |taps: &[Tap], by: &dyn Fn(f64) -> f64| -> Vec<Tap> {
        taps.iter().map(|t| Tap { point: t.point, weight: by(sponge_factor(problem, t.point)) * t.weight }).collect()
    };
    let wavelet = problem.source().wavelet.clone();
    let mut sources = Vec::with_capacity(problem.receivers.len());
    for (r, trace) in problem.receivers.iter().zip(traces) {
        sources.push(PointSource {
            position: r.position,
            // Not read: the samples below are what the run injects.
            wavelet: wavelet.clone(),
            injection: r.interpolation,
            taps: scaled(&r.taps, &|g| g),
            samples: trace.iter().rev().copied().collect(),
        });
    }
    let receivers = problem
        .sources
        .iter()
        .map(|s| Receiver { position: s.position, interpolation: s.injection, taps: scaled(&s.taps, &|g| 1.0 / g) })
        .collect();
    let boundary = match problem.boundary.kind {
        BoundaryKind::Cpml => problem.boundary.transposed(),
        _ => problem.boundary.clone(),
    };
    Ok(Problem { sources, receivers, boundary, ..problem.clone() })
}

/// Each trace reversed in time: the adjoint run's traces in forward time, and back.
pub fn reversed_traces(traces: &[Vec<f64>]) -> Vec<Vec<f64>> {
    traces.iter().map(|t| t.iter().rev().copied().collect()).collect()
}

/// F on the CPU in precision `T`: the traces of `problem` (its sources' samples as they are).
pub fn forward_traces<T: Real>(problem: &Problem) -> Result<Vec<Vec<f64>>> {
    let mut solver = CpuSolver::<T>::new(problem)?;
    for n in 0..problem.steps {
        solver.advance(n);
    }
    Ok(solver.traces_native().iter().map(|t| t.iter().map(|v| v.f64()).collect()).collect())
}

/// F^T on the CPU in precision `T`: per source of `problem`, the samples (in
/// [`PointSource::samples`]' units, forward time) that `traces` (one per receiver) transpose to:
/// the forward step on [`adjoint_problem`].
pub fn adjoint_samples<T: Real>(problem: &Problem, traces: &[Vec<f64>]) -> Result<Vec<Vec<f64>>> {
    Ok(reversed_traces(&forward_traces::<T>(&adjoint_problem(problem, traces)?)?))
}

/// `problem` with `samples` (one row per source, `problem.steps` each) in place of its sources'
/// samples: the x that F is applied to.
pub fn with_source_samples(problem: &Problem, samples: &[Vec<f64>]) -> Result<Problem> {
    ensure!(samples.len() == problem.sources.len(), "{} rows for {} sources", samples.len(), problem.sources.len());
    let mut out = problem.clone();
    for (s, x) in out.sources.iter_mut().zip(samples) {
        ensure!(x.len() == problem.steps, "{} samples for {} steps", x.len(), problem.steps);
        s.samples = x.clone();
    }
    Ok(out)
}
