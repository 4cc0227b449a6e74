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
//! # CPML: what its transpose needs (not implemented; [`adjoint_problem`] refuses it)
//!
//! Per axis (boundary.rs has the formulation; the axes' terms add), with the diagonals a, b
//! (the profile's coefficients, zero and one outside the layer), D1 the centred first derivative
//! (antisymmetric: D1^T = -D1, phi being zero outside its slabs), D2 the axis' second derivative
//! and A = D(a D) the compact operator (both symmetric), the step maps (p^n, p^{n-1}, phi^n,
//! zeta^n) to
//!
//! ```text
//! p^{n+1}    = [2 + K L + K A + K a (D2 + A)] p^n - p^{n-1} + K (1 + a) D1 phi^n + K b zeta^n + K S^T x^n
//! phi^{n+1}  = b a D1 p^n + b phi^n
//! zeta^{n+1} = a (D2 + A) p^n + a D1 phi^n + b zeta^n
//! ```
//!
//! Its transpose, run backward with mu, lambda, eta the adjoints of p, phi, zeta:
//!
//! ```text
//! mu^n     = [2 + L K + A K + (D2 + A) a K] mu^{n+1} - mu^{n+2} - D1 (a b lambda^{n+1}) + (D2 + A) (a eta^{n+1}) + R^T y^n
//! lambda^n = -D1 ((1 + a) K mu^{n+1}) - D1 (a eta^{n+1}) + b lambda^{n+1}
//! eta^n    = b K mu^{n+1} + b eta^{n+1}
//! ```
//!
//! In nu = K mu the pressure's part is the forward one except that a multiplies before (D2 + A)
//! rather than after it, and the memory variables are driven by minus the first derivative of
//! the adjoint pressure (weighted by 1 + a) where the forward ones take plus that of p (weighted
//! by a b), and feed back through -D1 and (D2 + A) of a-weighted values. So the backward step is
//! a kernel of its own (the same stencils, the coefficients on the other side of each derivative),
//! not the forward step on another problem; it needs a transposed CPML sweep on the CPU and the
//! dot-product test with CPML, a free surface (whose odd mirror makes D1 near z = 0 not
//! antisymmetric: a z layer under the free surface needs its own rows) and off-grid positions.

use crate::backend::cpu::{CpuSolver, Real};
use crate::boundary::BoundaryKind;
use crate::problem::{PointSource, Problem, Receiver, Tap};
use anyhow::{Result, bail, ensure};

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

/// Refuses what the transposed run does not cover yet.
pub fn check_adjoint_supported(problem: &Problem) -> Result<()> {
    if problem.boundary.kind == BoundaryKind::Cpml {
        bail!(
            "the adjoint (migration, gradient) does not support boundary.kind = \"cpml\" yet: its memory \
             variables make the backward step differ from the forward one; use \"sponge\" or \"none\""
        );
    }
    ensure!(problem.vp_first == 0, "the adjoint runs on a whole grid, not on one rank's part of it");
    ensure!(!problem.receivers.is_empty(), "the adjoint needs receivers (their traces are its sources)");
    Ok(())
}

/// The problem whose forward run is the transpose of `problem`'s F (module docs): its sources are
/// `problem`'s receivers, injecting `traces` (one per receiver, `problem.steps` samples, in the
/// units of the traces) reversed in time, and its receivers are `problem`'s sources. Its traces,
/// each reversed, are F^T applied to `traces`, one row per source of `problem`
/// ([`reversed_traces`]). Same grid, model, boundary, dt and steps.
pub fn adjoint_problem(problem: &Problem, traces: &[Vec<f64>]) -> Result<Problem> {
    check_adjoint_supported(problem)?;
    ensure!(
        traces.len() == problem.receivers.len(),
        "{} traces for {} receivers",
        traces.len(),
        problem.receivers.len()
    );
    let steps = problem.steps;
    let scaled = |taps: &[Tap], by: &dyn Fn(f64) -> f64| -> Vec<Tap> {
        taps.iter().map(|t| Tap { point: t.point, weight: by(sponge_factor(problem, t.point)) * t.weight }).collect()
    };
    let wavelet = problem.source().wavelet.clone();
    let mut sources = Vec::with_capacity(problem.receivers.len());
    for (r, trace) in problem.receivers.iter().zip(traces) {
        ensure!(trace.len() == steps, "a trace of {} samples for {steps} steps", trace.len());
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
    Ok(Problem { sources, receivers, ..problem.clone() })
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
/// [`PointSource::samples`]' units, forward time) that `traces` (one per receiver) transpose to.
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
