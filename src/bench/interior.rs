//! Interior benchmarks without a configuration: an [`Operator`] (fused step, three-pass step,
//! Laplacian only) timed on a homogeneous grid filled with noise, for `examples/gpu_bench.rs`.

use crate::backend::gpu::ceiling::median;
use crate::backend::gpu::{GpuRuntime, GpuSolver, Operator, Tuning};
use crate::config::KernelChoice;
use crate::numerics::noise;
use crate::problem::Problem;
use anyhow::Result;
use serde::Serialize;

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
    pub unroll_z: u32,
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
    let problem = Problem::homogeneous_interior(shape, radius);
    let kernel = if op == Operator::ThreePass { KernelChoice::ThreePass } else { KernelChoice::Fused };
    let mut s = GpuSolver::new(rt, &problem, kernel, tuning)?;
    let points = problem.layout.points();
    s.set_state(&noise(points, 1), &noise(points, 2))?;
    let auto = s.windows();
    let mut out = Vec::new();
    for &w in windows {
        if w == 0 {
            s.restore_windows(auto);
        } else {
            s.set_window(w);
        }
        out.push(bench_result(&mut s, op, reps)?);
    }
    Ok(out)
}

fn bench_result<Rt: GpuRuntime>(s: &mut GpuSolver<Rt>, op: Operator, reps: usize) -> Result<BenchResult> {
    let (shape, radius) = (s.shape(), s.radius());
    let points = shape.iter().product::<usize>();
    let mut t = s.time_interior(op, reps)?;
    let sec = median(&mut t);
    let tu = s.operator_tuning(op);
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
        unroll_z: tu.unroll_z,
        order: tu.order,
        tile_ring: tu.tile_ring,
        halo_ring: tu.halo_ring,
        seconds: sec,
        gbs: op.bytes(shape, radius) as f64 / sec / 1e9,
        gpts: points as f64 / sec / 1e9,
        kernel_info: s.kernel_info(),
    })
}
