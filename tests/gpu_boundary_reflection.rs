//! The default CPML's reflection on the CUDA backend: tests/cpu_boundaries.rs's small domain
//! against large domain, both run on the GPU with each kernel, at most -60 dB before the faces,
//! at normal and grazing incidence. Needs an NVIDIA GPU, so ignored by default; run it with
//! `cargo test --release --test gpu_boundary_reflection -- --ignored` on a GPU machine.
#![cfg(feature = "cuda")]

mod common;

use common::reflection::{Case, Incidence, db, default_width, measure};
use seismic_run::backend::gpu::{self, autotune};
use seismic_run::config::KernelChoice;
use seismic_run::problem::Problem;

/// Every step of `problem` on the CUDA backend with `kernel` (the default launch shape, whatever
/// this machine's tuning cache holds); the traces per receiver.
fn run_cuda(problem: &Problem, kernel: KernelChoice) -> Vec<Vec<f64>> {
    autotune::disable();
    let mut gpu = gpu::open_cuda(problem, kernel).expect("CUDA backend");
    for n in 0..problem.steps {
        gpu.step(n).expect("step");
    }
    let flat = gpu.traces(problem.steps).expect("traces");
    flat.chunks(problem.steps).map(|t| t.iter().map(|&v| v as f64).collect()).collect()
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_default_cpml_reflects_under_minus_60_db() {
    let width = default_width(4);
    for incidence in [Incidence::Normal, Incidence::Grazing] {
        let case = Case { points_per_wavelength: 10.0, radius: 4, incidence };
        for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
            let measured = measure(&case, width, |p| run_cuda(p, kernel));
            for (i, r) in measured.into_iter().enumerate() {
                eprintln!("{kernel:?}, width {width}, {incidence:?} incidence, receiver {i}: {:.1} dB", db(r));
                assert!(
                    db(r) <= -60.0,
                    "{kernel:?}: reflection {r:.2e} ({:.1} dB) at receiver {i}, {incidence:?}",
                    db(r)
                );
            }
        }
    }
}
