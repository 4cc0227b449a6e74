//! Reverse-time migration of one shot, and the velocity gradient of its data misfit, driven
//! through a [`Backend`] (any backend that runs the forward step runs both).
//!
//! The source wavefield u^{n+1} (the field after step n) is kept in host memory, f32, every step:
//! [`source_wavefield_bytes`] says what that costs, [`check_source_wavefield_fits`] refuses a shot
//! it does not fit. The backward pass is the forward step on [`adjoint_problem`] (with CPML the
//! transposed CPU step, [`super::transposed`], which gives the same nu): step m of it
//! gives nu^n, n = N - 1 - m, the adjoint field that pairs with the step-n source term
//! (`adjoint`'s module docs). Per point:
//!
//! - image:        I = sum_n u^{n+1} nu^n (zero-lag cross-correlation),
//! - illumination: E = sum_n (u^{n+1})^2,
//! - gradient of J = 1/2 ||d - d_obs||^2 with respect to the velocity v (K = c^2 dt^2 scaled by
//!   the density's factor, so dK/dv = 2 K / v):
//!   dJ/dv = (2 / (v G K)) sum_n nu^n (u^{n+1} - 2 G u^n + G^2 u^{n-1}),
//!   the bracket being K (G L u^n + S^T x^n), the term a change of K perturbs the step by (G the
//!   sponge factor, 1 elsewhere), and nu = G K mu the backward pass of the residuals d - d_obs
//!   (mu the adjoint state: dJ = sum_n <mu^n, dK (G L u^n + S^T x^n)>).
//!
//! The correlation runs on the host from per-step snapshots: right on every backend, the first
//! thing a GPU backend replaces (with a device-side sum and the source wavefield on the device).

use super::adjoint::{
    adjoint_problem, check_adjoint_supported, check_backward_supported, needs_transposed_step,
    sponge_factor as sponge_at,
};
use crate::backend::Backend;
use crate::problem::Problem;
use crate::solver::Interrupted;
use anyhow::{Result, ensure};
use rayon::prelude::*;

/// Part of the highest illumination added to every point's before dividing by it: where the
/// source wavefield is that much weaker than its strongest, the normalised image is damped
/// rather than amplified (no division by a near-zero energy).
pub const ILLUMINATION_FLOOR: f64 = 1e-3;

/// One shot's sums over time, dense (nz, ny, nx), f64.
#[derive(Clone, Debug, Default)]
pub struct ShotSums {
    /// sum_n u^{n+1} nu^n.
    pub image: Vec<f64>,
    /// sum_n (u^{n+1})^2.
    pub illumination: Vec<f64>,
}

/// Bytes of host memory the source wavefield of `problem` takes (f32, every step).
pub fn source_wavefield_bytes(problem: &Problem) -> u64 {
    problem.steps as u64 * problem.layout.points() as u64 * 4
}

/// Refuses a shot whose source wavefield does not fit: beyond `limit` bytes (the host's
/// available memory when None, and not checked where it is unknown).
pub fn check_source_wavefield_fits(problem: &Problem, limit: Option<u64>) -> Result<()> {
    let need = source_wavefield_bytes(problem);
    if let Some(limit) = limit.or_else(crate::resources::available_host_memory) {
        ensure!(
            need <= limit,
            "the source wavefield of a shot takes {:.2} GiB ({} steps of {} points, f32) and {:.2} GiB is \
             available: fewer steps, a smaller grid, or a larger machine",
            need as f64 / GIB,
            problem.steps,
            problem.layout.points(),
            limit as f64 / GIB
        );
    }
    Ok(())
}

const GIB: f64 = (1u64 << 30) as f64;

/// Ends a pass before step `done` of `steps` where a stop was asked: a signal, or another MPI
/// rank's stop (checked without waiting).
pub fn check_stop(done: usize, steps: usize) -> Result<()> {
    crate::solver::check_other_processes();
    if crate::solver::stop_requested() {
        return Err(Interrupted { steps_done: done, steps }.into());
    }
    Ok(())
}

/// Runs the forward shot of `problem` on `backend` (opened on it, or on a problem of the same
/// grid, model, time and boundary) and keeps u^{n+1} after every step n: `steps` fields, dense.
/// Returns them and the receivers' traces.
pub fn source_wavefield(backend: &mut dyn Backend, problem: &Problem) -> Result<(Vec<Vec<f32>>, Vec<f32>)> {
    check_adjoint_supported(problem)?;
    // Refused before the forward pass rather than after it.
    check_backward_supported(problem, backend.info().backend)?;
    backend.start_shot(problem)?;
    let points = problem.layout.points();
    let mut fields = Vec::with_capacity(problem.steps);
    for n in 0..problem.steps {
        check_stop(n, problem.steps)?;
        backend.step(n)?;
        let mut u = vec![0.0f32; points];
        backend.snapshot(&mut u)?;
        fields.push(u);
    }
    let traces = backend.traces(problem.steps)?;
    Ok((fields, traces))
}

/// Runs the backward pass of `problem` with `traces` (one per receiver, `problem.steps` samples)
/// as the adjoint's sources on `backend`, calling `each(n, nu)` with nu^n for n = N - 1 down to 0
/// ([`transposed_backward_pass`] with CPML).
pub fn backward(
    backend: &mut dyn Backend,
    problem: &Problem,
    traces: &[Vec<f64>],
    mut each: impl FnMut(usize, &[f32]),
) -> Result<()> {
    if needs_transposed_step(problem) {
        check_backward_supported(problem, backend.info().backend)?;
        return transposed_backward_pass(problem, traces, each);
    }
    let adjoint = adjoint_problem(problem, traces)?;
    backend.start_shot(&adjoint)?;
    let mut nu = vec![0.0f32; problem.layout.points()];
    for m in 0..problem.steps {
        check_stop(m, problem.steps)?;
        backend.step(m)?;
        backend.snapshot(&mut nu)?;
        each(problem.steps - 1 - m, &nu);
    }
    Ok(())
}

/// [`backward`] by the transposed CPU step (f32, as the source wavefield), the backward pass
/// under CPML ([`super::transposed`]); `backend` is not used.
pub fn transposed_backward_pass(problem: &Problem, traces: &[Vec<f64>], each: impl FnMut(usize, &[f32])) -> Result<()> {
    super::transposed::transposed_backward::<f32>(problem, traces, |done| check_stop(done, problem.steps), each)
}

/// The image and illumination sums of one shot: the source wavefield of `problem`, then the
/// backward pass of `observed` (one trace per receiver, `problem.steps` samples, the data to
/// migrate: reflections, the direct wave removed).
pub fn migrate_shot(backend: &mut dyn Backend, problem: &Problem, observed: &[Vec<f64>]) -> Result<ShotSums> {
    let (u, _) = source_wavefield(backend, problem)?;
    let points = problem.layout.points();
    let mut sums = ShotSums { image: vec![0.0; points], illumination: vec![0.0; points] };
    backward(backend, problem, observed, |n, nu| {
        let un = &u[n];
        sums.image.par_iter_mut().zip(un.par_iter().zip(nu)).for_each(|(i, (&a, &b))| *i += a as f64 * b as f64);
        sums.illumination.par_iter_mut().zip(un).for_each(|(e, &a)| *e += a as f64 * a as f64);
    })?;
    if problem.boundary.free_surface {
        // z = 0 holds no pressure (the step leaves a value there that the next one discards).
        let plane = problem.layout.nx * problem.layout.ny;
        sums.image[..plane].fill(0.0);
        sums.illumination[..plane].fill(0.0);
    }
    Ok(sums)
}

/// The sum of `image` / (illumination + floor) over shots: `shots`' sums each normalised by its
/// own illumination, [`ILLUMINATION_FLOOR`] of its highest added.
pub fn normalised_stack(shots: &[ShotSums]) -> Vec<f64> {
    let points = shots.first().map_or(0, |s| s.image.len());
    let mut out = vec![0.0; points];
    for s in shots {
        add_normalised(&mut out, s);
    }
    out
}

/// Adds `shot`'s image over its illumination (plus the floor) to `stack`.
pub fn add_normalised(stack: &mut [f64], shot: &ShotSums) {
    let floor = ILLUMINATION_FLOOR * shot.illumination.iter().fold(0.0f64, |m, &e| m.max(e));
    if floor == 0.0 {
        return;
    }
    stack
        .par_iter_mut()
        .zip(shot.image.par_iter().zip(&shot.illumination))
        .for_each(|(o, (&i, &e))| *o += i / (e + floor));
}

/// dJ/dv of J = 1/2 sum (d - d_obs)^2 for the shot of `problem` (module docs), dense (nz, ny, nx):
/// its source wavefield, then the backward pass of the residuals d - d_obs, `observed` one trace
/// per receiver. Returns the gradient and J.
pub fn misfit_gradient(backend: &mut dyn Backend, problem: &Problem, observed: &[Vec<f64>]) -> Result<(Vec<f64>, f64)> {
    let (u, traces) = source_wavefield(backend, problem)?;
    let steps = problem.steps;
    ensure!(
        observed.len() == problem.receivers.len(),
        "{} traces for {} receivers",
        observed.len(),
        problem.receivers.len()
    );
    let residual: Vec<Vec<f64>> = traces
        .chunks_exact(steps)
        .zip(observed)
        .map(|(d, o)| d.iter().zip(o).map(|(&d, &o)| d as f64 - o).collect())
        .collect();
    let misfit = 0.5 * residual.iter().flatten().map(|r| r * r).sum::<f64>();
    let points = problem.layout.points();
    let [nx, ny, _] = problem.shape();
    let k = problem.stiffness();
    let g: Vec<f64> = (0..points).map(|i| sponge_at(problem, [i % nx, (i / nx) % ny, i / (nx * ny)])).collect();
    let mut sum = vec![0.0f64; points];
    let zero = vec![0.0f32; points];
    backward(backend, problem, &residual, |n, nu| {
        let next = &u[n];
        let cur = if n >= 1 { &u[n - 1] } else { &zero };
        let prev = if n >= 2 { &u[n - 2] } else { &zero };
        sum.par_iter_mut().enumerate().for_each(|(i, s)| {
            let bracket = next[i] as f64 - 2.0 * g[i] * cur[i] as f64 + g[i] * g[i] * prev[i] as f64;
            *s += nu[i] as f64 * bracket;
        });
    })?;
    for (i, s) in sum.iter_mut().enumerate() {
        let v = problem.vp[i] as f64;
        *s *= 2.0 / (v * g[i] * k[i]);
    }
    if problem.boundary.free_surface {
        sum[..nx * ny].fill(0.0);
    }
    Ok((sum, misfit))
}
