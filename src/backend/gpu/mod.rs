//! GPU backends: one solver over a small runtime trait, implemented by CUDA (cudarc) and HIP.
//!
//! One module per job, each building on the ones above it:
//! - [`runtime`]: [`GpuRuntime`], the little a vendor provides (memory, run-time compilation,
//!   launches, events on one stream), and [`DeviceBuffer`], device memory that frees itself;
//!   `cuda` and `hip` implement it;
//! - [`sources`]: the kernel sources of `kernels/`, their `-D` options, the on-disk compile cache;
//! - [`kernels`]: one typed parameter struct and launch per kernel, the by-value structs with
//!   their layouts asserted on both sides;
//! - [`geometry`]: the fused kernel's z-window and block layout;
//! - `plan`: the step's plan without a device (which launches over which planes, rows, bands
//!   and windows), unit-tested without a GPU;
//! - `fields`, `taps`, `launch`, `density`, `capture`, `snapshot`, `halo`, `imaging`: what a
//!   solver owns on the device (the fields; the source and receivers; the step's kernels and
//!   launches; the step where the density varies; the graph-capture gate; the staging of
//!   snapshots; a decomposed run's halo planes and rows; migration's kept source wavefield and
//!   imaging sums);
//! - [`solver`]: [`GpuSolver`], which composes them and implements the backend;
//! - [`ceiling`]: the device's STREAM-like bandwidth ceilings;
//! - [`autotune`]: the launch-shape search and its per-device cache.
//!
//! `open_cuda` and `open_hip` open a backend for a run, with the tuned launch shape, or the one
//! set by hand in [`TUNING_VARIABLE`](super::tuning::TUNING_VARIABLE).

pub mod autotune;
mod capture;
pub mod ceiling;
mod cpml_transposed;
#[cfg(feature = "cuda")]
pub mod cuda;
mod density;
#[cfg(test)]
mod fake;
mod fields;
pub mod geometry;
mod halo;
#[cfg(feature = "hip")]
pub mod hip;
mod imaging;
pub mod kernels;
mod launch;
#[cfg(test)]
mod launch_trace;
mod plan;
pub mod plane;
pub mod runtime;
mod snapshot;
pub mod solver;
pub mod sources;
mod taps;
mod y_pass;

pub use super::tuning::{Tuning, TuningOverride};
pub use ceiling::{Ceiling, ceiling_cached, measure_ceiling};
pub use plan::LayerPass;
pub use runtime::{DeviceBuffer, DevicePtr, GpuRuntime};
pub use solver::{GpuSolver, Operator, estimate_bytes};
pub use sources::{cache_dir, load_kernels};

use crate::{backend::Backend, config::KernelChoice, problem::Problem};
use anyhow::Result;

/// The solver of `problem` over `rt`: the 2D solver for a 2D grid ([`Problem::is_2d`]), else
/// [`GpuSolver`] with `kernel` and `tuning`.
pub fn open_solver<Rt: GpuRuntime + 'static>(
    rt: Rt,
    problem: &Problem,
    kernel: KernelChoice,
    tuning: Tuning,
) -> Result<Box<dyn Backend>> {
    if problem.is_2d() {
        anyhow::ensure!(
            kernel == KernelChoice::Fused,
            "grid.shape is 2D, and a 2D grid's GPU step is one kernel (kernels/plane.cu): use run.kernel = \"fused\" \
             (the default)"
        );
        return Ok(Box::new(plane::PlaneGpuSolver::new(rt, problem)?));
    }
    Ok(Box::new(GpuSolver::new(rt, problem, kernel, tuning)?))
}

/// Opens the CUDA backend on device 0 for this problem (allocates everything once).
#[cfg(feature = "cuda")]
pub fn open_cuda(problem: &Problem, kernel: KernelChoice) -> Result<Box<dyn Backend>> {
    open_cuda_on(problem, kernel, 0)
}

/// [`open_cuda`] on device `local_rank` modulo the devices present.
#[cfg(feature = "cuda")]
pub fn open_cuda_on(problem: &Problem, kernel: KernelChoice, local_rank: usize) -> Result<Box<dyn Backend>> {
    let over = TuningOverride::from_environment()?;
    let rt = cuda::CudaRuntime::new(local_rank % cuda::device_count()?.max(1))?;
    let (tuning, _) = autotune::tuning_for(&rt.device_name(), problem.stencil.radius, problem.shape(), over.as_ref());
    open_solver(rt, problem, kernel, tuning)
}

/// Opens the HIP backend on device 0 for this problem (allocates everything once).
#[cfg(feature = "hip")]
pub fn open_hip(problem: &Problem, kernel: KernelChoice) -> Result<Box<dyn Backend>> {
    open_hip_on(problem, kernel, 0)
}

/// [`open_hip`] on device `local_rank` modulo the devices present.
#[cfg(feature = "hip")]
pub fn open_hip_on(problem: &Problem, kernel: KernelChoice, local_rank: usize) -> Result<Box<dyn Backend>> {
    let over = TuningOverride::from_environment()?;
    let count = hip::result::device_count().map_err(|e| anyhow::anyhow!("hipGetDeviceCount: {e}"))?;
    let rt = hip::HipRuntime::new((local_rank % count.max(1) as usize) as i32)?;
    let r = problem.stencil.radius;
    let tuning = match over {
        Some(o) => o.tuning(r, false, false),
        None => autotune::tuning_or(&rt.device_name(), Operator::Fused, r, problem.shape(), false).0,
    };
    open_solver(rt, problem, kernel, tuning)
}
