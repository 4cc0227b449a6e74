//! The kernels as typed calls. Each kernel has one parameter struct here whose fields are the
//! kernel's parameters, in its order and with its types (device pointers as [`DevicePtr`], or as
//! [`TypedPtr`] of their element type, `int` as `i32`, `i64`/`u64` as themselves), and whose
//! `launch` is the one place that kernel is enqueued;
//! the structs passed by value ([`StencilWeights`], [`AxisWeights`], [`Layers`]) have their sizes,
//! alignments and field offsets asserted here and their sizes and alignments in kernels/ (NVRTC has
//! no offsetof; the same fields in the same order then lie at the same offsets). [`Kernels`] holds a step's functions.

use super::runtime::{DevicePtr, GpuRuntime, TypedPtr};
use anyhow::Result;
use half::f16;
use std::ffi::c_void;
use std::mem::{align_of, offset_of, size_of};

/// Stencil weights by value (prelude.h's `StencilWeights`): index 0 of each axis unused, the three
/// centres summed in `centre`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StencilWeights {
    pub cx: [f32; 9],
    pub cy: [f32; 9],
    pub cz: [f32; 9],
    pub centre: f32,
}
const _: () = assert!(
    size_of::<StencilWeights>() == 112
        && align_of::<StencilWeights>() == 4
        && offset_of!(StencilWeights, centre) == 108
);

/// One axis's first- and second-derivative weights (prelude.h's `AxisWeights`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AxisWeights {
    pub c1: [f32; 9],
    pub c2: [f32; 9],
}
const _: () =
    assert!(size_of::<AxisWeights>() == 72 && align_of::<AxisWeights>() == 4 && offset_of!(AxisWeights, c2) == 36);

/// Every CPML array of a run and which blocks a fused launch computes (layers.h's `Layers`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Layers {
    pub phi_in: [DevicePtr; 3],
    pub phi_out: [DevicePtr; 3],
    pub zeta: [DevicePtr; 3],
    pub a: [DevicePtr; 3],
    pub b: [DevicePtr; 3],
    pub w: [AxisWeights; 3],
    /// Points per layer; 0: no CPML.
    pub width: i32,
    /// 1 where the axis's low face holds a layer (not under a free surface, nor at a cut).
    pub low: [i32; 3],
    /// 1 where the axis's high face holds a layer (not at a subdomain's cut).
    pub high: [i32; 3],
    /// Fused launches: 0 every block, 1 the blocks without layer points, 2 those with, 3 the
    /// blocks without y-layer rows, 4 those with; cpml.cu's z layers: 5 the rows of select 4 only.
    pub select: i32,
    /// cpml.cu launches: the z-planes [z_begin, z_end) they update.
    pub z_begin: i32,
    pub z_end: i32,
    /// Fused launches: the grid plane of the launch's first plane (where its slabs' planes start).
    pub z_offset: i32,
    /// Select 3 and 4: the rows of the plain fused step's tiles that hold y-layer rows are those
    /// below `band_lo` and from `band_hi` on (layers.h, `band_row`).
    pub band_lo: i32,
    pub band_hi: i32,
    /// The grid's planes (fused_step_zlayers: its launch covers part of them).
    pub nz: i32,
    /// cpml.cu where the density varies: the buoyancy field at its origin (a layer point's c^2 dt^2
    /// is then K bh); 0 for a constant density.
    pub buoyancy: DevicePtr,
}
const _: () = assert!(
    size_of::<Layers>() == 400
        && align_of::<Layers>() == 8
        && offset_of!(Layers, b) == 96
        && offset_of!(Layers, w) == 120
        && offset_of!(Layers, width) == 336
        && offset_of!(Layers, low) == 340
        && offset_of!(Layers, high) == 352
        && offset_of!(Layers, select) == 364
        && offset_of!(Layers, z_end) == 372
        && offset_of!(Layers, z_offset) == 376
        && offset_of!(Layers, band_lo) == 380
        && offset_of!(Layers, band_hi) == 384
        && offset_of!(Layers, nz) == 388
        && offset_of!(Layers, buoyancy) == 392
);

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
}

impl Launch {
    /// A one-dimensional launch of `blocks` blocks of `threads` threads.
    pub fn linear(blocks: u32, threads: u32) -> Launch {
        Launch { grid: [blocks.max(1), 1, 1], block: [threads, 1, 1], shared: 0 }
    }
}

/// A kernel's parameter struct, its launch and its C++ signature, from one description: each
/// field's Rust type and the C++ type of the kernel parameter it is (with `T` for the field's
/// element type where one struct serves an f32 and an f16 kernel), and the kernels that take it
/// with their element type. The unit test `every_kernel_takes_its_described_parameters` holds
/// every `__global__` of kernels/ to these.
macro_rules! kernel_params {
    ($(#[$doc:meta])* $name:ident for [$($kernel:literal: $elem:literal),+ $(,)?] {
        $($field:ident $(as $cname:ident)?: $ty:ty = $cpp:literal),* $(,)?
    }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            $(pub $field: $ty),*
        }

        impl $name {
            /// The kernels that take these parameters and their element type (`T`).
            pub const KERNELS: &[(&str, &str)] = &[$(($kernel, $elem)),+];
            /// Each parameter's name in the kernel and its C++ type.
            pub const PARAMS: &[(&str, &str)] =
                &[$((kernel_params!(@name $field $($cname)?), $cpp)),*];
            /// Each field's Rust type, in the parameters' order.
            pub const RUST_TYPES: &[&str] = &[$(stringify!($ty)),*];

            /// Enqueues the kernel `f` (a function of this signature) on the runtime's stream.
            pub fn launch<Rt: GpuRuntime>(&self, rt: &Rt, f: Rt::Function, l: Launch) -> Result<()> {
                #[cfg(test)]
                crate::backend::gpu::fake::note_params(format!("{self:?}"));
                let $name { $($field),* } = *self;
                // SAFETY: the fields are the kernel's parameters in number, order and type, and
                // live until the launch has copied them.
                unsafe {
                    rt.launch(f, l.grid, l.block, l.shared, &mut [$((&$field) as *const $ty as *mut c_void),*])
                }
            }
        }
    };
    (@name $field:ident $cname:ident) => { stringify!($cname) };
    (@name $field:ident) => { stringify!($field) };
}

kernel_params!(
    /// `fused_step` (fused.cu and fused_ring.cu, `FUSED_STEP_PARAMS`): the leapfrog update, or
    /// out = L p when built with LAPLACIAN_ONLY.
    FusedStep for ["fused_step": "float", "fused_step_ylayers": "float", "fused_step_zlayers": "float"] {
        cur: DevicePtr = "const float*",
        out: DevicePtr = "float*",
        vel: DevicePtr = "const float*",
        gx: DevicePtr = "const float*",
        gy: DevicePtr = "const float*",
        gz: DevicePtr = "const float*",
        w: StencilWeights = "StencilWeights",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
        window: i32 = "int",
        layers as L: Layers = "Layers",
    }
);

kernel_params!(
    /// `density_step` (density.cu): the leapfrog update where the density varies, K in `vel`, the
    /// buoyancy in `bh`.
    DensityStep for ["density_step": "float"] {
        cur: DevicePtr = "const float*",
        out: DevicePtr = "float*",
        vel: DevicePtr = "const float*",
        bh: DevicePtr = "const float*",
        gx: DevicePtr = "const float*",
        gy: DevicePtr = "const float*",
        gz: DevicePtr = "const float*",
        w: StencilWeights = "StencilWeights",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
        window: i32 = "int",
    }
);

kernel_params!(
    /// `plane_step`, `plane_step_density` (plane.cu): a 2D grid's interior update (and sponge), a
    /// block marching down `window` rows; `bh` the buoyancy (density only).
    PlaneStep for ["plane_step": "float", "plane_step_density": "float"] {
        cur: DevicePtr = "const float*",
        out: DevicePtr = "float*",
        vel: DevicePtr = "const float*",
        bh: DevicePtr = "const float*",
        gx: DevicePtr = "const float*",
        gz: DevicePtr = "const float*",
        w: StencilWeights = "StencilWeights",
        nx: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        window: i32 = "int",
    }
);

kernel_params!(
    /// `plane_layers` (plane.cu): a 2D grid's CPML corrections at its layer points (x at index 0
    /// of `L`, z at 2), after plane_step; `bh` the buoyancy or null.
    PlaneLayers for ["plane_layers": "float"] {
        cur: DevicePtr = "const float*",
        out: DevicePtr = "float*",
        vel: DevicePtr = "const float*",
        bh: DevicePtr = "const float*",
        nx: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        layers as L: Layers = "Layers",
    }
);

kernel_params!(
    /// `pass_x` (pass_x.cu): lap = the x part of L p.
    PassX for ["pass_x": "float"] {
        cur: DevicePtr = "const float*",
        lap: DevicePtr = "float*",
        w: StencilWeights = "StencilWeights",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
    }
);

kernel_params!(
    /// `pass_y` and `pass_z` (pass_y.cu, pass_z.cu): lap += that axis's part of L p, `window`
    /// points along the axis per block.
    PassWindowed for ["pass_y": "float", "pass_z": "float"] {
        cur: DevicePtr = "const float*",
        lap: DevicePtr = "float*",
        w: StencilWeights = "StencilWeights",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
        window: i32 = "int",
    }
);

kernel_params!(
    /// `update` (update.cu): the leapfrog update from a computed Laplacian.
    Update for ["update": "float"] {
        cur: DevicePtr = "const float*",
        out: DevicePtr = "float*",
        vel: DevicePtr = "const float*",
        lap: DevicePtr = "const float*",
        gx: DevicePtr = "const float*",
        gy: DevicePtr = "const float*",
        gz: DevicePtr = "const float*",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
    }
);

kernel_params!(
    /// `cpml_x`, `cpml_y`, `cpml_z` (cpml.cu, `CPML_PARAMS`): one axis's layers as a pass of their
    /// own (layers.h's update of every layer point).
    CpmlAxis for ["cpml_x": "float", "cpml_y": "float", "cpml_z": "float"] {
        cur: DevicePtr = "const float*",
        out: DevicePtr = "float*",
        vel: DevicePtr = "const float*",
        layers as L: Layers = "Layers",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
    }
);

kernel_params!(
    /// `free_surface` (free_surface.cu): p = 0 on z = 0, mirrored with opposite sign above.
    FreeSurface for ["free_surface": "float"] {
        cur: DevicePtr = "float*",
        nx: i32 = "int",
        ny: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
    }
);

kernel_params!(
    /// `inject_source` (sources.cu): field\[offsets\[t\]\] += weights\[t\] * the tap's sample of
    /// `step` (`row` samples a step: 1 shared, or one per tap), for the taps with offsets in [lo, hi).
    InjectSource for ["inject_source": "float"] {
        field: DevicePtr = "float*",
        offsets: DevicePtr = "const u64*",
        weights: DevicePtr = "const float*",
        ntaps: i32 = "int",
        samples: DevicePtr = "const float*",
        row: i32 = "int",
        nsteps: i32 = "int",
        step: i32 = "int",
        lo: u64 = "u64",
        hi: u64 = "u64",
    }
);

kernel_params!(
    /// `record_receivers` (sources.cu): traces\[r\]\[step\] = sum of the receiver's weighted taps.
    RecordReceivers for ["record_receivers": "float", "record_receivers_half": "h16"] {
        field: DevicePtr = "const T*",
        offsets: DevicePtr = "const u64*",
        weights: DevicePtr = "const float*",
        first: DevicePtr = "const u32*",
        nrec: i32 = "int",
        traces: DevicePtr = "float*",
        steps: i32 = "int",
        step: i32 = "int",
    }
);

kernel_params!(
    /// `extract_section` (section.cu): an n0 x n1 plane with strides s0, s1 gathered densely.
    ExtractSection for ["extract_section": "float", "extract_section_half": "h16"] {
        field: DevicePtr = "const T*",
        out: DevicePtr = "float*",
        n0: i32 = "int",
        n1: i32 = "int",
        s0: i64 = "i64",
        s1: i64 = "i64",
    }
);

kernel_params!(
    /// `insert_section` (section.cu): a dense n0 x n1 buffer written into a plane with strides s0, s1.
    InsertSection for ["insert_section": "float"] {
        field: DevicePtr = "float*",
        dense: DevicePtr = "const float*",
        n0: i32 = "int",
        n1: i32 = "int",
        s0: i64 = "i64",
        s1: i64 = "i64",
    }
);

kernel_params!(
    /// `finite_check` (finite_check.cu): sets *flag when any of n values is NaN or infinite.
    FiniteCheck for ["finite_check": "float", "finite_check_half": "h16"] {
        field: DevicePtr = "const T*",
        n: u64 = "u64",
        flag: DevicePtr = "u32*",
    }
);

kernel_params!(
    /// `stream_copy`, `stream_copy_x4` (stream.cu): b = a over n float4.
    StreamCopy for ["stream_copy": "float4", "stream_copy_x4": "float4"] {
        a: DevicePtr = "const float4*",
        b: DevicePtr = "float4*",
        n: u64 = "u64",
    }
);

kernel_params!(
    /// `stream_3r1w`, `stream_3r1w_x4` (stream.cu): d = a + b + c over n float4.
    StreamThreeReadOneWrite for ["stream_3r1w": "float4", "stream_3r1w_x4": "float4"] {
        a: DevicePtr = "const float4*",
        b: DevicePtr = "const float4*",
        c: DevicePtr = "const float4*",
        d: DevicePtr = "float4*",
        n: u64 = "u64",
    }
);

kernel_params!(
    /// `stream_fill` (stream.cu): deterministic values from `seed` over n float4.
    StreamFill for ["stream_fill": "float4"] {
        a: DevicePtr = "float4*",
        n: u64 = "u64",
        seed: f32 = "float",
    }
);

kernel_params!(
    /// `fused_step_half` (fused_half.cu): the f16 step, d^{n+1} over d^n (`inc`) and p^{n+1} into `next`.
    FusedStepHalf for ["fused_step_half": "h16"] {
        cur: TypedPtr<f16> = "const h16*",
        inc: TypedPtr<f16> = "h16*",
        next: TypedPtr<f16> = "h16*",
        vel: TypedPtr<f16> = "const h16*",
        gx: TypedPtr<f32> = "const float*",
        gy: TypedPtr<f32> = "const float*",
        gz: TypedPtr<f32> = "const float*",
        w: StencilWeights = "StencilWeights",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
        window: i32 = "int",
    }
);

kernel_params!(
    /// `cpml_x_half`, `cpml_y_half`, `cpml_z_half` (cpml.cu, `CPML_HALF_PARAMS`): one axis's layers
    /// of the f16 step, correcting d^{n+1} (`inc`) and rewriting p^{n+1} (`next`).
    CpmlAxisHalf for ["cpml_x_half": "h16", "cpml_y_half": "h16", "cpml_z_half": "h16"] {
        cur: TypedPtr<f16> = "const h16*",
        inc: TypedPtr<f16> = "h16*",
        next: TypedPtr<f16> = "h16*",
        vel: TypedPtr<f16> = "const h16*",
        layers as L: Layers = "Layers",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
    }
);

kernel_params!(
    /// `free_surface_half` (free_surface.cu): the mirror on an f16 p^n, and d^n = 0 on z = 0.
    FreeSurfaceHalf for ["free_surface_half": "h16"] {
        cur: TypedPtr<f16> = "h16*",
        inc: TypedPtr<f16> = "h16*",
        nx: i32 = "int",
        ny: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
    }
);

kernel_params!(
    /// `inject_source_half` (sources.cu): d^{n+1} += w s at the taps, then p^{n+1} = p^n + d^{n+1}.
    InjectSourceHalf for ["inject_source_half": "h16"] {
        cur: TypedPtr<f16> = "const h16*",
        inc: TypedPtr<f16> = "h16*",
        next: TypedPtr<f16> = "h16*",
        offsets: TypedPtr<u64> = "const u64*",
        weights: TypedPtr<f32> = "const float*",
        ntaps: i32 = "int",
        samples: TypedPtr<f32> = "const float*",
        row: i32 = "int",
        nsteps: i32 = "int",
        step: i32 = "int",
    }
);

/// The kernels that move values into and out of a field: the sources' injection, the receivers'
/// recording, sections out and in, and the blow-up check (every step's module holds them).
pub struct IoKernels<F> {
    pub inject: F,
    pub record: F,
    pub section: F,
    /// insert_section: a block's halo rows back into the field.
    pub insert: F,
    pub finite_check: F,
    /// The imaging condition and the shots' stack (imaging.cu).
    pub keep_source: F,
    pub correlate_image: F,
    pub correlate_gradient: F,
    pub illumination_max: F,
    pub stack_normalised: F,
}

impl<F: Copy> IoKernels<F> {
    pub fn load<Rt: GpuRuntime<Function = F>>(rt: &Rt, module: &Rt::Module) -> Result<Self> {
        let f = |n: &str| rt.function(module, n);
        Ok(IoKernels {
            inject: f("inject_source")?,
            record: f("record_receivers")?,
            section: f("extract_section")?,
            insert: f("insert_section")?,
            finite_check: f("finite_check")?,
            keep_source: f("keep_source")?,
            correlate_image: f("correlate_image")?,
            correlate_gradient: f("correlate_gradient")?,
            illumination_max: f("illumination_max")?,
            stack_normalised: f("stack_normalised")?,
        })
    }
}

/// The functions of a step's module.
pub struct Kernels<F> {
    pub fused: F,
    /// The fused step with the y layers in its pass (modules built with YLAYERS only).
    pub fused_ylayers: Option<F>,
    /// The fused step on the planes of one z layer with their z update in its pass (modules
    /// built with YLAYERS only).
    pub fused_zlayers: Option<F>,
    /// The step where the density varies (density.cu).
    pub density: F,
    pub pass_x: F,
    pub pass_y: F,
    pub pass_z: F,
    pub update: F,
    /// cpml_x, cpml_y, cpml_z.
    pub cpml: [F; 3],
    /// cpml_transposed_prepare, cpml_transposed_gather (a backward step's layers).
    pub cpml_transposed: [F; 2],
    pub free_surface: F,
    pub io: IoKernels<F>,
}

impl<F: Copy> Kernels<F> {
    /// Looks every kernel of a step up in `module` (built from `sources::step`).
    pub fn load<Rt: GpuRuntime<Function = F>>(rt: &Rt, module: &Rt::Module) -> Result<Self> {
        let f = |n: &str| rt.function(module, n);
        Ok(Kernels {
            fused: f("fused_step")?,
            fused_ylayers: f("fused_step_ylayers").ok(),
            fused_zlayers: f("fused_step_zlayers").ok(),
            density: f("density_step")?,
            pass_x: f("pass_x")?,
            pass_y: f("pass_y")?,
            pass_z: f("pass_z")?,
            update: f("update")?,
            cpml: [f("cpml_x")?, f("cpml_y")?, f("cpml_z")?],
            cpml_transposed: [f("cpml_transposed_prepare")?, f("cpml_transposed_gather")?],
            free_surface: f("free_surface")?,
            io: IoKernels::load(rt, module)?,
        })
    }
}

/// The functions of a 2D grid's module (`sources::PLANE_STEP`).
pub struct PlaneKernels<F> {
    /// plane_step, or plane_step_density where the density varies.
    pub step: F,
    pub layers: F,
    /// cpml_transposed_prepare, cpml_transposed_gather (a backward step's layers).
    pub transposed: [F; 2],
    pub free_surface: F,
    pub io: IoKernels<F>,
}

impl<F: Copy> PlaneKernels<F> {
    /// The kernels of `module`, with the step for a constant or a varying density.
    pub fn load<Rt: GpuRuntime<Function = F>>(rt: &Rt, module: &Rt::Module, density: bool) -> Result<Self> {
        let step = if density { "plane_step_density" } else { "plane_step" };
        Ok(PlaneKernels {
            step: rt.function(module, step)?,
            layers: rt.function(module, "plane_layers")?,
            transposed: [
                rt.function(module, "cpml_transposed_prepare")?,
                rt.function(module, "cpml_transposed_gather")?,
            ],
            free_surface: rt.function(module, "free_surface")?,
            io: IoKernels::load(rt, module)?,
        })
    }
}

/// The f16 step's own functions (modules built with -DHALF=1, `sources::half_step`); receivers,
/// sections and the blow-up check take the f32 kernels' parameter structs.
pub struct HalfKernels<F> {
    pub fused: F,
    /// cpml_x_half, cpml_y_half, cpml_z_half.
    pub cpml: [F; 3],
    pub free_surface: F,
    pub inject: F,
    pub record: F,
    pub section: F,
    pub finite_check: F,
}

impl<F: Copy> HalfKernels<F> {
    pub fn load<Rt: GpuRuntime<Function = F>>(rt: &Rt, module: &Rt::Module) -> Result<Self> {
        let f = |n: &str| rt.function(module, n);
        Ok(HalfKernels {
            fused: f("fused_step_half")?,
            cpml: [f("cpml_x_half")?, f("cpml_y_half")?, f("cpml_z_half")?],
            free_surface: f("free_surface_half")?,
            inject: f("inject_source_half")?,
            record: f("record_receivers_half")?,
            section: f("extract_section_half")?,
            finite_check: f("finite_check_half")?,
        })
    }
}

// The imaging condition's parameters (imaging.cu) and the backward step's CPML terms
// (cpml_transposed.cu), in files of their own.
mod cpml_transposed;
mod imaging;
pub use cpml_transposed::CpmlTransposedAxis;
pub use imaging::{CorrelateGradient, CorrelateImage, IlluminationMax, KeepSource, StackNormalised};

#[cfg(test)]
mod tests;
