//! GPU backends: one solver over a small runtime trait, implemented by CUDA (cudarc) and HIP.
//!
//! [`GpuRuntime`] is the little a vendor must provide (memory, run-time compilation, launches,
//! events), byte-oriented so that CUDA and HIP implement it the same way. [`GpuSolver`] does the
//! rest once for both: it allocates every buffer when it opens, and each [`Backend::step`] only
//! enqueues kernels on the runtime's stream (free surface, the interior update as one fused kernel
//! or three passes plus an update, CPML memory variables and correction, source, receivers), in the order
//! of `backend`'s module docs. The host waits only for snapshots, traces and step timings.
//! Kernels come from `kernels/` (one source for both vendors), specialised per radius, block shape,
//! vector width and boundary, and cached on disk keyed by source, options and architecture.
//!
//! For benchmarks: [`bench_step`] times an interior [`Operator`] (fused step, three-pass step,
//! Laplacian only) on a random state without a configuration, [`measure_ceiling`] and
//! [`ceiling_cached`] give the device's STREAM-like copy and 3-read-1-write ceilings, and
//! `problem::step_bytes` is the effective-bandwidth numerator (see kernels/NOTES.md).

pub mod autotune;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "hip")]
pub mod hip;

use super::{Backend, DeviceInfo};
use crate::boundary::{Boundary, BoundaryKind};
use crate::config::KernelChoice;
use crate::grid::{Layout, Section, for_each_section};
use crate::numerics::{Ricker, Stencil};
use crate::problem::{PointSource, Problem, Tap};
use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::ffi::c_void;
use std::path::PathBuf;

/// A device address.
pub type DevicePtr = u64;

/// What a GPU vendor's runtime provides to [`GpuSolver`]. All work goes to one in-order stream.
pub trait GpuRuntime {
    type Module;
    type Function: Copy;
    type Event;

    /// "cuda" or "hip".
    fn vendor(&self) -> &'static str;
    fn device_name(&self) -> String;
    /// Compilation target, e.g. "sm_90" or "gfx90a".
    fn arch(&self) -> String;
    fn multiprocessors(&self) -> u32;
    /// (free, total) device memory in bytes.
    fn mem_info(&self) -> Result<(usize, usize)>;
    fn alloc(&self, bytes: usize) -> Result<DevicePtr>;
    /// # Safety
    /// `ptr` comes from `alloc` and is freed once; no queued work still uses it after this call.
    unsafe fn free(&self, ptr: DevicePtr);
    /// Enqueues a zero fill of `bytes` bytes.
    fn zero(&self, ptr: DevicePtr, bytes: usize) -> Result<()>;
    /// Copies host bytes to the device after the stream's queued work (returns when done).
    fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;
    /// Copies device bytes to the host after the stream's queued work (returns when done).
    fn download(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()>;
    /// Compiler flags the runtime adds itself (part of the kernel cache key).
    fn compiler_flags(&self) -> Vec<String> {
        Vec::new()
    }
    /// Compiles one source into a loadable binary image for this device.
    fn compile(&self, source: &str, name: &str, options: &[String]) -> Result<Vec<u8>>;
    fn load_module(&self, image: &[u8]) -> Result<Self::Module>;
    fn function(&self, module: &Self::Module, name: &str) -> Result<Self::Function>;
    /// Enqueues a kernel; `args[i]` points at the value of the kernel's i-th parameter.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameter list in number, order and type.
    unsafe fn launch(
        &self,
        f: Self::Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &mut [*mut c_void],
    ) -> Result<()>;
    fn event(&self) -> Result<Self::Event>;
    fn record(&self, event: &Self::Event) -> Result<()>;
    /// Milliseconds between two recorded events (both must have completed).
    fn elapsed_ms(&self, start: &Self::Event, end: &Self::Event) -> Result<f32>;
    fn synchronize(&self) -> Result<()>;
    /// Lets a kernel use `bytes` of dynamic shared memory (beyond the default 48 KB where needed).
    fn allow_dynamic_shared(&self, f: Self::Function, bytes: u32) -> Result<()> {
        let _ = (f, bytes);
        Ok(())
    }
    /// Blocks of `threads` threads and `shared_bytes` of dynamic shared memory that fit on one
    /// multiprocessor at once (None when the runtime cannot tell).
    fn resident_blocks(&self, f: Self::Function, threads: u32, shared_bytes: u32) -> Option<u32> {
        let _ = (f, threads, shared_bytes);
        None
    }
    /// Compiler resources of a kernel (registers, spills, shared memory), for reports.
    fn function_info(&self, f: Self::Function) -> String {
        let _ = f;
        String::new()
    }
}

/// The kernel sources, one file per kernel, assembled behind the prelude for run-time compilation.
pub mod sources {
    pub const PRELUDE: &str = include_str!("../../../kernels/prelude.h");
    pub const FUSED: &str = include_str!("../../../kernels/fused.cu");
    pub const FUSED_RING: &str = include_str!("../../../kernels/fused_ring.cu");
    pub const PASS_X: &str = include_str!("../../../kernels/pass_x.cu");
    pub const PASS_Y: &str = include_str!("../../../kernels/pass_y.cu");
    pub const PASS_Z: &str = include_str!("../../../kernels/pass_z.cu");
    pub const UPDATE: &str = include_str!("../../../kernels/update.cu");
    pub const CPML: &str = include_str!("../../../kernels/cpml.cu");
    pub const FREE_SURFACE: &str = include_str!("../../../kernels/free_surface.cu");
    pub const SOURCES: &str = include_str!("../../../kernels/sources.cu");
    pub const SECTION: &str = include_str!("../../../kernels/section.cu");
    pub const STREAM: &str = include_str!("../../../kernels/stream.cu");
    pub const FINITE_CHECK: &str = include_str!("../../../kernels/finite_check.cu");

    /// Every kernel of a step (and the run's blow-up check).
    pub const STEP: [&str; 11] =
        [FUSED, PASS_X, PASS_Y, PASS_Z, UPDATE, CPML, FREE_SURFACE, SOURCES, SECTION, STREAM, FINITE_CHECK];

    /// The fused kernel's source for a tuning (both define `fused_step`).
    pub fn fused(t: &super::Tuning) -> &'static str {
        if t.tile_ring == 1 { FUSED_RING } else { FUSED }
    }

    /// [`STEP`] with the fused kernel `t` asks for.
    pub fn step(t: &super::Tuning) -> [&'static str; 11] {
        let mut s = STEP;
        s[0] = fused(t);
        s
    }

    /// The prelude followed by `parts`, as one translation unit.
    pub fn assemble(parts: &[&str]) -> String {
        let mut s = PRELUDE.replace("#pragma once", "");
        for p in parts {
            s.push('\n');
            s.push_str(p);
        }
        s
    }
}

pub use super::tuning::Tuning;

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

/// Where compiled kernels and device measurements are kept: $SEISMIC_CACHE_DIR, else
/// $XDG_CACHE_HOME/seismic-run, else ~/.cache/seismic-run (else a temporary directory).
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SEISMIC_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("seismic-run");
    }
    if let Some(h) = std::env::var_os("HOME") {
        return PathBuf::from(h).join(".cache").join("seismic-run");
    }
    std::env::temp_dir().join("seismic-run")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compiles (or reads back from the disk cache) a module of `parts` with `options`.
pub fn load_kernels<Rt: GpuRuntime>(rt: &Rt, parts: &[&str], options: &[String]) -> Result<Rt::Module> {
    let source = sources::assemble(parts);
    let mut h = Sha256::new();
    for s in [rt.vendor(), &rt.arch(), &rt.compiler_flags().join(" "), &options.join(" "), &source] {
        h.update(s.as_bytes());
        h.update([0u8]);
    }
    let key = hex(&h.finalize()[..12]);
    let dir = cache_dir();
    let path = dir.join(format!("{}-{}-{key}.bin", rt.vendor(), rt.arch()));
    if let Ok(image) = std::fs::read(&path)
        && let Ok(m) = rt.load_module(&image)
    {
        return Ok(m);
    }
    let image = rt.compile(&source, "seismic_kernels.cu", options)?;
    // The cache is an optimisation: a read-only or missing directory only costs a recompile.
    if std::fs::create_dir_all(&dir).is_ok() {
        let tmp = dir.join(format!(".{key}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, &image).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
    rt.load_module(&image)
}

/// Compile-time parameters of a module. SEISMIC_KERNEL_DEFS adds `-D` options for experiments
/// (e.g. "-DDEPTH=2 -DMIN_BLOCKS=3", see kernels/fused.cu).
fn kernel_options(radius: usize, t: &Tuning, sponge: bool, laplacian_only: bool) -> Vec<String> {
    let t = &t.effective(radius);
    let mut o = vec![
        format!("-DRADIUS={radius}"),
        format!("-DBLOCK_X={}", t.block_x),
        format!("-DBLOCK_Y={}", t.block_y),
        format!("-DVEC={}", t.vec),
        format!("-DSPONGE={}", sponge as u32),
        format!("-DLAPLACIAN_ONLY={}", laplacian_only as u32),
        format!("-DSTAGES={}", t.stages),
        format!("-DMIN_BLOCKS={}", t.min_blocks),
        format!("-DUNROLL_Z={}", t.unroll_z),
        format!("-DROWS={}", t.rows),
        format!("-DORDER={}", t.order),
        format!("-DHALO_RING={}", t.halo_ring),
    ];
    if let Ok(extra) = std::env::var("SEISMIC_KERNEL_DEFS") {
        o.extend(extra.split_whitespace().filter(|d| d.starts_with("-D")).map(String::from));
    }
    o
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain-old-data slices (f32, u32, u64) viewed as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn as_bytes_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as as_bytes; every bit pattern is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

/// Kernel argument list: pointers to each value, valid until the end of the enclosing statement.
macro_rules! kargs {
    ($($a:expr),* $(,)?) => { &mut [$( (&$a) as *const _ as *mut c_void ),*] };
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct StencilWeights {
    cx: [f32; 9],
    cy: [f32; 9],
    cz: [f32; 9],
    centre: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct AxisWeights {
    c1: [f32; 9],
    c2: [f32; 9],
}

/// Mirrors cpml.cu's `SlabGeom` (both sides assert its size).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SlabGeom {
    width: i32,
    n: [i32; 3],
    e: [i32; 3],
    half_first: i32,
    pitch: i64,
    plane: i64,
}
const _: () = assert!(std::mem::size_of::<SlabGeom>() == 48);

struct Kernels<F> {
    fused: F,
    pass_x: F,
    pass_y: F,
    pass_z: F,
    update: F,
    /// cpml_x, cpml_y, cpml_z.
    cpml: [F; 3],
    free_surface: F,
    inject: F,
    record: F,
    section: F,
    finite_check: F,
}

/// One axis's CPML state on the device. psi is double-buffered: a step reads the previous psi
/// from `psi[0]` and writes the new one to `psi[1]` (cpml.cu recomputes the neighbours' new psi
/// from the old), then the two swap.
struct CpmlAxisDev {
    axis: usize,
    geom: SlabGeom,
    psi: [DevicePtr; 2],
    zeta: DevicePtr,
    a: DevicePtr,
    b: DevicePtr,
}

/// Shortest automatic window of the fused step with banded order: short windows keep neighbouring
/// blocks in step, so the halo rows and priming planes they share are still in L2, but every chunk
/// re-reads 2R priming planes through L2. Where the two balance depends on the GPU: on an H100
/// (R = 4, with the L2 hints) 512^3 runs at 92.0 / 93.0 / 92.4% of 3R1W with 4 / 6 / 8 planes and
/// 1024^3 at 90.1 / 90.1 / 89.7%, while on an H200 4 planes lose 17% against 12 at 512^3. 8 planes
/// are within 0.6 points of the best on the H100; the autotuner finds each GPU's own.
const FUSED_SHORTEST: usize = 8;
/// The Laplacian-only operator moves half the bytes per point and gains from longer windows
/// (H100, R = 4: 76.8% of copy at 12 planes, 74.9% at 8, 71.1% at 4; 1024^3 76.3 / 72.9 / 69.9).
const LAPLACIAN_SHORTEST: usize = 12;

/// z-planes per block of the fused kernel for `tiles` xy tiles over `nz` planes when `slots` blocks
/// run at once. Blocks all take about the same time, so a launch runs in waves of `slots` blocks;
/// the window minimises waves x (window + priming), `priming` standing for the queue's 2R planes
/// every block loads first, among windows of `shortest` to 48 planes (ties: the shortest).
/// Measured on an H200 (kernels/NOTES.md): filling the last wave is what counts on small grids
/// (256^3: 77% of 3R1W with 6 chunks in one wave, 63-71% with 1.3-2.7 waves), while windows past
/// ~48 planes lose on every grid (1024^3: 81.5% at 40 planes, 79.4% at 128, 77% at 342), as
/// neighbouring blocks drift apart and stop sharing their halo rows in L2.
fn best_window(tiles: usize, nz: usize, slots: usize, priming: usize, shortest: usize) -> u32 {
    let (tiles, nz, slots) = (tiles.max(1), nz.max(1), slots.max(1));
    let mut best = (usize::MAX, nz.min(48));
    for chunks in (1..=nz).rev() {
        let w = nz.div_ceil(chunks);
        if w < shortest.min(nz) || w > 48 || (chunks < nz && nz.div_ceil(chunks + 1) == w) {
            continue; // out of range, or a window already costed
        }
        let cost = (tiles * nz.div_ceil(w)).div_ceil(slots) * (w + priming);
        if cost < best.0 {
            best = (cost, w);
        }
    }
    best.1 as u32
}

/// Elements added after each field beyond `Layout::len`, so that tiles of up to 32 rows overhanging
/// the last plane still read inside the allocation.
fn field_extra(layout: &Layout) -> usize {
    64 * layout.pitch + 4096
}

/// Device bytes a problem needs with this kernel (estimated before anything is allocated).
pub fn estimate_bytes(problem: &Problem, kernel: KernelChoice) -> u64 {
    let l = &problem.layout;
    let field = (l.len() + field_extra(l)) as u64 * 4;
    let fields = if kernel == KernelChoice::ThreePass { 4 } else { 3 };
    let shape = problem.shape();
    let slabs: u64 = if problem.boundary.kind == BoundaryKind::Cpml {
        problem.boundary.slabs(shape).iter().map(|s| s.len() as u64 * 12).sum()
    } else {
        0
    };
    let traces = (problem.receivers.len() * problem.steps) as u64 * 4;
    fields * field + slabs + traces + (1 << 20)
}

/// The GPU solver over any [`GpuRuntime`]: every buffer allocated once, steps only enqueue.
pub struct GpuSolver<Rt: GpuRuntime> {
    kernel: KernelChoice,
    layout: Layout,
    shape: [usize; 3],
    radius: usize,
    tuning: Tuning,
    window: u32,
    /// z-planes per block of the Laplacian-only operator (its own automatic choice).
    laplacian_window: u32,
    /// Fused blocks the device runs at once.
    resident_blocks: u32,
    /// Blocks per band of the banded grid-index order: half the resident blocks, or
    /// SEISMIC_BAND_BLOCKS (an experiment knob, read once here, not in the time-step loop).
    band_blocks: u32,
    free_surface: bool,
    weights: StencilWeights,
    axis_weights: [AxisWeights; 3],
    field_len: usize,
    cur: DevicePtr,
    prev: DevicePtr,
    vel: DevicePtr,
    lap: DevicePtr,
    damp: [DevicePtr; 3],
    cpml: Vec<CpmlAxisDev>,
    src_offsets: DevicePtr,
    src_weights: DevicePtr,
    src_samples: DevicePtr,
    src_taps: usize,
    nsamples: usize,
    rec_offsets: DevicePtr,
    rec_weights: DevicePtr,
    rec_first: DevicePtr,
    nrec: usize,
    traces: DevicePtr,
    trace_steps: usize,
    steps_done: usize,
    allocations: Vec<DevicePtr>,
    events: Vec<Rt::Event>,
    /// Host copy of the interior z-planes for snapshots (sized at the first one, then reused).
    snapshot_staging: Vec<f32>,
    /// Device buffer a plane snapshot is gathered into (allocated at the first plane snapshot).
    section_staging: (DevicePtr, usize),
    /// The blow-up check's flag, one u32 (allocated at the first check).
    finite_flag: DevicePtr,
    /// The Laplacian-only build (loaded at its first timing) and its dynamic shared memory.
    laplacian: Option<(Rt::Module, Rt::Function, u32)>,
    f: Kernels<Rt::Function>,
    /// Keeps the functions in `f` valid.
    _module: Rt::Module,
    rt: Rt,
}

impl<Rt: GpuRuntime> Drop for GpuSolver<Rt> {
    fn drop(&mut self) {
        let _ = self.rt.synchronize();
        for &p in &self.allocations {
            // SAFETY: each allocation is freed once, after the stream has drained.
            unsafe { self.rt.free(p) };
        }
    }
}

impl<Rt: GpuRuntime> GpuSolver<Rt> {
    /// Allocates and uploads everything the problem needs; errors (before allocating) if it does
    /// not fit in the device's free memory.
    pub fn new(rt: Rt, problem: &Problem, kernel: KernelChoice, tuning: Tuning) -> Result<Self> {
        let layout = problem.layout;
        let shape = problem.shape();
        let r = problem.stencil.radius;
        ensure!(layout.halo == r, "layout halo must equal the stencil radius");
        let tuning = tuning.effective(r);
        tuning.check(r)?;
        ensure!(
            shape.iter().all(|&n| n < i32::MAX as usize / 2),
            "grid {shape:?} is too large for 32-bit indices along an axis"
        );
        let need = estimate_bytes(problem, kernel);
        let (free, total) = rt.mem_info()?;
        let margin = 128u64 << 20;
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        if need + margin > free as u64 {
            bail!(
                "grid.shape = [{}, {}, {}] (radius {r}, {} kernel) needs {:.2} GiB of GPU memory, but {} has only {:.2} GiB \
                 free of {:.2} GiB: use a smaller grid or the CPU backend",
                shape[0],
                shape[1],
                shape[2],
                kernel_name(kernel),
                gib(need),
                rt.device_name(),
                gib(free as u64),
                gib(total as u64)
            );
        }
        let b = &problem.boundary;
        let sponge = b.kind == BoundaryKind::Sponge;
        let module = load_kernels(&rt, &sources::step(&tuning), &kernel_options(r, &tuning, sponge, false))?;
        let fun = |n: &str| rt.function(&module, n);
        let fused = fun("fused_step")?;
        rt.allow_dynamic_shared(fused, tuning.dynamic_shared_bytes(r, false))?;
        let f = Kernels {
            fused,
            pass_x: fun("pass_x")?,
            pass_y: fun("pass_y")?,
            pass_z: fun("pass_z")?,
            update: fun("update")?,
            cpml: [fun("cpml_x")?, fun("cpml_y")?, fun("cpml_z")?],
            free_surface: fun("free_surface")?,
            inject: fun("inject_source")?,
            record: fun("record_receivers")?,
            section: fun("extract_section")?,
            finite_check: fun("finite_check")?,
        };

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

        let mut s = GpuSolver {
            kernel,
            layout,
            shape,
            radius: r,
            tuning,
            window: 0,
            laplacian_window: 0,
            resident_blocks: 0,
            band_blocks: 0,
            free_surface: b.free_surface,
            weights,
            axis_weights,
            field_len: layout.len() + field_extra(&layout),
            cur: 0,
            prev: 0,
            vel: 0,
            lap: 0,
            damp: [0; 3],
            cpml: Vec::new(),
            src_offsets: 0,
            src_weights: 0,
            src_samples: 0,
            src_taps: 0,
            nsamples: 0,
            rec_offsets: 0,
            rec_weights: 0,
            rec_first: 0,
            nrec: 0,
            traces: 0,
            trace_steps: problem.steps,
            steps_done: 0,
            allocations: Vec::new(),
            events: Vec::new(),
            snapshot_staging: Vec::new(),
            section_staging: (0, 0),
            finite_flag: 0,
            laplacian: None,
            f,
            _module: module,
            rt,
        };
        let t = &s.tuning;
        let per_sm = s.rt.resident_blocks(s.f.fused, t.block_x * t.block_y, t.dynamic_shared_bytes(r, false));
        s.resident_blocks = s.rt.multiprocessors() * per_sm.unwrap_or(t.min_blocks).max(1);
        s.band_blocks = std::env::var("SEISMIC_BAND_BLOCKS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(s.resident_blocks / 2)
            .max(1);
        s.set_window(s.choose_window(FUSED_SHORTEST));
        // Always automatic: a tuned window is the full step's (H100, 512^3: the tuner's 4 planes
        // gave the Laplacian-only operator 73.4% of copy, 12 and 16 planes 90.6% and 89.4%).
        s.laplacian_window = s.guarded_window(s.auto_window(LAPLACIAN_SHORTEST));
        let field_bytes = s.field_len * 4;
        s.cur = s.alloc_zeroed(field_bytes)?;
        s.prev = s.alloc_zeroed(field_bytes)?;
        s.vel = s.alloc_zeroed(field_bytes)?;
        if kernel == KernelChoice::ThreePass {
            s.lap = s.alloc_zeroed(field_bytes)?;
        }
        let vel2dt2: Vec<f32> = problem.vel2dt2().into_iter().map(|v| v as f32).collect();
        let mut padded = vec![0.0f32; layout.len()];
        layout.scatter(&vel2dt2, &mut padded);
        drop(vel2dt2);
        s.rt.upload(s.vel, as_bytes(&padded))?;

        if sponge {
            // Padded with ones so that lanes and rows past the grid read defined values.
            for (a, profile) in b.profiles.iter().enumerate() {
                let mut g: Vec<f32> = profile.damp.iter().map(|&v| v as f32).collect();
                g.resize(shape[a] + 256, 1.0);
                s.damp[a] = s.alloc_upload(&g)?;
            }
        }
        if b.kind == BoundaryKind::Cpml {
            for slab in b.slabs(shape) {
                if slab.is_empty() {
                    continue;
                }
                let a = slab.axis;
                let e = slab.extent();
                // The top layer of a free surface's axis has a = 0: psi and zeta stay zero there.
                let half_first = (a == 2 && b.free_surface) as i32;
                let geom = SlabGeom {
                    width: slab.width as i32,
                    n: shape.map(|n| n as i32),
                    e: e.map(|n| n as i32),
                    half_first,
                    pitch: layout.pitch as i64,
                    plane: layout.plane as i64,
                };
                let pa: Vec<f32> = b.profiles[a].a.iter().map(|&v| v as f32).collect();
                let pb: Vec<f32> = b.profiles[a].b.iter().map(|&v| v as f32).collect();
                let dev = CpmlAxisDev {
                    axis: a,
                    geom,
                    psi: [s.alloc_zeroed(slab.len() * 4)?, s.alloc_zeroed(slab.len() * 4)?],
                    zeta: s.alloc_zeroed(slab.len() * 4)?,
                    a: s.alloc_upload(&pa)?,
                    b: s.alloc_upload(&pb)?,
                };
                s.cpml.push(dev);
            }
        }
        let offset = |t: &Tap| layout.index(t.point[0] as isize, t.point[1] as isize, t.point[2] as isize) as u64;
        let src = &problem.source;
        if !src.taps.is_empty() && !src.samples.is_empty() {
            let offs: Vec<u64> = src.taps.iter().map(offset).collect();
            let w: Vec<f32> =
                src.taps.iter().zip(&offs).map(|(t, &o)| (t.weight * padded[o as usize] as f64) as f32).collect();
            let samples: Vec<f32> = src.samples.iter().map(|&v| v as f32).collect();
            s.src_taps = offs.len();
            s.nsamples = samples.len();
            s.src_offsets = s.alloc_upload(&offs)?;
            s.src_weights = s.alloc_upload(&w)?;
            s.src_samples = s.alloc_upload(&samples)?;
        }
        if !problem.receivers.is_empty() {
            let mut offs = Vec::new();
            let mut w = Vec::new();
            let mut first = vec![0u32];
            for rcv in &problem.receivers {
                for t in &rcv.taps {
                    offs.push(offset(t));
                    w.push(t.weight as f32);
                }
                first.push(offs.len() as u32);
            }
            s.nrec = problem.receivers.len();
            s.rec_offsets = s.alloc_upload(&offs)?;
            s.rec_weights = s.alloc_upload(&w)?;
            s.rec_first = s.alloc_upload(&first)?;
            s.traces = s.alloc_zeroed(s.nrec * s.trace_steps * 4)?;
        }
        s.events = (0..=problem.steps).map(|_| s.rt.event()).collect::<Result<_>>()?;
        s.rt.synchronize()?;
        Ok(s)
    }

    fn alloc_zeroed(&mut self, bytes: usize) -> Result<DevicePtr> {
        let p = self.rt.alloc(bytes)?;
        self.allocations.push(p);
        self.rt.zero(p, bytes)?;
        Ok(p)
    }

    fn alloc_upload<T: Copy>(&mut self, data: &[T]) -> Result<DevicePtr> {
        let bytes = as_bytes(data);
        let p = self.rt.alloc(bytes.len())?;
        self.allocations.push(p);
        self.rt.upload(p, bytes)?;
        Ok(p)
    }

    /// z-planes per fused block: the tuning's window, or where it is 0 the automatic one.
    fn choose_window(&self, shortest_banded: usize) -> u32 {
        if self.tuning.window > 0 { self.tuning.window } else { self.auto_window(shortest_banded) }
    }

    /// The automatic z-window: [`best_window`] for the blocks that fit on the device at once;
    /// with banded order (3) the planes a chunk primes with come from L2 (its band's previous
    /// chunk ran alongside), so priming costs nothing and windows down to `shortest_banded` planes
    /// are allowed ([`FUSED_SHORTEST`], [`LAPLACIAN_SHORTEST`]).
    fn auto_window(&self, shortest_banded: usize) -> u32 {
        let t = &self.tuning;
        let [nx, ny, nz] = self.shape;
        let tiles = nx.div_ceil(t.fused_tile_x()) * ny.div_ceil(t.fused_tile_y() as usize);
        // The tile ring copies R + stages whole tiles (halos included) before a chunk's first plane,
        // through the ring's few slots, so its chunks must be longer (H100, R = 7, 512^3: 48.9% of
        // 3R1W with 4-plane windows, 86.7% with the tuner's 64).
        let shortest_banded = if t.tile_ring == 1 { shortest_banded.max(4 * self.radius) } else { shortest_banded };
        if t.order == 3 {
            best_window(tiles, nz, self.resident_blocks as usize, 0, shortest_banded)
        } else {
            best_window(tiles, nz, self.resident_blocks as usize, self.radius, 16)
        }
    }

    /// Compiler resources of the interior kernels, for reports.
    pub fn kernel_info(&self) -> String {
        let mut parts = vec![format!("fused: {}", self.rt.function_info(self.f.fused))];
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

    pub fn tuning(&self) -> Tuning {
        Tuning { window: self.window, ..self.tuning }
    }

    /// The launch shape `op` runs with: the Laplacian-only operator has its own ring depth and
    /// z-window.
    pub fn operator_tuning(&self, op: Operator) -> Tuning {
        match op {
            Operator::Laplacian => Tuning { window: self.laplacian_window, ..self.tuning.for_laplacian(self.radius) },
            _ => self.tuning(),
        }
    }

    fn origin(&self, p: DevicePtr) -> DevicePtr {
        p + self.layout.origin() as u64 * 4
    }

    /// Sets p^n and p^{n-1} from dense (nz, ny, nx) arrays (tests, benchmarks).
    pub fn set_state(&mut self, current: &[f32], previous: &[f32]) -> Result<()> {
        let mut field = vec![0.0f32; self.layout.len()];
        self.layout.scatter(current, &mut field);
        self.rt.upload(self.cur, as_bytes(&field))?;
        self.layout.scatter(previous, &mut field);
        self.rt.upload(self.prev, as_bytes(&field))
    }

    /// One snapshot section into `out`: a plane is gathered on the device and only its points come
    /// down; the volume comes down whole.
    fn snapshot_section(&mut self, section: &Section, out: &mut [f32]) -> Result<()> {
        let Some((n0, n1, first, s0, s1)) = section.plane_lines(&self.layout) else {
            return self.snapshot(out);
        };
        if self.section_staging.1 < n0 * n1 {
            self.section_staging = (self.alloc_zeroed(n0 * n1 * 4)?, n0 * n1);
        }
        let (field, dense) = (self.cur + (first * 4) as DevicePtr, self.section_staging.0);
        let (n0i, n1i, s0, s1) = (n0 as i32, n1 as i32, s0 as i64, s1 as i64);
        // SAFETY: matches extract_section's parameters; the plane lies inside the field.
        unsafe {
            self.rt.launch(
                self.f.section,
                [n0.div_ceil(256) as u32, n1.min(65535) as u32, 1],
                [256, 1, 1],
                0,
                kargs![field, dense, n0i, n1i, s0, s1],
            )?;
        }
        self.rt.download(dense, as_bytes_mut(out))
    }

    /// Sets the z-window of the fused step and of the Laplacian-only operator ([`Self::guarded_window`]).
    pub(crate) fn set_window(&mut self, window: u32) {
        self.window = self.guarded_window(window);
        self.laplacian_window = self.window;
    }

    /// Sets the z-window `op` runs with (0: its automatic choice), leaving the other operator's.
    pub(crate) fn set_operator_window(&mut self, op: Operator, window: u32) {
        let shortest = if op == Operator::Laplacian { LAPLACIAN_SHORTEST } else { FUSED_SHORTEST };
        let w = self.guarded_window(if window == 0 { self.auto_window(shortest) } else { window });
        match op {
            Operator::Laplacian => self.laplacian_window = w,
            _ => self.window = w,
        }
    }

    /// `window`, lengthened where needed to keep the grid's z dimension within the 65535 blocks
    /// every GPU allows (only extremely deep grids need it; past the whole depth a longer window
    /// changes nothing, so the search stops there).
    fn guarded_window(&self, window: u32) -> u32 {
        let nz = self.shape[2] as u32;
        let mut w = window.max(1);
        while self.fused_grid(w)[2] > 65535 && w < nz {
            w = w.saturating_mul(2).min(nz);
        }
        w
    }

    /// The fused kernel's grid: x tiles, y tiles (swapped with grid-index order 2), z-chunks; with
    /// order 3, x tiles, tile rows per band, z-chunks x bands (bands of about half the blocks that
    /// fit on the device at once, so that two chunks of a band run together).
    fn fused_grid(&self, window: u32) -> [u32; 3] {
        let [nx, ny, nz] = self.shape;
        let tx = nx.div_ceil(self.tuning.fused_tile_x()) as u32;
        let ty = ny.div_ceil(self.tuning.fused_tile_y() as usize) as u32;
        let tz = (nz as u32).div_ceil(window);
        match self.tuning.order {
            2 => [ty, tx, tz],
            3 => {
                // One band when the whole plane's tiles fit at once (then order 3 is order 0).
                let band = if tx * ty <= self.resident_blocks { ty } else { (self.band_blocks / tx).clamp(1, ty) };
                [tx, band, tz * ty.div_ceil(band)]
            }
            _ => [tx, ty, tz],
        }
    }

    fn grid_xy(&self) -> (u32, u32) {
        let [nx, ny, _] = self.shape;
        (nx.div_ceil(self.tuning.tile_x()) as u32, ny.div_ceil(self.tuning.block_y as usize) as u32)
    }

    /// Enqueues the interior update (or L p into `out` with the Laplacian-only kernel).
    fn launch_interior(&self, op: Operator, out: DevicePtr) -> Result<()> {
        let [nx, ny, nz] = self.shape.map(|n| n as i32);
        let (pitch, plane) = (self.layout.pitch as i64, self.layout.plane as i64);
        let (cur, outp, vel) = (self.origin(self.cur), self.origin(out), self.origin(self.vel));
        let (gx, gy, gz) = (self.damp[0], self.damp[1], self.damp[2]);
        let w = self.weights;
        let (bx, by) = self.grid_xy();
        let block = [32, self.tuning.block_y, 1];
        let window = if op == Operator::Laplacian { self.laplacian_window } else { self.window };
        let grid = self.fused_grid(window);
        let window = window as i32;
        let fused = |f: Rt::Function, shared: u32| {
            // SAFETY: matches fused_step's parameters.
            unsafe {
                self.rt.launch(
                    f,
                    grid,
                    [self.tuning.block_x, self.tuning.block_y, 1],
                    shared,
                    kargs![cur, outp, vel, gx, gy, gz, w, nx, ny, nz, pitch, plane, window],
                )
            }
        };
        match op {
            Operator::Fused => fused(self.f.fused, self.tuning.dynamic_shared_bytes(self.radius, false)),
            Operator::Laplacian => {
                let (_, f, shared) = self.laplacian.as_ref().context("Laplacian kernel not loaded")?;
                fused(*f, *shared)
            }
            Operator::ThreePass => {
                let lap = self.origin(self.lap);
                ensure!(self.lap != 0, "three-pass scratch field not allocated");
                let wm = 64i32;
                // SAFETY: each argument list matches its kernel's parameters.
                unsafe {
                    self.rt.launch(
                        self.f.pass_x,
                        [bx, by, nz as u32],
                        block,
                        0,
                        kargs![cur, lap, w, nx, ny, nz, pitch, plane],
                    )?;
                    self.rt.launch(
                        self.f.pass_y,
                        [bx, (nz as u32).div_ceil(self.tuning.block_y), (ny as u32).div_ceil(wm as u32)],
                        block,
                        0,
                        kargs![cur, lap, w, nx, ny, nz, pitch, plane, wm],
                    )?;
                    self.rt.launch(
                        self.f.pass_z,
                        [bx, by, (nz as u32).div_ceil(wm as u32)],
                        block,
                        0,
                        kargs![cur, lap, w, nx, ny, nz, pitch, plane, wm],
                    )?;
                    self.rt.launch(
                        self.f.update,
                        [bx, by, nz as u32],
                        block,
                        0,
                        kargs![cur, outp, vel, lap, gx, gy, gz, nx, ny, nz, pitch, plane],
                    )
                }
            }
        }
    }

    /// Enqueues the CPML update of every axis after the interior's (x, then y, then z, as the CPU
    /// reference adds them), then swaps each axis's psi buffers.
    fn launch_cpml(&mut self) -> Result<()> {
        let (cur, out, vel) = (self.origin(self.cur), self.origin(self.prev), self.origin(self.vel));
        for c in &mut self.cpml {
            let w = self.axis_weights[c.axis];
            let g = c.geom;
            // cpml.cu: blocks of 32 lines across the axis (x over the first other axis), y over
            // the layers' segments of 32 points, z over the second other axis.
            let (u, v) = match c.axis {
                0 => (g.n[1], g.n[2]),
                1 => (g.n[0], g.n[2]),
                _ => (g.n[0], g.n[1]),
            };
            let layers = 2 - g.half_first as u32;
            let grid = [(u as u32).div_ceil(32), layers * (g.width as u32).div_ceil(32), (v as u32).min(65535)];
            let (psi_in, psi_out) = (c.psi[0], c.psi[1]);
            // SAFETY: matches cpml_x / cpml_y / cpml_z; the slab lies inside the field.
            unsafe {
                self.rt.launch(
                    self.f.cpml[c.axis],
                    grid,
                    [256, 1, 1],
                    0,
                    kargs![cur, out, vel, psi_in, psi_out, c.zeta, c.a, c.b, w, g],
                )?;
            }
            c.psi.swap(0, 1);
        }
        Ok(())
    }

    /// Enqueues step `n` (order of `backend`'s module docs), then swaps p^n and p^{n+1}.
    fn enqueue_step(&mut self, n: usize) -> Result<()> {
        let [nx, ny, _] = self.shape.map(|v| v as i32);
        if self.free_surface {
            let cur = self.origin(self.cur);
            let (pitch, plane) = (self.layout.pitch as i64, self.layout.plane as i64);
            // SAFETY: matches free_surface.
            unsafe {
                self.rt.launch(
                    self.f.free_surface,
                    [(nx as u32).div_ceil(32), (ny as u32).div_ceil(8), 1],
                    [32, 8, 1],
                    0,
                    kargs![cur, nx, ny, pitch, plane],
                )?;
            }
        }
        let op = if self.kernel == KernelChoice::ThreePass { Operator::ThreePass } else { Operator::Fused };
        self.launch_interior(op, self.prev)?;
        self.launch_cpml()?;
        let step = n as i32;
        if self.src_taps > 0 && n < self.nsamples {
            let (ntaps, nsamples) = (self.src_taps as i32, self.nsamples as i32);
            // SAFETY: matches inject_source.
            unsafe {
                self.rt.launch(
                    self.f.inject,
                    [(ntaps as u32).div_ceil(32), 1, 1],
                    [32, 1, 1],
                    0,
                    kargs![self.prev, self.src_offsets, self.src_weights, ntaps, self.src_samples, nsamples, step],
                )?;
            }
        }
        if self.nrec > 0 && n < self.trace_steps {
            let (nrec, steps) = (self.nrec as i32, self.trace_steps as i32);
            // SAFETY: matches record_receivers.
            unsafe {
                self.rt.launch(
                    self.f.record,
                    [(nrec as u32).div_ceil(128), 1, 1],
                    [128, 1, 1],
                    0,
                    kargs![
                        self.prev,
                        self.rec_offsets,
                        self.rec_weights,
                        self.rec_first,
                        nrec,
                        self.traces,
                        steps,
                        step
                    ],
                )?;
            }
        }
        std::mem::swap(&mut self.cur, &mut self.prev);
        Ok(())
    }

    /// Device seconds of each of `reps` applications of an interior operator alone (no boundary,
    /// source or receivers), after 3 untimed ones; for benchmarks. Leapfrog operators advance the
    /// state (cur and prev swap each time) as a run does.
    pub fn time_interior(&mut self, op: Operator, reps: usize) -> Result<Vec<f64>> {
        match op {
            Operator::ThreePass if self.lap == 0 => {
                self.lap = self.alloc_zeroed(self.field_len * 4)?;
            }
            Operator::Laplacian if self.laplacian.is_none() => {
                let t = self.tuning.for_laplacian(self.radius);
                let m = load_kernels(&self.rt, &[sources::fused(&t)], &kernel_options(self.radius, &t, false, true))?;
                let f = self.rt.function(&m, "fused_step")?;
                let shared = t.dynamic_shared_bytes(self.radius, true);
                self.rt.allow_dynamic_shared(f, shared)?;
                self.laplacian = Some((m, f, shared));
                if self.lap == 0 {
                    self.lap = self.alloc_zeroed(self.field_len * 4)?;
                }
            }
            _ => {}
        }
        let events: Vec<Rt::Event> = (0..=reps).map(|_| self.rt.event()).collect::<Result<_>>()?;
        for i in 0..reps + 3 {
            if i >= 3 {
                self.rt.record(&events[i - 3])?;
            }
            let out = if op == Operator::Laplacian { self.lap } else { self.prev };
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

fn kernel_name(k: KernelChoice) -> &'static str {
    match k {
        KernelChoice::Fused => "fused",
        KernelChoice::ThreePass => "three-pass",
    }
}

impl<Rt: GpuRuntime> Backend for GpuSolver<Rt> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: self.rt.vendor(), name: self.rt.device_name(), kernel: kernel_name(self.kernel).into() }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        let k = self.steps_done;
        if k == 0 && !self.events.is_empty() {
            self.rt.record(&self.events[0])?;
        }
        self.enqueue_step(n)?;
        if k + 1 < self.events.len() {
            self.rt.record(&self.events[k + 1])?;
        }
        self.steps_done += 1;
        Ok(())
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        ensure!(
            out.len() == self.layout.points(),
            "snapshot buffer has {} values, grid {}",
            out.len(),
            self.layout.points()
        );
        // Only the interior's z-planes come down, into a host buffer kept between snapshots.
        let l = self.layout;
        let staging = &mut self.snapshot_staging;
        staging.resize(l.nz * l.plane, 0.0);
        self.rt.download(self.cur + (l.halo * l.plane * 4) as DevicePtr, as_bytes_mut(staging))?;
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
        let l = self.layout;
        for_each_section(sections, [l.nx, l.ny, l.nz], out, |s, part| self.snapshot_section(s, part))
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        if self.nrec == 0 {
            return Ok(Vec::new());
        }
        let mut all = vec![0.0f32; self.nrec * self.trace_steps];
        self.rt.download(self.traces, as_bytes_mut(&mut all))?;
        let n = steps.min(self.steps_done).min(self.trace_steps);
        Ok(all.chunks(self.trace_steps).flat_map(|t| t[..n].iter().copied()).collect())
    }

    /// One launch of finite_check over the whole current field (halo and padding hold zeros or
    /// mirrored interior values) and a 4-byte download, which waits for the queued steps. Cost,
    /// estimated: one field read at memory bandwidth (288 M points, 1.2 GB: about 0.4 ms on an
    /// H100) plus the stream drain and launch latency (tens of microseconds); the solver calls it
    /// about once a second, so well under 0.1% of a run.
    fn field_is_finite(&mut self) -> Result<bool> {
        if self.finite_flag == 0 {
            self.finite_flag = self.alloc_zeroed(4)?;
        } else {
            self.rt.zero(self.finite_flag, 4)?;
        }
        let (field, n, flag) = (self.cur, self.field_len as u64, self.finite_flag);
        let blocks = (self.rt.multiprocessors() * 4).max(1);
        // SAFETY: matches finite_check; `field` holds field_len floats, `flag` one u32.
        unsafe { self.rt.launch(self.f.finite_check, [blocks, 1, 1], [256, 1, 1], 0, kargs![field, n, flag])? };
        let mut bad = [0u8; 4];
        self.rt.download(flag, &mut bad)?;
        Ok(u32::from_ne_bytes(bad) == 0)
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        self.rt.synchronize()?;
        let n = self.steps_done.min(self.events.len().saturating_sub(1));
        (0..n).map(|i| Ok(self.rt.elapsed_ms(&self.events[i], &self.events[i + 1])? as f64 * 1e-3)).collect()
    }
}

/// STREAM-like bandwidth ceilings of one device (GB/s = 1e9 bytes/s, reads plus writes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    pub device: String,
    /// b = a, float4.
    pub copy_gbs: f64,
    /// d = a + b + c, float4 (the leapfrog's 3 reads and 1 write).
    pub three_read_one_write_gbs: f64,
    /// Bytes per array.
    pub array_bytes: u64,
    pub repetitions: usize,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// Measures the copy and 3-read-1-write ceilings with arrays of `array_bytes` (>= 1 GiB advised),
/// median of `reps` timed runs after one untimed.
pub fn measure_ceiling<Rt: GpuRuntime>(rt: &Rt, array_bytes: usize, reps: usize) -> Result<Ceiling> {
    let n4 = (array_bytes / 16).max(1) as u64;
    let bytes = n4 as usize * 16;
    let (free, _) = rt.mem_info()?;
    ensure!(4 * bytes + (256 << 20) <= free, "not enough free GPU memory for 4 arrays of {bytes} bytes");
    let m = load_kernels(rt, &[sources::STREAM], &kernel_options(1, &Tuning::for_radius(1), false, false))?;
    let copy = [rt.function(&m, "stream_copy")?, rt.function(&m, "stream_copy_x4")?];
    let triad = [rt.function(&m, "stream_3r1w")?, rt.function(&m, "stream_3r1w_x4")?];
    let fill = rt.function(&m, "stream_fill")?;
    let arrays: Vec<DevicePtr> = (0..4).map(|_| rt.alloc(bytes)).collect::<Result<_>>()?;
    let result = (|| -> Result<Ceiling> {
        let blocks = (rt.multiprocessors() * 8).min(n4.div_ceil(256) as u32).max(1);
        for (i, &a) in arrays.iter().enumerate() {
            let seed = 1.0f32 + i as f32;
            // SAFETY: matches stream_fill.
            unsafe { rt.launch(fill, [blocks, 1, 1], [256, 1, 1], 0, kargs![a, n4, seed])? };
        }
        // Two launch styles (a grid-stride loop over a full device, and one block per 1024
        // vectors with 4 loads in flight per thread); the ceiling is the better of the two.
        let time = |three: bool, variant: usize| -> Result<f64> {
            let f = if three { triad[variant] } else { copy[variant] };
            let grid = if variant == 0 { blocks } else { n4.div_ceil(1024) as u32 };
            let ev: Vec<Rt::Event> = (0..=reps + 1).map(|_| rt.event()).collect::<Result<_>>()?;
            for e in &ev[..=reps] {
                rt.record(e)?;
                // SAFETY: matches the stream kernels' parameters.
                unsafe {
                    if three {
                        rt.launch(
                            f,
                            [grid, 1, 1],
                            [256, 1, 1],
                            0,
                            kargs![arrays[0], arrays[1], arrays[2], arrays[3], n4],
                        )?;
                    } else {
                        rt.launch(f, [grid, 1, 1], [256, 1, 1], 0, kargs![arrays[0], arrays[3], n4])?;
                    }
                }
            }
            rt.record(&ev[reps + 1])?;
            rt.synchronize()?;
            let mut t: Vec<f64> =
                (1..=reps).map(|i| Ok(rt.elapsed_ms(&ev[i], &ev[i + 1])? as f64 * 1e-3)).collect::<Result<_>>()?;
            let moved = if three { 4.0 } else { 2.0 } * bytes as f64;
            Ok(moved / median(&mut t) / 1e9)
        };
        let copy_gbs = time(false, 0)?.max(time(false, 1)?);
        let three_read_one_write_gbs = time(true, 0)?.max(time(true, 1)?);
        Ok(Ceiling {
            device: rt.device_name(),
            copy_gbs,
            three_read_one_write_gbs,
            array_bytes: bytes as u64,
            repetitions: reps,
        })
    })();
    let _ = rt.synchronize();
    for a in arrays {
        // SAFETY: allocated above, stream drained.
        unsafe { rt.free(a) };
    }
    result
}

/// The device's ceilings, measured once (1 GiB arrays, 20 repetitions) and cached as JSON in
/// [`cache_dir`], keyed by vendor, device name and architecture.
pub fn ceiling_cached<Rt: GpuRuntime>(rt: &Rt) -> Result<Ceiling> {
    let name: String = rt.device_name().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let path = cache_dir().join(format!("ceiling-{}-{}-{name}.json", rt.vendor(), rt.arch()));
    if let Ok(text) = std::fs::read_to_string(&path)
        && let Ok(c) = serde_json::from_str::<Ceiling>(&text)
    {
        return Ok(c);
    }
    let c = measure_ceiling(rt, 1 << 30, 20)?;
    if std::fs::create_dir_all(cache_dir()).is_ok() {
        let _ = std::fs::write(&path, serde_json::to_string_pretty(&c)?);
    }
    Ok(c)
}

/// A homogeneous problem with no boundary, source or receivers, for benchmarks of the interior:
/// unit spacing, 2000 m/s, dt at half the CFL limit.
pub fn synthetic_problem(shape: [usize; 3], radius: usize) -> Problem {
    let stencil = Stencil::new(radius);
    let spacing = [10.0; 3];
    let v = 2000.0f32;
    let dt = 0.5 * stencil.cfl_limit(spacing, v as f64);
    let points: usize = shape.iter().product();
    Problem {
        layout: Layout::new(shape, radius),
        spacing,
        origin: [0.0; 3],
        stencil,
        dt,
        steps: 1,
        vp: vec![v; points],
        boundary: Boundary::none(shape),
        source: PointSource {
            position: [0.0; 3],
            wavelet: Ricker::new(10.0, 1.0, None),
            injection: crate::problem::Positioning::Nearest,
            taps: vec![],
            samples: vec![],
        },
        receivers: vec![],
        warnings: vec![],
    }
}

/// Deterministic pseudo-random values in [-1, 1) (benchmarks must not run on zeros).
pub fn noise(len: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// One benchmark measurement of an interior operator.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    pub shape: [usize; 3],
    pub radius: usize,
    pub operator: String,
    pub block_x: u32,
    pub block_y: u32,
    pub vec: u32,
    pub window: u32,
    pub stages: u32,
    pub min_blocks: u32,
    pub rows: u32,
    pub order: u32,
    pub tile_ring: u32,
    pub halo_ring: u32,
    /// Median device seconds per application.
    pub seconds: f64,
    /// Effective bandwidth: `problem::step_bytes` over the median time, GB/s.
    pub gbs: f64,
    /// Grid points updated per second, in billions.
    pub gpts: f64,
    /// Registers, spills and shared memory of the kernels used.
    pub kernel_info: String,
}

/// Times an interior operator on a random state of `shape` (median of `reps`).
pub fn bench_step<Rt: GpuRuntime>(
    rt: Rt,
    shape: [usize; 3],
    radius: usize,
    op: Operator,
    tuning: Tuning,
    reps: usize,
) -> Result<BenchResult> {
    let mut v = bench_windows(rt, shape, radius, op, tuning, &[tuning.window], reps)?;
    Ok(v.remove(0))
}

/// [`bench_step`] for several fused z-windows on one solver (0: the automatic choice).
pub fn bench_windows<Rt: GpuRuntime>(
    rt: Rt,
    shape: [usize; 3],
    radius: usize,
    op: Operator,
    tuning: Tuning,
    windows: &[u32],
    reps: usize,
) -> Result<Vec<BenchResult>> {
    let problem = synthetic_problem(shape, radius);
    let kernel = if op == Operator::ThreePass { KernelChoice::ThreePass } else { KernelChoice::Fused };
    let mut s = GpuSolver::new(rt, &problem, kernel, tuning)?;
    let points = problem.layout.points();
    s.set_state(&noise(points, 1), &noise(points, 2))?;
    let auto = (s.window, s.laplacian_window);
    let mut out = Vec::new();
    for &w in windows {
        if w == 0 {
            (s.window, s.laplacian_window) = auto;
        } else {
            s.set_window(w);
        }
        out.push(s.bench_result(op, reps)?);
    }
    Ok(out)
}

impl<Rt: GpuRuntime> GpuSolver<Rt> {
    fn bench_result(&mut self, op: Operator, reps: usize) -> Result<BenchResult> {
        let (shape, radius) = (self.shape, self.radius);
        let points = self.layout.points();
        let mut t = self.time_interior(op, reps)?;
        let sec = median(&mut t);
        let tu = self.operator_tuning(op);
        Ok(BenchResult {
            shape,
            radius,
            operator: format!("{op:?}"),
            block_x: tu.block_x,
            block_y: tu.block_y,
            vec: tu.vec,
            window: tu.window,
            stages: tu.stages,
            min_blocks: tu.min_blocks,
            rows: tu.rows,
            order: tu.order,
            tile_ring: tu.tile_ring,
            halo_ring: tu.halo_ring,
            seconds: sec,
            gbs: op.bytes(shape, radius) as f64 / sec / 1e9,
            gpts: points as f64 / sec / 1e9,
            kernel_info: self.kernel_info(),
        })
    }
}

/// Opens the CUDA backend on device 0 for this problem (allocates everything once).
#[cfg(feature = "cuda")]
pub fn open_cuda(problem: &Problem, kernel: KernelChoice) -> Result<Box<dyn Backend>> {
    let rt = cuda::CudaRuntime::new(0)?;
    let (tuning, _) = autotune::tuning_for(&rt.device_name(), problem.stencil.radius, problem.shape());
    Ok(Box::new(GpuSolver::new(rt, problem, kernel, tuning)?))
}

/// Opens the HIP backend on device 0 for this problem (allocates everything once).
#[cfg(feature = "hip")]
pub fn open_hip(problem: &Problem, kernel: KernelChoice) -> Result<Box<dyn Backend>> {
    let rt = hip::HipRuntime::new(0)?;
    let r = problem.stencil.radius;
    let (tuning, _) = autotune::tuning_or(&rt.device_name(), Operator::Fused, r, problem.shape(), hip::tuning(r));
    Ok(Box::new(GpuSolver::new(rt, problem, kernel, tuning)?))
}

#[cfg(test)]
mod tests {
    use super::{Tuning, best_window};

    fn tuning(block_y: u32, stages: u32, rows: u32) -> Tuning {
        Tuning {
            block_x: 32,
            block_y,
            vec: 4,
            window: 0,
            stages,
            min_blocks: 2,
            unroll_z: 1,
            rows,
            order: 0,
            tile_ring: 0,
            halo_ring: 0,
        }
    }

    #[test]
    fn windows_fill_whole_waves() {
        // 256^3 in 128 x 12 tiles: 44 tiles, 264 resident blocks: 6 chunks of 43 planes, one wave.
        assert_eq!(best_window(44, 256, 264, 4, 16), 43);
        assert_eq!(best_window(44, 256, 264, 0, 8), 43);
        // 512^3: 172 tiles; 12 chunks of 43 planes fill 7.8 of 8 waves.
        assert_eq!(best_window(172, 512, 264, 4, 16), 43);
        // Free priming (banded order): the shortest window that fills its waves as well.
        assert_eq!(best_window(172, 512, 264, 0, 8), 8);
        assert_eq!(best_window(688, 1024, 264, 0, 8), 8);
        // 2048 x 2048 x 64: 2736 tiles, 2 chunks of 32 (21 waves of 36) beat 1 of 64 (11 of 68).
        assert_eq!(best_window(2736, 64, 264, 4, 16), 32);
        // Shallow grids: the whole depth.
        assert_eq!(best_window(1, 8, 1000, 4, 16), 8);
        assert_eq!(best_window(10, 12, 1, 4, 16), 12);
        // Deep columns on one slot: the longest window allowed.
        assert_eq!(best_window(10, 100, 1, 4, 16), 34);
        for nz in 1..200 {
            for (priming, shortest) in [(4, 16), (0, 8)] {
                let w = best_window(100, nz, 264, priming, shortest) as usize;
                assert!(w >= shortest.min(nz) && w <= 48.min(nz), "nz {nz}: {w}");
            }
        }
    }

    #[test]
    fn rows_need_the_asynchronous_ring() {
        assert_eq!(tuning(8, 0, 2).effective(4).rows, 1);
        assert_eq!(tuning(8, 2, 2).effective(4).rows, 2);
    }

    #[test]
    fn rows_are_lowered_until_the_tile_fits() {
        for r in 1..=8usize {
            for rows in 1..=4 {
                let t = tuning(8.max(r as u32), 2, rows).effective(r);
                assert!(t.rows >= 1 && t.rows <= rows);
                assert!(t.check(r).is_ok(), "R = {r}, rows {rows} -> {t:?}");
                let static_tile = 2 * (t.fused_tile_y() + 2 * r as u32) * (32 + 2 * (r as u32).div_ceil(4)) * 16;
                assert!(static_tile <= 48 << 10 && t.fused_tile_y() <= 32, "R = {r}: {t:?}");
            }
        }
        // 8 rows of threads x 4 rows = 32 rows at R = 4 fit: 2 x 40 x 34 x 16 B = 43.5 KB.
        assert_eq!(tuning(8, 2, 4).effective(4).rows, 4);
        // At R = 8 that tile would take 55 KB of static shared memory.
        assert!(tuning(8, 2, 4).effective(8).rows < 4);
    }
}
