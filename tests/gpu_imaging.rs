//! Imaging on the GPU (kernels/imaging.cu, src/backend/gpu/imaging.rs, and with CPML
//! kernels/cpml_transposed.cu) against the CPU reference: one shot's image, illumination and
//! misfit gradient, 3D (fused and three-pass kernels) and 2D, a sponge or CPML; the dot-product
//! test of the GPU's adjoint; and the `migrate` command run on the GPU against the same command
//! on the CPU, with a sponge and with CPML. Every test needs an NVIDIA GPU, so all are ignored by default;
//! run them with `cargo test --release --test gpu_imaging -- --ignored`.
//!
//! The contract: the CPU's sums within 1e-5 of their largest value (the device keeps the host's
//! operation order in f64 and the fields are the CPU's, so the difference measured is 0).
#![cfg(feature = "cuda")]

mod common;
mod process;

use common::Lcg;
use seismic_run::backend::Backend;
use seismic_run::backend::cpu::{CpuSolver, PlaneSolver};
use seismic_run::backend::gpu::{self, autotune};
use seismic_run::backend::imaging::ImagingSums;
use seismic_run::config::{Config, KernelChoice};
use seismic_run::imaging::adjoint::{adjoint_problem, reversed_traces, with_source_samples};
use seismic_run::imaging::rtm::{ImagingPlan, ShotImaging, ShotSums, add_normalised, residuals, take_device_stack};
use seismic_run::problem::Problem;

/// GPU against CPU: max |gpu - cpu| / max |cpu|.
const TOLERANCE: f64 = 1e-5;

fn open_cuda(problem: &Problem, kernel: KernelChoice) -> Box<dyn Backend> {
    autotune::disable();
    gpu::open_cuda(problem, kernel).expect("open the CUDA backend")
}

/// A grid of `shape` ([nx, nz] for 2D) at 10 m, a smooth random velocity (and a density), an
/// off-grid sinc source, off-grid sinc receivers (one near the free surface, one in the layers),
/// the `boundary` ("sponge" or "cpml") 6 points wide inside the grid.
fn problem(shape: &[usize], boundary: &str, free_surface: bool, density: bool) -> Problem {
    let two_d = shape.len() == 2;
    let [nx, ny, nz] = if two_d { [shape[0], 1, shape[1]] } else { [shape[0], shape[1], shape[2]] };
    let pos =
        |p: [f64; 3]| if two_d { format!("[{}, {}]", p[0], p[2]) } else { format!("[{}, {}, {}]", p[0], p[1], p[2]) };
    let list = |v: &[usize]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ");
    let spacing = if two_d { "[10.0, 10.0]" } else { "[10.0, 10.0, 10.0]" };
    let y = if two_d { 0.0 } else { 108.7 };
    let mut text = format!(
        "[grid]\nshape = [{}]\nspacing = {spacing}\n\n[model]\nkind = \"constant\"\nvp = 2000.0\n\n\
         [stencil]\nradius = 4\n\n[time]\nsteps = 120\ncfl_safety = 0.6\n\n\
         [source]\nposition = {}\nfrequency = 25.0\ninjection = \"sinc\"\n\n\
         [boundary]\nkind = \"{boundary}\"\nwidth = 6\nfree_surface = {free_surface}\nplacement = \"inside\"\n",
        list(shape),
        pos([123.4, y, 31.3]),
    );
    for p in [[41.7, y, 18.9], [188.1, y, 143.3], [96.5, y, 64.2], [233.3, y, 201.6], [31.0, y, 112.8]] {
        text += &format!("\n[[receivers]]\nposition = {}\ninterpolation = \"sinc\"\n", pos(p));
    }
    let cfg = Config::from_toml(&text).expect("test configuration parses");
    let mut rng = Lcg(17);
    let waves: Vec<([f64; 3], f64)> =
        (0..5).map(|_| ([rng.next() * 0.3, rng.next() * 0.3, rng.next() * 0.3], rng.next() * 3.0)).collect();
    let mut vp = Vec::with_capacity(nx * ny * nz);
    for iz in 0..nz {
        for iy in 0..ny {
            for ix in 0..nx {
                let x = [ix, iy, iz].map(|v| v as f64);
                let wiggle: f64 =
                    waves.iter().map(|(k, ph)| (k[0] * x[0] + k[1] * x[1] + k[2] * x[2] + ph).sin()).sum();
                vp.push((2200.0 + 80.0 * wiggle) as f32);
            }
        }
    }
    let rho = density.then(|| vp.iter().map(|&v| 1000.0 + 0.4 * v + 0.0002 * v * v).collect());
    Problem::build_with_density(&cfg, vp, rho).expect("test problem builds")
}

fn random(rng: &mut Lcg, rows: usize, len: usize) -> Vec<Vec<f64>> {
    (0..rows).map(|_| (0..len).map(|_| rng.next()).collect()).collect()
}

/// One shot's sums on `backend`: the image of `data`, and the gradient of the misfit against it.
fn shot_sums(backend: &mut dyn Backend, p: &Problem, plan: ImagingPlan, data: &[Vec<f64>]) -> ImagingSums {
    let mut shot = ShotImaging::source_pass(backend, p, plan).expect("source pass");
    shot.image(data).expect("image");
    if plan.gradient {
        let (residual, _) = residuals(shot.modelled(), data).unwrap();
        shot.gradient(&residual).expect("gradient");
    }
    shot.finish().expect("sums")
}

/// Shots' images stacked on the device ([`ShotImaging::finish_into`], one download at the end)
/// against the same shots' sums downloaded and stacked on the host: the same bits, the gradient
/// too; 3D under a free surface (whose top plane the stack leaves out) and 2D.
#[test]
#[ignore = "needs a GPU"]
fn shots_stacked_on_the_device_are_the_hosts_stack_bit_for_bit() {
    for (shape, free_surface) in [(&[27usize, 22, 25][..], true), (&[61, 47][..], false)] {
        let p = problem(shape, "cpml", free_surface, false);
        let plan = ImagingPlan { interval: 2, gradient: true };
        let points = p.layout.points();
        let mut backend = open_cuda(&p, KernelChoice::Fused);
        let (mut host, mut device) = (vec![0.0; points], vec![0.0; points]);
        let (mut host_gradient, mut device_gradient) = (Vec::new(), Vec::new());
        for seed in [5, 9] {
            let data = random(&mut Lcg(seed), p.receivers.len(), p.steps);
            let sums = shot_sums(backend.as_mut(), &p, plan, &data);
            add_normalised(&mut host, &ShotSums { image: sums.image, illumination: sums.illumination });
            host_gradient.push(sums.gradient);
            let mut shot = ShotImaging::source_pass(backend.as_mut(), &p, plan).expect("source pass");
            shot.image(&data).expect("image");
            let (residual, _) = residuals(shot.modelled(), &data).unwrap();
            shot.gradient(&residual).expect("gradient");
            device_gradient.push(shot.finish_into(&mut device).expect("stacked"));
        }
        assert!(device.iter().all(|&v| v == 0.0), "{shape:?}: the stack came to the host before its end");
        take_device_stack(backend.as_mut(), &mut device).expect("the device stack");
        assert!(host.iter().any(|&v| v != 0.0), "{shape:?}: an empty stack");
        let same = host.iter().zip(&device).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{shape:?}: the device's stack differs from the host's by {:e}", rel_max_diff(&device, &host));
        assert_eq!(host_gradient, device_gradient, "{shape:?}: the gradients differ");
        // Taken once: nothing is left to add.
        let before = device.clone();
        take_device_stack(backend.as_mut(), &mut device).expect("no stack");
        assert_eq!(before, device, "{shape:?}: the stack was taken twice");
        eprintln!("{shape:?}, free surface {free_surface}: 2 shots stacked on the device, bit for bit the host's");
    }
}

fn rel_max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let peak = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(peak > 0.0, "the reference is not all zero");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f64, f64::max) / peak
}

fn compare(what: &str, gpu: &ImagingSums, cpu: &ImagingSums) {
    for (name, g, c) in [
        ("image", &gpu.image, &cpu.image),
        ("illumination", &gpu.illumination, &cpu.illumination),
        ("gradient", &gpu.gradient, &cpu.gradient),
    ] {
        if c.is_empty() {
            assert!(g.is_empty(), "{what}: a {name} the CPU did not compute");
            continue;
        }
        let d = rel_max_diff(g, c);
        eprintln!("{what}: {name} {d:.2e}");
        assert!(d <= TOLERANCE, "{what}: {name} off the CPU's by {d:e}");
    }
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_migration_and_gradient_match_the_cpu_in_3d() {
    for (kernel, boundary, free_surface, density, interval) in [
        (KernelChoice::Fused, "sponge", true, false, 3),
        (KernelChoice::Fused, "sponge", false, true, 1),
        (KernelChoice::ThreePass, "sponge", true, false, 4),
        (KernelChoice::Fused, "cpml", true, true, 2),
        (KernelChoice::Fused, "cpml", false, false, 1),
        (KernelChoice::ThreePass, "cpml", true, false, 3),
    ] {
        let p = problem(&[27, 22, 25], boundary, free_surface, density);
        let data = random(&mut Lcg(5), p.receivers.len(), p.steps);
        for gradient in [false, true] {
            let plan = ImagingPlan { interval, gradient };
            let cpu = shot_sums(&mut CpuSolver::<f32>::new(&p).unwrap(), &p, plan, &data);
            let mut gpu_backend = open_cuda(&p, kernel);
            let gpu = shot_sums(gpu_backend.as_mut(), &p, plan, &data);
            let what = format!("3D {kernel:?}, {boundary}, free surface {free_surface}, density {density}, {plan:?}");
            compare(&what, &gpu, &cpu);
            // A second shot on the same backend reuses its buffers from zero.
            let again = shot_sums(gpu_backend.as_mut(), &p, plan, &data);
            assert_eq!(again, gpu, "a second shot on the same backend");
        }
    }
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_migration_and_gradient_match_the_cpu_in_2d() {
    for (boundary, free_surface, density, interval) in
        [("sponge", true, false, 2), ("sponge", false, true, 5), ("cpml", true, true, 3), ("cpml", false, false, 1)]
    {
        let p = problem(&[261, 233], boundary, free_surface, density);
        let data = random(&mut Lcg(6), p.receivers.len(), p.steps);
        let plan = ImagingPlan { interval, gradient: true };
        let cpu = shot_sums(&mut PlaneSolver::<f32>::new(&p).unwrap(), &p, plan, &data);
        let gpu = shot_sums(open_cuda(&p, KernelChoice::Fused).as_mut(), &p, plan, &data);
        compare(&format!("2D, {boundary}, free surface {free_surface}, density {density}, {plan:?}"), &gpu, &cpu);
    }
}

/// F and F^T on the GPU: the receivers' traces of random source samples x, and the adjoint run
/// of random traces y; <F x, y> against <x, F^T y>, both summed in f64.
#[test]
#[ignore = "needs a GPU"]
fn the_gpu_adjoint_passes_the_dot_product_test() {
    for (shape, boundary, free_surface, density) in [
        (&[27usize, 22, 25][..], "sponge", true, false),
        (&[27, 22, 25][..], "sponge", true, true),
        (&[261, 233][..], "sponge", true, false),
        (&[27, 22, 25][..], "cpml", true, false),
        (&[27, 22, 25][..], "cpml", false, true),
        (&[261, 233][..], "cpml", true, false),
    ] {
        let p = problem(shape, boundary, free_surface, density);
        let mut rng = Lcg(23);
        let x = random(&mut rng, p.sources.len(), p.steps);
        let y = random(&mut rng, p.receivers.len(), p.steps);
        let traces = |q: &Problem| -> Vec<Vec<f64>> {
            let mut b = open_cuda(q, KernelChoice::Fused);
            for n in 0..q.steps {
                b.step(n).unwrap();
            }
            b.traces(q.steps).unwrap().chunks_exact(q.steps).map(|t| t.iter().map(|&v| v as f64).collect()).collect()
        };
        let fx = traces(&with_source_samples(&p, &x).unwrap());
        let fty = reversed_traces(&traces(&adjoint_problem(&p, &y).unwrap()));
        let dot = |a: &[Vec<f64>], b: &[Vec<f64>]| -> f64 {
            a.iter().zip(b).flat_map(|(a, b)| a.iter().zip(b)).map(|(u, v)| u * v).sum()
        };
        let (a, b) = (dot(&fx, &y), dot(&x, &fty));
        let mismatch = (a - b).abs() / a.abs().max(b.abs());
        eprintln!(
            "{shape:?}, {boundary}, free surface {free_surface}, density {density}: <Fx, y> {a:.6e}, <x, F'y> {b:.6e}: \
             {mismatch:.2e}"
        );
        // f32 fields: the variable density's operator rounds more (measured 8.0e-6 with the sponge,
        // 1.2e-5 with CPML; the GPU's fields are the CPU's f32 bits, the test above).
        let tolerance = if density { 2e-5 } else { 1e-5 };
        assert!(mismatch < tolerance, "dot-product test off by {mismatch:e}");
    }
}

/// `seismic-run migrate` on the GPU and on the CPU: the same input (a two-shot line over a flat
/// reflector, the data modelled in the true model on the same backend, the gradient too) writes
/// the same image and gradient, with a sponge and with CPML.
#[test]
#[ignore = "needs a GPU"]
fn the_migrate_command_on_the_gpu_writes_the_cpus_image() {
    for boundary in ["sponge", "cpml"] {
        migrate_on_both(boundary);
    }
}

fn migrate_on_both(boundary: &str) {
    let dir = std::env::temp_dir().join(format!("seismic-run-gpu-imaging-{boundary}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = |backend: &str| {
        format!(
            "[grid]\nshape = [81, 21, 56]\nspacing = [10.0, 10.0, 10.0]\n\n\
             [model]\nkind = \"constant\"\nvp = 2000.0\n\n[stencil]\nradius = 4\n\n[time]\nduration = 0.6\n\n\
             [source]\nposition = [300.0, 100.0, 20.0]\nfrequency = 15.0\ndelay = 0.08\n\n\
             [[receivers]]\nline = {{ start = [80.0, 100.0, 20.0], end = [720.0, 100.0, 20.0], count = 33 }}\n\n\
             [boundary]\nkind = \"{boundary}\"\nwidth = 8\nfree_surface = true\n\n\
             [run]\nbackend = \"{backend}\"\n\n\
             [survey]\nshots = [[300.0, 100.0, 20.0], [500.0, 100.0, 20.0]]\n\n\
             [imaging]\ntrue_model = {{ kind = \"layered\", depths = [305.0], velocities = [2000.0, 2600.0] }}\n\
             data_derivative = -0.5\nlaplacian = true\ngradient = true\noutput = \"{backend}.h5\"\n"
        )
    };
    let mut images = Vec::new();
    for backend in ["cuda", "cpu"] {
        std::fs::write(dir.join(format!("{backend}.toml")), input(backend)).unwrap();
        let out =
            process::seismic_run().current_dir(&dir).args(["migrate", &format!("{backend}.toml")]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!("{stdout}");
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        if backend == "cuda" {
            assert!(stdout.contains("source wavefield kept on the device"), "{stdout}");
        }
        let f = rust_hdf5::H5File::open(dir.join(format!("{backend}.h5"))).unwrap();
        let read = |name: &str| -> Vec<f64> {
            f.dataset(name).unwrap().read_raw::<f32>().unwrap().iter().map(|&v| v as f64).collect()
        };
        images.push((read("image"), read("gradient")));
    }
    let (image, gradient) = (rel_max_diff(&images[0].0, &images[1].0), rel_max_diff(&images[0].1, &images[1].1));
    eprintln!("migrate command, {boundary}, GPU against CPU: image {image:.2e}, gradient {gradient:.2e}");
    assert!(image <= TOLERANCE && gradient <= TOLERANCE, "image {image:e}, gradient {gradient:e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
