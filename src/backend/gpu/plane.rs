//! [`PlaneGpuSolver`]: a 2D grid's state on one device ([`Layout::planar`]), the GPU twin of the CPU's
//! `PlaneSolver`. A step is kernels/plane.cu's two kernels (the interior and the sponge, then the CPML
//! layers' points of both axes), after the free surface's mirror and before the sources' and
//! receivers' taps; the fields, taps, snapshots and blow-up check are the 3D solver's own (`Fields`,
//! `Taps`, `Staging`).
//!
//! [`Layout::planar`]: crate::grid::Layout::planar

use super::cpml_transposed::DeviceTransposed;
use super::fields::{Fields, check_fits, ptr_or_null};
use super::imaging::{DeviceSums, opened, reopen};
use super::kernels::{AxisWeights, FreeSurface, Launch, PlaneKernels, PlaneLayers, PlaneStep, StencilWeights};
use super::plan::LayerPass;
use super::runtime::GpuRuntime;
use super::snapshot::Staging;
use super::sources::{self, load_kernels};
use super::taps::Taps;
use crate::backend::imaging::{DeviceImaging, ImagingSums};
use crate::backend::{Backend, DeviceInfo};
use crate::config::{KernelChoice, Precision};
use crate::grid::{Section, for_each_section};
use crate::problem::Problem;
use anyhow::{Result, ensure};
use std::rc::Rc;

/// Threads of a block along x (plane.cu's PLANE_X); each computes [`PLANE_VEC`] points of a row.
pub const PLANE_THREADS: u32 = 128;
/// Points a thread computes along x (vector loads of that width).
pub const PLANE_VEC: u32 = 4;
/// Rows of p^n in flight beyond the 2R + 1 the stencil reads (plane.cu's AHEAD).
pub const PLANE_AHEAD: usize = 3;
/// Blocks a multiprocessor is asked to hold (the launch bound's register cap).
pub const PLANE_MIN_BLOCKS: u32 = 4;
/// The -D options of a 2D grid's module at `radius` with the boundary's defines: the 3D module's
/// set (prelude.h asks for every define) with plane.cu's launch shape.
pub fn plane_options(radius: usize, boundary: crate::boundary::BoundaryDefines) -> Vec<String> {
    let t = crate::backend::tuning::Tuning::for_radius(radius);
    let mut o = sources::kernel_options(radius, &t, boundary, false, LayerPass::After);
    for opt in o.iter_mut() {
        if opt.starts_with("-DVEC=") {
            *opt = format!("-DVEC={PLANE_VEC}");
        } else if opt.starts_with("-DMIN_BLOCKS=") {
            *opt = format!("-DMIN_BLOCKS={PLANE_MIN_BLOCKS}");
        }
    }
    o.push(format!("-DPLANE_X={PLANE_THREADS}"));
    o.push(format!("-DPLANE_AHEAD={PLANE_AHEAD}"));
    o
}

/// Dynamic shared memory of plane_step at `radius`: the ring of 2R + 4 rows of PLANE_THREADS
/// vectors and their halo vectors, for p and, where the density varies, for the buoyancy.
pub fn plane_shared_bytes(radius: usize, density: bool) -> u32 {
    let vec = PLANE_VEC as usize;
    let row = PLANE_THREADS as usize + 2 * radius.div_ceil(vec);
    ((2 * radius + 1 + PLANE_AHEAD) * row * vec * 4 * if density { 2 } else { 1 }) as u32
}

/// Rows of z a block marches down, for a device that holds `resident` blocks at once: the
/// columns of tiles split so that every block runs in one wave (the blocks of a wave march the
/// same number of rows and end together, where a last partial wave would leave the device part
/// idle), at least 2R rows a block (the 2R rows its ring starts with are read again by its
/// neighbour). More tiles than fit at once march their whole columns, in several waves.
pub fn plane_window(shape: [usize; 3], radius: usize, resident: usize) -> usize {
    let tiles = shape[0].div_ceil((PLANE_THREADS * PLANE_VEC) as usize).max(1);
    let chunks = (resident / tiles).max(1);
    shape[2].div_ceil(chunks).max(2 * radius).min(shape[2].max(1))
}

/// The 2D solver over any [`GpuRuntime`]: every buffer allocated once, steps only enqueue.
pub struct PlaneGpuSolver<Rt: GpuRuntime> {
    f: PlaneKernels<Rt::Function>,
    /// The module `f` lives in (its functions are valid while it is loaded).
    _module: Rt::Module,
    fields: Fields<Rt>,
    taps: Taps<Rt>,
    weights: StencilWeights,
    axis_weights: [AxisWeights; 3],
    launch: Launch,
    /// plane_layers over every layer point (None without CPML).
    layer_launch: Option<Launch>,
    window: i32,
    free_surface: bool,
    /// The first step's start and every step's end.
    events: Vec<Rt::Event>,
    steps_done: usize,
    staging: Staging<Rt>,
    /// The imaging condition's buffers, once a migration opens them.
    imaging: Option<DeviceSums<Rt>>,
    /// The CPML's transposed layers where a shot is a backward pass with CPML (the step's
    /// layers are then these), and whether the current shot is one.
    transposed: Option<DeviceTransposed<Rt>>,
    backward: bool,
    rt: Rc<Rt>,
}

impl<Rt: GpuRuntime> Drop for PlaneGpuSolver<Rt> {
    fn drop(&mut self) {
        // The buffers free themselves after this, once no queued kernel can still use them.
        let _ = self.rt.synchronize();
    }
}

impl<Rt: GpuRuntime> PlaneGpuSolver<Rt> {
    /// Compiles the module, allocates and uploads everything `problem` (a 2D problem) needs;
    /// errors (before allocating) if it does not fit in the device's free memory.
    pub fn new(rt: Rt, problem: &Problem) -> Result<Self> {
        ensure!(problem.is_2d(), "the 2D GPU solver runs 2D grids only (grid.shape = [nx, nz])");
        ensure!(
            problem.precision == Precision::F32,
            "run.precision = \"f16\" runs 3D grids only: a 2D grid (grid.shape = [nx, nz]) runs in f32"
        );
        let (layout, r, b) = (problem.layout, problem.stencil.radius, &problem.boundary);
        ensure!(layout.halo == r, "layout halo must equal the stencil radius");
        ensure!(
            layout.nx < i32::MAX as usize / 2 && layout.nz < i32::MAX as usize / 2,
            "grid [{}, {}] is too large for 32-bit indices along an axis",
            layout.nx,
            layout.nz
        );
        let (free, total) = rt.mem_info()?;
        check_fits(problem, KernelChoice::Fused, &rt.device_name(), free as u64, total as u64)?;
        let rt = Rc::new(rt);
        let module = load_kernels(&*rt, &sources::PLANE_STEP, &plane_options(r, b.kernel_defines()))?;
        let f = PlaneKernels::load(&*rt, &module, problem.variable_density())?;
        let fields = Fields::new(&rt, problem, KernelChoice::Fused, LayerPass::After, None)?;
        let taps = Taps::new(&rt, problem)?;
        let events = (0..=problem.steps).map(|_| rt.event()).collect::<Result<_>>()?;

        // Weights exactly as the CPU reference rounds them; the centre is x's and z's.
        let c2: [Vec<f32>; 3] = std::array::from_fn(|a| {
            problem.stencil.second_scaled(problem.spacing[a]).into_iter().map(|c| c as f32).collect()
        });
        let mut weights = StencilWeights { centre: (c2[0][0] as f64 + c2[2][0] as f64) as f32, ..Default::default() };
        weights.cx[1..=r].copy_from_slice(&c2[0][1..=r]);
        weights.cz[1..=r].copy_from_slice(&c2[2][1..=r]);
        let axis_weights = std::array::from_fn(|a| {
            let mut w = AxisWeights::default();
            for (c1, first) in w.c1.iter_mut().zip(&problem.stencil.first) {
                *c1 = (first / problem.spacing[a]) as f32;
            }
            w.c2[..=r].copy_from_slice(&c2[a][..=r]);
            w
        });
        let shape = problem.shape();
        let shared = plane_shared_bytes(r, problem.variable_density());
        rt.allow_dynamic_shared(f.step, shared)?;
        let per_sm = rt.resident_blocks(f.step, PLANE_THREADS, shared).unwrap_or(PLANE_MIN_BLOCKS);
        let window = plane_window(shape, r, (rt.multiprocessors() * per_sm) as usize);
        let tile = (PLANE_THREADS * PLANE_VEC) as usize;
        let launch = Launch {
            grid: [shape[0].div_ceil(tile) as u32, shape[2].div_ceil(window) as u32, 1],
            block: [PLANE_THREADS, 1, 1],
            shared,
        };
        // The z layers' rows whole, then the x layers' columns of the other rows.
        let layer_launch = fields.cpml.as_ref().map(|c| {
            let w = c.width as usize;
            let rows = w * (c.low[2] + c.high[2]) as usize;
            let points = rows * shape[0] + (shape[2] - rows) * 2 * w;
            Launch::linear(points.div_ceil(128) as u32, 128)
        });
        let mut transposed = None;
        let backward = DeviceTransposed::for_shot(&mut transposed, &rt, problem, true)?;
        rt.synchronize()?;
        Ok(PlaneGpuSolver {
            f,
            _module: module,
            fields,
            taps,
            weights,
            axis_weights,
            launch,
            layer_launch,
            window: window as i32,
            free_surface: b.free_surface,
            events,
            steps_done: 0,
            staging: Staging::new(),
            imaging: None,
            transposed,
            backward,
            rt,
        })
    }

    /// Compiler resources of the step's kernels (registers, spills, shared memory), for reports.
    pub fn kernel_info(&self) -> String {
        format!(
            "plane step: {}; plane layers: {}",
            self.rt.function_info(self.f.step),
            self.rt.function_info(self.f.layers)
        )
    }

    /// The rows of z a block of the step marches down.
    pub fn window(&self) -> usize {
        self.window as usize
    }

    /// Enqueues step `n`: the free surface's mirror, the step, the sources' taps, the receivers'
    /// samples of p^{n+1}, then p^n and p^{n+1} swap.
    fn enqueue_step(&mut self, n: usize) -> Result<()> {
        let (rt, d) = (&*self.rt, &self.fields);
        let l = d.layout;
        let (nx, nz, pitch) = (l.nx as i32, l.nz as i32, l.pitch as i64);
        if self.free_surface {
            let launch = Launch::linear((l.nx as u32).div_ceil(128), 128);
            FreeSurface { cur: d.origin(d.cur.ptr()), nx, ny: 1, pitch, plane: pitch }.launch(
                rt,
                self.f.free_surface,
                launch,
            )?;
        }
        let bh = d.bh.as_ref().map_or(0, |b| d.origin(b.ptr()));
        let (cur, out, vel) = (d.origin(d.cur.ptr()), d.origin(d.prev.ptr()), d.origin(d.vel.ptr()));
        let step = PlaneStep {
            cur,
            out,
            vel,
            bh,
            gx: ptr_or_null(&d.damp[0]),
            gz: ptr_or_null(&d.damp[2]),
            w: self.weights,
            nx,
            nz,
            pitch,
            window: self.window,
        };
        step.launch(rt, self.f.step, self.launch)?;
        if let (Some(t), true) = (&self.transposed, self.backward) {
            t.enqueue(rt, d, self.f.transposed, &self.axis_weights)?;
        } else if let (Some(c), Some(launch)) = (&d.cpml, self.layer_launch) {
            let layers = c.layers(&self.axis_weights, 0, 0..l.nz);
            PlaneLayers { cur, out, vel, bh, nx, nz, pitch, layers }.launch(rt, self.f.layers, launch)?;
        }
        self.taps.enqueue_source(rt, d, &self.f.io, n, 0..l.nz)?;
        self.taps.enqueue_record(rt, d, &self.f.io, d.prev.ptr(), n)?;
        self.fields.close_step();
        Ok(())
    }
}

impl<Rt: GpuRuntime> Backend for PlaneGpuSolver<Rt> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: self.rt.vendor(), name: self.rt.device_name(), kernel: "plane (2D)".into() }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        if self.steps_done == 0 && !self.events.is_empty() {
            self.rt.record(&self.events[0])?;
        }
        self.enqueue_step(n)?;
        let k = self.steps_done;
        if k + 1 < self.events.len() {
            self.rt.record(&self.events[k + 1])?;
        }
        self.steps_done += 1;
        Ok(())
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        self.staging.snapshot(&self.rt, &mut self.fields, out)
    }

    fn snapshot_sections(&mut self, sections: &[Section], out: &mut [f32]) -> Result<()> {
        let l = self.fields.layout;
        let (rt, d, f, staging) = (&self.rt, &mut self.fields, &self.f.io, &mut self.staging);
        for_each_section(sections, [l.nx, l.ny, l.nz], out, |s, part| staging.section(rt, d, f, s, part))
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        self.taps.traces(&self.rt, &self.fields, steps, self.steps_done)
    }

    fn field_is_finite(&mut self) -> Result<bool> {
        self.staging.field_is_finite(&self.rt, &self.fields, &self.f.io)
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        self.rt.synchronize()?;
        let n = self.steps_done.min(self.events.len().saturating_sub(1));
        (0..n).map(|i| Ok(self.rt.elapsed_ms(&self.events[i], &self.events[i + 1])? as f64 * 1e-3)).collect()
    }

    fn device_imaging(&mut self) -> Option<&mut dyn DeviceImaging> {
        Some(self)
    }

    fn start_shot(&mut self, problem: &Problem) -> Result<()> {
        ensure!(
            problem.layout == self.fields.layout && problem.steps == self.taps.trace_steps,
            "a shot must use the grid and steps the backend was opened with"
        );
        self.fields.zero_for_shot(problem)?;
        self.backward =
            DeviceTransposed::for_shot(&mut self.transposed, &self.rt, problem, self.fields.cpml.is_some())?;
        self.taps = Taps::new(&self.rt, problem)?;
        self.steps_done = 0;
        Ok(())
    }
}

impl<Rt: GpuRuntime> DeviceImaging for PlaneGpuSolver<Rt> {
    fn open_imaging(&mut self, slots: usize, sponge: Option<&[f64]>) -> Result<()> {
        reopen(&mut self.imaging, &self.rt, &self.fields, slots, sponge)
    }

    fn keep_source(&mut self, slot: usize) -> Result<()> {
        opened(&self.imaging)?.keep(&self.rt, &self.f.io, self.fields.cur.ptr(), slot)
    }

    fn correlate_image(&mut self, slot: usize) -> Result<()> {
        opened(&self.imaging)?.correlate_image(&self.rt, &self.f.io, self.fields.cur.ptr(), slot)
    }

    fn correlate_gradient(&mut self, slots: [Option<usize>; 3]) -> Result<()> {
        opened(&self.imaging)?.correlate_gradient(&self.rt, &self.f.io, self.fields.cur.ptr(), slots)
    }

    fn take_sums(&mut self) -> Result<ImagingSums> {
        opened(&self.imaging)?.take(&self.rt)
    }

    fn stack_image(&mut self, floor_fraction: f64, first_plane: usize) -> Result<()> {
        opened(&self.imaging)?.stack(&self.rt, &self.f.io, floor_fraction, first_plane)
    }

    fn take_gradient(&mut self) -> Result<Vec<f64>> {
        opened(&self.imaging)?.take_gradient(&self.rt)
    }

    fn take_stack(&mut self) -> Result<Option<Vec<f64>>> {
        // A backend that never opened the imaging condition (every shot on its box) holds none.
        self.imaging.as_ref().map_or(Ok(None), |s| s.take_stack(&self.rt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_fills_one_wave_of_blocks() {
        // 16 tiles of 512 points on 8192 columns; 792 resident blocks: 49 chunks of 168 rows.
        assert_eq!(plane_window([8192, 1, 8192], 4, 792), 168);
        assert_eq!(16 * 8192usize.div_ceil(168), 784);
        // A small grid: at least 2R rows a block.
        assert_eq!(plane_window([1641, 1, 421], 4, 792), 8);
        // More tiles than resident blocks: one window a column of tiles.
        assert_eq!(plane_window([1 << 20, 1, 64], 8, 100), 64);
        assert_eq!(plane_window([100, 1, 3], 8, 100), 3);
    }

    #[test]
    fn the_ring_holds_2r_plus_1_rows_and_those_in_flight() {
        // R = 4: 12 rows of 128 + 2 vectors of 16 B; twice with a density.
        assert_eq!(plane_shared_bytes(4, false), 12 * 130 * 16);
        assert_eq!(plane_shared_bytes(8, true), 2 * 20 * 132 * 16);
        let o = plane_options(4, crate::boundary::BoundaryKind::Cpml.kernel_defines());
        assert!(o.contains(&"-DVEC=4".to_string()) && o.contains(&format!("-DPLANE_AHEAD={PLANE_AHEAD}")), "{o:?}");
    }
}
