//! Running a backend over a whole problem and comparing two runs' values: the GPU tests' yardstick
//! against the CPU reference.

use seismic_run::backend::Backend;
use seismic_run::problem::Problem;

/// Every step of `problem` on `backend`: the wavefield after the last step and the traces,
/// (receivers, steps) row-major.
pub fn run_backend(backend: &mut dyn Backend, problem: &Problem) -> (Vec<f32>, Vec<f32>) {
    for n in 0..problem.steps {
        backend.step(n).expect("step");
    }
    let mut field = vec![0.0f32; problem.layout.points()];
    backend.snapshot(&mut field).expect("snapshot");
    (field, backend.traces(problem.steps).expect("traces"))
}

/// max |got - reference| / max |reference|; where the reference is zero everywhere, `got` must be
/// too. NaN anywhere counts as infinitely wrong.
pub fn rel_max_diff(got: &[f32], reference: &[f32]) -> f64 {
    assert_eq!(got.len(), reference.len());
    assert!(reference.iter().all(|v| v.is_finite()), "the reference is not finite");
    let scale = reference.iter().fold(0.0f64, |m, &v| m.max((v as f64).abs())).max(f64::MIN_POSITIVE);
    let diff = got.iter().zip(reference).fold(0.0f64, |m, (&a, &b)| {
        let d = (a as f64 - b as f64).abs();
        if d.is_nan() { f64::INFINITY } else { m.max(d) }
    });
    diff / scale
}

/// Traces (receivers, steps) row-major as one f64 row per receiver.
pub fn traces_f64(traces: &[f32], steps: usize) -> Vec<Vec<f64>> {
    traces.chunks(steps).map(|t| t.iter().map(|&v| v as f64).collect()).collect()
}
