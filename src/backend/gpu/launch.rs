//! The step's launches ([`StepLaunches`]): its kernels and their modules, the launch shapes and
//! z-windows of the interior (one fused kernel, or three passes and an update), of the y mode's
//! two launches and of the CPML layers, and the launches themselves over the planes a step asks
//! for. Which launches those are comes from [`plan`](super::plan); the fields they read and write
//! are [`Fields`].

use super::density::DensityLaunch;
use super::fields::{CpmlDev, Fields, ptr_or_null};
use super::geometry::{FUSED_WINDOWS, LAPLACIAN_WINDOWS, LaunchGeometry, WindowRule, best_window_upto};
use super::kernels::{
    AxisWeights, CpmlAxis, CpmlAxisHalf, DensityStep, FreeSurface, FreeSurfaceHalf, FusedStep, FusedStepHalf,
    HalfKernels, Kernels, Launch, Layers, PassWindowed, PassX, StencilWeights, Update,
};
use super::plan::{
    LayerPass, Operator, X_PLANES, Y_PASS_LONGEST, Y_PASS_PRIMING, gap_in_interior_shape, march_segments, overlap,
    x_layers_by_rows, y_mode_band, y_mode_tiles, z_layer_planes, z_layer_window,
};
use super::runtime::{DevicePtr, GpuRuntime, TypedPtr};
use super::sources::{self, KernelDefines, load_kernels_all, module_options};
pub(super) use super::y_pass::YModule;
use super::y_pass::YPass;
use crate::backend::tuning::Tuning;
use crate::boundary::BoundaryKind;
use crate::config::KernelChoice;
use crate::problem::Problem;
use anyhow::{Context, Result, ensure};
use std::rc::Rc;

/// The step's kernels, launch shapes and windows.
pub(super) struct StepLaunches<Rt: GpuRuntime> {
    radius: usize,
    /// The launch shape and the fused grid's geometry (its tuning's window is the initial one).
    geometry: LaunchGeometry,
    window: u32,
    /// z-planes per block of the Laplacian-only operator (its own automatic choice).
    laplacian_window: u32,
    /// fused_step_ylayers's shape and module ([`LayerPass::YLayers`] only).
    y_pass: Option<YPass<Rt>>,
    free_surface: bool,
    weights: StencilWeights,
    axis_weights: [AxisWeights; 3],
    /// The step where the density varies (its launches only where it does).
    density: DensityLaunch,
    pub f: Kernels<Rt::Function>,
    /// The Laplacian-only build (loaded at its first timing) and its dynamic shared memory.
    laplacian: Option<(Rt::Module, Rt::Function, u32)>,
    /// Keeps the functions in `f` valid.
    _module: Rt::Module,
}

impl<Rt: GpuRuntime> StepLaunches<Rt> {
    /// Compiles (or reads from the cache) the step's modules in the launch shape `tuning` (and
    /// `y_tuning`, the y-layer module's, where the y layers go in the pass), grants their kernels
    /// their shared memory and sets the weights and the fused grid; with the f16 step's kernels
    /// where `half`, and the y-layer module to set up once the fields are allocated.
    #[allow(clippy::type_complexity)]
    pub fn open(
        rt: &Rc<Rt>,
        problem: &Problem,
        tuning: Tuning,
        y_tuning: Option<Tuning>,
        half: bool,
    ) -> Result<(Self, Option<HalfKernels<Rt::Function>>, Option<YModule<Rt>>)> {
        let (shape, r) = (problem.shape(), problem.stencil.radius);
        let boundary = problem.boundary.kernel_defines();
        let defines = KernelDefines::new(r, &tuning, boundary, false, LayerPass::After).on_grid(shape);
        let options = KernelDefines { half, ..defines }.options();
        let (half_parts, step_parts) = (sources::half_step(&tuning), sources::step(&tuning));
        let parts: &[&str] = if half { &half_parts } else { &step_parts };
        let y_options = y_tuning.map(|t| module_options(shape, r, &t, boundary, false, LayerPass::YLayers));
        let mut modules: Vec<(&[&str], &[String])> = vec![(parts, &options)];
        if let Some(o) = &y_options {
            modules.push((&[sources::FUSED], o));
        }
        let mut modules = load_kernels_all(&**rt, &modules)?.into_iter();
        let module = modules.next().expect("the step's module");
        let mut f = Kernels::load(&**rt, &module)?;
        let y_module = modules.next();
        if let Some(m) = &y_module {
            f.fused_ylayers = Some(rt.function(m, "fused_step_ylayers")?);
            f.fused_zlayers = Some(rt.function(m, "fused_step_zlayers")?);
        }
        let half_f = if half { Some(HalfKernels::load(&**rt, &module)?) } else { None };
        if let Some(h) = &half_f {
            rt.allow_dynamic_shared(h.fused, tuning.half_ring_bytes())?;
        }
        rt.allow_dynamic_shared(f.fused, tuning.dynamic_shared_bytes(r, false))?;
        let y_shared = y_tuning.map(|t| t.dynamic_shared_bytes(r, false) + t.layer_tile_bytes(r));
        if let (Some(k), Some(bytes)) = (f.fused_ylayers, y_shared) {
            rt.allow_dynamic_shared(k, bytes)?;
        }
        let z_shared = y_tuning.map(|t| t.dynamic_shared_bytes(r, false) + t.z_layer_ring_bytes());
        if let (Some(k), Some(bytes)) = (f.fused_zlayers, z_shared) {
            rt.allow_dynamic_shared(k, bytes)?;
        }

        // Weights exactly as the CPU reference rounds them.
        let c2: [Vec<f32>; 3] = std::array::from_fn(|a| {
            problem.stencil.second_scaled(problem.spacing[a]).into_iter().map(|c| c as f32).collect()
        });
        let mut weights =
            StencilWeights { centre: (0..3).map(|a| c2[a][0] as f64).sum::<f64>() as f32, ..Default::default() };
        // Index 0 stays unused per axis: the kernels take the centres summed in `centre`.
        weights.cx[1..=r].copy_from_slice(&c2[0][1..=r]);
        weights.cy[1..=r].copy_from_slice(&c2[1][1..=r]);
        weights.cz[1..=r].copy_from_slice(&c2[2][1..=r]);
        let axis_weights = std::array::from_fn(|a| {
            let mut w = AxisWeights::default();
            for (c1, first) in w.c1.iter_mut().zip(&problem.stencil.first) {
                *c1 = (first / problem.spacing[a]) as f32;
            }
            w.c2[..=r].copy_from_slice(&c2[a][..=r]);
            w
        });

        let (interior, interior_shared) = match &half_f {
            Some(h) => (h.fused, tuning.half_ring_bytes()),
            None => (f.fused, tuning.dynamic_shared_bytes(r, false)),
        };
        let per_sm = rt.resident_blocks(interior, tuning.block_x * tuning.block_y, interior_shared);
        let geometry =
            LaunchGeometry::new(shape, r, tuning, rt.multiprocessors() * per_sm.unwrap_or(tuning.min_blocks).max(1));
        let density = DensityLaunch::new(&**rt, f.density, r, tuning.vec);
        let mut s = StepLaunches {
            radius: r,
            density,
            geometry,
            window: 0,
            laplacian_window: 0,
            y_pass: None,
            free_surface: problem.boundary.free_surface,
            weights,
            axis_weights,
            f,
            laplacian: None,
            _module: module,
        };
        s.set_window(s.choose_window(FUSED_WINDOWS));
        let pending = match (y_module, y_tuning, y_shared, z_shared) {
            (Some(module), Some(tuning), Some(shared), Some(z_shared)) => {
                Some(YModule { module, tuning, shared, z_shared })
            }
            _ => None,
        };
        Ok((s, half_f, pending))
    }

    /// Sets up the y mode's launches from the y-layer module `y` (where the layers of `d` go in
    /// the pass), and the Laplacian-only operator's window.
    pub fn set_y_pass(&mut self, rt: &Rt, d: &Fields<Rt>, y: Option<YModule<Rt>>) -> Result<()> {
        let (shape, r) = (self.geometry.shape, self.radius);
        if let (Some(c), Some(YModule { module, tuning: t, shared, z_shared })) = (&d.cpml, y) {
            let with_y = self.f.fused_ylayers.context("fused_step_ylayers not compiled")?;
            let per_sm = rt.resident_blocks(with_y, t.block_x * t.block_y, shared).unwrap_or(1);
            let geometry = LaunchGeometry::new(shape, r, t, per_sm.max(1) * rt.multiprocessors());
            let (ny, band_tile) = (shape[1] as i32, t.fused_tile_y() as i32);
            let interior_tile = self.geometry.tuning.fused_tile_y() as i32;
            let (gap_kernel, gap_tile) = if gap_in_interior_shape(ny, c.width, band_tile, interior_tile) {
                (None, interior_tile)
            } else {
                (Some((rt.function(&module, "fused_step")?, t.dynamic_shared_bytes(r, false))), band_tile)
            };
            if let Some((k, bytes)) = gap_kernel {
                rt.allow_dynamic_shared(k, bytes)?;
            }
            let band = y_mode_band(ny, c.width, band_tile, gap_tile);
            let tiles = y_mode_tiles(ny, band, band_tile, gap_tile);
            let gap_geometry = match gap_kernel {
                Some((k, bytes)) => {
                    let per_sm = rt.resident_blocks(k, t.block_x * t.block_y, bytes).unwrap_or(t.min_blocks);
                    LaunchGeometry::new(shape, r, t, per_sm.max(1) * rt.multiprocessors())
                }
                None => self.geometry,
            };
            let windows = self.choose_y_pass_windows(&gap_geometry, &geometry, tiles);
            // The gap's z layers in the pass where the grid has them.
            let has_z = c.axes.iter().any(|a| a.axis == 2);
            let z_kernel = self.f.fused_zlayers.map(|k| (k, z_shared)).filter(|_| has_z);
            self.y_pass = Some(YPass {
                geometry,
                shared,
                gap_kernel,
                gap_geometry,
                band,
                tiles,
                windows,
                z_kernel,
                _module: module,
            });
        }
        // Always automatic: a tuned window is the full step's (H100, 512^3: the tuner's 4 planes
        // gave the Laplacian-only operator 73.4% of copy, 12 and 16 planes 90.6% and 89.4%).
        self.laplacian_window = self.geometry.guarded_window(self.geometry.auto_window(LAPLACIAN_WINDOWS));
        Ok(())
    }

    /// Grid shape (nx, ny, nz).
    pub fn shape(&self) -> [usize; 3] {
        self.geometry.shape
    }

    /// Loads the Laplacian-only build at its first use.
    pub fn load_laplacian(&mut self, rt: &Rt) -> Result<()> {
        if self.laplacian.is_some() {
            return Ok(());
        }
        let t = self.geometry.tuning.for_laplacian(self.radius);
        let none = BoundaryKind::None.kernel_defines(); // the operator alone, without the boundary
        let options = module_options(self.shape(), self.radius, &t, none, true, LayerPass::After);
        let m = sources::load_kernels(rt, &[sources::fused(&t)], &options)?;
        let f = rt.function(&m, "fused_step")?;
        let shared = t.dynamic_shared_bytes(self.radius, true);
        rt.allow_dynamic_shared(f, shared)?;
        self.laplacian = Some((m, f, shared));
        Ok(())
    }

    /// Whether the Laplacian-only build is loaded.
    pub fn laplacian_loaded(&self) -> bool {
        self.laplacian.is_some()
    }

    /// z-planes per fused block: the tuning's window, or where it is 0 the automatic one.
    pub fn choose_window(&self, rule: WindowRule) -> u32 {
        let t = &self.geometry.tuning;
        if t.window > 0 { t.window } else { self.geometry.auto_window(rule) }
    }

    /// Compiler resources of the interior kernels, for reports.
    pub fn kernel_info(&self, rt: &Rt, d: &Fields<Rt>, kernel: KernelChoice) -> String {
        let mut parts = match &d.half {
            Some(h) => vec![format!("fused_step_half: {}", rt.function_info(h.f.fused))],
            None => vec![format!("fused: {}", rt.function_info(self.f.fused))],
        };
        if let Some((_, f, _)) = &self.laplacian {
            parts.push(format!("laplacian: {}", rt.function_info(*f)));
        }
        if kernel == KernelChoice::ThreePass {
            for (n, f) in [("pass_x", self.f.pass_x), ("pass_z", self.f.pass_z), ("update", self.f.update)] {
                parts.push(format!("{n}: {}", rt.function_info(f)));
            }
        }
        parts.join("; ")
    }

    pub fn tuning(&self) -> Tuning {
        Tuning { window: self.window, ..self.geometry.tuning }
    }

    /// The launch shape `op` runs with: the Laplacian-only operator has its own ring depth and
    /// z-window.
    pub fn operator_tuning(&self, op: Operator) -> Tuning {
        match op {
            Operator::Laplacian => {
                Tuning { window: self.laplacian_window, ..self.geometry.tuning.for_laplacian(self.radius) }
            }
            _ => self.tuning(),
        }
    }

    /// The z-windows of the fused step and of the Laplacian-only operator.
    pub fn windows(&self) -> (u32, u32) {
        (self.window, self.laplacian_window)
    }

    /// Sets both z-windows as [`Self::windows`] returned them.
    pub fn restore_windows(&mut self, (fused, laplacian): (u32, u32)) {
        (self.window, self.laplacian_window) = (fused, laplacian);
    }

    /// Whether the gap's z layers are computed in its pass (fused_step_zlayers), as they are
    /// wherever the y layers are and the grid has z layers.
    pub fn z_layers_in_pass(&self) -> bool {
        self.y_pass.as_ref().is_some_and(|y| y.z_kernel.is_some())
    }

    /// The y mode's windows: the gap launch's (`gap`, its geometry) as the fused step's, over its
    /// own tiles; the y-layer launch's (`y`) over its tiles and the blocks of it that fit at once,
    /// with the planes a chunk primes its rings with counted.
    pub fn choose_y_pass_windows(
        &self,
        gap: &LaunchGeometry,
        y: &LaunchGeometry,
        (gap_rows, band_rows): (u32, u32),
    ) -> (u32, u32) {
        let (nz, r) = (gap.shape[2], self.radius);
        let gap_window = match self.geometry.tuning.window {
            0 => gap.window_over(gap.tile_columns() as usize * gap_rows as usize, FUSED_WINDOWS),
            w => w,
        };
        let band_window = best_window_upto(
            y.tile_columns() as usize * band_rows as usize,
            nz,
            y.resident_blocks as usize,
            Y_PASS_PRIMING * r,
            FUSED_WINDOWS.shortest_banded,
            Y_PASS_LONGEST,
        );
        (gap.guarded_window_rows(gap_window, gap_rows), y.guarded_window_rows(band_window, band_rows))
    }

    /// Sets the z-window of the fused step and of the Laplacian-only operator
    /// ([`LaunchGeometry::guarded_window`]).
    pub fn set_window(&mut self, window: u32) {
        self.window = self.geometry.guarded_window(window);
        self.laplacian_window = self.window;
    }

    /// Sets the z-window `op` runs with (0: its automatic choice), leaving the other operator's.
    pub fn set_operator_window(&mut self, op: Operator, window: u32) {
        let rule = if op == Operator::Laplacian { LAPLACIAN_WINDOWS } else { FUSED_WINDOWS };
        let g = &self.geometry;
        let w = g.guarded_window(if window == 0 { g.auto_window(rule) } else { window });
        match op {
            Operator::Laplacian => self.laplacian_window = w,
            _ => self.window = w,
        }
    }

    /// Enqueues the interior update (or L p into `out` with the Laplacian-only kernel).
    pub fn launch_interior(&self, rt: &Rt, d: &Fields<Rt>, op: Operator, out: DevicePtr) -> Result<()> {
        self.launch_interior_planes(rt, d, op, out, 0..d.layout.nz, true)
    }

    /// [`launch_interior`](Self::launch_interior) with no CPML layer in the fused pass, whatever
    /// the fields' layer pass: a backward pass's step, whose layers are the transposed ones.
    pub fn launch_interior_unlayered(&self, rt: &Rt, d: &Fields<Rt>, op: Operator, out: DevicePtr) -> Result<()> {
        self.launch_interior_planes(rt, d, op, out, 0..d.layout.nz, false)
    }

    /// Each axis's first- and second-derivative weights, scaled.
    pub fn axis_weights(&self) -> &[AxisWeights; 3] {
        &self.axis_weights
    }

    /// [`launch_interior`](Self::launch_interior) for the z-planes `planes` only (the plain fused
    /// step only, unless they are all the planes): the fused kernel runs on a grid of those planes
    /// that starts at the first, and reads its z-neighbours from the planes next to them. Without
    /// `with_layers` the fused pass computes no layer point.
    pub fn launch_interior_planes(
        &self,
        rt: &Rt,
        d: &Fields<Rt>,
        op: Operator,
        out: DevicePtr,
        planes: std::ops::Range<usize>,
        with_layers: bool,
    ) -> Result<()> {
        let whole = planes == (0..d.layout.nz);
        let pass = d.layer_pass();
        ensure!(
            whole
                || (op == Operator::Fused && d.half.is_none() && matches!(pass, LayerPass::After | LayerPass::YLayers)),
            "only the f32 fused step with its x and z layers after the interior runs on part of the planes"
        );
        let [nx, ny, _] = self.geometry.shape.map(|n| n as i32);
        let nz = planes.len() as i32;
        let (pitch, plane) = (d.layout.pitch as i64, d.layout.plane as i64);
        let skip = (planes.start * d.layout.plane) as u64 * d.value_bytes();
        let (cur, out, vel) = (d.origin(d.cur.ptr()) + skip, d.origin(out) + skip, d.origin(d.vel.ptr()) + skip);
        let [gx, gy, gz] = d.damp.each_ref().map(ptr_or_null);
        let gz = if gz == 0 { 0 } else { gz + 4 * planes.start as u64 };
        let w = self.weights;
        let t = &self.geometry.tuning;
        let window = if op == Operator::Laplacian { self.laplacian_window } else { self.window };
        let grid = if whole {
            self.geometry.fused_grid(window)
        } else {
            self.geometry.fused_grid_planes(window, planes.len())
        };
        let fused = |f: Rt::Function, shared: u32, layers: Layers| {
            let l = Launch { grid, block: [t.block_x, t.block_y, 1], shared };
            let window = window as i32;
            FusedStep { cur, out, vel, gx, gy, gz, w, nx, ny, nz, pitch, plane, window, layers }.launch(rt, f, l)
        };
        let shared = t.dynamic_shared_bytes(self.radius, false);
        if let Some(h) = &d.half {
            ensure!(op == Operator::Fused, "the f16 step has the fused kernel only");
            let block = [t.block_x, t.block_y, 1];
            let l = Launch { grid: self.geometry.fused_grid(window), block, shared: t.half_ring_bytes() };
            let [cur, inc, next, vel] = [cur, d.origin(h.inc.ptr()), out, vel].map(TypedPtr::new);
            let ([gx, gy, gz], window) = ([gx, gy, gz].map(TypedPtr::new), window as i32);
            let args = FusedStepHalf { cur, inc, next, vel, gx, gy, gz, w, nx, ny, nz, pitch, plane, window };
            return args.launch(rt, h.f.fused, l);
        }
        if let Some(bh) = &d.bh {
            ensure!(
                op == Operator::Fused,
                "where the density varies the step is density.cu's (the fused kernel's) alone"
            );
            let (bh, window) = (d.origin(bh.ptr()) + skip, 0);
            let args = DensityStep { cur, out, vel, bh, gx, gy, gz, w, nx, ny, nz, pitch, plane, window };
            return self.density.launch(rt, self.f.density, args);
        }
        match op {
            Operator::Fused => {
                let layers_on = |c: &CpmlDev<Rt>, select, part| c.layers(&self.axis_weights, select, part);
                match &d.cpml {
                    Some(c) if c.pass == LayerPass::YLayers && with_layers => {
                        // Two launches, each over its own tiles with its own shape and window
                        // (fused.cu, band_tile); with the z layers in the pass, the gap's in three:
                        // fused_step_zlayers on each z layer's planes.
                        let with_y = self.f.fused_ylayers.context("fused_step_ylayers not compiled")?;
                        let y = self.y_pass.as_ref().context("the y pass's shape not set")?;
                        let (band_lo, band_hi) = y.band;
                        let launch = |f: Rt::Function,
                                      g: &LaunchGeometry,
                                      shared: u32,
                                      window: u32,
                                      rows: u32,
                                      select,
                                      part: std::ops::Range<usize>| {
                            if rows == 0 || part.is_empty() {
                                return Ok(());
                            }
                            let skip = ((part.start - planes.start) * d.layout.plane) as u64 * d.value_bytes();
                            let (cur, out, vel) = (cur + skip, out + skip, vel + skip);
                            let gz = if gz == 0 { 0 } else { gz + 4 * (part.start - planes.start) as u64 };
                            let grid = g.fused_grid_rows(window, part.len(), rows);
                            let l = Launch { grid, block: [g.tuning.block_x, g.tuning.block_y, 1], shared };
                            let layers = Layers { band_lo, band_hi, ..layers_on(c, select, part.clone()) };
                            let (nz, window) = (part.len() as i32, window as i32);
                            FusedStep { cur, out, vel, gx, gy, gz, w, nx, ny, nz, pitch, plane, window, layers }
                                .launch(rt, f, l)
                        };
                        let (gap_window, band_window) = y.windows;
                        let (gap_kernel, gap_shared) = y.gap_kernel.unwrap_or((self.f.fused, shared));
                        // The launches write disjoint rows or planes of p^{n+1} (and of their own
                        // layers' memory variables) and read nothing another writes. The z layers'
                        // planes go beside the band's launch, so that their short launches run
                        // alongside the gap's long one rather than after it.
                        let parts = match y.z_layers() {
                            Some(_) => {
                                z_layer_planes(d.layout.nz, c.width as usize, c.z_faces()).map(|p| overlap(&p, &planes))
                            }
                            None => [planes.start..planes.start, planes.clone(), planes.end..planes.end],
                        };
                        let z_layers = || match y.z_layers() {
                            Some((zk, z_shared)) => {
                                for part in [&parts[0], &parts[2]] {
                                    let window =
                                        y.geometry.guarded_window_rows(z_layer_window(part.len()), y.z_tiles());
                                    launch(zk, &y.geometry, z_shared, window, y.z_tiles(), 3, part.clone())?;
                                }
                                Ok(())
                            }
                            None => Ok(()),
                        };
                        let mut gap = || {
                            launch(gap_kernel, &y.gap_geometry, gap_shared, gap_window, y.tiles.0, 3, parts[1].clone())
                        };
                        // The y-layer tiles and then the gap's z layers' planes go on a second
                        // stream beside the gap's tiles, launched first so that the gap's shorter
                        // blocks fill the multiprocessors their last blocks leave.
                        let mut band = || {
                            launch(with_y, &y.geometry, y.shared, band_window, y.tiles.1, 4, planes.clone())?;
                            z_layers()
                        };
                        rt.alongside(&mut band, &mut gap)
                    }
                    _ => fused(self.f.fused, shared, Layers::default()),
                }
            }
            Operator::Laplacian => {
                let (_, f, shared) = self.laplacian.as_ref().context("Laplacian kernel not loaded")?;
                fused(*f, *shared, Layers::default())
            }
            Operator::ThreePass => {
                let lap = d.origin(d.lap.as_ref().context("three-pass scratch field not allocated")?.ptr());
                let (bx, by) = self.geometry.grid_xy();
                let block = [32, t.block_y, 1];
                let at = |grid: [u32; 3]| Launch { grid, block, shared: 0 };
                // Blocks of pass_y and pass_z march `window` points along their axis.
                let window = 64i32;
                PassX { cur, lap, w, nx, ny, nz, pitch, plane }.launch(rt, self.f.pass_x, at([bx, by, nz as u32]))?;
                let along = |n: i32| (n as u32).div_ceil(window as u32);
                let pass = PassWindowed { cur, lap, w, nx, ny, nz, pitch, plane, window };
                pass.launch(rt, self.f.pass_y, at([bx, (nz as u32).div_ceil(t.block_y), along(ny)]))?;
                pass.launch(rt, self.f.pass_z, at([bx, by, along(nz)]))?;
                Update { cur, out, vel, lap, gx, gy, gz, nx, ny, nz, pitch, plane }.launch(
                    rt,
                    self.f.update,
                    at([bx, by, nz as u32]),
                )
            }
        }
    }

    /// Enqueues the CPML update of every axis after the interior's on the z-planes `planes`,
    /// unless the fused pass did it (in CPML_AXIS_ORDER, as the CPU reference adds them). The step
    /// swaps each axis's phi buffers once all its planes are done.
    pub fn launch_cpml(&self, rt: &Rt, d: &Fields<Rt>, planes: std::ops::Range<usize>) -> Result<()> {
        let (cur, out, vel) = (d.origin(d.cur.ptr()), d.origin(d.prev.ptr()), d.origin(d.vel.ptr()));
        let half = d.half.as_ref().map(|h| (&h.f, d.origin(h.inc.ptr())));
        let [nx, ny, nz] = self.geometry.shape.map(|n| n as i32);
        let (pitch, plane) = (d.layout.pitch as i64, d.layout.plane as i64);
        let vec = self.geometry.tuning.vec as u64;
        let march = rt.vendor() != "hip";
        let radius = self.radius as u64;
        let Some(c) = &d.cpml else { return Ok(()) };
        if matches!(c.pass, LayerPass::After | LayerPass::YLayers) {
            let buoyancy = d.bh.as_ref().map_or(0, |b| d.origin(b.ptr()));
            let layers = Layers { buoyancy, ..c.layers(&self.axis_weights, 0, planes.clone()) };
            // With the gap's z layers in its pass, cpml_z takes the band rows only (select 5).
            let z_band =
                self.y_pass.as_ref().filter(|y| c.pass == LayerPass::YLayers && y.z_layers().is_some()).map(|y| y.band);
            let span = planes.len() as u64;
            // In CPML_AXIS_ORDER; the y layers were the fused pass's with YLayers.
            // z layers: only where the planes meet them.
            let [low_z, _, high_z] = z_layer_planes(d.layout.nz, c.width as usize, c.z_faces());
            let meets_z = !overlap(&low_z, &planes).is_empty() || !overlap(&high_z, &planes).is_empty();
            for a in c.axes.iter().filter(|a| !(a.axis == 1 && c.pass == LayerPass::YLayers)) {
                // Faces with a layer. An axis cut at both ends has no slabs (`Fields::new`), so no
                // entry in c.axes.
                let faces = (c.low[a.axis] + c.high[a.axis]) as u64;
                debug_assert!(faces > 0, "slabs of an axis without a layer face");
                if a.axis == 2 && !meets_z {
                    continue;
                }
                // cpml.cu: with nx a multiple of VEC the y and z layers march (VEC points of x a
                // thread along x, the other axis over grid y, the absorbing layers in segments
                // over grid z) and, with the width a multiple of VEC too, the x layers go by rows
                // of vectors, except on AMD (its register windows spill there); else one thread
                // per slab point, x over the slab's first two axes, y over its third.
                let mut e = [nx, ny, nz].map(|n| n as u64);
                e[a.axis] = 2 * c.width as u64;
                if a.axis < 2 {
                    // x and y slabs: grid z (or grid y, marching) over the planes asked for.
                    e[2] = span;
                }
                let w = c.width as u64;
                let mut layers = layers;
                if let (2, Some((band_lo, band_hi))) = (a.axis, z_band) {
                    // Only the march reads select 5; the y mode runs where nx is a multiple of VEC.
                    ensure!(e[0] % vec == 0 && march, "the z layers' band rows need cpml.cu's march");
                    layers = Layers { select: 5, band_lo, band_hi, ..layers };
                    e[1] = (band_lo.max(0) + (ny - band_hi.max(band_lo)).max(0)) as u64;
                    if e[1] == 0 {
                        continue;
                    }
                }
                let grid = if a.axis == 0 && march && x_layers_by_rows(nx as u64, w, vec) {
                    // cpml.cu's x_rows: 2 width / VEC threads a row, x_planes planes a thread.
                    let planes = e[2].div_ceil(X_PLANES).min(65535);
                    [(2 * w / vec * e[1]).div_ceil(128) as u32, planes as u32, 1]
                } else if a.axis > 0 && e[0] % vec == 0 && march {
                    // A thread a vector of a row, over the rows across (y layers: the planes asked
                    // for; z layers: every y).
                    let across = if a.axis == 1 { e[2] } else { e[1] };
                    let bx = (e[0] / vec * across).div_ceil(128);
                    // The layers of the faces that hold one, each in segments.
                    let sms = rt.multiprocessors() as u64;
                    let segments = march_segments(bx * faces, sms, c.width as u64, radius);
                    [bx as u32, 1, (faces * segments) as u32]
                } else {
                    [(e[0] * e[1]).div_ceil(128) as u32, e[2].min(65535) as u32, 1]
                };
                let l = Launch { grid, block: [128, 1, 1], shared: 0 };
                match half {
                    Some((f, inc)) => {
                        let [cur, inc, next, vel] = [cur, inc, out, vel].map(TypedPtr::new);
                        let args = CpmlAxisHalf { cur, inc, next, vel, layers, nx, ny, nz, pitch, plane };
                        args.launch(rt, f.cpml[a.axis], l)?
                    }
                    None => {
                        let args = CpmlAxis { cur, out, vel, layers, nx, ny, nz, pitch, plane };
                        args.launch(rt, self.f.cpml[a.axis], l)?
                    }
                }
            }
        }
        Ok(())
    }

    /// Step 1: the mirror above z = 0 (under a free surface).
    pub fn enqueue_free_surface(&self, rt: &Rt, d: &Fields<Rt>) -> Result<()> {
        if !self.free_surface {
            return Ok(());
        }
        let [nx, ny, _] = self.geometry.shape.map(|v| v as i32);
        let (pitch, plane) = (d.layout.pitch as i64, d.layout.plane as i64);
        let l = Launch { grid: [(nx as u32).div_ceil(32), (ny as u32).div_ceil(8), 1], block: [32, 8, 1], shared: 0 };
        let cur = d.origin(d.cur.ptr());
        match &d.half {
            Some(h) => {
                let [cur, inc] = [cur, d.origin(h.inc.ptr())].map(TypedPtr::new);
                FreeSurfaceHalf { cur, inc, nx, ny, pitch, plane }.launch(rt, h.f.free_surface, l)
            }
            None => FreeSurface { cur, nx, ny, pitch, plane }.launch(rt, self.f.free_surface, l),
        }
    }
}
