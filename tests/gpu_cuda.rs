//! CUDA backend against the CPU reference. Every test needs an NVIDIA GPU, so all are
//! ignored by default; run them with `cargo test --features cuda -- --ignored` on a GPU machine.
//!
//! The contract: the GPU computes the CPU reference's numbers bit for bit (the kernels keep its
//! operation order and compile without multiply-add contraction): after 200 steps,
//! max |gpu - cpu| / max |cpu| is 0 over the whole wavefield and over the receiver traces, for
//! R = 1..8, both kernels, odd grid sizes and every boundary.
#![cfg(feature = "cuda")]

mod common;

use common::compare::{self, rel_max_diff};
use seismic_run::backend::Backend;
use seismic_run::backend::cpu::CpuSolver;
use seismic_run::backend::cpu_half::CpuHalfSolver;
use seismic_run::backend::gpu::{self, GpuRuntime, GpuSolver, LayerPass, Tuning, autotune, cuda::CudaRuntime};
use seismic_run::config::{Config, KernelChoice, Precision};
use seismic_run::grid::Section;
use seismic_run::problem::Problem;

/// Bit for bit: every value equal.
const TOLERANCE: f64 = 0.0;

/// A small run in grid indices, built through the CLI's path (TOML, then `Problem::build`).
struct Setup {
    shape: [usize; 3],
    radius: usize,
    steps: usize,
    boundary: &'static str,
    width: usize,
    free_surface: bool,
    /// `boundary.placement`: the layers outside `shape` (the default) or inside it.
    placement: &'static str,
    frequency: f64,
    source: [usize; 3],
    receivers: Vec<[usize; 3]>,
}

const H: f64 = 10.0;

impl Setup {
    fn odd(radius: usize, boundary: &'static str, free_surface: bool) -> Setup {
        Setup {
            shape: [67, 45, 39],
            radius,
            steps: 200,
            boundary,
            width: 8,
            free_surface,
            placement: "outside",
            frequency: 15.0,
            source: [30, 20, 17],
            receivers: vec![[5, 5, 5], [40, 22, 3], [66, 44, 38], [31, 20, 17], [10, 40, 30]],
        }
    }

    fn problem(&self, vp: Vec<f32>) -> Problem {
        let pos = |p: [usize; 3]| format!("[{}, {}, {}]", p[0] as f64 * H, p[1] as f64 * H, p[2] as f64 * H);
        let mut s = format!(
            "[grid]\nshape = [{}, {}, {}]\nspacing = [{H}, {H}, {H}]\n\n\
             [model]\nkind = \"constant\"\nvp = 2000.0\n\n\
             [stencil]\nradius = {}\n\n\
             [time]\nsteps = {}\ncfl_safety = 0.6\n\n\
             [source]\nposition = {}\nfrequency = {}\ninjection = \"trilinear\"\n\n\
             [boundary]\nkind = \"{}\"\nwidth = {}\nfree_surface = {}\nplacement = \"{}\"\n",
            self.shape[0],
            self.shape[1],
            self.shape[2],
            self.radius,
            self.steps,
            pos(self.source),
            self.frequency,
            self.boundary,
            self.width,
            self.free_surface,
            self.placement,
        );
        for &r in &self.receivers {
            s += &format!("\n[[receivers]]\nposition = {}\n", pos(r));
        }
        let cfg = Config::from_toml(&s).expect("test configuration parses");
        Problem::build(&cfg, vp).expect("test problem builds")
    }

    fn homogeneous(&self) -> Problem {
        self.problem(vec![2000.0; self.shape.iter().product()])
    }
}

/// A heterogeneous, Marmousi-like velocity (dense (nz, ny, nx)): layers dipping in x, a fault
/// offsetting them, a fast lens and point-to-point noise, 1500..4200 m/s.
fn marmousi_like(shape: [usize; 3]) -> Vec<f32> {
    let [nx, ny, nz] = shape;
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut out = Vec::with_capacity(nx * ny * nz);
    for iz in 0..nz {
        for iy in 0..ny {
            for ix in 0..nx {
                let fault = if ix > nx / 2 { 4.0 } else { 0.0 };
                let depth = iz as f64 + 0.3 * ix as f64 - fault + 0.1 * iy as f64;
                let layer = (depth / 6.0).floor();
                let mut v = 1500.0 + 180.0 * layer.clamp(0.0, 14.0);
                let (dx, dz) = (ix as f64 - 0.7 * nx as f64, iz as f64 - 0.6 * nz as f64);
                if dx * dx / 64.0 + dz * dz / 16.0 < 1.0 {
                    v = 4200.0;
                }
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                v += ((seed >> 40) as f64 / (1u64 << 24) as f64 - 0.5) * 100.0;
                out.push(v.min(4200.0) as f32);
            }
        }
    }
    out
}

/// [`compare::run_backend`], the snapshot sections checked against the snapshot.
fn run_backend(backend: &mut dyn Backend, problem: &Problem) -> (Vec<f32>, Vec<f32>) {
    let (field, traces) = compare::run_backend(backend, problem);
    check_sections(backend, problem, &field);
    (field, traces)
}

/// Snapshot sections (planes gathered on the device) hold exactly the full snapshot's points.
fn check_sections(backend: &mut dyn Backend, problem: &Problem, field: &[f32]) {
    let grid = problem.shape();
    let [nx, ny, nz] = grid;
    let sections = [
        Section::Xz { iy: ny / 2 },
        Section::Volume,
        Section::Xy { iz: nz - 1 },
        Section::Yz { ix: nx / 3 },
        Section::Xz { iy: 0 },
    ];
    let mut got = vec![f32::NAN; sections.iter().map(|s| s.len(grid)).sum()];
    backend.snapshot_sections(&sections, &mut got).expect("snapshot sections");
    let (mut want, mut part) = (Vec::new(), Vec::new());
    for s in &sections {
        s.extract(grid, field, &mut part);
        want.extend_from_slice(&part);
    }
    assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "sections differ from the snapshot");
}

fn cpu_reference(problem: &Problem) -> (Vec<f32>, Vec<f32>) {
    let mut cpu = CpuSolver::<f32>::new(problem).expect("CPU solver");
    run_backend(&mut cpu, problem)
}

/// The CUDA backend as a run opens it, but with the default launch shape whatever this machine's
/// tuning cache holds, so that what a test checks does not depend on the machine's history
/// (`every_tuner_candidate_matches_cpu` checks every shape the cache may hold).
fn open_cuda(problem: &Problem, kernel: KernelChoice) -> anyhow::Result<Box<dyn Backend>> {
    autotune::disable();
    gpu::open_cuda(problem, kernel)
}

/// Runs the problem on the GPU with a kernel and returns (field error, trace error) against `cpu`.
fn compare(problem: &Problem, kernel: KernelChoice, cpu: &(Vec<f32>, Vec<f32>)) -> (f64, f64) {
    let mut gpu = open_cuda(problem, kernel).expect("open CUDA backend");
    compare_on(gpu.as_mut(), problem, cpu)
}

/// Runs the problem on an opened GPU backend and returns (field error, trace error) against `cpu`.
fn compare_on(gpu: &mut dyn Backend, problem: &Problem, cpu: &(Vec<f32>, Vec<f32>)) -> (f64, f64) {
    let (field, traces) = run_backend(gpu, problem);
    let secs = gpu.step_seconds().expect("step seconds");
    assert_eq!(secs.len(), problem.steps);
    assert!(secs.iter().all(|&s| s > 0.0 && s.is_finite()), "step times must be positive");
    (rel_max_diff(&field, &cpu.0), rel_max_diff(&traces, &cpu.1))
}

fn matrix(boundary: &'static str, free_surface: bool) {
    let mut worst = 0.0f64;
    let mut failures = Vec::new();
    for radius in 1..=8 {
        let problem = Setup::odd(radius, boundary, free_surface).homogeneous();
        let cpu = cpu_reference(&problem);
        for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
            let (ef, et) = compare(&problem, kernel, &cpu);
            eprintln!(
                "gpu-vs-cpu boundary={boundary} free_surface={free_surface} R={radius} kernel={kernel:?}: \
                 field {ef:.3e} traces {et:.3e}"
            );
            worst = worst.max(ef).max(et);
            if !(ef <= TOLERANCE && et <= TOLERANCE) {
                failures.push(format!("R={radius} {kernel:?}: field {ef:.3e}, traces {et:.3e}"));
            }
        }
    }
    eprintln!("worst {worst:.3e}");
    assert!(failures.is_empty(), "over {TOLERANCE:e}: {failures:?}");
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_matches_cpu_cpml() {
    matrix("cpml", false);
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_matches_cpu_sponge() {
    matrix("sponge", false);
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_matches_cpu_free_surface_cpml() {
    matrix("cpml", true);
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_matches_cpu_free_surface_no_absorber() {
    matrix("none", true);
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_matches_cpu_heterogeneous() {
    for radius in [2, 4, 8] {
        let setup = Setup::odd(radius, "cpml", true);
        let problem = setup.problem(marmousi_like(setup.shape));
        let cpu = cpu_reference(&problem);
        for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
            let (ef, et) = compare(&problem, kernel, &cpu);
            eprintln!("gpu-vs-cpu heterogeneous R={radius} kernel={kernel:?}: field {ef:.3e} traces {et:.3e}");
            assert!(ef <= TOLERANCE && et <= TOLERANCE, "R={radius} {kernel:?}: field {ef:.3e} traces {et:.3e}");
        }
    }
}

/// Steps captured into graph launches (chunks of 2, 7 and 32 steps, the first after a host wait
/// of at most 4, so that a snapshot, a blow-up check and the run's end fall inside a chunk and
/// chunks of several lengths take turns) give the bits of steps whose kernels are launched one by
/// one: the field at step 45 and at the end, every trace, and a time for every step.
#[test]
#[ignore = "needs a GPU"]
fn graph_launched_steps_match_kernel_launches() {
    let mut setup = Setup::odd(4, "cpml", true);
    setup.steps = 101;
    let problem = setup.problem(marmousi_like(setup.shape));
    let run = |graph_steps: usize| {
        let rt = CudaRuntime::new(0).expect("CUDA device 0");
        let mut gpu = GpuSolver::new(rt, &problem, KernelChoice::Fused, Tuning::for_radius(4)).expect("open");
        gpu.set_graph_steps(graph_steps).expect("graph steps");
        assert_eq!(gpu.graph_steps(), if graph_steps > 1 { graph_steps } else { 0 }, "CUDA captures graphs");
        let mut middle = vec![0.0f32; problem.layout.points()];
        for n in 0..problem.steps {
            gpu.step(n).expect("step");
            if n + 1 == 45 {
                gpu.snapshot(&mut middle).expect("snapshot");
                assert!(gpu.field_is_finite().expect("blow-up check"));
            }
        }
        let mut last = vec![0.0f32; problem.layout.points()];
        gpu.snapshot(&mut last).expect("snapshot");
        let secs = gpu.step_seconds().expect("step seconds");
        assert_eq!(secs.len(), problem.steps);
        assert!(secs.iter().all(|&s| s > 0.0 && s.is_finite()), "graph {graph_steps}: step times {secs:?}");
        (middle, last, gpu.traces(problem.steps).expect("traces"))
    };
    let launched = run(0);
    assert!(launched.2.iter().any(|&v| v != 0.0), "the traces recorded the wave");
    for graph_steps in [2, 7, 32] {
        let graphed = run(graph_steps);
        assert!(graphed.0 == launched.0, "graphs of {graph_steps} steps: the field at step 45 differs");
        assert!(graphed.1 == launched.1, "graphs of {graph_steps} steps: the last field differs");
        assert!(graphed.2 == launched.2, "graphs of {graph_steps} steps: the traces differ");
    }
}

/// CPML layers from one point wide to wider than a fused tile's 12 rows and a z-window (width 40),
/// on odd grids, with and without a free surface, both kernels: the layers computed inside the
/// fused pass (blocks that hold layer points and blocks that do not) and by cpml.cu after the
/// three passes, against the CPU reference.
#[test]
#[ignore = "needs a GPU"]
fn gpu_matches_cpu_cpml_layer_widths() {
    let mut failures = Vec::new();
    let cases = [([67, 45, 39], 1), ([67, 45, 39], 3), ([67, 45, 39], 17), ([140, 50, 44], 20), ([97, 90, 88], 40)];
    for (shape, width) in cases {
        for radius in [1, 4, 8] {
            for free_surface in [false, true] {
                let mut setup = Setup::odd(radius, "cpml", free_surface);
                (setup.shape, setup.width, setup.steps) = (shape, width, 120);
                setup.source = shape.map(|n| n / 2);
                setup.receivers = vec![[0, 0, 0], shape.map(|n| n - 1), [shape[0] / 2, 1, shape[2] - 2]];
                let problem = setup.homogeneous();
                let cpu = cpu_reference(&problem);
                for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
                    let (ef, et) = compare(&problem, kernel, &cpu);
                    eprintln!(
                        "gpu-vs-cpu cpml width={width} shape={shape:?} R={radius} free_surface={free_surface} \
                         {kernel:?}: field {ef:.3e} traces {et:.3e}"
                    );
                    if !(ef <= TOLERANCE && et <= TOLERANCE) {
                        failures.push(format!("width {width} R={radius} {kernel:?}: {ef:.3e} {et:.3e}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "over {TOLERANCE:e}: {failures:#?}");
}

/// Both ways a fused step can compute the CPML layers are the CPU reference bit for bit: the y
/// layers inside the pass (the default: blocks without y-layer rows, then those with; the
/// former's z layers in the pass too) and the rest after it; and every layer by cpml.cu after the
/// interior. R = 1..8, layer widths 3 and 17, with and without a free surface;
/// nx odd (scalar layer rows; the y layers then after the interior too), a multiple of 4 (vector
/// rows; in the pass the y layers' phi through shared memory; with width 8 the x layers by rows of
/// vectors too); ny 37 with width 17 (the two y layers nearly meet); width 20 on 140 x 100 x 60
/// (the first tile of 128 points meets both x layers, the high one crosses into the second).
#[test]
#[ignore = "needs a GPU"]
fn gpu_layer_pass_modes_match_cpu() {
    let mut failures = Vec::new();
    for radius in 1..=8 {
        for (shape, width, free_surface) in [
            ([67, 45, 39], 3, false),
            ([67, 45, 39], 17, true),
            ([68, 45, 39], 3, false),
            ([68, 45, 39], 17, true),
            ([68, 45, 39], 8, true),
            ([64, 37, 40], 17, false),
            ([140, 100, 60], 20, true),
        ] {
            let mut setup = Setup::odd(radius, "cpml", free_surface);
            (setup.shape, setup.width, setup.steps) = (shape, width, 80);
            // The run grid is `shape`: its nx decides which paths the layers take.
            setup.placement = "inside";
            setup.source = [60, 25, 5];
            setup.receivers = vec![[0, 0, 0], shape.map(|n| n - 1), [33, 1, 37]];
            let problem = setup.homogeneous();
            let cpu = cpu_reference(&problem);
            for mode in [LayerPass::YLayers, LayerPass::After] {
                let rt = CudaRuntime::new(0).expect("CUDA device 0");
                let tuning = Tuning::for_radius(radius);
                let mut gpu = GpuSolver::with_layer_pass(rt, &problem, KernelChoice::Fused, tuning, mode)
                    .expect("open the CUDA solver");
                // The default launch shape has room for the layer tile at every radius; the y
                // layers' kernel takes rows of whole vectors only (nx a multiple of 4).
                let taken =
                    if mode == LayerPass::YLayers && !shape[0].is_multiple_of(4) { LayerPass::After } else { mode };
                assert_eq!(gpu.layer_pass(), taken, "R={radius} {shape:?}: {mode:?} not taken");
                // The gap's z layers go in its pass wherever the y layers do.
                let z = gpu.z_layers_in_pass();
                if z != (taken == LayerPass::YLayers) {
                    failures.push(format!("R={radius} {shape:?} {mode:?}: the gap's z layers in the pass: {z}"));
                }
                let (ef, et) = compare_on(&mut gpu, &problem, &cpu);
                eprintln!(
                    "gpu-vs-cpu layer pass {mode:?} R={radius} {shape:?} width={width} \
                     free_surface={free_surface} z layers in the gap's pass {z}: field {ef:.3e} traces {et:.3e}"
                );
                if !(ef <= TOLERANCE && et <= TOLERANCE) {
                    failures.push(format!("R={radius} {shape:?} width={width} {mode:?}: {ef:.3e} {et:.3e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "over {TOLERANCE:e}: {failures:#?}");
}

/// `run.precision = "f16"` on the GPU (kernels/fused_half.cu and the *_half kernels) against the
/// CPU reference's f16 mode (cpu_half.rs), bit for bit: the kernels keep its operation order and
/// round to f16 where it does. R = 1..8; CPML (widths 3 and 17, a free surface or not), the sponge
/// and no absorber; nx odd (scalar layer rows) and a multiple of 4 (the layers' marching rows);
/// the homogeneous and the heterogeneous model. Snapshots, sections and traces, with the field's
/// scale divided out; the blow-up check sees a finite field.
#[test]
#[ignore = "needs a GPU"]
fn gpu_f16_matches_cpu_f16() {
    let mut failures = Vec::new();
    let mut worst = 0.0f64;
    for radius in 1..=8 {
        for (shape, boundary, width, free_surface, heterogeneous) in [
            ([67, 45, 39], "cpml", 3, true, false),
            ([68, 45, 39], "cpml", 17, false, true),
            ([64, 37, 40], "cpml", 8, true, true),
            ([67, 45, 39], "sponge", 8, false, true),
            ([68, 45, 39], "none", 8, true, false),
        ] {
            let mut setup = Setup::odd(radius, boundary, free_surface);
            (setup.shape, setup.width, setup.steps) = (shape, width, 150);
            setup.source = [33, 22, 17];
            setup.receivers = vec![[0, 0, 0], shape.map(|n| n - 1), [33, 1, 37], [40, 22, 3]];
            let mut problem =
                if heterogeneous { setup.problem(marmousi_like(setup.shape)) } else { setup.homogeneous() };
            problem.precision = Precision::F16;
            let mut cpu = CpuHalfSolver::new(&problem).expect("CPU f16 solver");
            let reference = run_backend(&mut cpu, &problem);
            let mut gpu = open_cuda(&problem, KernelChoice::Fused).expect("open the CUDA f16 solver");
            let (ef, et) = compare_on(gpu.as_mut(), &problem, &reference);
            assert!(gpu.field_is_finite().expect("blow-up check"), "R={radius}: a finite field reported non-finite");
            eprintln!(
                "gpu-vs-cpu f16 R={radius} {shape:?} {boundary} width={width} free_surface={free_surface} \
                 heterogeneous={heterogeneous}: field {ef:.3e} traces {et:.3e}"
            );
            worst = worst.max(ef).max(et);
            if !(ef <= TOLERANCE && et <= TOLERANCE) {
                failures.push(format!("R={radius} {shape:?} {boundary} width={width}: {ef:.3e} {et:.3e}"));
            }
        }
    }
    eprintln!("worst {worst:.3e}");
    assert!(failures.is_empty(), "over {TOLERANCE:e}: {failures:#?}");
}

/// The f16 GPU step is refused with the three-pass kernel, naming the key, before any allocation.
#[test]
#[ignore = "needs a GPU"]
fn gpu_f16_needs_the_fused_kernel() {
    let mut problem = Setup::odd(4, "cpml", false).homogeneous();
    problem.precision = Precision::F16;
    let err = open_cuda(&problem, KernelChoice::ThreePass).err().expect("three-pass f16 must be refused");
    let msg = format!("{err:#}");
    assert!(msg.contains("precision") && msg.contains("fused"), "{msg}");
}

/// Tile-edge cases: grid sizes one below, at and one above the vector and tile widths, and the
/// smallest 3D grid (1 x 2 x 1: a grid one point thick in y is 2D, tests/gpu_plane.rs has those).
#[test]
#[ignore = "needs a GPU"]
fn gpu_matches_cpu_at_tile_edges() {
    for shape in [[1, 2, 1], [3, 9, 17], [127, 8, 9], [128, 17, 3], [129, 7, 33], [5, 130, 70]] {
        for radius in [1, 4, 8] {
            let mut setup = Setup::odd(radius, "none", false);
            setup.shape = shape;
            setup.steps = 60;
            setup.source = shape.map(|n| n / 2);
            setup.receivers = vec![shape.map(|n| n - 1)];
            let problem = setup.homogeneous();
            let cpu = cpu_reference(&problem);
            for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
                let (ef, et) = compare(&problem, kernel, &cpu);
                eprintln!("gpu-vs-cpu shape={shape:?} R={radius} {kernel:?}: field {ef:.3e} traces {et:.3e}");
                assert!(
                    ef <= TOLERANCE && et <= TOLERANCE,
                    "shape {shape:?} R={radius} {kernel:?}: field {ef:.3e} traces {et:.3e}"
                );
            }
        }
    }
}

/// Every launch shape the autotuner may pick, and so seismic-run may run from its cache, is the
/// CPU reference bit for bit: R = 1..8, CPML and a free surface, and z-windows of 0 (automatic),
/// 5 and 13 planes in turn, which put chunk seams inside the 39-plane grid.
#[test]
#[ignore = "needs a GPU"]
fn every_tuner_candidate_matches_cpu() {
    let (mut shapes, mut failures) = (0, Vec::new());
    for radius in 1..=8 {
        let mut setup = Setup::odd(radius, "cpml", true);
        setup.steps = 60;
        let problem = setup.homogeneous();
        let cpu = cpu_reference(&problem);
        for (i, t) in autotune::launch_candidates(radius, Tuning::for_radius(radius)).into_iter().enumerate() {
            let t = Tuning { window: [0, 5, 13][i % 3], ..t };
            let rt = CudaRuntime::new(0).expect("CUDA device 0");
            let mut gpu = GpuSolver::new(rt, &problem, KernelChoice::Fused, t)
                .unwrap_or_else(|e| panic!("R={radius} {t:?}: {e:#}"));
            let (ef, et) = compare_on(&mut gpu, &problem, &cpu);
            eprintln!("gpu-vs-cpu candidate R={radius} {t:?}: field {ef:.3e} traces {et:.3e}");
            shapes += 1;
            if !(ef <= TOLERANCE && et <= TOLERANCE) {
                failures.push(format!("R={radius} {t:?}: field {ef:.3e}, traces {et:.3e}"));
            }
        }
    }
    eprintln!("{shapes} launch shapes compared");
    assert!(shapes >= 8 * 10, "only {shapes} candidates");
    assert!(failures.is_empty(), "over {TOLERANCE:e}: {failures:#?}");
}

/// The Laplacian-only benchmark operator computes the CPU reference's L p^n bit for bit, for
/// R = 1..8 with its own default launch shape (`Tuning::default_for(r, true, true)`: at R = 4
/// four rows a thread in 32-row tiles) and the step's (at R = 4 also the autotuner's three-row
/// tall tile), on a grid no side of which is a multiple of a tile, and at R = 4 and 8 on grids of
/// several tile rows and z-chunks (a module whose rows disagreed with the host's tiles passed the
/// small grid alone). The CPU's L p comes out of one reference step with c^2 dt^2 = 1 and
/// p^{n-1} = 2 p^n, so that p^{n+1} = (2 p^n - p^{n-1}) + c^2 dt^2 L p^n = L p^n exactly.
#[test]
#[ignore = "needs a GPU"]
fn laplacian_operator_matches_cpu_laplacian() {
    let (mut compared, mut failures) = (0, Vec::new());
    // An odd small grid, and grids of several tile rows and z-chunks.
    let large = [([200, 70, 130], 4), ([200, 70, 130], 8), ([512, 128, 256], 4)];
    for (shape, radius) in (1..=8).map(|r| ([67, 45, 39], r)).chain(large) {
        let points: usize = shape.iter().product();
        let mut problem = Problem::homogeneous_interior(shape, radius);
        // (1000 m/s x 1 ms)^2 = 1 in f32; 0.1 of a 10 m cell a step, well within the CFL limit.
        problem.vp = vec![1000.0; points];
        problem.dt = 1e-3;
        assert_eq!(problem.vel2dt2()[0] as f32, 1.0);
        let cur = seismic_run::numerics::noise(points, 7);
        let prev: Vec<f32> = cur.iter().map(|&v| 2.0 * v).collect();
        let mut cpu = CpuSolver::<f32>::new(&problem).expect("CPU solver");
        cpu.set_state(&cur, &prev);
        cpu.advance_field(0);
        let mut want = vec![0.0f32; points];
        cpu.layout().gather(cpu.field(), &mut want);
        // The defaults, and at R = 4 the autotuner's other tall tile (three rows a thread).
        let own = Tuning::default_for(radius, true, true);
        let mut shapes = vec![own, Tuning::for_radius(radius)];
        if radius == 4 {
            shapes.push(Tuning { rows: 3, ..own });
        }
        shapes.dedup();
        for t in shapes {
            let mut gpu = GpuSolver::new(CudaRuntime::new(0).expect("CUDA device 0"), &problem, KernelChoice::Fused, t)
                .unwrap_or_else(|e| panic!("R={radius} {t:?}: {e:#}"));
            gpu.set_state(&cur, &prev).expect("state");
            gpu.time_interior(gpu::Operator::Laplacian, 1).expect("Laplacian-only operator");
            let got = gpu.laplacian_output().expect("L p");
            let (e, scale) = (rel_max_diff(&got, &want), want.iter().fold(0.0f32, |m, v| m.max(v.abs())));
            let runs = gpu.operator_tuning(gpu::Operator::Laplacian).label();
            eprintln!(
                "Laplacian-only R={radius} {shape:?} {runs}: max |L p| {scale:.3e}, max diff / max |L p| {e:.3e}"
            );
            assert!(scale > 0.0, "R={radius}: the reference Laplacian is zero");
            if e > TOLERANCE {
                failures.push(format!("R={radius} {shape:?} {runs}: {e:.3e}"));
            }
            compared += 1;
        }
    }
    assert!(failures.is_empty(), "over {TOLERANCE:e}: {failures:#?}");
    assert!(compared >= 16, "only {compared} launch shapes compared");
}

/// Point Ricker source in a homogeneous medium against p = s(t - r/c) / (4 pi r), before the
/// wall reflections arrive: the CPU reference's analytic test (tests/cpu_analytic.rs), on the GPU,
/// with its tolerance.
#[test]
#[ignore = "needs a GPU"]
fn gpu_point_source_matches_green_function() {
    let setup = common::free_space_point_source();
    let p = setup.problem();
    for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
        let mut gpu = open_cuda(&p, kernel).expect("CUDA backend");
        for s in 0..p.steps {
            gpu.step(s).unwrap();
        }
        let flat = gpu.traces(p.steps).unwrap();
        let traces: Vec<Vec<f64>> = flat.chunks(p.steps).map(|t| t.iter().map(|&v| v as f64).collect()).collect();
        for (rec, (r, err)) in setup.receivers.iter().zip(common::green_function_errors(&setup, &p, &traces)) {
            eprintln!("analytic {kernel:?}: r = {r:6.1} m, relative L2 error {err:.3e}");
            assert!(err <= 1e-3, "{kernel:?} receiver {rec:?}: relative L2 error {err}");
        }
    }
}

#[test]
#[ignore = "needs a GPU"]
fn too_large_grid_is_a_clear_error() {
    let rt = CudaRuntime::new(0).expect("CUDA runtime");
    let (free, _) = rt.mem_info().unwrap();
    // A cube whose three fields alone exceed the free memory.
    let side = ((free as f64 / 4.0).cbrt() * 1.05) as usize + 64;
    // Only the layout matters before the memory check: keep the host arrays small.
    let mut problem = seismic_run::problem::Problem::homogeneous_interior([8, 8, 8], 4);
    problem.layout = seismic_run::grid::Layout::new([side, side, side], 4);
    let err = match GpuSolver::new(rt, &problem, KernelChoice::Fused, Tuning::for_radius(4)) {
        Ok(_) => panic!("a {side}^3 grid cannot fit"),
        Err(e) => format!("{e:#}"),
    };
    eprintln!("{err}");
    assert!(err.contains("GiB of GPU memory") && err.contains("free"), "unclear error: {err}");
}

#[test]
#[ignore = "needs a GPU"]
fn dropping_the_solver_frees_its_memory() {
    let watcher = CudaRuntime::new(0).expect("CUDA runtime");
    let shape = [256, 256, 256];
    let problem = seismic_run::problem::Problem::homogeneous_interior(shape, 4);
    let expected = gpu::estimate_bytes(&problem, KernelChoice::ThreePass) as i64;
    // Warm the kernel cache and context so that only the solver's buffers move the figure.
    drop(GpuSolver::new(CudaRuntime::new(0).unwrap(), &problem, KernelChoice::ThreePass, Tuning::for_radius(4)));
    // Free memory is device-wide: another process allocating or freeing between the readings
    // moves it (the other GPU tests in parallel did). A solver that leaks fails
    // every attempt; one that does not passes the first quiet one.
    let mut last = String::new();
    for attempt in 1..=5 {
        let before = watcher.mem_info().unwrap().0 as i64;
        let mut s =
            GpuSolver::new(CudaRuntime::new(0).unwrap(), &problem, KernelChoice::ThreePass, Tuning::for_radius(4))
                .unwrap();
        s.step(0).unwrap();
        let during = watcher.mem_info().unwrap().0 as i64;
        drop(s);
        let after = watcher.mem_info().unwrap().0 as i64;
        last = format!("free before {before}, during {during}, after {after}, estimate {expected}");
        eprintln!("attempt {attempt}: {last}");
        let held = before - during >= expected * 9 / 10;
        let returned = (before - after).abs() < 64 << 20;
        if held && returned {
            return;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    panic!("the solver should hold its buffers while open and return them when dropped: {last}");
}

/// The blow-up check on the GPU: finite after ordinary steps, non-finite once a NaN or an infinity
/// is in p^n (set through set_state), and after steps at three times the CFL limit, for both kernels;
/// the solver loop then stops with its BlowUp error.
#[test]
#[ignore = "needs a GPU"]
fn gpu_blow_up_check_finds_non_finite_fields() {
    let setup = Setup::odd(4, "cpml", false);
    let p = setup.homogeneous();
    let n = p.layout.points();
    for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
        let mut gpu = open_cuda(&p, kernel).expect("CUDA backend");
        for s in 0..20 {
            gpu.step(s).unwrap();
        }
        assert!(gpu.field_is_finite().unwrap(), "{kernel:?}: a stable run is finite");
        // The flag is reset between checks.
        assert!(gpu.field_is_finite().unwrap());
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut rt = GpuSolver::new(CudaRuntime::new(0).unwrap(), &p, kernel, Tuning::for_radius(4)).unwrap();
            let mut cur = vec![0.0f32; n];
            cur[n - 1] = bad;
            rt.set_state(&cur, &vec![0.0f32; n]).unwrap();
            assert!(!rt.field_is_finite().unwrap(), "{kernel:?}: {bad} in the last point is found");
        }
    }
    let mut unstable = setup.homogeneous();
    unstable.dt = 3.0 * unstable.dt_limit();
    let mut gpu = open_cuda(&unstable, KernelChoice::Fused).expect("CUDA backend");
    let plan = seismic_run::output::plan::OutputPlan::none();
    struct NoSnapshots;
    impl seismic_run::solver::SnapshotSink for NoSnapshots {
        fn buffer(&mut self) -> anyhow::Result<Vec<f32>> {
            Ok(Vec::new())
        }
        fn submit(&mut self, _: usize, _: usize, _: Vec<f32>) -> anyhow::Result<()> {
            Ok(())
        }
    }
    let e = seismic_run::solver::run(&unstable, gpu.as_mut(), &plan, &mut NoSnapshots, &mut |_| {}).unwrap_err();
    assert!(e.blow_up().is_some(), "{e:#}");
    assert!(format!("{e}").contains("300% of the stability (CFL) limit"), "{e}");
}

/// Sinc positioning on the GPU: off-grid source and receivers (the source 1.3 points below the
/// free surface, its z weights mirrored; receivers near faces, their weights truncated, and one
/// at 0.4 point from the surface) against the CPU reference, both kernels, same tolerance; then
/// the CPU suite's off-grid free-space case (512 taps each) within 0.3% of s(t - r/c) / (4 pi r).
#[test]
#[ignore = "needs a GPU"]
fn gpu_sinc_positioning_matches_cpu_and_free_space() {
    let g = common::Geometry {
        shape: [67, 45, 39],
        spacing: H,
        model: "kind = \"constant\"\nvp = 2000.0".into(),
        frequency: 15.0,
        delay: 0.07,
        dt: None,
        cfl_safety: 0.6,
        duration: 0.2,
        source: [301.7, 203.4, 13.0],
        receivers: vec![[15.5, 18.2, 47.1], [402.6, 223.1, 4.0], [655.3, 437.9, 371.2], [311.1, 207.7, 16.6]],
        method: "sinc",
        half_width: None,
        boundary: "none",
        free_surface: true,
    };
    let p = g.problem();
    assert_eq!(p.source().taps.len(), 320);
    let cpu = cpu_reference(&p);
    for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
        let (ef, et) = compare(&p, kernel, &cpu);
        eprintln!("gpu-vs-cpu sinc off the grid {kernel:?}: field {ef:.3e} traces {et:.3e}");
        assert!(ef <= TOLERANCE && et <= TOLERANCE, "{kernel:?}: field {ef:.3e} traces {et:.3e}");
    }

    let g = common::off_grid_free_space("sinc");
    let p = g.problem();
    for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
        let mut gpu = open_cuda(&p, kernel).expect("CUDA backend");
        for s in 0..p.steps {
            gpu.step(s).unwrap();
        }
        let flat = gpu.traces(p.steps).unwrap();
        let traces: Vec<Vec<f64>> = flat.chunks(p.steps).map(|t| t.iter().map(|&v| v as f64).collect()).collect();
        for (r, err) in common::off_grid_free_space_errors(&g, &p, &traces) {
            eprintln!("analytic off the grid, sinc, {kernel:?}: r = {r:6.1} m, relative L2 error {err:.3e}");
            assert!(err <= 3e-3, "{kernel:?}: receiver at {r} m: relative L2 error {err}");
        }
    }
}

/// A survey's shots on one opened GPU backend (`Backend::start_shot` between them: fields and
/// memory variables reset, source and receivers moved, nothing reallocated) equal the CPU
/// reference of each shot built on its own, bit for bit, with CPML and a free surface, both kernels.
#[test]
#[ignore = "needs a GPU"]
fn gpu_survey_shots_match_single_cpu_runs() {
    use seismic_run::survey;
    let text = "[grid]\nshape = [61, 33, 41]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"layered\"\n\
                depths = [200.0]\nvelocities = [1500.0, 2500.0]\n[time]\nsteps = 150\n[source]\n\
                position = [150.0, 160.0, 40.0]\nfrequency = 10.0\n[[receivers]]\n\
                line = { start = [60.0, 160.0, 20.0], end = [360.0, 160.0, 20.0], count = 7 }\n\
                [boundary]\nkind = \"cpml\"\nwidth = 8\nfree_surface = true\n[survey]\n\
                line = { start = [150.0, 160.0, 40.0], end = [233.3, 171.1, 47.7], count = 3 }\nspread = \"moving\"\n";
    let cfg = Config::from_toml(text).unwrap();
    let shots = survey::shots(&cfg).unwrap();
    let shot_cfgs: Vec<Config> =
        shots.iter().map(|s| Config::from_toml(&survey::shot_input(text, s).unwrap()).unwrap()).collect();
    let vp = seismic_run::model::sample(&shot_cfgs[0], std::path::Path::new(".")).unwrap().vp;
    for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
        let mut problem = Problem::build(&shot_cfgs[0], vp.clone()).unwrap();
        let mut gpu = open_cuda(&problem, kernel).expect("CUDA backend");
        for (s, c) in shots.iter().zip(&shot_cfgs) {
            problem.set_shot(c).unwrap();
            gpu.start_shot(&problem).unwrap();
            let single = Problem::build(c, vp.clone()).unwrap();
            let cpu = cpu_reference(&single);
            let (ef, et) = compare_on(gpu.as_mut(), &problem, &cpu);
            eprintln!("gpu-vs-cpu survey shot {} {kernel:?}: field {ef:.3e} traces {et:.3e}", s.index);
            assert!(ef <= TOLERANCE && et <= TOLERANCE, "shot {} {kernel:?}: field {ef:.3e} traces {et:.3e}", s.index);
        }
    }
}

/// Two sources a shot (`[[source]]`: a trilinear and a sinc source whose taps overlap, with other
/// wavelets, amplitudes and delays; the host sums them per tap) on the heterogeneous model with
/// CPML under a free surface: the CPU reference bit for bit in f32 with both kernels, and the
/// CPU's f16 mode in f16.
#[test]
#[ignore = "needs a GPU"]
fn gpu_two_sources_match_cpu() {
    let shape = [67, 45, 39];
    let text = format!(
        "[grid]\nshape = [{}, {}, {}]\nspacing = [{H}, {H}, {H}]\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\
         [time]\nsteps = 200\ncfl_safety = 0.6\n\
         [[source]]\nposition = [300.0, 200.0, 170.0]\nfrequency = 15.0\ninjection = \"trilinear\"\n\
         [[source]]\nposition = [312.5, 207.0, 161.0]\nfrequency = 9.0\namplitude = -2.0\ndelay = 0.05\n\
         [boundary]\nkind = \"cpml\"\nwidth = 8\nfree_surface = true\n\
         [[receivers]]\nposition = [50.0, 50.0, 50.0]\n\
         [[receivers]]\nposition = [400.0, 220.0, 30.0]\n\
         [[receivers]]\nposition = [305.0, 203.0, 165.0]\n",
        shape[0], shape[1], shape[2]
    );
    let cfg = Config::from_toml(&text).expect("two-source input parses");
    let mut problem = Problem::build(&cfg, marmousi_like(shape)).expect("two-source problem builds");
    assert_eq!(problem.sources.len(), 2);
    assert!(problem.source_injection().row > 1, "the sources inject a row of samples per tap");
    let cpu = cpu_reference(&problem);
    for kernel in [KernelChoice::Fused, KernelChoice::ThreePass] {
        let (ef, et) = compare(&problem, kernel, &cpu);
        eprintln!("gpu-vs-cpu two sources kernel={kernel:?}: field {ef:.3e} traces {et:.3e}");
        assert!(ef <= TOLERANCE && et <= TOLERANCE, "{kernel:?}: field {ef:.3e} traces {et:.3e}");
    }
    problem.precision = Precision::F16;
    let mut cpu = CpuHalfSolver::new(&problem).expect("CPU f16 solver");
    let reference = run_backend(&mut cpu, &problem);
    let mut gpu = open_cuda(&problem, KernelChoice::Fused).expect("open the CUDA f16 solver");
    let (ef, et) = compare_on(gpu.as_mut(), &problem, &reference);
    eprintln!("gpu-vs-cpu two sources f16: field {ef:.3e} traces {et:.3e}");
    assert!(ef <= TOLERANCE && et <= TOLERANCE, "f16: field {ef:.3e} traces {et:.3e}");
}
