//! [`GpuSolver`]: a [`Problem`]'s state on one device, over any [`GpuRuntime`]. Every buffer is
//! allocated when it opens and owned by it ([`DeviceBuffer`]); each [`Backend::step`] only enqueues
//! kernels (free surface, the interior as one fused kernel or three passes plus an update, the CPML
//! layers, source, receivers), in the order of `backend`'s module docs; where the runtime captures
//! graphs (CUDA), 32 steps' launches (4 after a host wait) go to the device as one graph launch. The host
//! waits only for snapshots, traces, step timings and the blow-up check.

use super::geometry::{FUSED_WINDOWS, LAPLACIAN_WINDOWS, LaunchGeometry, WindowRule, best_window_upto, field_extra};
use super::kernels::{
    AxisWeights, CpmlAxis, CpmlAxisHalf, ExtractSection, FiniteCheck, FreeSurface, FreeSurfaceHalf, FusedStep,
    FusedStepHalf, HalfKernels, InjectSource, InjectSourceHalf, InsertSection, Kernels, Launch, Layers, PassWindowed,
    PassX, RecordReceivers, StencilWeights, Update,
};
use super::runtime::{DeviceBuffer, DevicePtr, GpuRuntime, as_bytes, as_bytes_mut};
use super::sources::{self, load_kernels, load_kernels_all, module_options};
use crate::backend::tuning::Tuning;
use crate::backend::{Backend, DeviceField, DeviceInfo};
use crate::boundary::{BoundaryKind, CPML_AXIS_ORDER};
use crate::config::{KernelChoice, Precision};
use crate::grid::{Layout, Section, for_each_section};
use crate::problem::{Problem, Receiver, Tap};
use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use std::rc::Rc;

/// Which interior operator to time (see [`GpuSolver::time_interior`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operator {
    /// The fused leapfrog step (one pass).
    #[default]
    Fused,
    /// x, y, z passes into a scratch Laplacian, then the update.
    ThreePass,
    /// out = L p only, by the fused kernel compiled with LAPLACIAN_ONLY.
    Laplacian,
}

impl Operator {
    /// Theoretical bytes per application (the effective-bandwidth numerator).
    pub fn bytes(&self, shape: [usize; 3], radius: usize) -> u64 {
        crate::problem::step_bytes(shape, radius, *self != Operator::Laplacian)
    }
}

/// Device bytes a problem needs with this kernel (estimated before anything is allocated): f32,
/// p^n, p^{n-1} and c^2 dt^2 (and the three-pass Laplacian); f16, p^n, p^{n+1}, d^n and c^2 dt^2
/// at 2 bytes a value.
pub fn estimate_bytes(problem: &Problem, kernel: KernelChoice) -> u64 {
    let l = &problem.layout;
    let half = problem.precision == Precision::F16;
    let field = (l.len() + field_extra(l)) as u64 * problem.precision.bytes();
    let fields = if kernel == KernelChoice::ThreePass || half { 4 } else { 3 };
    let shape = problem.shape();
    let slabs: u64 = if problem.boundary.kind == BoundaryKind::Cpml {
        problem.boundary.slabs(shape).iter().map(|s| s.len() as u64 * 12).sum()
    } else {
        0
    };
    let traces = (problem.receivers.len() * problem.steps) as u64 * 4;
    fields * field + slabs + traces + (1 << 20)
}

/// Memory kept free beside a run's buffers (the runtime's own, the kernels' modules).
pub const MEMORY_MARGIN: u64 = 128 << 20;

/// Errors, before anything is allocated, when `problem` with `kernel` needs more than `free` bytes
/// of `device` (of `total`) less [`MEMORY_MARGIN`], naming the grid, the need and the memory.
pub fn check_fits(problem: &Problem, kernel: KernelChoice, device: &str, free: u64, total: u64) -> Result<()> {
    let need = estimate_bytes(problem, kernel);
    if need + MEMORY_MARGIN > free {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let [nx, ny, nz] = problem.shape();
        bail!(
            "grid.shape = [{nx}, {ny}, {nz}] (radius {}, {} kernel, {} receivers x {} steps) needs {:.2} GiB of GPU \
             memory, but {device} has only {:.2} GiB free of {:.2} GiB: use a smaller grid, fewer receivers or steps, \
             or the CPU backend",
            problem.stencil.radius,
            kernel_name(kernel),
            problem.receivers.len(),
            problem.steps,
            gib(need),
            gib(free),
            gib(total)
        );
    }
    Ok(())
}

/// Segments each y or z layer's march is split into along its axis (cpml.cu, cpml_march), for a
/// launch of `blocks` unsplit blocks on `multiprocessors` holding 5 blocks each. A block's time is
/// its march: about `width / S + radius` points (the R points of p^n before a segment are loaded
/// first, partly in parallel), and the launch takes as many of those as it has waves, so the count
/// minimising waves x march wins, with segments no shorter than 4 points. A launch that fills its
/// last wave is not split; one whose last wave is short or that does not fill the GPU once is (H200,
/// R = 4, every march forced to S segments: 512^3 real step 0.935 ms at S = 1, 0.942-0.963 at 2-5;
/// 960 x 64 x 240, 0.240 at S = 1, 0.226 at 2). The bits are the same for any count.
fn march_segments(blocks: u64, multiprocessors: u64, width: u64, radius: u64) -> u64 {
    let resident = (5 * multiprocessors).max(1);
    let cost = |s: u64| (blocks.max(1) * s).div_ceil(resident) * (width.div_ceil(s) + radius);
    (1..=(width / 4).max(1)).min_by_key(|&s| (cost(s), s)).unwrap_or(1)
}

/// Planes a fused_step_ylayers chunk primes its rings with, per unit of the radius, as
/// [`choose_y_pass_windows`](GpuSolver::choose_y_pass_windows) costs them.
const Y_PASS_PRIMING: usize = 2;

/// The longest z-window of the y-layer launch. H200, R = 4, 8 x 16 blocks (three a
/// multiprocessor): marmousi-large 1.705 ms a step with the cost
/// model's choice among windows up to 48 (47 planes), 1.68 / 1.67 / 1.685 / 1.695 at 12 / 16 / 24 /
/// 32; the real step 1.702 -> 1.694 ms at 2400 x 200 x 600, 5.459 -> 5.436 at 1024^3, 0.163 ->
/// 0.160 at 960 x 64 x 240 with 16. Shorter windows keep neighbouring blocks on nearby planes,
/// where they share their halo rows of p^n and phi in L2.
const Y_PASS_LONGEST: usize = 16;

/// The rows of the fused step's tiles of `tile_rows` rows that hold y-layer rows (`width` a
/// layer) on `ny` rows: those below the first value and from the second on.
fn y_band(ny: i32, width: i32, tile_rows: i32) -> (i32, i32) {
    let tile_rows = tile_rows.max(1);
    let lo = ((width - 1).max(0) / tile_rows + 1) * tile_rows;
    let hi = (ny - width).max(0) / tile_rows * tile_rows;
    (lo.min(ny), hi)
}

/// The y mode's band (fused.cu, band_tile): rows below the first value and from the second on go
/// to fused_step_ylayers in tiles of `band_tile` rows, those between to fused_step in tiles of
/// `gap_tile` rows. [`y_band`] for the y-layer tiles, its gap shortened to a whole number of both
/// tile heights, so that either launch's tiles end where the other's begin (the y-layer kernel
/// then computes up to lcm - 1 rows of the gap's as well).
fn y_mode_band(ny: i32, width: i32, band_tile: i32, gap_tile: i32) -> (i32, i32) {
    let (band_tile, gap_tile) = (band_tile.max(1), gap_tile.max(1));
    let (lo, hi) = y_band(ny, width, band_tile);
    let both = band_tile / gcd(band_tile, gap_tile) * gap_tile;
    if hi <= lo { (lo, hi) } else { (lo, lo + (hi - lo) / both * both) }
}

fn gcd(a: i32, b: i32) -> i32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Tiles of each of the y mode's launches over the band `(lo, hi)` ([`y_mode_band`]) of `ny` rows:
/// fused_step's between (tiles of `gap_tile` rows), fused_step_ylayers's outside (`band_tile`).
fn y_mode_tiles(ny: i32, (lo, hi): (i32, i32), band_tile: i32, gap_tile: i32) -> (u32, u32) {
    let (band_tile, gap_tile) = (band_tile.max(1), gap_tile.max(1));
    let gap = (hi - lo).max(0);
    ((gap / gap_tile) as u32, ((ny.max(0) + band_tile - 1) / band_tile - gap / band_tile) as u32)
}

/// The y mode's two launches: fused_step on the gap between the y layers' tiles, in the
/// interior's launch shape where its tiles fill most of the gap (else the y-layer kernel's module's
/// fused_step, in that shape), and fused_step_ylayers on the others, in a module of its own shape.
struct YPass<Rt: GpuRuntime> {
    /// fused_step_ylayers's shape and its dynamic shared memory.
    geometry: LaunchGeometry,
    shared: u32,
    /// The y-layer module's fused_step and its dynamic shared memory, where the gap takes it, and
    /// the gap launch's geometry (the interior's, or that kernel's).
    gap_kernel: Option<(Rt::Function, u32)>,
    gap_geometry: LaunchGeometry,
    /// The band (`y_mode_band`), tiles of each launch (gap, y layers), their z-windows.
    band: (i32, i32),
    tiles: (u32, u32),
    windows: (u32, u32),
    /// fused_step_zlayers (the gap's tiles on the z layers' planes, in the y-layer kernel's shape)
    /// and its dynamic shared memory, where the grid has z layers (else cpml.cu takes every row's
    /// after the pass).
    z_kernel: Option<(Rt::Function, u32)>,
    _module: Rt::Module,
}

impl<Rt: GpuRuntime> YPass<Rt> {
    /// fused_step_zlayers's tiles: the gap's rows in the y-layer kernel's tile height (the band's
    /// ends are multiples of it, `y_mode_band`).
    fn z_tiles(&self) -> u32 {
        let (lo, hi) = self.band;
        ((hi - lo).max(0) as u32).div_ceil(self.geometry.tuning.fused_tile_y().max(1))
    }

    /// The kernel that takes the gap's z layers in the pass, where it does.
    fn z_layers(&self) -> Option<(Rt::Function, u32)> {
        self.z_kernel
    }
}

/// The planes of `nz` in the low z layer (where it absorbs), between the layers and in the high
/// one, each `width` planes, as layers.h's layer_of assigns them (the low layer wins where they
/// overlap).
fn z_layer_planes(nz: usize, width: usize, low: bool) -> [std::ops::Range<usize>; 3] {
    let low_end = if low { width.min(nz) } else { 0 };
    let high = nz.saturating_sub(width).max(width.min(nz));
    [0..low_end, low_end..high, high..nz]
}

/// The planes of `part` among `planes` (an empty range at the later start where they do not meet).
fn overlap(part: &std::ops::Range<usize>, planes: &std::ops::Range<usize>) -> std::ops::Range<usize> {
    let start = part.start.max(planes.start);
    start..part.end.min(planes.end).max(start)
}

/// z-planes per block of a fused_step_zlayers launch over `planes` planes: chunks of at most 16
/// (the y-layer launch's longest, `Y_PASS_LONGEST`) of equal length.
fn z_layer_window(planes: usize) -> u32 {
    planes.div_ceil(planes.div_ceil(Y_PASS_LONGEST).max(1)).max(1) as u32
}

/// Whether the interior's tiles of `gap_tile` rows take the y mode's gap: where the gap that a whole
/// number of them and of the y-layer tiles fills ([`y_mode_band`]) keeps at least 3/4 of its rows
/// (H200: marmousi.toml's 16-row gap, lost whole to the y-layer kernel's tiles, ran 0.62 s against
/// 0.60 in the y-layer module's shape).
fn gap_in_interior_shape(ny: i32, width: i32, band_tile: i32, gap_tile: i32) -> bool {
    let (lo, hi) = y_band(ny, width, band_tile);
    let (slo, shi) = y_mode_band(ny, width, band_tile, gap_tile);
    shi > slo && 4 * (shi - slo) >= 3 * (hi - lo)
}

pub(crate) fn kernel_name(k: KernelChoice) -> &'static str {
    match k {
        KernelChoice::Fused => "fused",
        KernelChoice::ThreePass => "three-pass",
    }
}

/// One axis's CPML state on the device: phi = b psi (boundary.rs), double-buffered (a step reads
/// `phi[0]` and writes `phi[1]`, then the two swap), zeta and the profile tables a and b.
struct CpmlAxisDev<Rt: GpuRuntime> {
    axis: usize,
    phi: [DeviceBuffer<Rt>; 2],
    zeta: DeviceBuffer<Rt>,
    a: DeviceBuffer<Rt>,
    b: DeviceBuffer<Rt>,
}

/// Where a fused step computes the CPML layers (on NVIDIA; AMD always computes them after).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayerPass {
    /// By cpml.cu after the interior.
    #[default]
    After,
    /// The y layers inside the pass (fused_step_ylayers, in the launch shape of
    /// [`Tuning::for_ylayers`], on the tiles that hold y-layer rows; fused_step on the others,
    /// `YPass`), and the z layers of those others too (fused_step_zlayers on the z layers'
    /// planes, in the same shape); the x layers and the y-layer rows' z layers by cpml.cu after
    /// it: the y layers' points and the other rows' z-layer points are read and written once a
    /// step. The default ([`LayerPass::for_grid`]). Where it cannot run (f16, AMD,
    /// nx not a multiple of 4, y layers that overlap) the step computes the layers after the
    /// interior.
    YLayers,
}

impl LayerPass {
    /// The default for a grid with CPML layers `width` points wide: the y layers in the pass
    /// (faster than after it on an H200 from 3.9% of the points in the y layers, 1024^3, to 62%,
    /// marmousi.toml, since each of the y mode's launches has its own tiles, shape and window).
    pub fn for_grid(width: usize) -> LayerPass {
        if width > 0 { LayerPass::YLayers } else { LayerPass::After }
    }
}

/// Steps in each graph launch for `requested` (0 where the runtime cannot capture, or where a
/// launch would hold at most one step: every kernel is then launched on its own).
fn graph_chunk(requested: usize, captures: bool) -> usize {
    if captures && requested > 1 { requested } else { 0 }
}

/// Planes a thread of cpml.cu's x_rows takes, the next one's lines asked for while it works on
/// one (H200, R = 4, CPML 20: 1024^3 5.444 -> 5.413 ms a step with two; four and eight lost).
const X_PLANES: u64 = 2;

/// Steps in one graph launch: a launch's few microseconds of host work and the graph's update
/// are spread over this many steps, and a snapshot, a blow-up check or the end of the run launches
/// the steps captured so far.
const GRAPH_STEPS: usize = 32;

/// Steps in the first graph launch after any other use of the stream (a snapshot's download, a
/// blow-up check): the device, idle after such a wait, starts on these while the host captures
/// the next [`GRAPH_STEPS`].
const FIRST_GRAPH_STEPS: usize = 4;

/// Executable graphs kept, one per chunk length (the chunk before a snapshot is shorter than the
/// others, the first after it shorter still): each is updated in place from one chunk of its
/// length to the next instead of being instantiated again.
const GRAPH_SLOTS: usize = 4;

/// Whether fused_step_ylayers can take a grid's y layers: it moves whole vectors along x and
/// needs the two y layers apart (layers.h, add_layers).
fn y_layers_fit(shape: [usize; 3], width: usize, vec: u32) -> bool {
    shape[0].is_multiple_of(vec as usize) && shape[1] >= 2 * width
}

/// Whether cpml.cu takes the x layers by rows of vectors (its `x_rows`, which the launch matches):
/// nx and the width multiples of VEC, the two layers apart.
fn x_layers_by_rows(nx: u64, width: u64, vec: u64) -> bool {
    nx.is_multiple_of(vec) && width.is_multiple_of(vec) && 2 * width <= nx
}

/// The CPML layers on the device and where a step computes them.
struct CpmlDev<Rt: GpuRuntime> {
    /// In [`CPML_AXIS_ORDER`], the order their corrections are added.
    axes: Vec<CpmlAxisDev<Rt>>,
    width: i32,
    low: [i32; 3],
    /// The grid's planes.
    nz: i32,
    /// Where a step computes them (never [`LayerPass::YLayers`] for a run whose y-layer kernel
    /// was not compiled).
    pass: LayerPass,
}

impl<Rt: GpuRuntime> CpmlDev<Rt> {
    /// The kernels' view of the current buffers; `select` picks a fused launch's blocks, `z` the
    /// planes a cpml.cu launch updates or a fused launch covers.
    fn layers(&self, w: &[AxisWeights; 3], select: i32, z: std::ops::Range<usize>) -> Layers {
        let (z_begin, z_end) = (z.start as i32, z.end as i32);
        let mut l = Layers {
            w: *w,
            width: self.width,
            low: self.low,
            select,
            z_begin,
            z_end,
            z_offset: z_begin,
            nz: self.nz,
            ..Default::default()
        };
        for c in &self.axes {
            let a = c.axis;
            l.phi_in[a] = c.phi[0].ptr();
            l.phi_out[a] = c.phi[1].ptr();
            l.zeta[a] = c.zeta.ptr();
            l.a[a] = c.a.ptr();
            l.b[a] = c.b.ptr();
        }
        l
    }

    fn swap(&mut self) {
        for c in &mut self.axes {
            c.phi.swap(0, 1);
        }
    }
}

/// The source's taps on the device: offsets into the padded field, weights (with c^2 dt^2 of the
/// tap folded in) and the wavelet's samples.
struct SourceTable<Rt: GpuRuntime> {
    offsets: DeviceBuffer<Rt>,
    weights: DeviceBuffer<Rt>,
    samples: DeviceBuffer<Rt>,
    taps: usize,
    nsamples: usize,
}

impl<Rt: GpuRuntime> SourceTable<Rt> {
    /// None for a source without taps or samples. The samples carry the field's scale
    /// ([`Problem::field_scale`], 1 in f32; a power of two, so exact).
    fn new(rt: &Rc<Rt>, problem: &Problem) -> Result<Option<Self>> {
        let (layout, src) = (&problem.layout, &problem.source);
        if src.taps.is_empty() || src.samples.is_empty() {
            return Ok(None);
        }
        let offs: Vec<u64> = src.taps.iter().map(|t| tap_offset(layout, t)).collect();
        // As the CPU reference rounds them: the tap weight and c^2 dt^2 to f32 first, then the product.
        let w: Vec<f32> = src
            .taps
            .iter()
            .map(|t| (t.weight as f32 as f64 * problem.vel2dt2_at(t.point) as f32 as f64) as f32)
            .collect();
        let scale = problem.field_scale();
        let samples: Vec<f32> = src.samples.iter().map(|&v| (v as f32 as f64 * scale) as f32).collect();
        Ok(Some(SourceTable {
            offsets: DeviceBuffer::from_slice(rt, &offs)?,
            weights: DeviceBuffer::from_slice(rt, &w)?,
            samples: DeviceBuffer::from_slice(rt, &samples)?,
            taps: offs.len(),
            nsamples: samples.len(),
        }))
    }
}

/// The receivers' taps on the device (receiver r owns taps first[r]..first[r + 1]) and their
/// traces, (receivers, steps) row-major.
struct ReceiverTable<Rt: GpuRuntime> {
    offsets: DeviceBuffer<Rt>,
    weights: DeviceBuffer<Rt>,
    first: DeviceBuffer<Rt>,
    traces: DeviceBuffer<Rt>,
    count: usize,
}

impl<Rt: GpuRuntime> ReceiverTable<Rt> {
    /// None without receivers; traces of `steps` samples each, zeroed.
    fn new(rt: &Rc<Rt>, layout: &Layout, receivers: &[Receiver], steps: usize) -> Result<Option<Self>> {
        if receivers.is_empty() {
            return Ok(None);
        }
        let mut offs = Vec::new();
        let mut w = Vec::new();
        let mut first = vec![0u32];
        for rcv in receivers {
            for t in &rcv.taps {
                offs.push(tap_offset(layout, t));
                w.push(t.weight as f32);
            }
            first.push(offs.len() as u32);
        }
        Ok(Some(ReceiverTable {
            offsets: DeviceBuffer::from_slice(rt, &offs)?,
            weights: DeviceBuffer::from_slice(rt, &w)?,
            first: DeviceBuffer::from_slice(rt, &first)?,
            traces: DeviceBuffer::zeroed(rt, receivers.len() * steps * 4)?,
            count: receivers.len(),
        }))
    }
}

fn tap_offset(layout: &Layout, t: &Tap) -> u64 {
    layout.index(t.point[0] as isize, t.point[1] as isize, t.point[2] as isize) as u64
}

/// c^2 dt^2 converted by `of` into `vel`, a zeroed field of `layout`, a few planes at a time: no
/// host copy of the whole field (1.2 GB at 288 M points), each chunk computed in parallel.
fn upload_vel2dt2<Rt: GpuRuntime, T: Copy + Default + Send>(
    vel: &DeviceBuffer<Rt>,
    problem: &Problem,
    layout: &Layout,
    of: impl Fn(f64) -> T + Sync,
) -> Result<()> {
    const CHUNK_BYTES: usize = 64 << 20;
    let per = (CHUNK_BYTES / (layout.plane * std::mem::size_of::<T>())).clamp(1, layout.nz.max(1));
    // Whatever is not an interior point stays zero: no chunk writes it.
    let mut chunk = vec![T::default(); per * layout.plane];
    for first in (0..layout.nz).step_by(per) {
        let planes = &mut chunk[..per.min(layout.nz - first) * layout.plane];
        problem.vel2dt2_planes_into(layout, first, planes, &of);
        vel.upload_at((layout.halo + first) * layout.plane, planes)?;
    }
    Ok(())
}

/// The device address of a buffer that may be absent (kernels test such pointers for null).
fn ptr_or_null<Rt: GpuRuntime>(b: &Option<DeviceBuffer<Rt>>) -> DevicePtr {
    b.as_ref().map_or(0, DeviceBuffer::ptr)
}

/// What the f16 step (`run.precision = "f16"`, kernels/fused_half.cu) adds: its kernels, the
/// increment d^n = p^n - p^{n-1} (`prev` then holds p^{n+1}), and the factor the field carries.
struct HalfStep<Rt: GpuRuntime> {
    f: HalfKernels<Rt::Function>,
    inc: DeviceBuffer<Rt>,
    scale: f64,
    /// Host copy of the interior z-planes for snapshots.
    staging: Vec<u16>,
}

/// The GPU solver over any [`GpuRuntime`]: every buffer allocated once, steps only enqueue.
pub struct GpuSolver<Rt: GpuRuntime> {
    kernel: KernelChoice,
    layout: Layout,
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
    /// Elements of each field buffer (the padded layout plus [`field_extra`]).
    field_len: usize,
    /// p^n, p^{n-1} (overwritten by p^{n+1}; in f16 p^{n+1} only), c^2 dt^2: f32, or f16 with `half`.
    cur: DeviceBuffer<Rt>,
    prev: DeviceBuffer<Rt>,
    vel: DeviceBuffer<Rt>,
    /// The three-pass Laplacian, or the Laplacian-only operator's output.
    lap: Option<DeviceBuffer<Rt>>,
    /// Sponge factors per axis (sponge runs only).
    damp: [Option<DeviceBuffer<Rt>>; 3],
    cpml: Option<CpmlDev<Rt>>,
    /// The f16 step's state (None in f32).
    half: Option<HalfStep<Rt>>,
    source: Option<SourceTable<Rt>>,
    receivers: Option<ReceiverTable<Rt>>,
    trace_steps: usize,
    steps_done: usize,
    events: Vec<Rt::Event>,
    /// The z-ranges a decomposed run's step computed first (`begin_field`) while that step is
    /// open, kept (with their complement) between steps so that the loop allocates nothing.
    split: Option<StepSplit>,
    /// Host copy of the interior z-planes for snapshots (sized at the first one, then reused).
    snapshot_staging: Vec<f32>,
    /// Device buffer plane snapshots are gathered into (allocated at the first, grown as needed).
    section_staging: Option<DeviceBuffer<Rt>>,
    /// The blow-up check's flag, one u32 (allocated at the first check).
    finite_flag: Option<DeviceBuffer<Rt>>,
    /// The Laplacian-only build (loaded at its first timing) and its dynamic shared memory.
    laplacian: Option<(Rt::Module, Rt::Function, u32)>,
    /// Steps `step` captures into one graph launch (0: none, each kernel launched on its own).
    graph_steps: usize,
    /// Steps of the capture in progress (its launch comes at `chunk`, or before any other use of
    /// the stream: [`end_capture`](Self::end_capture)).
    captured: usize,
    /// Steps the capture in progress will hold: `graph_steps`, or fewer after a host wait.
    chunk: usize,
    /// The executable graphs the captures go through, by chunk length, most recent last (each
    /// updated in place from one capture of its length to the next).
    graphs: Vec<(usize, Option<Rt::Graph>)>,
    f: Kernels<Rt::Function>,
    /// Keeps the functions in `f` valid.
    _module: Rt::Module,
    rt: Rc<Rt>,
}

/// A step in two parts: the z-ranges computed first and the rest, and whether a step is open.
struct StepSplit {
    first: Vec<std::ops::Range<usize>>,
    leave: Vec<std::ops::Range<usize>>,
    rest: Vec<std::ops::Range<usize>>,
    open: bool,
}

impl<Rt: GpuRuntime> Drop for GpuSolver<Rt> {
    fn drop(&mut self) {
        let _ = self.end_capture();
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

    /// [`GpuSolver::new`] with the CPML layers computed where `layer_pass` says. The in-pass
    /// kernel is compiled only when asked for, and only a fused step with CPML whose layer tile
    /// fits in shared memory ([`Tuning::layer_tile_fits`]) can use it; other runs compute the
    /// layers after the interior ([`GpuSolver::layer_pass`] says which one runs).
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
        let layer_pass = if layer_pass == LayerPass::YLayers
            && !half
            && rt.vendor() != "hip"
            && b.kind == BoundaryKind::Cpml
            && kernel == KernelChoice::Fused
            && in_pass_shape.layer_tile_fits(r)
            && y_layers_fit(shape, b.width, in_pass_shape.vec)
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
        let sponge = b.kind == BoundaryKind::Sponge;
        let mut options = module_options(shape, r, &tuning, sponge, false, LayerPass::After);
        if half {
            options.push("-DHALF=1".into());
        }
        let (half_parts, step_parts) = (sources::half_step(&tuning), sources::step(&tuning));
        let parts: &[&str] = if half { &half_parts } else { &step_parts };
        let y_options = y_tuning.map(|t| module_options(shape, r, &t, sponge, false, LayerPass::YLayers));
        let mut modules: Vec<(&[&str], &[String])> = vec![(parts, &options)];
        if let Some(o) = &y_options {
            modules.push((&[sources::FUSED], o));
        }
        let mut modules = load_kernels_all(&*rt, &modules)?.into_iter();
        let module = modules.next().expect("the step's module");
        let mut f = Kernels::load(&*rt, &module)?;
        let y_module = modules.next();
        if let Some(m) = &y_module {
            f.fused_ylayers = Some(rt.function(m, "fused_step_ylayers")?);
            f.fused_zlayers = Some(rt.function(m, "fused_step_zlayers")?);
        }
        let half_f = if half { Some(HalfKernels::load(&*rt, &module)?) } else { None };
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

        let field_len = layout.len() + field_extra(&layout);
        let field = || DeviceBuffer::zeroed(&rt, field_len * problem.precision.bytes() as usize);
        let (cur, prev, vel) = (field()?, field()?, field()?);
        let lap = if kernel == KernelChoice::ThreePass { Some(field()?) } else { None };
        let half = match half_f {
            Some(f) => {
                // c^2 dt^2 rounded to f16 as the CPU reference stores it (cpu_half.rs, VEL_F16).
                const _: () = assert!(crate::backend::cpu_half::VEL_F16, "the f16 kernels read c^2 dt^2 as f16");
                upload_vel2dt2(&vel, problem, &layout, |v| half::f16::from_f32(v as f32).to_bits())?;
                Some(HalfStep { f, inc: field()?, scale: problem.field_scale(), staging: Vec::new() })
            }
            None => {
                upload_vel2dt2(&vel, problem, &layout, |v| v as f32)?;
                None
            }
        };

        let mut damp = [None, None, None];
        if sponge {
            // Padded with ones so that lanes and rows past the grid read defined values.
            for (a, profile) in b.profiles.iter().enumerate() {
                let mut g: Vec<f32> = profile.damp.iter().map(|&v| v as f32).collect();
                g.resize(shape[a] + 256, 1.0);
                damp[a] = Some(DeviceBuffer::from_slice(&rt, &g)?);
            }
        }
        let cpml = if b.kind == BoundaryKind::Cpml {
            let mut axes = Vec::new();
            let slabs = b.slabs(shape);
            for slab in CPML_AXIS_ORDER.map(|a| slabs[a]) {
                if slab.is_empty() {
                    continue;
                }
                let table = |v: &[f64]| DeviceBuffer::from_slice(&rt, &v.iter().map(|&x| x as f32).collect::<Vec<_>>());
                let p = &b.profiles[slab.axis];
                let slab_bytes = slab.len() * 4;
                axes.push(CpmlAxisDev {
                    axis: slab.axis,
                    phi: [DeviceBuffer::zeroed(&rt, slab_bytes)?, DeviceBuffer::zeroed(&rt, slab_bytes)?],
                    zeta: DeviceBuffer::zeroed(&rt, slab_bytes)?,
                    a: table(&p.a)?,
                    b: table(&p.b)?,
                });
            }
            Some(CpmlDev {
                axes,
                width: b.width as i32,
                // The top layer of a free surface's axis has a = 0: nothing to compute there.
                low: [1, 1, (!b.free_surface) as i32],
                nz: layout.nz as i32,
                pass: layer_pass,
            })
        } else {
            None
        };
        let source = SourceTable::new(&rt, problem)?;
        let receivers = ReceiverTable::new(&rt, &layout, &problem.receivers, problem.steps)?;
        let events = (0..=problem.steps).map(|_| rt.event()).collect::<Result<_>>()?;

        let graph_steps = graph_chunk(GRAPH_STEPS, rt.captures());
        let mut s = GpuSolver {
            kernel,
            layout,
            radius: r,
            geometry,
            window: 0,
            laplacian_window: 0,
            y_pass: None,
            free_surface: b.free_surface,
            weights,
            axis_weights,
            field_len,
            cur,
            prev,
            vel,
            lap,
            damp,
            cpml,
            half,
            source,
            receivers,
            trace_steps: problem.steps,
            steps_done: 0,
            events,
            split: None,
            snapshot_staging: Vec::new(),
            section_staging: None,
            finite_flag: None,
            laplacian: None,
            graph_steps,
            captured: 0,
            chunk: FIRST_GRAPH_STEPS.min(graph_steps),
            graphs: Vec::with_capacity(GRAPH_SLOTS),
            f,
            _module: module,
            rt,
        };
        s.set_window(s.choose_window(FUSED_WINDOWS));
        if let (Some(c), Some(t), Some(module), Some(shared)) = (&s.cpml, y_tuning, y_module, y_shared) {
            let with_y = s.f.fused_ylayers.context("fused_step_ylayers not compiled")?;
            let per_sm = s.rt.resident_blocks(with_y, t.block_x * t.block_y, shared).unwrap_or(1);
            let geometry = LaunchGeometry::new(shape, r, t, per_sm.max(1) * s.rt.multiprocessors());
            let (ny, band_tile) = (shape[1] as i32, t.fused_tile_y() as i32);
            let interior_tile = tuning.fused_tile_y() as i32;
            let (gap_kernel, gap_tile) = if gap_in_interior_shape(ny, c.width, band_tile, interior_tile) {
                (None, interior_tile)
            } else {
                (Some((s.rt.function(&module, "fused_step")?, t.dynamic_shared_bytes(r, false))), band_tile)
            };
            if let Some((k, bytes)) = gap_kernel {
                s.rt.allow_dynamic_shared(k, bytes)?;
            }
            let band = y_mode_band(ny, c.width, band_tile, gap_tile);
            let tiles = y_mode_tiles(ny, band, band_tile, gap_tile);
            let gap_geometry = match gap_kernel {
                Some((k, bytes)) => {
                    let per_sm = s.rt.resident_blocks(k, t.block_x * t.block_y, bytes).unwrap_or(t.min_blocks);
                    LaunchGeometry::new(shape, r, t, per_sm.max(1) * s.rt.multiprocessors())
                }
                None => s.geometry,
            };
            let windows = s.choose_y_pass_windows(&gap_geometry, &geometry, tiles);
            // The gap's z layers in the pass where the grid has them.
            let has_z = c.axes.iter().any(|a| a.axis == 2);
            let z_kernel = s.f.fused_zlayers.zip(z_shared).filter(|_| has_z);
            s.y_pass = Some(YPass {
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
        s.laplacian_window = s.geometry.guarded_window(s.geometry.auto_window(LAPLACIAN_WINDOWS));
        s.rt.synchronize()?;
        Ok(s)
    }

    /// z-planes per fused block: the tuning's window, or where it is 0 the automatic one.
    fn choose_window(&self, rule: WindowRule) -> u32 {
        let t = &self.geometry.tuning;
        if t.window > 0 { t.window } else { self.geometry.auto_window(rule) }
    }

    /// Compiler resources of the interior kernels, for reports.
    pub fn kernel_info(&self) -> String {
        let mut parts = match &self.half {
            Some(h) => vec![format!("fused_step_half: {}", self.rt.function_info(h.f.fused))],
            None => vec![format!("fused: {}", self.rt.function_info(self.f.fused))],
        };
        if let Some((_, f, _)) = &self.laplacian {
            parts.push(format!("laplacian: {}", self.rt.function_info(*f)));
        }
        if self.kernel == KernelChoice::ThreePass {
            for (n, f) in [("pass_x", self.f.pass_x), ("pass_z", self.f.pass_z), ("update", self.f.update)] {
                parts.push(format!("{n}: {}", self.rt.function_info(f)));
            }
        }
        parts.join("; ")
    }

    pub fn runtime(&self) -> &Rt {
        &self.rt
    }

    /// Grid shape (nx, ny, nz) and stencil radius.
    pub fn shape(&self) -> [usize; 3] {
        self.geometry.shape
    }

    pub fn radius(&self) -> usize {
        self.radius
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

    /// Bytes of one stored field value: 4, or 2 in f16.
    fn value_bytes(&self) -> u64 {
        if self.half.is_some() { 2 } else { 4 }
    }

    fn origin(&self, p: DevicePtr) -> DevicePtr {
        p + self.layout.origin() as u64 * self.value_bytes()
    }

    /// Sets p^n and p^{n-1} from dense (nz, ny, nx) arrays (tests, benchmarks); in f16, p^n and
    /// d^n = p^n - p^{n-1}, rounded, unscaled.
    pub fn set_state(&mut self, current: &[f32], previous: &[f32]) -> Result<()> {
        self.end_capture()?;
        let mut field = vec![0.0f32; self.layout.len()];
        self.layout.scatter(current, &mut field);
        let bits = |f: &[f32]| f.iter().map(|&v| half::f16::from_f32(v).to_bits()).collect::<Vec<u16>>();
        match &self.half {
            Some(h) => {
                self.cur.upload(&bits(&field))?;
                let inc: Vec<f32> = current.iter().zip(previous).map(|(c, p)| c - p).collect();
                self.layout.scatter(&inc, &mut field);
                h.inc.upload(&bits(&field))
            }
            None => {
                self.cur.upload(&field)?;
                self.layout.scatter(previous, &mut field);
                self.prev.upload(&field)
            }
        }
    }

    /// One snapshot section into `out`: a plane is gathered on the device and only its points come
    /// down; the volume comes down whole.
    fn snapshot_section(&mut self, section: &Section, out: &mut [f32]) -> Result<()> {
        let Some((n0, n1, first, s0, s1)) = section.plane_lines(&self.layout) else {
            return self.snapshot(out);
        };
        if self.section_staging.as_ref().is_none_or(|b| b.bytes() < n0 * n1 * 4) {
            self.section_staging = Some(DeviceBuffer::zeroed(&self.rt, n0 * n1 * 4)?);
        }
        let dense = ptr_or_null(&self.section_staging);
        let args = ExtractSection {
            field: self.cur.ptr() + first as DevicePtr * self.value_bytes(),
            out: dense,
            n0: n0 as i32,
            n1: n1 as i32,
            s0: s0 as i64,
            s1: s1 as i64,
        };
        let l = Launch { grid: [n0.div_ceil(256) as u32, n1.min(65535) as u32, 1], block: [256, 1, 1], shared: 0 };
        args.launch(&*self.rt, self.half.as_ref().map_or(self.f.section, |h| h.f.section), l)?;
        self.rt.download(dense, as_bytes_mut(out))?;
        self.unscale(out);
        Ok(())
    }

    /// Divides the f16 field's scale out of values read from it (as the CPU reference does: in
    /// f64, exact for a power of two); nothing in f32.
    fn unscale(&self, values: &mut [f32]) {
        if let Some(h) = &self.half {
            for v in values {
                *v = (*v as f64 / h.scale) as f32;
            }
        }
    }

    /// Whether the gap's z layers are computed in its pass (fused_step_zlayers), as they are
    /// wherever the y layers are and the grid has z layers.
    pub fn z_layers_in_pass(&self) -> bool {
        self.y_pass.as_ref().is_some_and(|y| y.z_kernel.is_some())
    }

    /// Where this solver computes the CPML layers; [`LayerPass::After`] also for runs without CPML.
    pub fn layer_pass(&self) -> LayerPass {
        self.cpml.as_ref().map_or(LayerPass::After, |c| c.pass)
    }

    /// The y mode's windows: the gap launch's (`gap`, its geometry) as the fused step's, over its
    /// own tiles; the y-layer launch's (`y`) over its tiles and the blocks of it that fit at once,
    /// with the planes a chunk primes its rings with counted.
    fn choose_y_pass_windows(
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

    /// Captures `steps` steps of [`Backend::step`] into each graph launch (0 or 1: every kernel
    /// launched on its own), where the runtime can capture; the steps captured so far are
    /// launched first.
    pub fn set_graph_steps(&mut self, steps: usize) -> Result<()> {
        self.end_capture()?;
        self.graph_steps = graph_chunk(steps, self.rt.captures());
        self.chunk = FIRST_GRAPH_STEPS.min(self.graph_steps);
        Ok(())
    }

    /// Steps in each graph launch (0: none).
    pub fn graph_steps(&self) -> usize {
        self.graph_steps
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
    fn launch_interior(&self, op: Operator, out: DevicePtr) -> Result<()> {
        self.launch_interior_planes(op, out, 0..self.layout.nz)
    }

    /// [`launch_interior`](Self::launch_interior) for the z-planes `planes` only (the plain fused
    /// step only, unless they are all the planes): the fused kernel runs on a grid of those planes
    /// that starts at the first, and reads its z-neighbours from the planes next to them.
    fn launch_interior_planes(&self, op: Operator, out: DevicePtr, planes: std::ops::Range<usize>) -> Result<()> {
        let whole = planes == (0..self.layout.nz);
        let pass = self.layer_pass();
        ensure!(
            whole
                || (op == Operator::Fused
                    && self.half.is_none()
                    && matches!(pass, LayerPass::After | LayerPass::YLayers)),
            "only the f32 fused step with its x and z layers after the interior runs on part of the planes"
        );
        let [nx, ny, _] = self.geometry.shape.map(|n| n as i32);
        let nz = planes.len() as i32;
        let (pitch, plane) = (self.layout.pitch as i64, self.layout.plane as i64);
        let skip = (planes.start * self.layout.plane) as u64 * self.value_bytes();
        let (cur, out, vel) =
            (self.origin(self.cur.ptr()) + skip, self.origin(out) + skip, self.origin(self.vel.ptr()) + skip);
        let [gx, gy, gz] = self.damp.each_ref().map(ptr_or_null);
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
            FusedStep { cur, out, vel, gx, gy, gz, w, nx, ny, nz, pitch, plane, window, layers }.launch(&*self.rt, f, l)
        };
        let shared = t.dynamic_shared_bytes(self.radius, false);
        if let Some(h) = &self.half {
            ensure!(op == Operator::Fused, "the f16 step has the fused kernel only");
            let block = [t.block_x, t.block_y, 1];
            let l = Launch { grid: self.geometry.fused_grid(window), block, shared: t.half_ring_bytes() };
            let (inc, window) = (self.origin(h.inc.ptr()), window as i32);
            let args = FusedStepHalf { cur, inc, next: out, vel, gx, gy, gz, w, nx, ny, nz, pitch, plane, window };
            return args.launch(&*self.rt, h.f.fused, l);
        }
        match op {
            Operator::Fused => {
                let layers_on = |c: &CpmlDev<Rt>, select, part| c.layers(&self.axis_weights, select, part);
                match &self.cpml {
                    Some(c) if c.pass == LayerPass::YLayers => {
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
                            let skip = ((part.start - planes.start) * self.layout.plane) as u64 * self.value_bytes();
                            let (cur, out, vel) = (cur + skip, out + skip, vel + skip);
                            let gz = if gz == 0 { 0 } else { gz + 4 * (part.start - planes.start) as u64 };
                            let grid = g.fused_grid_rows(window, part.len(), rows);
                            let l = Launch { grid, block: [g.tuning.block_x, g.tuning.block_y, 1], shared };
                            let layers = Layers { band_lo, band_hi, ..layers_on(c, select, part.clone()) };
                            let (nz, window) = (part.len() as i32, window as i32);
                            FusedStep { cur, out, vel, gx, gy, gz, w, nx, ny, nz, pitch, plane, window, layers }
                                .launch(&*self.rt, f, l)
                        };
                        let (gap_window, band_window) = y.windows;
                        let (gap_kernel, gap_shared) = y.gap_kernel.unwrap_or((self.f.fused, shared));
                        // The launches write disjoint rows or planes of p^{n+1} (and of their own
                        // layers' memory variables) and read nothing another writes. The z layers'
                        // planes go beside the band's launch, so that their short launches run
                        // alongside the gap's long one rather than after it.
                        let parts = match y.z_layers() {
                            Some(_) => z_layer_planes(self.layout.nz, c.width as usize, c.low[2] != 0)
                                .map(|p| overlap(&p, &planes)),
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
                        self.rt.alongside(&mut band, &mut gap)
                    }
                    _ => fused(self.f.fused, shared, Layers::default()),
                }
            }
            Operator::Laplacian => {
                let (_, f, shared) = self.laplacian.as_ref().context("Laplacian kernel not loaded")?;
                fused(*f, *shared, Layers::default())
            }
            Operator::ThreePass => {
                let lap = self.origin(self.lap.as_ref().context("three-pass scratch field not allocated")?.ptr());
                let (bx, by) = self.geometry.grid_xy();
                let block = [32, t.block_y, 1];
                let at = |grid: [u32; 3]| Launch { grid, block, shared: 0 };
                // Blocks of pass_y and pass_z march `window` points along their axis.
                let window = 64i32;
                let rt = &*self.rt;
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
    fn launch_cpml(&self, planes: std::ops::Range<usize>) -> Result<()> {
        let (cur, out, vel) = (self.origin(self.cur.ptr()), self.origin(self.prev.ptr()), self.origin(self.vel.ptr()));
        let half = self.half.as_ref().map(|h| (&h.f, self.origin(h.inc.ptr())));
        let [nx, ny, nz] = self.geometry.shape.map(|n| n as i32);
        let (pitch, plane) = (self.layout.pitch as i64, self.layout.plane as i64);
        let vec = self.geometry.tuning.vec as u64;
        let march = self.rt.vendor() != "hip";
        let radius = self.radius as u64;
        let Some(c) = &self.cpml else { return Ok(()) };
        if matches!(c.pass, LayerPass::After | LayerPass::YLayers) {
            let layers = c.layers(&self.axis_weights, 0, planes.clone());
            // With the gap's z layers in its pass, cpml_z takes the band rows only (select 5).
            let z_band =
                self.y_pass.as_ref().filter(|y| c.pass == LayerPass::YLayers && y.z_layers().is_some()).map(|y| y.band);
            let span = planes.len() as u64;
            // In CPML_AXIS_ORDER; the y layers were the fused pass's with YLayers.
            // z layers: only where the planes meet them.
            let [low_z, _, high_z] = z_layer_planes(self.layout.nz, c.width as usize, c.low[2] != 0);
            let meets_z = !overlap(&low_z, &planes).is_empty() || !overlap(&high_z, &planes).is_empty();
            for a in c.axes.iter().filter(|a| !(a.axis == 1 && c.pass == LayerPass::YLayers)) {
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
                    // Both layers, or the high one alone where the low face does not absorb.
                    let layers = if c.low[a.axis] != 0 { 2 } else { 1 };
                    let sms = self.rt.multiprocessors() as u64;
                    let segments = march_segments(bx * layers, sms, c.width as u64, radius);
                    [bx as u32, 1, (layers * segments) as u32]
                } else {
                    [(e[0] * e[1]).div_ceil(128) as u32, e[2].min(65535) as u32, 1]
                };
                let l = Launch { grid, block: [128, 1, 1], shared: 0 };
                match half {
                    Some((f, inc)) => {
                        let args = CpmlAxisHalf { cur, inc, next: out, vel, layers, nx, ny, nz, pitch, plane };
                        args.launch(&*self.rt, f.cpml[a.axis], l)?
                    }
                    None => {
                        let args = CpmlAxis { cur, out, vel, layers, nx, ny, nz, pitch, plane };
                        args.launch(&*self.rt, self.f.cpml[a.axis], l)?
                    }
                }
            }
        }
        Ok(())
    }

    /// Step 6 of step `n`: one sample per receiver from `field` (p^{n+1}).
    fn enqueue_record(&self, field: DevicePtr, n: usize) -> Result<()> {
        let rt = &*self.rt;
        let step = n as i32;
        if let Some(r) = &self.receivers
            && n < self.trace_steps
        {
            let args = RecordReceivers {
                field,
                offsets: r.offsets.ptr(),
                weights: r.weights.ptr(),
                first: r.first.ptr(),
                nrec: r.count as i32,
                traces: r.traces.ptr(),
                steps: self.trace_steps as i32,
                step,
            };
            let f = self.half.as_ref().map_or(self.f.record, |h| h.f.record);
            args.launch(rt, f, Launch::linear((r.count as u32).div_ceil(128), 128))?;
        }
        Ok(())
    }

    /// Enqueues step `n` (order of `backend`'s module docs; the receivers only with `record`),
    /// then swaps p^n and p^{n+1}.
    fn enqueue_step(&mut self, n: usize, record: bool) -> Result<()> {
        self.enqueue_free_surface()?;
        let op = if self.kernel == KernelChoice::ThreePass { Operator::ThreePass } else { Operator::Fused };
        self.launch_interior(op, self.prev.ptr())?;
        self.launch_cpml(0..self.layout.nz)?;
        self.enqueue_source(n, 0..self.layout.nz)?;
        if record {
            self.enqueue_record(self.prev.ptr(), n)?;
        }
        self.close_step();
        Ok(())
    }

    /// Step 1: the mirror above z = 0 (under a free surface).
    fn enqueue_free_surface(&self) -> Result<()> {
        if !self.free_surface {
            return Ok(());
        }
        let [nx, ny, _] = self.geometry.shape.map(|v| v as i32);
        let rt = &*self.rt;
        let (pitch, plane) = (self.layout.pitch as i64, self.layout.plane as i64);
        let l = Launch { grid: [(nx as u32).div_ceil(32), (ny as u32).div_ceil(8), 1], block: [32, 8, 1], shared: 0 };
        let cur = self.origin(self.cur.ptr());
        match &self.half {
            Some(h) => {
                let inc = self.origin(h.inc.ptr());
                FreeSurfaceHalf { cur, inc, nx, ny, pitch, plane }.launch(rt, h.f.free_surface, l)
            }
            None => FreeSurface { cur, nx, ny, pitch, plane }.launch(rt, self.f.free_surface, l),
        }
    }

    /// Steps 2-4 of step `n` on the z-planes `planes` (the f32 fused step), with their source taps.
    fn enqueue_planes(&self, n: usize, planes: std::ops::Range<usize>) -> Result<()> {
        if planes.is_empty() {
            return Ok(());
        }
        self.launch_interior_planes(Operator::Fused, self.prev.ptr(), planes.clone())?;
        self.launch_cpml(planes.clone())?;
        self.enqueue_source(n, planes)
    }

    /// Step 5 for the source taps on the z-planes `planes`.
    fn enqueue_source(&self, n: usize, planes: std::ops::Range<usize>) -> Result<()> {
        let Some(s) = &self.source else { return Ok(()) };
        if n >= s.nsamples {
            return Ok(());
        }
        let rt = &*self.rt;
        let step = n as i32;
        let (offsets, weights, samples) = (s.offsets.ptr(), s.weights.ptr(), s.samples.ptr());
        let (ntaps, nsamples) = (s.taps as i32, s.nsamples as i32);
        let l = Launch::linear((s.taps as u32).div_ceil(32), 32);
        match &self.half {
            Some(h) => {
                let (cur, inc, next) = (self.cur.ptr(), h.inc.ptr(), self.prev.ptr());
                let args = InjectSourceHalf { cur, inc, next, offsets, weights, ntaps, samples, nsamples, step };
                args.launch(rt, h.f.inject, l)
            }
            None => {
                // Tap offsets count from the allocation's start (plane z begins at (halo + z) planes).
                let at = |z: usize| ((self.layout.halo + z) * self.layout.plane) as u64;
                let (lo, hi) =
                    if planes == (0..self.layout.nz) { (0, u64::MAX) } else { (at(planes.start), at(planes.end)) };
                let args =
                    InjectSource { field: self.prev.ptr(), offsets, weights, ntaps, samples, nsamples, step, lo, hi };
                args.launch(rt, self.f.inject, l)
            }
        }
    }

    /// Step 7: the memory variables and the fields swap.
    fn close_step(&mut self) {
        if let Some(c) = &mut self.cpml {
            c.swap();
        }
        std::mem::swap(&mut self.cur, &mut self.prev);
    }

    /// The step's start event (the first step's) and, after its work, its end event.
    fn time_step_start(&self) -> Result<()> {
        if self.steps_done == 0 && !self.events.is_empty() {
            self.rt.record(&self.events[0])?;
        }
        Ok(())
    }

    /// Launches the steps captured so far (none: nothing to do). Every use of the stream other
    /// than `step` comes after this.
    fn end_capture(&mut self) -> Result<()> {
        // Whatever comes next may wait on the device: the next capture starts short.
        self.chunk = FIRST_GRAPH_STEPS.min(self.graph_steps);
        self.launch_captured()
    }

    /// Launches the steps captured so far through the executable graph of their count.
    fn launch_captured(&mut self) -> Result<()> {
        let steps = std::mem::take(&mut self.captured);
        if steps == 0 {
            return Ok(());
        }
        let slot = match self.graphs.iter().position(|(n, _)| *n == steps) {
            Some(i) => i,
            None => {
                if self.graphs.len() == GRAPH_SLOTS {
                    self.graphs.remove(0);
                }
                self.graphs.push((steps, None));
                self.graphs.len() - 1
            }
        };
        let (_, graph) = &mut self.graphs[slot];
        let launched = self.rt.launch_capture(graph).context("the steps' graph launch");
        let used = self.graphs.remove(slot);
        self.graphs.push(used);
        launched
    }

    fn time_step_end(&mut self) -> Result<()> {
        let k = self.steps_done;
        if k + 1 < self.events.len() {
            self.rt.record(&self.events[k + 1])?;
        }
        self.steps_done += 1;
        Ok(())
    }

    /// The device buffer a block's halo rows pass through, at least `values` f32 (grown as needed).
    fn rows_staging(&mut self, values: usize) -> Result<DevicePtr> {
        if self.section_staging.as_ref().is_none_or(|b| b.bytes() < values * 4) {
            self.section_staging = Some(DeviceBuffer::zeroed(&self.rt, values * 4)?);
        }
        Ok(ptr_or_null(&self.section_staging))
    }

    /// The f32 field at `field` as a [`DeviceField`] (None in f16).
    fn field_at(&self, field: DevicePtr) -> Option<DeviceField> {
        let l = self.layout;
        self.half.is_none().then(|| DeviceField {
            device: self.rt.ordinal(),
            plane0: field + (l.halo * l.plane * 4) as DevicePtr,
            plane_values: l.plane,
            stream: self.rt.stream_handle(),
        })
    }

    /// Interior z-planes `z0..z0 + planes` of the f32 field at `field`, packed into `buf` (the
    /// planes come down whole, row padding included, after the work queued so far).
    fn field_planes_out(&mut self, field: DevicePtr, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        ensure!(self.half.is_none(), "the f16 step has no halo exchange (decomposed runs are f32)");
        let l = self.layout;
        ensure!(
            z0 + planes <= l.nz && buf.len() == planes * l.nx * l.ny,
            "halo planes {z0}..{} of {}",
            z0 + planes,
            l.nz
        );
        let staging = &mut self.snapshot_staging;
        staging.resize(planes * l.plane, 0.0);
        self.rt.download(field + ((l.halo + z0) * l.plane * 4) as DevicePtr, as_bytes_mut(staging))?;
        for (k, chunk) in buf.chunks_exact_mut(l.nx * l.ny).enumerate() {
            for (iy, row) in chunk.chunks_exact_mut(l.nx).enumerate() {
                let src = k * l.plane + (iy + l.halo) * l.pitch + l.x_offset;
                row.copy_from_slice(&staging[src..src + l.nx]);
            }
        }
        Ok(())
    }

    /// L p^n from the last [`Operator::Laplacian`] application of [`Self::time_interior`], dense
    /// (nz, ny, nx); for tests.
    pub fn laplacian_output(&mut self) -> Result<Vec<f32>> {
        ensure!(self.laplacian.is_some(), "no Laplacian-only application yet");
        let lap = ptr_or_null(&self.lap);
        let l = self.layout;
        let mut out = vec![0.0; l.points()];
        self.field_planes_out(lap, 0, l.nz, &mut out)?;
        Ok(out)
    }

    /// Device seconds of each of `reps` applications of an interior operator alone (no boundary,
    /// source or receivers), after 3 untimed ones; for benchmarks. Leapfrog operators advance the
    /// state (cur and prev swap each time) as a run does.
    pub fn time_interior(&mut self, op: Operator, reps: usize) -> Result<Vec<f64>> {
        self.end_capture()?;
        if op == Operator::Laplacian && self.laplacian.is_none() {
            let t = self.geometry.tuning.for_laplacian(self.radius);
            let options = module_options(self.shape(), self.radius, &t, false, true, LayerPass::After);
            let m = load_kernels(&*self.rt, &[sources::fused(&t)], &options)?;
            let f = self.rt.function(&m, "fused_step")?;
            let shared = t.dynamic_shared_bytes(self.radius, true);
            self.rt.allow_dynamic_shared(f, shared)?;
            self.laplacian = Some((m, f, shared));
        }
        ensure!(self.half.is_none() || op == Operator::Fused, "the f16 step has the fused kernel only");
        if op != Operator::Fused && self.lap.is_none() {
            self.lap = Some(DeviceBuffer::zeroed(&self.rt, self.field_len * 4)?);
        }
        let events: Vec<Rt::Event> = (0..=reps).map(|_| self.rt.event()).collect::<Result<_>>()?;
        for i in 0..reps + 3 {
            if i >= 3 {
                self.rt.record(&events[i - 3])?;
            }
            let out = if op == Operator::Laplacian { ptr_or_null(&self.lap) } else { self.prev.ptr() };
            self.launch_interior(op, out)?;
            if op != Operator::Laplacian {
                std::mem::swap(&mut self.cur, &mut self.prev);
            }
        }
        self.rt.record(&events[reps])?;
        self.rt.synchronize()?;
        (0..reps).map(|i| Ok(self.rt.elapsed_ms(&events[i], &events[i + 1])? as f64 * 1e-3)).collect()
    }
}

impl<Rt: GpuRuntime> Backend for GpuSolver<Rt> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: self.rt.vendor(), name: self.rt.device_name(), kernel: kernel_name(self.kernel).into() }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        let capturing = self.graph_steps > 0;
        if capturing && self.captured == 0 {
            self.rt.begin_capture()?;
        }
        let queued =
            self.time_step_start().and_then(|()| self.enqueue_step(n, true)).and_then(|()| self.time_step_end());
        if !capturing {
            return queued;
        }
        self.captured += 1;
        if let Err(e) = queued {
            let _ = self.end_capture();
            return Err(e);
        }
        if self.captured == self.chunk {
            self.chunk = self.graph_steps;
            self.launch_captured()
        } else {
            Ok(())
        }
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        self.end_capture()?;
        ensure!(
            out.len() == self.layout.points(),
            "snapshot buffer has {} values, grid {}",
            out.len(),
            self.layout.points()
        );
        // Only the interior's z-planes come down, into a host buffer kept between snapshots.
        let l = self.layout;
        if let Some(h) = &mut self.half {
            let staging = &mut h.staging;
            staging.resize(l.nz * l.plane, 0);
            self.rt.download(self.cur.ptr() + (l.halo * l.plane * 2) as DevicePtr, as_bytes_mut(staging))?;
            for iz in 0..l.nz {
                for iy in 0..l.ny {
                    let src = iz * l.plane + (iy + l.halo) * l.pitch + l.x_offset;
                    let dst = (iz * l.ny + iy) * l.nx;
                    for (o, &b) in out[dst..dst + l.nx].iter_mut().zip(&staging[src..src + l.nx]) {
                        *o = (half::f16::from_bits(b).to_f32() as f64 / h.scale) as f32;
                    }
                }
            }
            return Ok(());
        }
        let staging = &mut self.snapshot_staging;
        staging.resize(l.nz * l.plane, 0.0);
        self.rt.download(self.cur.ptr() + (l.halo * l.plane * 4) as DevicePtr, as_bytes_mut(staging))?;
        for iz in 0..l.nz {
            for iy in 0..l.ny {
                let src = iz * l.plane + (iy + l.halo) * l.pitch + l.x_offset;
                let dst = (iz * l.ny + iy) * l.nx;
                out[dst..dst + l.nx].copy_from_slice(&staging[src..src + l.nx]);
            }
        }
        Ok(())
    }

    fn snapshot_sections(&mut self, sections: &[Section], out: &mut [f32]) -> Result<()> {
        self.end_capture()?;
        let l = self.layout;
        for_each_section(sections, [l.nx, l.ny, l.nz], out, |s, part| self.snapshot_section(s, part))
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        self.end_capture()?;
        let Some(r) = &self.receivers else {
            return Ok(Vec::new());
        };
        let mut all = vec![0.0f32; r.count * self.trace_steps];
        self.rt.download(r.traces.ptr(), as_bytes_mut(&mut all))?;
        let n = steps.min(self.steps_done).min(self.trace_steps);
        let mut out: Vec<f32> = all.chunks(self.trace_steps).flat_map(|t| t[..n].iter().copied()).collect();
        self.unscale(&mut out);
        Ok(out)
    }

    /// One launch of finite_check over the whole current field (halo and padding hold zeros or
    /// mirrored interior values) and a 4-byte download, which waits for the queued steps. Cost,
    /// estimated: one field read at memory bandwidth (288 M points, 1.2 GB: about 0.4 ms on an
    /// H100) plus the stream drain and launch latency (tens of microseconds); the solver calls it
    /// about once a second, so well under 0.1% of a run.
    fn field_is_finite(&mut self) -> Result<bool> {
        self.end_capture()?;
        match &self.finite_flag {
            Some(flag) => flag.zero()?,
            None => self.finite_flag = Some(DeviceBuffer::zeroed(&self.rt, 4)?),
        }
        let flag = ptr_or_null(&self.finite_flag);
        let blocks = self.rt.multiprocessors() * 4;
        let args = FiniteCheck { field: self.cur.ptr(), n: self.field_len as u64, flag };
        let f = self.half.as_ref().map_or(self.f.finite_check, |h| h.f.finite_check);
        args.launch(&*self.rt, f, Launch::linear(blocks, 256))?;
        let mut bad = [0u8; 4];
        self.rt.download(flag, &mut bad)?;
        Ok(u32::from_ne_bytes(bad) == 0)
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        self.end_capture()?;
        self.rt.synchronize()?;
        let n = self.steps_done.min(self.events.len().saturating_sub(1));
        (0..n).map(|i| Ok(self.rt.elapsed_ms(&self.events[i], &self.events[i + 1])? as f64 * 1e-3)).collect()
    }

    fn step_field(&mut self, n: usize) -> Result<()> {
        self.end_capture()?;
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
        self.end_capture()?;
        if !self.splits_steps() {
            return self.step_field(n);
        }
        let nz = self.layout.nz;
        if self.split.as_ref().is_none_or(|s| s.first != first || s.leave != leave) {
            for ranges in [first, leave] {
                ensure!(
                    ranges.windows(2).all(|w| w[0].end <= w[1].start)
                        && ranges.iter().all(|r| r.start <= r.end && r.end <= nz),
                    "planes {ranges:?} of a step in two parts are not sorted disjoint ranges of 0..{nz}"
                );
            }
            // Made once: a decomposed run computes the same planes first every step. The rest is
            // what neither `first` nor `leave` holds, in order.
            let mut taken: Vec<std::ops::Range<usize>> = first.iter().chain(leave).cloned().collect();
            taken.sort_by_key(|r| r.start);
            let mut rest = Vec::with_capacity(taken.len() + 1);
            let mut z = 0;
            for r in &taken {
                if r.start > z {
                    rest.push(z..r.start);
                }
                z = z.max(r.end);
            }
            if z < nz {
                rest.push(z..nz);
            }
            self.split = Some(StepSplit { first: first.to_vec(), leave: leave.to_vec(), rest, open: false });
        }
        self.time_step_start()?;
        self.enqueue_free_surface()?;
        for r in first {
            self.enqueue_planes(n, r.clone())?;
        }
        if let Some(s) = &mut self.split {
            s.open = true;
        }
        Ok(())
    }

    fn next_planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        self.end_capture()?;
        let open = self.split.as_ref().is_some_and(|s| s.open);
        let field = if open { self.prev.ptr() } else { self.cur.ptr() };
        self.field_planes_out(field, z0, planes, buf)
    }

    fn finish_field(&mut self, n: usize) -> Result<()> {
        self.end_capture()?;
        let Some(split) = self.split.take_if(|s| s.open) else { return Ok(()) };
        for r in &split.rest {
            self.enqueue_planes(n, r.clone())?;
        }
        self.split = Some(StepSplit { open: false, ..split });
        self.close_step();
        self.time_step_end()
    }

    /// The f32 fused step with its x and z layers after the interior (the default) computes a step
    /// in parts; the three-pass kernel, every layer inside the pass and f16 storage do not.
    fn splits_steps(&self) -> bool {
        self.kernel != KernelChoice::ThreePass
            && self.half.is_none()
            && matches!(self.layer_pass(), LayerPass::After | LayerPass::YLayers)
    }

    fn record_receivers(&mut self) -> Result<()> {
        self.end_capture()?;
        let n = self.steps_done.checked_sub(1).context("no step to record")?;
        self.enqueue_record(self.cur.ptr(), n)
    }

    /// Host-staged: the planes come down whole (row padding included) and their rows are packed.
    fn planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        self.end_capture()?;
        self.field_planes_out(self.cur.ptr(), z0, planes, buf)
    }

    /// Host-staged: the rows of every plane are `rows * pitch` contiguous values, gathered into a
    /// dense buffer on the device (one launch, one download), unpacked here.
    fn rows_out(&mut self, y0: usize, rows: usize, buf: &mut [f32]) -> Result<()> {
        self.end_capture()?;
        ensure!(self.half.is_none(), "the f16 step has no halo exchange (decomposed runs are f32)");
        let l = self.layout;
        ensure!(y0 + rows <= l.ny && buf.len() == l.nz * rows * l.nx, "halo rows {y0}..{} of {}", y0 + rows, l.ny);
        let n0 = rows * l.pitch;
        let dense = self.rows_staging(n0 * l.nz)?;
        let first = l.index(-(l.x_offset as isize), y0 as isize, 0) as u64 * 4;
        let args = ExtractSection {
            field: self.cur.ptr() + first,
            out: dense,
            n0: n0 as i32,
            n1: l.nz as i32,
            s0: 1,
            s1: l.plane as i64,
        };
        let launch =
            Launch { grid: [n0.div_ceil(256) as u32, l.nz.min(65535) as u32, 1], block: [256, 1, 1], shared: 0 };
        args.launch(&*self.rt, self.f.section, launch)?;
        let staging = &mut self.snapshot_staging;
        staging.resize(n0 * l.nz, 0.0);
        self.rt.download(dense, as_bytes_mut(staging))?;
        for (k, row) in buf.chunks_exact_mut(l.nx).enumerate() {
            let src = k * l.pitch + l.x_offset;
            row.copy_from_slice(&staging[src..src + l.nx]);
        }
        Ok(())
    }

    /// Host-staged: whole padded rows go up (their padding zero, as it always is) and are written
    /// into every plane by one launch.
    fn rows_in(&mut self, y0: usize, rows: usize, buf: &[f32]) -> Result<()> {
        self.end_capture()?;
        ensure!(self.half.is_none(), "the f16 step has no halo exchange (decomposed runs are f32)");
        let l = self.layout;
        ensure!(y0 + rows <= l.ny && buf.len() == l.nz * rows * l.nx, "halo rows {y0}..{} of {}", y0 + rows, l.ny);
        let n0 = rows * l.pitch;
        let staging = &mut self.snapshot_staging;
        staging.clear();
        staging.resize(n0 * l.nz, 0.0);
        for (k, row) in buf.chunks_exact(l.nx).enumerate() {
            let dst = k * l.pitch + l.x_offset;
            staging[dst..dst + l.nx].copy_from_slice(row);
        }
        let dense = self.rows_staging(n0 * l.nz)?;
        self.rt.upload(dense, as_bytes(&self.snapshot_staging))?;
        let first = l.index(-(l.x_offset as isize), y0 as isize, 0) as u64 * 4;
        let args = InsertSection {
            field: self.cur.ptr() + first,
            dense,
            n0: n0 as i32,
            n1: l.nz as i32,
            s0: 1,
            s1: l.plane as i64,
        };
        let launch =
            Launch { grid: [n0.div_ceil(256) as u32, l.nz.min(65535) as u32, 1], block: [256, 1, 1], shared: 0 };
        args.launch(&*self.rt, self.f.insert, launch)
    }

    /// Host-staged: whole planes go up, their halo rows and row padding zero as they always are.
    fn planes_in(&mut self, z0: usize, planes: usize, buf: &[f32]) -> Result<()> {
        self.end_capture()?;
        ensure!(self.half.is_none(), "the f16 step has no halo exchange (decomposed runs are f32)");
        let l = self.layout;
        ensure!(
            z0 + planes <= l.nz && buf.len() == planes * l.nx * l.ny,
            "halo planes {z0}..{} of {}",
            z0 + planes,
            l.nz
        );
        let staging = &mut self.snapshot_staging;
        staging.clear();
        staging.resize(planes * l.plane, 0.0);
        for (k, chunk) in buf.chunks_exact(l.nx * l.ny).enumerate() {
            for (iy, row) in chunk.chunks_exact(l.nx).enumerate() {
                let dst = k * l.plane + (iy + l.halo) * l.pitch + l.x_offset;
                staging[dst..dst + l.nx].copy_from_slice(row);
            }
        }
        let bytes: &[u8] = as_bytes(staging);
        self.rt.upload(self.cur.ptr() + ((l.halo + z0) * l.plane * 4) as DevicePtr, bytes)
    }

    fn wait(&mut self) -> Result<()> {
        self.end_capture()?;
        self.rt.synchronize()
    }

    fn device_field(&self) -> Option<DeviceField> {
        self.field_at(self.cur.ptr())
    }

    fn next_device_field(&self) -> Option<DeviceField> {
        let open = self.split.as_ref().is_some_and(|s| s.open);
        self.field_at(if open { self.prev.ptr() } else { self.cur.ptr() })
    }

    /// Zero fills queued on the stream (no host wait) and the two small tap tables uploaded anew.
    fn start_shot(&mut self, problem: &Problem) -> Result<()> {
        self.end_capture()?;
        ensure!(
            problem.layout == self.layout && problem.steps == self.trace_steps,
            "a shot must use the grid and steps the backend was opened with"
        );
        for b in [&self.cur, &self.prev] {
            b.zero()?;
        }
        if let Some(s) = &mut self.split {
            s.open = false;
        }
        if let Some(h) = &mut self.half {
            // The scale depends on the shot's source (its samples are scaled anew below).
            h.inc.zero()?;
            h.scale = problem.field_scale();
        }
        for c in self.cpml.iter().flat_map(|c| &c.axes) {
            for b in [&c.phi[0], &c.phi[1], &c.zeta] {
                b.zero()?;
            }
        }
        self.source = SourceTable::new(&self.rt, problem)?;
        self.receivers = ReceiverTable::new(&self.rt, &self.layout, &problem.receivers, problem.steps)?;
        self.steps_done = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{
        LayerPass, gap_in_interior_shape, march_segments, overlap, y_band, y_layers_fit, y_mode_band, y_mode_tiles,
        z_layer_planes, z_layer_window,
    };

    #[test]
    fn the_y_band_is_the_rows_of_the_tiles_that_hold_y_layer_rows() {
        for ny in 1..70 {
            for width in 1..=ny.min(24) {
                for tile_rows in 1..=16 {
                    let (lo, hi) = y_band(ny, width, tile_rows);
                    for y in 0..ny {
                        let y0 = y / tile_rows * tile_rows;
                        let holds = y0 < width || y0 + tile_rows > ny - width;
                        assert_eq!(y < lo || y >= hi, holds, "ny {ny} width {width} tiles {tile_rows} row {y}");
                    }
                }
            }
        }
        // marmousi-large (200 rows, 24-point layers) in 8-row tiles: rows 0-23 and 176-199.
        assert_eq!(y_band(200, 24, 8), (24, 176));
    }

    /// fused.cu's band_tile and the stores it guards, as the y mode's two launches map their
    /// tiles (fused_step_ylayers's of `band_tile` rows, fused_step's of `gap_tile` rows): every
    /// grid row is stored once, and every y-layer row by the y-layer kernel.
    #[test]
    fn the_y_mode_launches_store_every_row_once() {
        for ny in 1..80 {
            for width in 1..=ny.min(24) {
                for band_tile in 1..=16 {
                    for gap_tile in [1, 4, 6, 8, 12, 16, 24] {
                        let (lo, hi) = y_mode_band(ny, width, band_tile, gap_tile);
                        let hi_row = hi.max(lo);
                        let in_band = |y: i32| y < lo || y >= hi;
                        let (gap_tiles, band_tiles) = y_mode_tiles(ny, (lo, hi), band_tile, gap_tile);
                        let mut stored = vec![0; ny as usize];
                        // Launch tiles past the launch's own (a banded grid's overhang) store nothing;
                        // fused_step stores every row of its tiles.
                        for t in 0..gap_tiles as i32 + 3 {
                            let row0 = lo + t * gap_tile;
                            assert_eq!(row0 < hi_row, t < gap_tiles as i32, "ny {ny} width {width} {gap_tile}");
                            if row0 < hi_row {
                                assert!(row0 + gap_tile <= hi_row, "ny {ny} width {width}: a gap tile overhangs");
                                for y in row0..row0 + gap_tile {
                                    stored[y as usize] += 1;
                                }
                            }
                        }
                        let rows = (ny + band_tile - 1) / band_tile;
                        let (lo_t, hi_t) = (lo / band_tile, hi_row / band_tile);
                        for t in 0..band_tiles as i32 + 3 {
                            let owns = t < rows - (hi_t - lo_t);
                            assert_eq!(owns, t < band_tiles as i32, "ny {ny} width {width} tiles {band_tile}");
                            if owns {
                                let row0 = if t < lo_t { t } else { t - lo_t + hi_t } * band_tile;
                                for y in (row0..row0 + band_tile).filter(|&y| y < ny && in_band(y)) {
                                    stored[y as usize] += 1;
                                }
                            }
                        }
                        assert!(
                            stored.iter().all(|&n| n == 1),
                            "ny {ny} width {width} tiles {band_tile}/{gap_tile}: {stored:?}"
                        );
                        for y in (0..ny).filter(|&y| y < width || y >= ny - width) {
                            assert!(in_band(y), "ny {ny} width {width}: layer row {y} outside the band");
                        }
                    }
                }
            }
        }
        // marmousi-large (200 rows, 24-point layers), y-layer tiles of 8 rows, the interior's of 12:
        // the gap 24..176 shortened to 24..168 (6 tiles of 12), 7 y-layer tiles.
        assert_eq!(y_mode_band(200, 24, 8, 12), (24, 168));
        assert_eq!(y_mode_tiles(200, (24, 168), 8, 12), (12, 7));
        // The interior's 12-row tiles take marmousi-large's and 512^3's gaps; marmousi.toml's
        // (64 rows, 20-point layers: rows 24..40) would be lost whole, so the y-layer module's
        // 8-row fused_step takes it.
        assert!(gap_in_interior_shape(200, 24, 8, 12));
        assert!(gap_in_interior_shape(512, 20, 8, 12));
        assert!(!gap_in_interior_shape(64, 20, 8, 12));
        assert_eq!(y_mode_band(64, 20, 8, 8), y_band(64, 20, 8));
    }

    #[test]
    fn the_y_layers_go_in_the_pass_by_default() {
        for width in [1, 20, 24] {
            assert_eq!(LayerPass::for_grid(width), LayerPass::YLayers, "width {width}");
        }
        assert_eq!(LayerPass::for_grid(0), LayerPass::After, "no layers");
        assert!(y_layers_fit([960, 64, 240], 20, 4));
        assert!(!y_layers_fit([67, 45, 39], 3, 4), "rows of whole vectors only");
        assert!(!y_layers_fit([68, 33, 39], 17, 4), "the two layers overlap");
    }

    #[test]
    fn marches_split_where_the_last_wave_is_short() {
        // H200: 132 multiprocessors, 660 resident blocks; R = 4.
        // 512^3, 20-point layers: 1024 blocks, 1.55 waves; splitting adds a wave per segment.
        assert_eq!(march_segments(1024, 132, 20, 4), 1);
        // 960 x 64 x 240 (marmousi.toml): the y layers' 960 blocks (1.45 waves) into 2 (2.9 waves).
        assert_eq!(march_segments(960, 132, 20, 4), 2);
        // Its z layer under a free surface: 128 blocks, split as far as 4-point segments allow.
        assert_eq!(march_segments(128, 132, 20, 4), 5);
        // marmousi-large's y layers: 6000 blocks, 9.1 waves.
        assert_eq!(march_segments(6000, 132, 24, 4), 1);
        // Its z layer under a free surface: 600 vectors a row x 200 rows, 938 blocks (1.42 waves)
        // into 2 (2.84 waves of 16-point marches against 2 of 28).
        assert_eq!(march_segments(938, 132, 24, 4), 2);
        // Layers thinner than 8 points are never split.
        assert_eq!(march_segments(10, 132, 7, 4), 1);
    }

    /// layers.h's layer_of along z: 0 the low layer (where it absorbs), 1 the high one, None
    /// neither; the low one wins where they overlap.
    fn layer_of(z: usize, nz: usize, w: usize, low: bool) -> Option<usize> {
        if z < w {
            low.then_some(0)
        } else if z + w >= nz {
            Some(1)
        } else {
            None
        }
    }

    #[test]
    fn the_z_layer_launches_cover_each_layer_as_the_kernels_assign_it() {
        for nz in [1, 5, 30, 39, 40, 41, 512, 600] {
            for w in [0, 1, 3, 17, 20, 24] {
                for low in [true, false] {
                    let [lo, between, hi] = z_layer_planes(nz, w, low);
                    assert_eq!((lo.start, lo.end, between.end, hi.end), (0, between.start, hi.start, nz));
                    for z in 0..nz {
                        let expected = layer_of(z, nz, w, low);
                        let got = [&lo, &between, &hi].iter().position(|p| p.contains(&z));
                        assert_eq!(got, Some(expected.map_or(1, |h| 2 * h)), "nz {nz} w {w} low {low} z {z}");
                    }
                }
            }
        }
        // Equal chunks of at most 16 planes: 20 -> 10 + 10, 24 -> 12 + 12, 40 -> 14 + 14 + 12.
        assert_eq!([20, 24, 40, 16, 3].map(z_layer_window), [10, 12, 14, 16, 3]);
    }

    #[test]
    fn a_launch_meets_a_layer_on_the_planes_both_hold() {
        for (part, planes, expected) in [
            (0..20, 0..512, 0..20),
            (492..512, 0..300, 492..492),
            (492..512, 480..500, 492..500),
            (20..492, 100..200, 100..200),
            (0..0, 5..9, 5..5),
        ] {
            let got = overlap(&part, &planes);
            assert_eq!(got, expected, "{part:?} among {planes:?}");
            assert!(got.clone().all(|z| part.contains(&z) && planes.contains(&z)));
        }
    }
}
