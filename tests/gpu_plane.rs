//! 2D grids on the GPU (kernels/plane.cu, src/backend/gpu/plane.rs) against the CPU's 2D reference,
//! the 2D Green's function and the CPML's reflection. Every test needs an NVIDIA GPU, so all are
//! ignored by default; run them with `cargo test --features cuda --test gpu_plane -- --ignored`.
//!
//! The contract: the CPU reference's numbers within 1e-5 of the largest value, over the whole
//! wavefield and the receiver traces (the kernel keeps the reference's operation order and
//! compiles without multiply-add contraction, so the difference measured is 0).
#![cfg(feature = "cuda")]

mod common;

use common::compare::{rel_max_diff, run_backend, traces_f64};
use common::plane;
use seismic_run::backend::Backend;
use seismic_run::backend::cpu::PlaneSolver;
use seismic_run::backend::gpu::{self, autotune};
use seismic_run::config::{Config, KernelChoice};
use seismic_run::problem::Problem;

/// GPU against CPU: max |gpu - cpu| / max |cpu|.
const TOLERANCE: f64 = 1e-5;

fn open_cuda(problem: &Problem) -> Box<dyn Backend> {
    autotune::disable();
    let b = gpu::open_cuda(problem, KernelChoice::Fused).expect("open the CUDA backend");
    assert_eq!(b.info().kernel, "plane (2D)");
    b
}

fn cpu_run(problem: &Problem) -> (Vec<f32>, Vec<f32>) {
    let mut cpu = PlaneSolver::<f32>::new(problem).expect("2D CPU solver");
    run_backend(&mut cpu, problem)
}

/// Every trace of the GPU run of `problem`, in f64.
fn gpu_traces(problem: &Problem) -> Vec<Vec<f64>> {
    let mut gpu = open_cuda(problem);
    let (_, traces) = run_backend(gpu.as_mut(), problem);
    traces_f64(&traces, problem.steps)
}

/// An odd 611 x 53 grid (past one block's 512 points in x), a velocity increasing with depth with
/// point-to-point noise, optionally a density of 1000..2700 kg/m^3 (a sharp layer, smooth variation
/// and noise), a sinc source and receivers off the grid, `boundary`, 160 steps.
fn odd_problem(radius: usize, boundary: &str, density: bool) -> Problem {
    odd_problem_at(radius, boundary, density, 3011.3)
}

/// [`odd_problem`] with its source at x = `source_x` m.
fn odd_problem_at(radius: usize, boundary: &str, density: bool, source_x: f64) -> Problem {
    let (nx, nz) = (611, 53);
    let toml = format!(
        "[grid]\nshape = [{nx}, {nz}]\nspacing = [10.0, 10.0]\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n[stencil]\nradius = {radius}\n\
         [time]\nsteps = 160\ncfl_safety = 0.6\n\
         [source]\nposition = [{source_x:?}, 171.1]\nfrequency = 15.0\ninjection = \"sinc\"\n\
         [boundary]\n{boundary}\n\
         [[receivers]]\nposition = [52.0, 48.0]\ninterpolation = \"sinc\"\n\
         [[receivers]]\nposition = [4404.4, 31.2]\ninterpolation = \"sinc\"\n\
         [[receivers]]\nposition = [6090.0, 510.0]\n\
         [[receivers]]\nposition = [100.0, 300.0]\n"
    );
    let cfg = Config::from_toml(&toml).unwrap();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let (mut vp, mut rho) = (Vec::new(), Vec::new());
    for iz in 0..nz {
        for ix in 0..nx {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let noise = (seed >> 40) as f64 / (1u64 << 24) as f64 - 0.5;
            let depth = iz as f64 + 0.02 * ix as f64;
            vp.push((1500.0 + 60.0 * depth + 80.0 * noise).min(4000.0) as f32);
            let layer = if depth > 25.0 { 2200.0 } else { 1100.0 };
            rho.push((layer + 300.0 * (0.15 * ix as f64).sin() + 150.0 * noise) as f32);
        }
    }
    Problem::build_with_density(&cfg, vp, density.then_some(rho)).unwrap()
}

/// R = 1..8 with `boundary`: the GPU within [`TOLERANCE`] of the CPU reference.
fn against_cpu(boundary: &str, density: bool) {
    let mut failures = Vec::new();
    for radius in 1..=8 {
        let problem = odd_problem(radius, boundary, density);
        assert!(problem.is_2d() && problem.variable_density() == density);
        let want = cpu_run(&problem);
        let mut gpu = open_cuda(&problem);
        let got = run_backend(gpu.as_mut(), &problem);
        let (ef, et) = (rel_max_diff(&got.0, &want.0), rel_max_diff(&got.1, &want.1));
        eprintln!("2D, R = {radius}, {boundary:?}, density {density}: field {ef:.2e}, traces {et:.2e}");
        if ef > TOLERANCE || et > TOLERANCE {
            failures.push(format!("R = {radius}: field {ef:.2e}, traces {et:.2e}"));
        }
    }
    assert!(failures.is_empty(), "{boundary}: GPU against CPU beyond {TOLERANCE}: {failures:?}");
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_matches_the_cpu_with_cpml() {
    against_cpu("kind = \"cpml\"\nwidth = 8", false);
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_matches_the_cpu_with_cpml_under_a_free_surface() {
    against_cpu("kind = \"cpml\"\nwidth = 8\nfree_surface = true", false);
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_matches_the_cpu_with_a_sponge_and_without_a_boundary() {
    against_cpu("kind = \"sponge\"\nwidth = 10", false);
    against_cpu("kind = \"none\"\nfree_surface = true", false);
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_matches_the_cpu_where_the_density_varies() {
    against_cpu("kind = \"cpml\"\nwidth = 8\nfree_surface = true", true);
    against_cpu("kind = \"sponge\"\nwidth = 10", true);
}

/// Grids one below, at and one above the vector and block widths in x (4 and 512 points), one
/// point wide, and fewer rows than a block's window.
#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_matches_the_cpu_at_tile_edges() {
    for shape in [[1, 1], [3, 17], [511, 9], [512, 33], [513, 70], [1025, 5]] {
        for radius in [1, 4, 8] {
            let [nx, nz] = shape;
            let toml = format!(
                "[grid]\nshape = [{nx}, {nz}]\nspacing = [10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
                 [stencil]\nradius = {radius}\n[time]\nsteps = 40\ncfl_safety = 0.5\n\
                 [source]\nposition = [{}, {}]\nfrequency = 25.0\ndelay = 0.01\n\
                 [[receivers]]\nposition = [0.0, 0.0]\n[boundary]\nkind = \"none\"\n",
                (nx / 2) as f64 * 10.0,
                (nz / 2) as f64 * 10.0
            );
            let cfg = Config::from_toml(&toml).unwrap();
            let vp = seismic_run::model::load(&cfg, std::path::Path::new(".")).unwrap();
            let problem = Problem::build(&cfg, vp).unwrap();
            let want = cpu_run(&problem);
            let got = run_backend(open_cuda(&problem).as_mut(), &problem);
            let (ef, et) = (rel_max_diff(&got.0, &want.0), rel_max_diff(&got.1, &want.1));
            assert!(ef <= TOLERANCE && et <= TOLERANCE, "{shape:?}, R = {radius}: field {ef:.2e}, traces {et:.2e}");
        }
    }
}

/// The off-grid line source against the 2D Green's function on the GPU: the CPU test's bound.
#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_line_source_matches_the_2d_green_function_off_grid() {
    let g = plane::off_grid_line_source();
    let p = g.problem();
    let traces = gpu_traces(&p);
    let c = 2000.0;
    for (rec, trace) in g.receivers.iter().zip(&traces) {
        let r = plane::dist(g.source, *rec);
        let t_end = r / c + g.delay + 0.2;
        let samples = ((t_end / p.dt) as usize).min(trace.len());
        let exact: Vec<f64> =
            (0..samples).map(|i| plane::line_source_pressure(&p, r, c, (i + 1) as f64 * p.dt)).collect();
        let err = plane::relative_l2(trace, &exact, samples);
        eprintln!("GPU 2D analytic: r = {r:6.1} m, relative L2 error {err:.3e}");
        assert!(err <= 3e-3, "receiver {rec:?} at {r} m: relative L2 error {err}");
    }
}

/// The CPML's reflection at the default width on the GPU, small domain against large domain.
#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_cpml_reflects_60_db_or_less_at_the_default_width() {
    let normal = |ppw, r| plane::reflection_db(&gpu_traces, [41, 41], [20, 20], &[[34, 20], [20, 6], [34, 34]], ppw, r);
    let grazing = |ppw, r| plane::reflection_db(&gpu_traces, [101, 21], [6, 6], &[[30, 6], [55, 6], [80, 6]], ppw, r);
    for (ppw, r) in [(5.0, 4), (10.0, 4), (10.0, 8)] {
        let (n, g) = (normal(ppw, r), grazing(ppw, r));
        eprintln!("GPU 2D CPML, {ppw} points per wavelength, R = {r}: normal {n:.1} dB, grazing {g:.1} dB");
        assert!(n <= -60.0 && g <= -60.0, "{ppw} ppw, R = {r}: normal {n:.1} dB, grazing {g:.1} dB");
    }
}

/// Two shots through one backend (`start_shot`), the second's source elsewhere: its field and
/// traces equal the CPU's.
#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_backend_runs_a_second_shot_as_the_cpu() {
    let first = odd_problem(4, "kind = \"cpml\"\nwidth = 8\nfree_surface = true", false);
    let second = odd_problem_at(4, "kind = \"cpml\"\nwidth = 8\nfree_surface = true", false, 1234.5);
    let mut gpu = open_cuda(&first);
    run_backend(gpu.as_mut(), &first);
    gpu.start_shot(&second).expect("second shot");
    let got = run_backend(gpu.as_mut(), &second);
    let want = cpu_run(&second);
    let (ef, et) = (rel_max_diff(&got.0, &want.0), rel_max_diff(&got.1, &want.1));
    assert!(ef <= TOLERANCE && et <= TOLERANCE, "second shot: field {ef:.2e}, traces {et:.2e}");
}

/// The step's kernels keep every value in registers (no local memory) at every radius, with and
/// without a density: a spill would cost a memory round trip a row.
#[test]
#[ignore = "needs a GPU"]
fn gpu_2d_kernels_do_not_spill() {
    use seismic_run::backend::gpu::cuda::CudaRuntime;
    use seismic_run::backend::gpu::plane::PlaneGpuSolver;
    for radius in 1..=8 {
        for density in [false, true] {
            let problem = odd_problem(radius, "kind = \"cpml\"\nwidth = 8", density);
            let s = PlaneGpuSolver::new(CudaRuntime::new(0).expect("CUDA"), &problem).expect("2D solver");
            let info = s.kernel_info();
            eprintln!("2D kernels, R = {radius}, density {density}: {info}; window {}", s.window());
            assert!(!info.contains("-1 registers"), "{info}");
            assert_eq!(info.matches(" 0 B local").count(), 2, "R = {radius}, density {density}: {info}");
        }
    }
}
