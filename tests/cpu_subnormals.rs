//! The CPU sweep's subnormal flushing (`CpuSolver::flushing_subnormals`, what seismic-run's own
//! CPU runs use): it takes effect (no subnormal value is left in a flushed run's wavefield, where
//! the IEEE run holds some), it changes the traces by at most 5 f32 roundings of their peak
//! (f32::EPSILON times the peak; measured 3.9), and every thread of the pool gets its IEEE mode back after the step.

mod common;

use common::Setup;
use seismic_run::backend::cpu::CpuSolver;

/// A wave that crosses the grid and its CPML layers: its far field decays through the subnormal
/// range while the receivers record the direct arrival and the free-surface reflection.
fn setup() -> Setup {
    Setup {
        shape: [72, 48, 64],
        spacing: 10.0,
        vp: 2000.0,
        radius: 4,
        frequency: 15.0,
        delay: 0.07,
        cfl_safety: 0.8,
        duration: 0.3,
        source: [20, 24, 12],
        receivers: vec![[60, 24, 6], [40, 30, 50], [10, 10, 55], [66, 40, 30]],
        boundary: "cpml",
        width: 10,
        free_surface: true,
    }
}

fn is_subnormal(v: f32) -> bool {
    v != 0.0 && v.abs() < f32::MIN_POSITIVE
}

/// Traces of a run, and the largest count of subnormal values its wavefield held after a step.
fn run(flush: bool) -> (Vec<Vec<f32>>, usize) {
    let p = setup().problem();
    let mut s = CpuSolver::<f32>::new(&p).expect("solver").flushing_subnormals(flush);
    let mut most = 0;
    for n in 0..p.steps {
        s.advance(n);
        if n % 10 == 0 {
            most = most.max(s.field().iter().filter(|&&v| is_subnormal(v)).count());
        }
    }
    (s.traces_native().to_vec(), most)
}

#[test]
#[cfg(target_arch = "x86_64")]
fn flushing_leaves_no_subnormals_and_moves_traces_by_at_most_5_roundings_of_their_peak() {
    let (ieee, ieee_subnormals) = run(false);
    let (flushed, flushed_subnormals) = run(true);
    assert!(ieee_subnormals > 0, "the IEEE run never held a subnormal value: the test exercises nothing");
    assert_eq!(flushed_subnormals, 0, "a flushed run left subnormal values in its wavefield");
    let peak = ieee.iter().flatten().fold(0.0f32, |m, v| m.max(v.abs()));
    let worst = ieee.iter().flatten().zip(flushed.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    eprintln!(
        "subnormal values in the IEEE field (most after a step): {ieee_subnormals}; trace peak {peak:.3e}, \
         largest difference {worst:.3e} = {:.3e} of the peak",
        worst / peak
    );
    assert!(peak > 1e-6, "the traces recorded the wave (peak {peak:e})");
    // Measured: 4.70e-7 of the peak (3.9 roundings).
    assert!(worst <= 5.0 * f32::EPSILON * peak, "traces moved by {worst:e}, {:e} of the peak", worst / peak);
}

#[test]
fn the_pool_threads_get_their_ieee_mode_back_after_a_flushed_step() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().expect("pool");
    pool.install(|| {
        let p = setup().problem();
        let mut s = CpuSolver::<f32>::new(&p).expect("solver").flushing_subnormals(true);
        for n in 0..3 {
            s.advance(n);
        }
    });
    let half_of_smallest = pool.broadcast(|_| std::hint::black_box(f32::MIN_POSITIVE) * std::hint::black_box(0.5));
    for v in half_of_smallest {
        assert!(is_subnormal(v), "a pool thread still flushes: MIN_POSITIVE / 2 gave {v:e}");
    }
}
