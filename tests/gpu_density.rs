//! The GPU where the density varies (kernels/density.cu, then cpml.cu's layers scaled by K bh)
//! against the CPU reference, the impedance reflection coefficient, and decomposed GPU runs.
//! Every test needs an NVIDIA GPU, so all are ignored by default; run them with
//! `cargo test --features cuda --test gpu_density -- --ignored` on a GPU machine.
//!
//! The contract: the CPU reference's numbers within 1e-5 of the largest value, over the whole
//! wavefield and the receiver traces (the kernel keeps the reference's operation order and
//! compiles without multiply-add contraction, so the difference measured is 0).
#![cfg(feature = "cuda")]

mod common;

use common::compare::{rel_max_diff, run_backend, traces_f64};
use common::impedance;
use seismic_run::backend::Backend;
use seismic_run::backend::cpu::CpuSolver;
use seismic_run::backend::gpu::{self, autotune};
use seismic_run::config::{Config, KernelChoice};
use seismic_run::decomposition::{self, Decomposition, Domain, InProcess};
use seismic_run::output::plan::OutputPlan;
use seismic_run::problem::Problem;
use seismic_run::solver::{self, SnapshotSink};

/// GPU against CPU: max |gpu - cpu| / max |cpu|.
const TOLERANCE: f64 = 1e-5;

/// The CUDA backend with the default launch shape (whatever this machine's tuning cache holds).
fn open_cuda(problem: &Problem) -> Box<dyn Backend> {
    autotune::disable();
    gpu::open_cuda(problem, KernelChoice::Fused).expect("open the CUDA backend")
}

/// Every trace of the GPU run of `problem`, in f64 (the reflection cases' runner).
fn gpu_traces(problem: &Problem) -> Vec<Vec<f64>> {
    let mut gpu = open_cuda(problem);
    let (_, traces) = run_backend(gpu.as_mut(), problem);
    traces_f64(&traces, problem.steps)
}

/// An odd 67 x 45 x 39 grid (the absorbing layers outside it), a Marmousi-like velocity and a
/// density with a sharp layer, smooth variation and point-to-point noise (1000..2700 kg/m^3), a
/// sinc source and receivers off the grid, `boundary`, 150 steps.
fn odd_problem(radius: usize, boundary: &str) -> Problem {
    let shape = [67, 45, 39];
    let toml = format!(
        "[grid]\nshape = {shape:?}\nspacing = [10.0, 10.0, 10.0]\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n[stencil]\nradius = {radius}\n\
         [time]\nsteps = 150\ncfl_safety = 0.6\n\
         [source]\nposition = [301.3, 203.7, 171.1]\nfrequency = 15.0\ninjection = \"sinc\"\n\
         [boundary]\n{boundary}\n\
         [[receivers]]\nposition = [52.0, 51.0, 48.0]\ninterpolation = \"sinc\"\n\
         [[receivers]]\nposition = [404.4, 221.9, 31.2]\ninterpolation = \"sinc\"\n\
         [[receivers]]\nposition = [660.0, 440.0, 380.0]\n\
         [[receivers]]\nposition = [100.0, 400.0, 300.0]\n"
    );
    let cfg = Config::from_toml(&toml).unwrap();
    let [nx, ny, nz] = shape;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let (mut vp, mut rho) = (Vec::new(), Vec::new());
    for iz in 0..nz {
        for iy in 0..ny {
            for ix in 0..nx {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let noise = (seed >> 40) as f64 / (1u64 << 24) as f64 - 0.5;
                let depth = iz as f64 + 0.2 * ix as f64 + 0.1 * iy as f64;
                vp.push((1500.0 + 60.0 * depth + 80.0 * noise).min(4000.0) as f32);
                let layer = if depth > 25.0 { 2200.0 } else { 1100.0 };
                rho.push((layer + 300.0 * (0.15 * ix as f64).sin() + 150.0 * noise) as f32);
            }
        }
    }
    Problem::build_with_density(&cfg, vp, Some(rho)).unwrap()
}

/// R = 1..8 with `boundary`: the GPU within [`TOLERANCE`] of the CPU reference.
fn against_cpu(boundary: &str) {
    let mut failures = Vec::new();
    for radius in 1..=8 {
        let problem = odd_problem(radius, boundary);
        assert!(problem.variable_density());
        let mut cpu = CpuSolver::<f32>::new(&problem).expect("CPU solver");
        let want = run_backend(&mut cpu, &problem);
        let mut gpu = open_cuda(&problem);
        assert_eq!(gpu.info().kernel, "fused");
        let got = run_backend(gpu.as_mut(), &problem);
        let (ef, et) = (rel_max_diff(&got.0, &want.0), rel_max_diff(&got.1, &want.1));
        eprintln!("density, R = {radius}, {boundary:?}: field {ef:.2e}, traces {et:.2e}");
        if ef > TOLERANCE || et > TOLERANCE {
            failures.push(format!("R = {radius}: field {ef:.2e}, traces {et:.2e}"));
        }
    }
    assert!(failures.is_empty(), "{boundary}: GPU against CPU beyond {TOLERANCE}: {failures:?}");
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_density_matches_the_cpu_with_cpml() {
    against_cpu("kind = \"cpml\"\nwidth = 8");
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_density_matches_the_cpu_with_cpml_under_a_free_surface() {
    against_cpu("kind = \"cpml\"\nwidth = 8\nfree_surface = true");
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_density_matches_the_cpu_with_a_sponge_and_without_layers() {
    against_cpu("kind = \"sponge\"\nwidth = 8");
    against_cpu("kind = \"none\"\nfree_surface = true");
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_density_contrast_reflects_with_the_impedance_coefficient() {
    impedance::a_density_contrast_reflects_with_the_impedance_coefficient(&gpu_traces);
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_both_contrasts_reflect_a_plane_wave_with_the_impedance_coefficient() {
    impedance::both_contrasts_reflect_a_plane_wave_with_the_impedance_coefficient(&gpu_traces);
}

/// Snapshots in the order taken.
struct Keep(Vec<Vec<f32>>, usize);

impl SnapshotSink for Keep {
    fn buffer(&mut self) -> anyhow::Result<Vec<f32>> {
        Ok(vec![f32::NAN; self.1])
    }
    fn submit(&mut self, _index: usize, _step: usize, field: Vec<f32>) -> anyhow::Result<()> {
        self.0.push(field);
        Ok(())
    }
}

/// Decomposed over z slabs and y-z blocks on one GPU (each part's step in two parts, the planes
/// next to the cuts first): the single-GPU run bit for bit, traces and snapshots, R = 1, 4, 8,
/// CPML wider than the halo under a free surface.
#[test]
#[ignore = "needs a GPU"]
fn decomposed_gpu_runs_with_a_variable_density_equal_the_single_gpu_run_bit_for_bit() {
    for radius in [1, 4, 8] {
        let toml = format!(
            "[grid]\nshape = [40, 36, 60]\nspacing = [10.0, 10.0, 10.0]\n\
             [model]\nkind = \"layered\"\ndepths = [205.0, 395.0]\nvelocities = [1800.0, 2500.0, 3000.0]\n\
             density = [1000.0, 2300.0, 1900.0]\n\
             [stencil]\nradius = {radius}\n[time]\nsteps = 120\n\
             [source]\nposition = [201.0, 180.5, 290.0]\nfrequency = 15.0\n\
             [boundary]\nkind = \"cpml\"\nwidth = 12\nfree_surface = true\n\
             [[receivers]]\nline = {{ start = [20.0, 180.0, 20.0], end = [380.0, 180.0, 560.0], count = 9 }}\n\
             [output]\nsnapshot_every = 40\nsnapshot = [{{ kind = \"xz\", at = 180.0 }}]\n"
        );
        let cfg = Config::from_toml(&toml).unwrap();
        let model = seismic_run::model::sample(&cfg, std::path::Path::new(".")).unwrap();
        let problem = Problem::build_with_density(&cfg, model.vp, model.rho).unwrap();
        assert!(problem.variable_density());
        let plan = OutputPlan::from_config(&cfg, &problem).unwrap();
        let mut single = open_cuda(&problem);
        let mut sink = Keep(Vec::new(), plan.snapshot_len(problem.shape()));
        let record = solver::run(&problem, single.as_mut(), &plan, &mut sink, &mut |_| {}).unwrap();
        let want = (record.traces, sink.0);
        let nz = problem.layout.nz;
        for (counts, rows) in [
            (vec![nz / 2, nz - nz / 2], vec![problem.layout.ny]),
            (vec![nz / 2, nz - nz / 2], vec![20, problem.layout.ny - 20]),
        ] {
            let d = Decomposition::with_blocks(&problem, &counts, &rows).unwrap();
            d.check_gpu(&problem).unwrap();
            let mut domains: Vec<Domain> = (0..d.ranks())
                .map(|r| {
                    let sub = d.subdomain(&problem, r).unwrap();
                    let backend = open_cuda(&sub.problem);
                    Domain { sub, backend }
                })
                .collect();
            let mut sink = Keep(Vec::new(), plan.snapshot_len(problem.shape()));
            let mut exchange = InProcess::overlapping();
            let out =
                decomposition::run(&problem, &d, &mut domains, &mut exchange, &plan, Some(&mut sink), &mut |_| {})
                    .unwrap()
                    .expect("in-process runs are rank 0");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
            let what = format!("R = {radius}, slabs {counts:?} x rows {rows:?}");
            assert_eq!(bits(&out.traces), bits(&want.0), "{what}: traces");
            assert_eq!(sink.0.len(), want.1.len(), "{what}: snapshots");
            for (a, b) in sink.0.iter().zip(&want.1) {
                assert_eq!(bits(a), bits(b), "{what}: a snapshot");
            }
            eprintln!("density, {what}: the single-GPU run bit for bit");
        }
    }
}
