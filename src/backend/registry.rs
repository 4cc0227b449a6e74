//! The backend registry: the one place that maps a backend choice (`cpu`, `cuda`, `hip`, `auto`)
//! to an opened [`Backend`] (single runs, survey shots, a decomposed run's subdomains) or to a GPU
//! runtime (seismic-bench). A new GPU vendor is its module under `gpu/` and its lines here.

use super::Backend;
use crate::config::{BackendChoice, KernelChoice, Precision};
use crate::grid::Layout;
use crate::problem::Problem;
use anyhow::{Result, bail, ensure};

/// Opens a GPU backend for a problem on device `local_rank` (modulo the devices present).
type OpenGpu = fn(&Problem, KernelChoice, usize) -> Result<Box<dyn Backend>>;

/// The GPU backends, in the order `auto` tries them: name, choice, and how to open one.
const GPUS: [(&str, BackendChoice, OpenGpu); 2] =
    [("cuda", BackendChoice::Cuda, open_cuda), ("hip", BackendChoice::Hip, open_hip)];

/// Opens the backend asked for. `auto` tries the GPU backends (those compiled in), then falls
/// back to the CPU; `notice` gets one line saying why.
/// On a node with several GPUs, `local_rank` (this process's rank among the node's, 0 for a
/// single process) chooses the GPU: local_rank modulo the number of GPUs, so ranks may share one.
pub fn open(
    problem: &Problem,
    choice: BackendChoice,
    kernel: KernelChoice,
    local_rank: usize,
    notice: &mut dyn FnMut(&str),
) -> Result<Box<dyn Backend>> {
    match choice {
        BackendChoice::Cpu => open_cpu(problem),
        BackendChoice::Auto => {
            if let Err(e) = gpu_takes(problem, kernel) {
                notice(&format!("{e:#}; running on the CPU"));
                return open_cpu(problem);
            }
            let mut reasons = Vec::new();
            for (name, _, open) in GPUS {
                match open(problem, kernel, local_rank) {
                    Ok(b) => return Ok(b),
                    Err(e) => reasons.push(format!("{name}: {e:#}")),
                }
            }
            notice(&format!("no GPU backend available ({}); running on the CPU", reasons.join("; ")));
            open_cpu(problem)
        }
        gpu => open_gpu(problem, gpu, kernel, local_rank),
    }
}

/// Opens the GPU backend `choice` (an error for `cpu` and `auto`) on device `local_rank` modulo
/// the devices present.
pub fn open_gpu(
    problem: &Problem,
    choice: BackendChoice,
    kernel: KernelChoice,
    local_rank: usize,
) -> Result<Box<dyn Backend>> {
    match GPUS.iter().find(|(_, c, _)| *c == choice) {
        Some((_, _, open)) => {
            gpu_takes(problem, kernel)?;
            open(problem, kernel, local_rank)
        }
        None => bail!("run.backend = {:?} is not a GPU backend", choice),
    }
}

/// Errors where `problem` needs what the GPU backends do not compute with `kernel`: a 2D grid or a
/// variable density with the three-pass kernel (a 2D grid's step is one kernel, plane.cu; the
/// fused kernel's path computes a varying density, density.cu).
fn gpu_takes(problem: &Problem, kernel: KernelChoice) -> Result<()> {
    if problem.is_2d() && kernel == KernelChoice::ThreePass {
        bail!(
            "grid.shape is 2D, and run.kernel = \"three-pass\" computes 3D grids only: run.kernel = \"fused\" \
             (the default) runs a 2D grid's one-pass step on the GPU"
        );
    }
    if problem.variable_density() && kernel == KernelChoice::ThreePass {
        bail!(
            "model.density varies, and run.kernel = \"three-pass\" computes a constant density only: \
             run.kernel = \"fused\" (the default) runs it on the GPU"
        );
    }
    Ok(())
}

/// What differs between GPU vendors outside their runtimes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuVendor {
    /// "cuda" or "hip".
    pub name: &'static str,
    /// Whether the default launch shape has the asynchronous ring (`Tuning::default_for`).
    pub ring: bool,
}

/// Work to do with a GPU runtime of whichever vendor is chosen: generic over the runtime, so
/// that it is written once for every vendor ([`with_runtime`]).
#[cfg(any(feature = "cuda", feature = "hip"))]
pub trait RuntimeTask {
    type Output;
    /// Runs with `open`, which opens the runtime of `vendor` on device 0.
    fn run<Rt: super::gpu::GpuRuntime + 'static>(
        self,
        vendor: GpuVendor,
        open: &mut dyn FnMut() -> Result<Rt>,
    ) -> Result<Self::Output>;
}

/// Runs `task` with the GPU runtime `choice` (an error for `cpu`, `auto` and vendors not built).
#[cfg(any(feature = "cuda", feature = "hip"))]
pub fn with_runtime<T: RuntimeTask>(choice: BackendChoice, task: T) -> Result<T::Output> {
    match choice {
        #[cfg(feature = "cuda")]
        BackendChoice::Cuda => {
            task.run(GpuVendor { name: "cuda", ring: true }, &mut || super::gpu::cuda::CudaRuntime::new(0))
        }
        #[cfg(feature = "hip")]
        BackendChoice::Hip => {
            task.run(GpuVendor { name: "hip", ring: false }, &mut || super::gpu::hip::HipRuntime::new(0))
        }
        #[cfg(not(feature = "cuda"))]
        BackendChoice::Cuda => bail!("--backend cuda: this build has no CUDA backend (build with --features cuda)"),
        #[cfg(not(feature = "hip"))]
        BackendChoice::Hip => bail!("--backend hip: this build has no HIP backend (build with --features hip)"),
        other => bail!("--backend {}: not a GPU backend", format!("{other:?}").to_lowercase()),
    }
}

fn open_cpu(problem: &Problem) -> Result<Box<dyn Backend>> {
    let bytes = cpu_host_bytes_per_point(problem.layout, problem.precision);
    if problem.is_2d() {
        ensure!(
            problem.precision == Precision::F32,
            "run.precision = \"f16\" runs 3D grids only: a 2D grid (grid.shape = [nx, nz]) runs in f32"
        );
        crate::resources::check_host_memory(problem.layout, bytes, "the CPU backend (2D)")?;
        return Ok(Box::new(super::cpu::PlaneSolver::<f32>::new(problem)?));
    }
    if problem.precision == Precision::F16 {
        crate::resources::check_host_memory(problem.layout, bytes, "the CPU backend (f16 reference)")?;
        return Ok(Box::new(super::cpu_half::CpuHalfSolver::new(problem)?));
    }
    crate::resources::check_host_memory(problem.layout, bytes, "the CPU backend")?;
    Ok(Box::new(super::cpu::CpuSolver::<f32>::new(problem)?.flushing_subnormals(true)))
}

/// Host bytes per interior point the CPU backend needs on top of the problem, for a grid of
/// `layout` (the problem's) in `precision`: what a run checks before it samples the model.
pub fn cpu_host_bytes_per_point(layout: Layout, precision: Precision) -> f64 {
    if precision == Precision::F16 {
        // f32 values, p^n, p^{n-1}, c^2 dt^2 and psi (twice) and zeta for all three axes.
        let padded = layout.len() as f64 / layout.points().max(1) as f64;
        return 3.0 * 4.0 * padded + 28.0 + 12.0;
    }
    cpu_bytes_per_point(super::cpu::cpu_layout::<f32>(layout))
}

#[cfg(feature = "cuda")]
fn open_cuda(problem: &Problem, kernel: KernelChoice, local_rank: usize) -> Result<Box<dyn Backend>> {
    super::gpu::open_cuda_on(problem, kernel, local_rank)
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: &Problem, _: KernelChoice, _: usize) -> Result<Box<dyn Backend>> {
    bail!("this build has no CUDA support (build with --features cuda)")
}

#[cfg(feature = "hip")]
fn open_hip(problem: &Problem, kernel: KernelChoice, local_rank: usize) -> Result<Box<dyn Backend>> {
    super::gpu::open_hip_on(problem, kernel, local_rank)
}

#[cfg(not(feature = "hip"))]
fn open_hip(_: &Problem, _: KernelChoice, _: usize) -> Result<Box<dyn Backend>> {
    bail!("this build has no HIP support (build with --features hip)")
}

/// Host bytes per interior point the CPU backend needs on top of the problem: three padded f32
/// fields (p^n, p^{n-1}, c^2 dt^2) plus the f64 and f32 dense copies made while building them.
fn cpu_bytes_per_point(layout: Layout) -> f64 {
    let padded = layout.len() as f64 / layout.points().max(1) as f64;
    3.0 * 4.0 * padded + 8.0 + 4.0
}
