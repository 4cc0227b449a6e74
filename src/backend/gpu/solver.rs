//! [`GpuSolver`]: a [`Problem`]'s state on one device, over any [`GpuRuntime`], composed of what
//! owns each part of it: the step's launches (`StepLaunches`), the fields (`Fields`), the
//! source and receivers (`Taps`), the staging of snapshots and halos (`Staging`) and the
//! graph-capture gate (`GraphCapture`). Every buffer is allocated when it opens; each
//! [`Backend::step`] only enqueues kernels (free surface, the interior as one fused kernel or three
//! passes plus an update, the CPML layers, source, receivers), in the order of `backend`'s module
//! docs. The host waits only for snapshots, traces, step timings and the blow-up check, each of
//! which passes the gate first.

use super::capture::GraphCapture;
use super::cpml_transposed::DeviceTransposed;
use super::fields::{Fields, kernel_name, ptr_or_null};
use super::imaging::{DeviceSums, opened, reopen};
use super::launch::StepLaunches;
use super::plan::{LayerPass, StepSplit, y_layers_fit};
use super::runtime::{DeviceBuffer, DevicePtr, GpuRuntime};
use super::snapshot::Staging;
use super::taps::Taps;
use crate::backend::imaging::{DeviceImaging, ImagingSums};
use crate::backend::tuning::Tuning;
use crate::backend::{Backend, DeviceField, DeviceInfo};
use crate::boundary::BoundaryKind;
use crate::config::{KernelChoice, Precision};
use crate::grid::{Section, for_each_section};
use crate::problem::Problem;
use anyhow::{Context, Result, ensure};
use std::rc::Rc;

pub use super::fields::{MEMORY_MARGIN, check_fits, estimate_bytes};
pub use super::plan::Operator;

/// The GPU solver over any [`GpuRuntime`]: every buffer allocated once, steps only enqueue.
pub struct GpuSolver<Rt: GpuRuntime> {
    kernel: KernelChoice,
    launches: StepLaunches<Rt>,
    fields: Fields<Rt>,
    taps: Taps<Rt>,
    /// The first step's start and every step's end.
    events: Vec<Rt::Event>,
    steps_done: usize,
    /// The z-ranges a decomposed run's step computed first (`begin_field`) while that step is
    /// open, kept (with their complement) between steps so that the loop allocates nothing.
    split: Option<StepSplit>,
    staging: Staging<Rt>,
    capture: GraphCapture<Rt::Graph>,
    /// The imaging condition's buffers, once a migration opens them.
    imaging: Option<DeviceSums<Rt>>,
    /// The CPML's transposed layers, once a shot is a backward pass with CPML
    /// ([`BoundaryKind::CpmlTransposed`]): its fused pass then computes no layer, these follow it.
    transposed: Option<DeviceTransposed<Rt>>,
    /// Whether the current shot is such a backward pass.
    backward: bool,
    rt: Rc<Rt>,
}

impl<Rt: GpuRuntime> Drop for GpuSolver<Rt> {
    fn drop(&mut self) {
        let _ = self.capture.end(&*self.rt);
        // The buffers free themselves after this, once no queued kernel can still use them.
        let _ = self.rt.synchronize();
    }
}

impl<Rt: GpuRuntime> GpuSolver<Rt> {
    /// Allocates and uploads everything the problem needs; errors (before allocating) if it does
    /// not fit in the device's free memory.
    pub fn new(rt: Rt, problem: &Problem, kernel: KernelChoice, tuning: Tuning) -> Result<Self> {
        let pass = LayerPass::for_grid(problem.boundary.width);
        Self::with_layer_pass(rt, problem, kernel, tuning, pass)
    }

    /// [`GpuSolver::new`] with the CPML layers computed where `layer_pass` says. The y-layer
    /// kernels are compiled only when asked for, and only a fused f32 step with CPML on NVIDIA
    /// whose layer tile fits in shared memory ([`Tuning::layer_tile_fits`]) can use them; other
    /// runs compute the layers after the interior ([`GpuSolver::layer_pass`] says which one runs).
    pub fn with_layer_pass(
        rt: Rt,
        problem: &Problem,
        kernel: KernelChoice,
        tuning: Tuning,
        layer_pass: LayerPass,
    ) -> Result<Self> {
        let layout = problem.layout;
        let shape = problem.shape();
        let r = problem.stencil.radius;
        ensure!(layout.halo == r, "layout halo must equal the stencil radius");
        // Before anything is compiled or allocated.
        let half = problem.precision == Precision::F16;
        ensure!(
            !half || kernel == KernelChoice::Fused,
            "run.precision = \"f16\" runs with the fused kernel only (kernels/fused_half.cu): use \
             run.kernel = \"fused\", or run.precision = \"f32\" with the three-pass kernel"
        );
        let b = &problem.boundary;
        let tuning = if half { tuning.for_half(r) } else { tuning }.effective(r);
        // fused_step_ylayers (fused.cu; fused_ring.cu has no layer path), where its shared memory
        // fits. It takes a launch shape of its own, in a module of its own, while the plain
        // fused_step between the y layers keeps the interior's (without the tile ring:
        // fused_ring.cu has no launch over part of the tiles).
        let in_pass_shape = tuning.for_ylayers(r);
        ensure!(
            !problem.variable_density() || kernel == KernelChoice::Fused,
            "model.density varies, and run.kernel = \"three-pass\" computes a constant density only: use \
             run.kernel = \"fused\" (the default)"
        );
        // Where the density varies, its step (density.cu) takes the interior and the CPML
        // layers follow it.
        let layer_pass = if layer_pass == LayerPass::YLayers
            && !half
            && !problem.variable_density()
            && rt.vendor() != "hip"
            && b.kind == BoundaryKind::Cpml
            && kernel == KernelChoice::Fused
            && in_pass_shape.layer_tile_fits(r)
            && y_layers_fit(shape, b.width, in_pass_shape.vec, b.layer_faces[1])
        {
            layer_pass
        } else {
            LayerPass::After
        };
        let (tuning, y_tuning) = match layer_pass {
            LayerPass::YLayers => (Tuning { tile_ring: 0, ..tuning }.effective(r), Some(in_pass_shape)),
            LayerPass::After => (tuning, None),
        };
        tuning.check(r)?;
        if let Some(t) = &y_tuning {
            t.check(r)?;
        }
        ensure!(
            shape.iter().all(|&n| n < i32::MAX as usize / 2),
            "grid {shape:?} is too large for 32-bit indices along an axis"
        );
        let (free, total) = rt.mem_info()?;
        check_fits(problem, kernel, &rt.device_name(), free as u64, total as u64)?;
        let rt = Rc::new(rt);
        let (mut launches, half_f, y_module) = StepLaunches::open(&rt, problem, tuning, y_tuning, half)?;
        let fields = Fields::new(&rt, problem, kernel, layer_pass, half_f)?;
        let taps = Taps::new(&rt, problem)?;
        let events = (0..=problem.steps).map(|_| rt.event()).collect::<Result<_>>()?;
        launches.set_y_pass(&rt, &fields, y_module)?;
        let mut transposed = None;
        let backward = DeviceTransposed::for_shot(&mut transposed, &rt, problem, true)?;
        ensure!(!(backward && half), "the backward pass with CPML runs in f32, not with run.precision = \"f16\"");
        rt.synchronize()?;
        Ok(GpuSolver {
            kernel,
            launches,
            fields,
            taps,
            events,
            steps_done: 0,
            split: None,
            staging: Staging::new(),
            imaging: None,
            transposed,
            backward,
            capture: GraphCapture::new(rt.captures()),
            rt,
        })
    }

    /// The gate every use of the stream other than a step's passes: the steps captured so far
    /// are launched first.
    fn gate(&mut self) -> Result<()> {
        self.capture.end(&*self.rt)
    }

    /// Compiler resources of the interior kernels, for reports.
    pub fn kernel_info(&self) -> String {
        self.launches.kernel_info(&self.rt, &self.fields, self.kernel)
    }

    pub fn runtime(&self) -> &Rt {
        &self.rt
    }

    /// Grid shape (nx, ny, nz).
    pub fn shape(&self) -> [usize; 3] {
        self.launches.shape()
    }

    pub fn radius(&self) -> usize {
        self.fields.layout.halo
    }

    pub fn tuning(&self) -> Tuning {
        self.launches.tuning()
    }

    /// The launch shape `op` runs with: the Laplacian-only operator has its own ring depth and
    /// z-window.
    pub fn operator_tuning(&self, op: Operator) -> Tuning {
        self.launches.operator_tuning(op)
    }

    /// The z-windows of the fused step and of the Laplacian-only operator.
    pub fn windows(&self) -> (u32, u32) {
        self.launches.windows()
    }

    /// Sets both z-windows as [`Self::windows`] returned them.
    pub fn restore_windows(&mut self, windows: (u32, u32)) {
        self.launches.restore_windows(windows)
    }

    /// Sets the z-window of the fused step and of the Laplacian-only operator
    /// ([`LaunchGeometry::guarded_window`](super::geometry::LaunchGeometry::guarded_window)).
    pub fn set_window(&mut self, window: u32) {
        self.launches.set_window(window)
    }

    /// Sets the z-window `op` runs with (0: its automatic choice), leaving the other operator's.
    pub fn set_operator_window(&mut self, op: Operator, window: u32) {
        self.launches.set_operator_window(op, window)
    }

    /// Sets p^n and p^{n-1} from dense (nz, ny, nx) arrays (tests, benchmarks); in f16, p^n and
    /// d^n = p^n - p^{n-1}, rounded, unscaled.
    pub fn set_state(&mut self, current: &[f32], previous: &[f32]) -> Result<()> {
        self.gate()?;
        self.fields.set_state(current, previous)
    }

    /// Whether the gap's z layers are computed in its pass (fused_step_zlayers), as they are
    /// wherever the y layers are and the grid has z layers.
    pub fn z_layers_in_pass(&self) -> bool {
        self.launches.z_layers_in_pass()
    }

    /// Where this solver computes the CPML layers; [`LayerPass::After`] also for runs without CPML.
    pub fn layer_pass(&self) -> LayerPass {
        self.fields.layer_pass()
    }

    /// Captures `steps` steps of [`Backend::step`] into each graph launch (0 or 1: every kernel
    /// launched on its own), where the runtime can capture; the steps captured so far are
    /// launched first.
    pub fn set_graph_steps(&mut self, steps: usize) -> Result<()> {
        self.capture.set_steps(&*self.rt, steps)
    }

    /// Steps in each graph launch (0: none).
    pub fn graph_steps(&self) -> usize {
        self.capture.steps()
    }

    /// Enqueues step `n` (order of `backend`'s module docs; the receivers only with `record`),
    /// then swaps p^n and p^{n+1}.
    fn enqueue_step(&mut self, n: usize, record: bool) -> Result<()> {
        let (rt, d, l) = (&*self.rt, &self.fields, &self.launches);
        l.enqueue_free_surface(rt, d)?;
        let op = if self.kernel == KernelChoice::ThreePass { Operator::ThreePass } else { Operator::Fused };
        match &self.transposed {
            Some(t) if self.backward => {
                l.launch_interior_unlayered(rt, d, op, d.prev.ptr())?;
                t.enqueue(rt, d, l.f.cpml_transposed, l.axis_weights())?;
            }
            _ => {
                l.launch_interior(rt, d, op, d.prev.ptr())?;
                l.launch_cpml(rt, d, 0..d.layout.nz)?;
            }
        }
        self.taps.enqueue_source(rt, d, &l.f.io, n, 0..d.layout.nz)?;
        if record {
            self.taps.enqueue_record(rt, d, &l.f.io, d.prev.ptr(), n)?;
        }
        self.fields.close_step();
        Ok(())
    }

    /// Steps 2-4 of step `n` on the z-planes `planes` (the f32 fused step), with their source taps.
    fn enqueue_planes(&self, n: usize, planes: std::ops::Range<usize>) -> Result<()> {
        if planes.is_empty() {
            return Ok(());
        }
        ensure!(!self.backward, "a backward pass runs on a whole grid");
        let (rt, d, l) = (&*self.rt, &self.fields, &self.launches);
        l.launch_interior_planes(rt, d, Operator::Fused, d.prev.ptr(), planes.clone(), true)?;
        l.launch_cpml(rt, d, planes.clone())?;
        self.taps.enqueue_source(rt, d, &l.f.io, n, planes)
    }

    /// The step's start event (the first step's).
    fn time_step_start(&self) -> Result<()> {
        if self.steps_done == 0 && !self.events.is_empty() {
            self.rt.record(&self.events[0])?;
        }
        Ok(())
    }

    /// The step's end event.
    fn time_step_end(&mut self) -> Result<()> {
        let k = self.steps_done;
        if k + 1 < self.events.len() {
            self.rt.record(&self.events[k + 1])?;
        }
        self.steps_done += 1;
        Ok(())
    }

    /// L p^n from the last [`Operator::Laplacian`] application of [`Self::time_interior`], dense
    /// (nz, ny, nx); for tests.
    pub fn laplacian_output(&mut self) -> Result<Vec<f32>> {
        ensure!(self.launches.laplacian_loaded(), "no Laplacian-only application yet");
        let lap = ptr_or_null(&self.fields.lap);
        let l = self.fields.layout;
        let mut out = vec![0.0; l.points()];
        self.staging.planes_out(&self.rt, &self.fields, lap, 0, l.nz, &mut out)?;
        Ok(out)
    }

    /// Device seconds of each of `reps` applications of an interior operator alone (no boundary,
    /// source or receivers), after 3 untimed ones; for benchmarks. Leapfrog operators advance the
    /// state (cur and prev swap each time) as a run does.
    pub fn time_interior(&mut self, op: Operator, reps: usize) -> Result<Vec<f64>> {
        self.gate()?;
        if op == Operator::Laplacian {
            self.launches.load_laplacian(&*self.rt)?;
        }
        let d = &mut self.fields;
        ensure!(d.half.is_none() || op == Operator::Fused, "the f16 step has the fused kernel only");
        if op != Operator::Fused && d.lap.is_none() {
            d.lap = Some(DeviceBuffer::zeroed(&self.rt, d.len * 4)?);
        }
        let rt = &*self.rt;
        let events: Vec<Rt::Event> = (0..=reps).map(|_| rt.event()).collect::<Result<_>>()?;
        for i in 0..reps + 3 {
            if i >= 3 {
                rt.record(&events[i - 3])?;
            }
            let out = if op == Operator::Laplacian { ptr_or_null(&d.lap) } else { d.prev.ptr() };
            self.launches.launch_interior(rt, d, op, out)?;
            if op != Operator::Laplacian {
                std::mem::swap(&mut d.cur, &mut d.prev);
            }
        }
        rt.record(&events[reps])?;
        rt.synchronize()?;
        (0..reps).map(|i| Ok(rt.elapsed_ms(&events[i], &events[i + 1])? as f64 * 1e-3)).collect()
    }

    /// The field a halo exchange reads while a step is open (p^{n+1}) or between steps (p^n).
    fn next_field(&self) -> DevicePtr {
        let open = self.split.as_ref().is_some_and(|s| s.open);
        if open { self.fields.prev.ptr() } else { self.fields.cur.ptr() }
    }
}

impl<Rt: GpuRuntime> Backend for GpuSolver<Rt> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: self.rt.vendor(), name: self.rt.device_name(), kernel: kernel_name(self.kernel).into() }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        self.capture.begin_step(&*self.rt)?;
        let queued =
            self.time_step_start().and_then(|()| self.enqueue_step(n, true)).and_then(|()| self.time_step_end());
        self.capture.end_step(&*self.rt, queued)
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        self.gate()?;
        self.staging.snapshot(&self.rt, &mut self.fields, out)
    }

    fn snapshot_sections(&mut self, sections: &[Section], out: &mut [f32]) -> Result<()> {
        self.gate()?;
        let l = self.fields.layout;
        let (rt, d, f, staging) = (&self.rt, &mut self.fields, &self.launches.f.io, &mut self.staging);
        for_each_section(sections, [l.nx, l.ny, l.nz], out, |s, part| staging.section(rt, d, f, s, part))
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        self.gate()?;
        self.taps.traces(&self.rt, &self.fields, steps, self.steps_done)
    }

    /// One launch of finite_check over the whole current field (halo and padding hold zeros or
    /// mirrored interior values) and a 4-byte download, which waits for the queued steps. Cost,
    /// estimated: one field read at memory bandwidth (288 M points, 1.2 GB: about 0.4 ms on an
    /// H100) plus the stream drain and launch latency (tens of microseconds); the solver calls it
    /// about once a second, so well under 0.1% of a run.
    fn field_is_finite(&mut self) -> Result<bool> {
        self.gate()?;
        self.staging.field_is_finite(&self.rt, &self.fields, &self.launches.f.io)
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        self.gate()?;
        self.rt.synchronize()?;
        let n = self.steps_done.min(self.events.len().saturating_sub(1));
        (0..n).map(|i| Ok(self.rt.elapsed_ms(&self.events[i], &self.events[i + 1])? as f64 * 1e-3)).collect()
    }

    fn step_field(&mut self, n: usize) -> Result<()> {
        self.gate()?;
        self.time_step_start()?;
        self.enqueue_step(n, false)?;
        self.time_step_end()
    }

    /// The planes `first` are queued now; the host then waits for them alone when it brings
    /// them down ([`next_planes_out`](Backend::next_planes_out)), and the rest of the step,
    /// queued by [`finish_field`](Backend::finish_field), runs while they travel.
    fn begin_field(
        &mut self,
        n: usize,
        first: &[std::ops::Range<usize>],
        leave: &[std::ops::Range<usize>],
    ) -> Result<()> {
        self.gate()?;
        if !self.splits_steps() {
            return self.step_field(n);
        }
        if self.split.as_ref().is_none_or(|s| s.first != first || s.leave != leave) {
            // Made once: a decomposed run computes the same planes first every step.
            self.split = Some(StepSplit::new(first, leave, self.fields.layout.nz)?);
        }
        self.time_step_start()?;
        self.launches.enqueue_free_surface(&self.rt, &self.fields)?;
        for r in first {
            self.enqueue_planes(n, r.clone())?;
        }
        if let Some(s) = &mut self.split {
            s.open = true;
        }
        Ok(())
    }

    fn next_planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        self.gate()?;
        let field = self.next_field();
        self.staging.planes_out(&self.rt, &self.fields, field, z0, planes, buf)
    }

    fn finish_field(&mut self, n: usize) -> Result<()> {
        self.gate()?;
        let Some(split) = self.split.take_if(|s| s.open) else { return Ok(()) };
        for r in &split.rest {
            self.enqueue_planes(n, r.clone())?;
        }
        self.split = Some(StepSplit { open: false, ..split });
        self.fields.close_step();
        self.time_step_end()
    }

    /// The f32 fused step with its x and z layers after the interior (the default) computes a step
    /// in parts; the three-pass kernel and f16 storage do not.
    fn splits_steps(&self) -> bool {
        self.kernel != KernelChoice::ThreePass
            && self.fields.half.is_none()
            && matches!(self.layer_pass(), LayerPass::After | LayerPass::YLayers)
    }

    fn record_receivers(&mut self) -> Result<()> {
        self.gate()?;
        let n = self.steps_done.checked_sub(1).context("no step to record")?;
        let (rt, d, l) = (&*self.rt, &self.fields, &self.launches);
        self.taps.enqueue_record(rt, d, &l.f.io, d.cur.ptr(), n)
    }

    /// Host-staged: the planes come down whole (row padding included) and their rows are packed.
    fn planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        self.gate()?;
        let field = self.fields.cur.ptr();
        self.staging.planes_out(&self.rt, &self.fields, field, z0, planes, buf)
    }

    /// Host-staged: the rows of every plane are `rows * pitch` contiguous values, gathered into a
    /// dense buffer on the device (one launch, one download), unpacked here.
    fn rows_out(&mut self, y0: usize, rows: usize, buf: &mut [f32]) -> Result<()> {
        self.gate()?;
        self.staging.rows_out(&self.rt, &self.fields, &self.launches.f.io, y0, rows, buf)
    }

    /// Host-staged: whole padded rows go up (their padding zero, as it always is) and are written
    /// into every plane by one launch.
    fn rows_in(&mut self, y0: usize, rows: usize, buf: &[f32]) -> Result<()> {
        self.gate()?;
        self.staging.rows_in(&self.rt, &self.fields, &self.launches.f.io, y0, rows, buf)
    }

    /// Host-staged: whole planes go up, their halo rows and row padding zero as they always are.
    fn planes_in(&mut self, z0: usize, planes: usize, buf: &[f32]) -> Result<()> {
        self.gate()?;
        self.staging.planes_in(&self.rt, &self.fields, z0, planes, buf)
    }

    fn wait(&mut self) -> Result<()> {
        self.gate()?;
        self.rt.synchronize()
    }

    fn device_field(&self) -> Option<DeviceField> {
        self.fields.device_field(&self.rt, self.fields.cur.ptr())
    }

    fn next_device_field(&self) -> Option<DeviceField> {
        self.fields.device_field(&self.rt, self.next_field())
    }

    fn device_imaging(&mut self) -> Option<&mut dyn DeviceImaging> {
        Some(self)
    }

    /// Zero fills queued on the stream (no host wait) and the two small tap tables uploaded anew.
    fn start_shot(&mut self, problem: &Problem) -> Result<()> {
        self.gate()?;
        ensure!(
            problem.layout == self.fields.layout && problem.steps == self.taps.trace_steps,
            "a shot must use the grid and steps the backend was opened with"
        );
        if let Some(s) = &mut self.split {
            s.open = false;
        }
        self.fields.zero_for_shot(problem)?;
        self.backward =
            DeviceTransposed::for_shot(&mut self.transposed, &self.rt, problem, self.fields.cpml.is_some())?;
        self.taps = Taps::new(&self.rt, problem)?;
        self.steps_done = 0;
        Ok(())
    }
}

/// The imaging kernels are queued between steps without the gate: where steps are being captured
/// they join the capture (same stream, same order), so a migration's passes keep their graph
/// launches.
impl<Rt: GpuRuntime> DeviceImaging for GpuSolver<Rt> {
    fn open_imaging(&mut self, slots: usize, sponge: Option<&[f64]>) -> Result<()> {
        self.gate()?;
        reopen(&mut self.imaging, &self.rt, &self.fields, slots, sponge)
    }

    fn keep_source(&mut self, slot: usize) -> Result<()> {
        opened(&self.imaging)?.keep(&self.rt, &self.launches.f.io, self.fields.cur.ptr(), slot)
    }

    fn correlate_image(&mut self, slot: usize) -> Result<()> {
        opened(&self.imaging)?.correlate_image(&self.rt, &self.launches.f.io, self.fields.cur.ptr(), slot)
    }

    fn correlate_gradient(&mut self, slots: [Option<usize>; 3]) -> Result<()> {
        opened(&self.imaging)?.correlate_gradient(&self.rt, &self.launches.f.io, self.fields.cur.ptr(), slots)
    }

    fn take_sums(&mut self) -> Result<ImagingSums> {
        self.gate()?;
        opened(&self.imaging)?.take(&self.rt)
    }

    fn stack_image(&mut self, floor_fraction: f64, first_plane: usize) -> Result<()> {
        self.gate()?;
        opened(&self.imaging)?.stack(&self.rt, &self.launches.f.io, floor_fraction, first_plane)
    }

    fn take_gradient(&mut self) -> Result<Vec<f64>> {
        self.gate()?;
        opened(&self.imaging)?.take_gradient(&self.rt)
    }

    fn take_stack(&mut self) -> Result<Option<Vec<f64>>> {
        self.gate()?;
        // A backend that never opened the imaging condition (every shot on its box) holds none.
        self.imaging.as_ref().map_or(Ok(None), |s| s.take_stack(&self.rt))
    }
}
