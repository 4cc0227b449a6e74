//! Imaging with CPML on the CPU: the step's terms (src/imaging/transposed.rs) reproduce the CPU
//! solver's traces; their transpose passes the dot-product test <F x, y> = <x, F^T y> with CPML
//! on every face or under a free surface, off-grid sinc sources and receivers (some inside the
//! layers), and a variable density; the misfit gradient through it matches a finite difference;
//! a flat reflector images at its depth, through the API and the `migrate` command; a GPU backend
//! is refused with CPML.

mod common;
mod process;

use common::Lcg;
use seismic_run::backend::cpu::{CpuSolver, Real};
use seismic_run::config::Config;
use seismic_run::imaging::adjoint::{adjoint_samples, check_backward_supported, forward_traces, with_source_samples};
use seismic_run::imaging::filter::fractional_derivative;
use seismic_run::imaging::rtm::{add_normalised, migrate_shot, misfit_gradient};
use seismic_run::imaging::transposed::forward_traces_by_terms;
use seismic_run::problem::Problem;

/// A 26 x 22 x 24 grid at 10 m with a smooth random velocity (1900..2500 m/s) and, with
/// `density`, a density that varies with it; CPML 6 points wide (on every face, or under a free
/// surface), an off-grid sinc source and five off-grid sinc receivers, two inside the layers and
/// one within reach of the free surface.
fn problem(free_surface: bool, density: bool) -> Problem {
    let shape = [26, 22, 24];
    let mut text = format!(
        "[grid]\nshape = [{}, {}, {}]\nspacing = [10.0, 10.0, 10.0]\n\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\n\
         [stencil]\nradius = 4\n\n[time]\nsteps = 90\ncfl_safety = 0.6\n\n\
         [source]\nposition = [123.4, 108.7, 31.3]\nfrequency = 25.0\ninjection = \"sinc\"\n\n\
         [boundary]\nkind = \"cpml\"\nwidth = 6\nfree_surface = {free_surface}\nplacement = \"inside\"\n",
        shape[0], shape[1], shape[2]
    );
    for p in [[41.7, 52.2, 18.9], [188.1, 77.7, 143.3], [96.5, 171.0, 64.2], [233.3, 33.9, 201.6], [61.0, 140.4, 112.8]]
    {
        text += &format!("\n[[receivers]]\nposition = [{}, {}, {}]\ninterpolation = \"sinc\"\n", p[0], p[1], p[2]);
    }
    let cfg = Config::from_toml(&text).expect("test configuration parses");
    let mut rng = Lcg(11);
    let waves: Vec<([f64; 3], f64)> =
        (0..5).map(|_| ([rng.next() * 0.3, rng.next() * 0.3, rng.next() * 0.3], rng.next() * 3.0)).collect();
    let mut vp = Vec::new();
    for iz in 0..shape[2] {
        for iy in 0..shape[1] {
            for ix in 0..shape[0] {
                let x = [ix, iy, iz].map(|v| v as f64);
                let wiggle: f64 =
                    waves.iter().map(|(k, ph)| (k[0] * x[0] + k[1] * x[1] + k[2] * x[2] + ph).sin()).sum();
                vp.push((2200.0 + 60.0 * wiggle) as f32);
            }
        }
    }
    let rho = density.then(|| vp.iter().map(|&v| 1000.0 + 0.4 * v + 0.0002 * v * v).collect());
    Problem::build_with_density(&cfg, vp, rho).expect("test problem builds")
}

fn random(rng: &mut Lcg, rows: usize, len: usize) -> Vec<Vec<f64>> {
    (0..rows).map(|_| (0..len).map(|_| rng.next()).collect()).collect()
}

fn dot(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter().zip(b).flat_map(|(a, b)| a.iter().zip(b)).map(|(x, y)| x * y).sum()
}

/// |<F x, y> - <x, F^T y>| / max(|<F x, y>|, |<x, F^T y>|) for random x and y, in precision T,
/// F from the CPU solver.
fn dot_product_mismatch<T: Real>(p: &Problem, seed: u64) -> f64 {
    let mut rng = Lcg(seed);
    let x = random(&mut rng, p.sources.len(), p.steps);
    let y = random(&mut rng, p.receivers.len(), p.steps);
    let fx = forward_traces::<T>(&with_source_samples(p, &x).unwrap()).unwrap();
    let fty = adjoint_samples::<T>(p, &y).unwrap();
    let (a, b) = (dot(&fx, &y), dot(&x, &fty));
    assert!(a.abs() > 0.0 && b.abs() > 0.0, "both sides nonzero");
    (a - b).abs() / a.abs().max(b.abs())
}

#[test]
fn the_steps_terms_reproduce_the_cpu_solvers_traces() {
    for (free_surface, density) in [(false, false), (true, true)] {
        let p = problem(free_surface, density);
        let solver = forward_traces::<f64>(&p).unwrap();
        let terms = forward_traces_by_terms::<f64>(&p).unwrap();
        let peak = solver.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
        let worst = solver.iter().flatten().zip(terms.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        eprintln!(
            "free surface {free_surface}, density {density}: terms off the solver by {:.2e} of the peak",
            worst / peak
        );
        assert!(peak > 0.0 && worst <= 1e-13 * peak, "{worst:e} of {peak:e}");
    }
}

#[test]
fn the_transposed_cpml_step_passes_the_dot_product_test() {
    for (free_surface, density, seed) in [(false, false, 1), (true, false, 2), (true, true, 3)] {
        let p = problem(free_surface, density);
        assert!(
            p.receivers.iter().filter(|r| p.in_absorbing_layer(r.position)).count() >= 2,
            "receivers inside the layers"
        );
        if free_surface {
            // The mirrored sinc weights are exercised.
            assert!(p.receivers[0].taps.len() < p.receivers[1].taps.len(), "receiver 0's taps reach z = 0");
        }
        let f64_mismatch = dot_product_mismatch::<f64>(&p, seed);
        let f32_mismatch = dot_product_mismatch::<f32>(&p, seed);
        eprintln!(
            "cpml, free surface {free_surface}, density {density}: f64 {f64_mismatch:.2e}, f32 {f32_mismatch:.2e}"
        );
        assert!(f64_mismatch < 1e-13, "f64: {f64_mismatch:e}");
        assert!(f32_mismatch < 1e-5, "f32: {f32_mismatch:e}");
    }
}

#[test]
fn a_gpu_backend_is_refused_with_cpml() {
    let p = problem(true, false);
    for backend in ["cuda", "hip"] {
        let err = check_backward_supported(&p, backend).unwrap_err();
        assert!(format!("{err:#}").contains("boundary.kind = \"cpml\""), "{err:#}");
    }
    check_backward_supported(&p, "cpu").unwrap();
}

/// A survey line over a 2D-like model: x 0..800 m, y a thin 21-point slab, z 0..550 m at 10 m;
/// sources and 33 receivers at 20 m depth along y = 100 m; CPML 8 points wide on every face.
fn line_problem(source_x: f64, vp: Vec<f32>) -> Problem {
    let mut text = "[grid]\nshape = [81, 21, 56]\nspacing = [10.0, 10.0, 10.0]\n\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\n\
         [stencil]\nradius = 4\n\n[time]\nduration = 0.6\ndt = 1.5e-3\n\n"
        .to_string();
    text += &format!(
        "[source]\nposition = [{source_x}, 100.0, 20.0]\nfrequency = 15.0\ndelay = 0.08\n\n\
         [boundary]\nkind = \"cpml\"\nwidth = 8\nplacement = \"inside\"\n\n\
         [[receivers]]\nline = {{ start = [80.0, 100.0, 20.0], end = [720.0, 100.0, 20.0], count = 33 }}\n"
    );
    let cfg = Config::from_toml(&text).expect("test configuration parses");
    Problem::build(&cfg, vp).expect("test problem builds")
}

/// The line's velocities: `above` m/s above `depth` m, `below` under it.
fn two_layers(depth: f64, above: f32, below: f32) -> Vec<f32> {
    let [nx, ny, nz] = [81, 21, 56];
    (0..nz)
        .flat_map(|iz| std::iter::repeat_n(if (iz as f64 * 10.0) < depth { above } else { below }, nx * ny))
        .collect()
}

/// Depth (m) of the image's largest value in column x (index) at the line's y, between 150 m and
/// the bottom layer, refined by a parabola through the peak and its two neighbours.
fn peak_depth(image: &[f64], ix: usize) -> f64 {
    let [nx, ny] = [81, 21];
    let at = |iz: usize| image[(iz * ny + 10) * nx + ix];
    let iz = (15..47).max_by(|&a, &b| at(a).total_cmp(&at(b))).unwrap();
    let (m, c, p) = (at(iz - 1), at(iz), at(iz + 1));
    let shift = 0.5 * (m - p) / (m - 2.0 * c + p);
    (iz as f64 + shift) * 10.0
}

#[test]
fn a_flat_reflector_images_at_its_true_depth_with_cpml() {
    let depth = 305.0;
    let truth = line_problem(400.0, two_layers(depth, 2000.0, 2600.0));
    let mut smooth = line_problem(400.0, two_layers(depth, 2000.0, 2000.0));
    // The CPML profiles scale with the model's highest velocity: the direct wave subtracts only
    // where both runs have the same layers (the source and receivers lie in the top one).
    smooth.boundary = truth.boundary.clone();
    let (full, direct) = (forward_traces::<f32>(&truth).unwrap(), forward_traces::<f32>(&smooth).unwrap());
    let observed: Vec<Vec<f64>> = full
        .iter()
        .zip(&direct)
        .map(|(a, b)| a.iter().zip(b).map(|(a, b)| a - b).collect::<Vec<f64>>())
        .map(|r| fractional_derivative(&r, -0.5, smooth.dt))
        .collect();
    let mut backend = CpuSolver::<f32>::new(&smooth).unwrap();
    let sums = migrate_shot(&mut backend, &smooth, &observed).unwrap();
    let mut image = vec![0.0; sums.image.len()];
    add_normalised(&mut image, &sums);
    for ix in [30, 35, 40, 45, 50] {
        let z = peak_depth(&image, ix);
        eprintln!("flat reflector at {depth} m, CPML: column x = {} m images at {z:.1} m", ix * 10);
        assert!((z - depth).abs() <= 10.0, "x = {} m: image at {z} m, reflector at {depth} m", ix * 10);
    }
}

/// A smooth random field of unit size over the line's grid (a sum of a few long plane waves).
fn smooth_field(seed: u64) -> Vec<f64> {
    let mut rng = Lcg(seed);
    let waves: Vec<([f64; 3], f64)> =
        (0..4).map(|_| ([rng.next() * 0.15, rng.next() * 0.15, rng.next() * 0.15], rng.next() * 3.0)).collect();
    let [nx, ny, nz] = [81, 21, 56];
    let mut out = Vec::with_capacity(nx * ny * nz);
    for iz in 0..nz {
        for iy in 0..ny {
            for ix in 0..nx {
                let x = [ix, iy, iz].map(|v| v as f64);
                out.push(
                    waves.iter().map(|(k, ph)| (k[0] * x[0] + k[1] * x[1] + k[2] * x[2] + ph).sin()).sum::<f64>() / 4.0,
                );
            }
        }
    }
    out
}

#[test]
fn the_misfit_gradient_matches_a_finite_difference_with_cpml() {
    let observed = forward_traces::<f64>(&line_problem(400.0, two_layers(305.0, 2000.0, 2600.0))).unwrap();
    let background = smooth_field(5);
    let model = line_problem(400.0, background.iter().map(|b| (2100.0 + 100.0 * b) as f32).collect());
    let mut backend = CpuSolver::<f64>::new(&model).unwrap();
    let (gradient, _) = misfit_gradient(&mut backend, &model, &observed).unwrap();
    let direction = smooth_field(9);
    let misfit = |h: f64| {
        let mut p = model.clone();
        for (v, d) in p.vp.iter_mut().zip(&direction) {
            *v = (*v as f64 + h * d) as f32;
        }
        let d = forward_traces::<f64>(&p).unwrap();
        0.5 * d.iter().flatten().zip(observed.iter().flatten()).map(|(a, b)| (a - b).powi(2)).sum::<f64>()
    };
    let h = 2.0;
    let finite_difference = (misfit(h) - misfit(-h)) / (2.0 * h);
    // The perturbed velocities are rounded to f32: the direction they actually take.
    let taken: Vec<f64> = model
        .vp
        .iter()
        .zip(&direction)
        .map(|(&v, d)| (((v as f64 + h * d) as f32) as f64 - ((v as f64 - h * d) as f32) as f64) / (2.0 * h))
        .collect();
    let predicted: f64 = gradient.iter().zip(&taken).map(|(g, d)| g * d).sum();
    let error = (predicted - finite_difference).abs() / finite_difference.abs();
    eprintln!("CPML: gradient . direction = {predicted:.6e}, finite difference = {finite_difference:.6e}: {error:.2e}");
    assert!(error < 0.01, "gradient off the finite difference by {error:e}");
}

/// The `migrate` command with CPML (the default boundary) on a two-shot line over a flat reflector
/// at 305 m, the data modelled in a true model of a higher velocity (other CPML profiles): the
/// image peaks at the reflector's depth under the line.
#[test]
fn the_migrate_command_images_the_reflector_with_cpml() {
    let dir = std::env::temp_dir().join(format!("seismic-run-imaging-cpml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = "[grid]\nshape = [81, 21, 56]\nspacing = [10.0, 10.0, 10.0]\n\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\n[stencil]\nradius = 4\n\n[time]\nduration = 0.6\n\n\
         [source]\nposition = [300.0, 100.0, 20.0]\nfrequency = 15.0\ndelay = 0.08\n\n\
         [[receivers]]\nline = { start = [80.0, 100.0, 20.0], end = [720.0, 100.0, 20.0], count = 33 }\n\n\
         [boundary]\nkind = \"cpml\"\nwidth = 8\nplacement = \"inside\"\n\n\
         [survey]\nshots = [[300.0, 100.0, 20.0], [500.0, 100.0, 20.0]]\n\n\
         [imaging]\ntrue_model = { kind = \"layered\", depths = [305.0], velocities = [2000.0, 2600.0] }\n\
         data_derivative = -0.5\noutput = \"line.h5\"\n";
    std::fs::write(dir.join("line.toml"), input).unwrap();
    let out = process::seismic_run().current_dir(&dir).args(["migrate", "line.toml"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let f = rust_hdf5::H5File::open(dir.join("line.h5")).unwrap();
    let image: Vec<f64> = f.dataset("image").unwrap().read_raw::<f32>().unwrap().iter().map(|&v| v as f64).collect();
    assert_eq!(image.len(), 81 * 21 * 56);
    for ix in [30, 40, 50] {
        let z = peak_depth(&image, ix);
        eprintln!("migrate command, CPML: column x = {} m images at {z:.1} m", ix * 10);
        assert!((z - 305.0).abs() <= 10.0, "x = {} m: image at {z} m", ix * 10);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
