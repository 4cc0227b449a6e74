//! Reverse-time migration of one shot, and the velocity gradient of its data misfit, driven
//! through a [`Backend`] (any backend that runs the forward step runs both).
//!
//! A shot is one source pass and one backward pass per data set ([`ShotImaging`]). The source pass
//! keeps the source wavefield u^{n+1} (the field after step n) at the steps the imaging condition
//! reads: every `interval`-th step ([`ImagingPlan`]), every step where the gradient is asked for.
//! The backward pass is the forward step on [`adjoint_problem`] (with CPML, whose boundary is the
//! transposed layer step's): step m of it gives nu^n, n = N - 1 - m,
//! the adjoint field that pairs with the step-n source term (`adjoint`'s module docs). Per point:
//!
//! - image:        I = sum_{n in S} u^{n+1} nu^n (zero-lag cross-correlation over the imaging
//!   steps S = {n : n mod interval = 0}),
//! - illumination: E = sum_{n in S} (u^{n+1})^2,
//! - gradient of J = 1/2 ||d - d_obs||^2 with respect to the velocity v (K = c^2 dt^2 scaled by
//!   the density's factor, so dK/dv = 2 K / v), over every step:
//!   dJ/dv = (2 / (v G K)) sum_n nu^n (u^{n+1} - 2 G u^n + G^2 u^{n-1}),
//!   the bracket being K (G L u^n + S^T x^n), the term a change of K perturbs the step by (G the
//!   sponge factor, 1 elsewhere), and nu = G K mu the backward pass of the residuals d - d_obs
//!   (mu the adjoint state: dJ = sum_n <mu^n, dK (G L u^n + S^T x^n)>).
//!
//! Sampling the correlation every `interval` steps is exact for fields band-limited below
//! 1 / (2 interval dt) (the product's band is twice the fields'); [`auto_interval`] keeps a factor
//! of two below that for the wavelet's highest frequency. A GPU backend keeps the fields and the
//! sums on the device ([`DeviceImaging`]): nothing crosses to the host inside a pass. Elsewhere
//! the host keeps them (f32 fields, f64 sums) from a snapshot a kept step; both do the same
//! arithmetic in the same order, so the sums agree where the fields do.

use super::adjoint::{adjoint_problem, check_adjoint_supported, check_backward_supported, sponge_factor as sponge_at};
use crate::backend::Backend;
use crate::backend::imaging::{DeviceImaging, ImagingSums};
use crate::problem::Problem;
use crate::solver::Interrupted;
use anyhow::{Result, ensure};
use rayon::prelude::*;

/// Part of the highest illumination added to every point's before dividing by it: where the
/// source wavefield is that much weaker than its strongest, the normalised image is damped
/// rather than amplified (no division by a near-zero energy).
pub const ILLUMINATION_FLOOR: f64 = 1e-3;

/// The longest [`auto_interval`]: a power of two dividing the GPU's 32-step graph launches, so
/// that every launch holds the same kernels.
pub const MAX_AUTO_INTERVAL: usize = 32;

/// One shot's sums over time, dense (nz, ny, nx), f64.
#[derive(Clone, Debug, Default)]
pub struct ShotSums {
    /// sum_{n in S} u^{n+1} nu^n.
    pub image: Vec<f64>,
    /// sum_{n in S} (u^{n+1})^2.
    pub illumination: Vec<f64>,
}

/// What a shot's imaging computes: the imaging condition every `interval` steps, and whether the
/// gradient (which sums every step) is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImagingPlan {
    pub interval: usize,
    pub gradient: bool,
}

impl ImagingPlan {
    /// The imaging condition every step, no gradient.
    pub const EVERY_STEP: ImagingPlan = ImagingPlan { interval: 1, gradient: false };

    /// Steps between kept fields: every step where the gradient is asked for.
    pub fn kept_every(&self) -> usize {
        if self.gradient { 1 } else { self.interval.max(1) }
    }

    /// Fields the source pass keeps over `steps` steps.
    pub fn slots(&self, steps: usize) -> usize {
        steps.div_ceil(self.kept_every())
    }

    /// The slot of u^{n+1}, where step n's field is kept.
    fn slot(&self, n: usize) -> Option<usize> {
        let every = self.kept_every();
        n.is_multiple_of(every).then_some(n / every)
    }

    /// Whether the image sums step n.
    fn images(&self, n: usize) -> bool {
        n.is_multiple_of(self.interval.max(1))
    }
}

/// Steps between the imaging condition's samples for a run of time step `dt` whose wavelet
/// reaches `max_frequency` Hz: the largest power of two, up to [`MAX_AUTO_INTERVAL`], with
/// interval dt <= 1 / (4 max_frequency) (half the correlation's Nyquist interval).
pub fn auto_interval(dt: f64, max_frequency: f64) -> usize {
    let limit = 1.0 / (4.0 * max_frequency * dt);
    let mut k = 1;
    while k < MAX_AUTO_INTERVAL && (2 * k) as f64 <= limit {
        k *= 2;
    }
    k
}

/// Bytes the source wavefield of `problem` takes when kept as `plan` says (f32).
pub fn source_wavefield_bytes(problem: &Problem, plan: &ImagingPlan) -> u64 {
    plan.slots(problem.steps) as u64 * problem.layout.points() as u64 * 4
}

/// Refuses a shot whose source wavefield does not fit in host memory: beyond `limit` bytes (the
/// host's available memory when None, and not checked where it is unknown).
pub fn check_source_wavefield_fits(problem: &Problem, plan: &ImagingPlan, limit: Option<u64>) -> Result<()> {
    let need = source_wavefield_bytes(problem, plan);
    if let Some(limit) = limit.or_else(crate::resources::available_host_memory) {
        ensure!(
            need <= limit,
            "the source wavefield of a shot takes {:.2} GiB ({} fields of {} points, f32) and {:.2} GiB is \
             available: a longer imaging.interval, fewer steps, a smaller grid, or a larger machine",
            need as f64 / GIB,
            plan.slots(problem.steps),
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

/// The source wavefield and the sums where the backend has no [`DeviceImaging`].
struct HostSums {
    kept: Vec<Vec<f32>>,
    nu: Vec<f32>,
    sums: ImagingSums,
    sponge: Vec<f64>,
}

impl HostSums {
    fn new(points: usize, slots: usize, sponge: Option<Vec<f64>>) -> HostSums {
        let gradient = if sponge.is_some() { vec![0.0; points] } else { Vec::new() };
        HostSums {
            kept: Vec::with_capacity(slots),
            nu: vec![0.0; points],
            sums: ImagingSums { image: vec![0.0; points], illumination: vec![0.0; points], gradient },
            sponge: sponge.unwrap_or_default(),
        }
    }

    fn keep(&mut self, backend: &mut dyn Backend, slot: usize) -> Result<()> {
        ensure!(slot == self.kept.len(), "fields are kept in order");
        let mut u = vec![0.0f32; self.nu.len()];
        backend.snapshot(&mut u)?;
        self.sums.illumination.par_iter_mut().zip(&u).for_each(|(e, &a)| *e += a as f64 * a as f64);
        self.kept.push(u);
        Ok(())
    }

    fn correlate_image(&mut self, slot: usize) {
        let u = &self.kept[slot];
        self.sums
            .image
            .par_iter_mut()
            .zip(u.par_iter().zip(&self.nu))
            .for_each(|(i, (&a, &b))| *i += a as f64 * b as f64);
    }

    /// Adds nu^n (in `nu`) into the sum `pass` computes.
    fn sum(&mut self, pass: Pass, plan: &ImagingPlan, n: usize) {
        match pass {
            Pass::Image => self.correlate_image(plan.slot(n).expect("an imaging step's field is kept")),
            Pass::Gradient => self.correlate_gradient(gradient_slots(n)),
        }
    }

    fn correlate_gradient(&mut self, [next, cur, prev]: [Option<usize>; 3]) {
        let field = |s: Option<usize>| s.map(|s| &self.kept[s][..]);
        let (next, cur, prev) = (field(next).expect("u^{n+1} is kept"), field(cur), field(prev));
        let (g, nu) = (&self.sponge, &self.nu);
        self.sums.gradient.par_iter_mut().enumerate().for_each(|(i, s)| {
            let c = cur.map_or(0.0, |c| c[i] as f64);
            let p = prev.map_or(0.0, |p| p[i] as f64);
            let bracket = next[i] as f64 - 2.0 * g[i] * c + g[i] * g[i] * p;
            *s += nu[i] as f64 * bracket;
        });
    }
}

/// What a backward pass sums.
#[derive(Clone, Copy)]
enum Pass {
    Image,
    Gradient,
}

impl Pass {
    /// Whether the pass reads nu^n.
    fn reads(self, plan: &ImagingPlan, n: usize) -> bool {
        match self {
            Pass::Image => plan.images(n),
            Pass::Gradient => true,
        }
    }
}

/// The kept slots of u^{n+1}, u^n and u^{n-1} where every step is kept (None before the first).
fn gradient_slots(n: usize) -> [Option<usize>; 3] {
    [Some(n), n.checked_sub(1), n.checked_sub(2)]
}

/// Where a shot's imaging condition runs.
enum Sums {
    Device,
    Host(Box<HostSums>),
}

/// One shot's imaging on a backend: [`ShotImaging::source_pass`], then [`ShotImaging::image`]
/// and/or [`ShotImaging::gradient`], then [`ShotImaging::finish`].
pub struct ShotImaging<'a> {
    backend: &'a mut dyn Backend,
    problem: &'a Problem,
    plan: ImagingPlan,
    sums: Sums,
    /// The source pass's traces, one row per receiver: the data modelled in the migration model.
    modelled: Vec<Vec<f64>>,
}

impl<'a> ShotImaging<'a> {
    /// Runs the forward shot of `problem` on `backend` (opened on it, or on a problem of the same
    /// grid, model, time and boundary), keeping the source wavefield as `plan` says.
    pub fn source_pass(backend: &'a mut dyn Backend, problem: &'a Problem, plan: ImagingPlan) -> Result<Self> {
        check_adjoint_supported(problem)?;
        // Refused before the forward pass rather than after it.
        check_backward_supported(problem)?;
        ensure!(plan.interval >= 1, "imaging.interval must be at least 1");
        let slots = plan.slots(problem.steps);
        let points = problem.layout.points();
        let sponge = plan.gradient.then(|| sponge_field(problem));
        let sums = match backend.device_imaging() {
            Some(d) => {
                d.open_imaging(slots, sponge.as_deref())?;
                Sums::Device
            }
            None => Sums::Host(Box::new(HostSums::new(points, slots, sponge))),
        };
        backend.start_shot(problem)?;
        let mut shot = ShotImaging { backend, problem, plan, sums, modelled: Vec::new() };
        for n in 0..problem.steps {
            check_stop(n, problem.steps)?;
            shot.backend.step(n)?;
            if let Some(slot) = plan.slot(n) {
                match &mut shot.sums {
                    Sums::Device => device(shot.backend)?.keep_source(slot)?,
                    Sums::Host(h) => h.keep(shot.backend, slot)?,
                }
            }
        }
        let traces = shot.backend.traces(problem.steps)?;
        shot.modelled = traces.chunks_exact(problem.steps).map(|t| t.iter().map(|&v| v as f64).collect()).collect();
        Ok(shot)
    }

    /// The source pass's traces (one row per receiver): the shot modelled in the migration model,
    /// its direct wave included.
    pub fn modelled(&self) -> &[Vec<f64>] {
        &self.modelled
    }

    /// The backward pass of `data` (one trace per receiver, `problem.steps` samples: reflections,
    /// the direct wave removed), correlated into the image.
    pub fn image(&mut self, data: &[Vec<f64>]) -> Result<()> {
        self.backward(data, Pass::Image)
    }

    /// The backward pass of the residuals `residual` (d - d_obs, one per receiver) into the
    /// gradient's sum (the plan asks for the gradient).
    pub fn gradient(&mut self, residual: &[Vec<f64>]) -> Result<()> {
        ensure!(self.plan.gradient, "the imaging plan does not keep the fields the gradient needs");
        self.backward(residual, Pass::Gradient)
    }

    /// The backward pass of `traces` as the adjoint's sources, nu^n for n = N - 1 down to 0 summed
    /// as `pass` says.
    fn backward(&mut self, traces: &[Vec<f64>], pass: Pass) -> Result<()> {
        let (plan, steps) = (self.plan, self.problem.steps);
        let adjoint = adjoint_problem(self.problem, traces)?;
        self.backend.start_shot(&adjoint)?;
        for m in 0..steps {
            check_stop(m, steps)?;
            self.backend.step(m)?;
            let n = steps - 1 - m;
            if !pass.reads(&plan, n) {
                continue;
            }
            match &mut self.sums {
                Sums::Device => {
                    let d = device(self.backend)?;
                    match pass {
                        Pass::Image => d.correlate_image(plan.slot(n).expect("an imaging step's field is kept"))?,
                        Pass::Gradient => d.correlate_gradient(gradient_slots(n))?,
                    }
                }
                Sums::Host(h) => {
                    self.backend.snapshot(&mut h.nu)?;
                    h.sum(pass, &plan, n);
                }
            }
        }
        // The pass ends when its queued steps are done, so that its time is its own.
        self.backend.wait()
    }

    /// The shot's sums: the image and illumination, and dJ/dv where the gradient was computed
    /// (empty otherwise). z = 0 under a free surface holds no pressure and sums nothing.
    pub fn finish(self) -> Result<ImagingSums> {
        let mut sums = match self.sums {
            Sums::Device => device(self.backend)?.take_sums()?,
            Sums::Host(h) => h.sums,
        };
        let problem = self.problem;
        finish_gradient(problem, &mut sums.gradient);
        for field in [&mut sums.image, &mut sums.illumination] {
            without_surface(problem, field);
        }
        Ok(sums)
    }

    /// [`finish`](Self::finish) with the image added to a stack as [`add_normalised`] adds it: on
    /// the device where the sums are there (the stack stays there until
    /// [`take_device_stack`]), else to `stack`. Returns dJ/dv (empty without the gradient).
    pub fn finish_into(self, stack: &mut [f64]) -> Result<Vec<f64>> {
        if !matches!(self.sums, Sums::Device) {
            let sums = self.finish()?;
            add_normalised(stack, &ShotSums { image: sums.image, illumination: sums.illumination });
            return Ok(sums.gradient);
        }
        let problem = self.problem;
        let d = device(self.backend)?;
        d.stack_image(ILLUMINATION_FLOOR, usize::from(problem.boundary.free_surface))?;
        let mut gradient = d.take_gradient()?;
        finish_gradient(problem, &mut gradient);
        Ok(gradient)
    }
}

/// The image stack [`ShotImaging::finish_into`] left on `backend`'s device, if any, added to
/// `stack`.
pub fn take_device_stack(backend: &mut dyn Backend, stack: &mut [f64]) -> Result<()> {
    if let Some(d) = backend.device_imaging()
        && let Some(s) = d.take_stack()?
    {
        ensure!(s.len() == stack.len(), "a device stack of {} points for {}", s.len(), stack.len());
        stack.par_iter_mut().zip(&s).for_each(|(a, b)| *a += b);
    }
    Ok(())
}

/// Zeros a dense sum's top plane under a free surface (z = 0 holds no pressure and sums nothing;
/// nothing where the sum is empty).
fn without_surface(problem: &Problem, field: &mut [f64]) {
    if problem.boundary.free_surface && !field.is_empty() {
        field[..problem.layout.nx * problem.layout.ny].fill(0.0);
    }
}

/// dJ/dv from the gradient's sum, in place (nothing where it is empty): 2 / (v g K) at each
/// point, the top plane zero under a free surface.
fn finish_gradient(problem: &Problem, gradient: &mut [f64]) {
    if gradient.is_empty() {
        return;
    }
    let k = problem.stiffness();
    let [nx, ny, _] = problem.shape();
    gradient.par_iter_mut().enumerate().for_each(|(i, s)| {
        let g = sponge_at(problem, [i % nx, (i / nx) % ny, i / (nx * ny)]);
        *s *= 2.0 / (problem.vp[i] as f64 * g * k[i]);
    });
    without_surface(problem, gradient);
}

fn device(backend: &mut dyn Backend) -> Result<&mut dyn DeviceImaging> {
    backend.device_imaging().ok_or_else(|| anyhow::anyhow!("the backend has no device imaging"))
}

/// The sponge factor G at every point, dense (nz, ny, nx) (1 without a sponge).
fn sponge_field(problem: &Problem) -> Vec<f64> {
    let [nx, ny, _] = problem.shape();
    (0..problem.layout.points()).map(|i| sponge_at(problem, [i % nx, (i / nx) % ny, i / (nx * ny)])).collect()
}

/// The image and illumination sums of one shot, the imaging condition every step: the source
/// wavefield of `problem`, then the backward pass of `observed` (one trace per receiver,
/// `problem.steps` samples, the data to migrate: reflections, the direct wave removed).
pub fn migrate_shot(backend: &mut dyn Backend, problem: &Problem, observed: &[Vec<f64>]) -> Result<ShotSums> {
    let mut shot = ShotImaging::source_pass(backend, problem, ImagingPlan::EVERY_STEP)?;
    shot.image(observed)?;
    let sums = shot.finish()?;
    Ok(ShotSums { image: sums.image, illumination: sums.illumination })
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
    let floor = ILLUMINATION_FLOOR * shot.illumination.par_iter().copied().reduce(|| 0.0, f64::max);
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
    let mut shot = ShotImaging::source_pass(backend, problem, ImagingPlan { interval: 1, gradient: true })?;
    let (residual, misfit) = residuals(shot.modelled(), observed)?;
    shot.gradient(&residual)?;
    Ok((shot.finish()?.gradient, misfit))
}

/// The residuals d - d_obs (one row per receiver) and J = 1/2 ||d - d_obs||^2.
pub fn residuals(modelled: &[Vec<f64>], observed: &[Vec<f64>]) -> Result<(Vec<Vec<f64>>, f64)> {
    ensure!(observed.len() == modelled.len(), "{} traces for {} receivers", observed.len(), modelled.len());
    let residual: Vec<Vec<f64>> =
        modelled.iter().zip(observed).map(|(d, o)| d.iter().zip(o).map(|(&d, &o)| d - o).collect()).collect();
    let misfit = 0.5 * residual.iter().flatten().map(|r| r * r).sum::<f64>();
    Ok((residual, misfit))
}
