//! Imaging on the CPU reference: the adjoint of the forward modelling operator F passes the
//! dot-product test <F x, y> = <x, F^T y> for random source samples x and traces y, with sinc
//! positions off the grid, a free surface, a sponge, and a variable velocity and density
//! (src/imaging/adjoint.rs derives why); reverse-time migration images a flat reflector at its
//! depth and a dipping one at its dip; the velocity gradient of the misfit matches a finite
//! difference along a smooth random direction.

mod common;
mod process;

use common::imaging::{dot_product_mismatch, gradient_and_finite_difference, peak_depth, small_problem, two_layers};
use seismic_run::backend::cpu::CpuSolver;
use seismic_run::imaging::adjoint::{adjoint_problem, forward_traces};
use seismic_run::imaging::filter::{fractional_derivative, laplacian_filter};
use seismic_run::imaging::rtm::{ImagingPlan, ShotImaging, add_normalised, auto_interval, migrate_shot};
use seismic_run::problem::Problem;

fn problem(boundary: &str, width: usize, free_surface: bool, density: bool) -> Problem {
    small_problem(boundary, width, free_surface, density, 80.0)
}

#[test]
fn the_adjoint_passes_the_dot_product_test_with_each_supported_boundary() {
    for (boundary, width, free_surface, density, seed) in [
        ("none", 0, false, false, 1),
        ("none", 0, true, false, 2),
        ("sponge", 6, false, false, 3),
        ("sponge", 6, true, false, 4),
        ("sponge", 6, true, true, 5),
    ] {
        let p = problem(boundary, width, free_surface, density);
        if boundary == "sponge" {
            // The sponge's factors on the transposed taps are exercised.
            assert!(p.receivers.iter().any(|r| p.in_absorbing_layer(r.position)), "a receiver in the sponge");
        }
        if free_surface {
            // The mirrored sinc weights are exercised.
            assert!(p.receivers[0].taps.len() < p.receivers[1].taps.len(), "receiver 0's taps reach z = 0");
        }
        let f64_mismatch = dot_product_mismatch::<f64>(&p, seed);
        let f32_mismatch = dot_product_mismatch::<f32>(&p, seed);
        eprintln!(
            "{boundary} (width {width}), free surface {free_surface}, density {density}: \
             f64 {f64_mismatch:.2e}, f32 {f32_mismatch:.2e}"
        );
        assert!(f64_mismatch < 1e-12, "f64: {f64_mismatch:e}");
        assert!(f32_mismatch < 1e-5, "f32: {f32_mismatch:e}");
    }
}

#[test]
fn the_adjoint_problem_of_a_cpml_run_takes_the_transposed_layers() {
    // Its layers are the transposed step's (tests/imaging_cpml.rs), the profiles the same.
    let p = problem("cpml", 6, false, false);
    let adjoint = adjoint_problem(&p, &vec![vec![0.0; p.steps]; p.receivers.len()]).unwrap();
    assert_eq!(adjoint.boundary.kind, seismic_run::boundary::BoundaryKind::CpmlTransposed);
    assert_eq!(adjoint.boundary.profiles, p.boundary.profiles);
    assert_eq!((adjoint.sources.len(), adjoint.receivers.len()), (p.receivers.len(), p.sources.len()));
}

/// The line with a sponge.
fn line_problem(source_x: f64, vp: Vec<f32>) -> Problem {
    common::imaging::line_problem("sponge", source_x, vp)
}

/// The stacked, illumination-normalised image of the shots at `sources_x` over the reflector:
/// observed data modelled with it minus data modelled without it (the direct wave removed),
/// migrated in the velocity above it. Dense (nz, ny, nx).
fn line_image(reflector: impl Fn(f64) -> f64 + Copy, sources_x: &[f64]) -> (Problem, Vec<f64>) {
    let mut stack = Vec::new();
    let mut last = None;
    for &sx in sources_x {
        let truth = line_problem(sx, two_layers(reflector, 2000.0, 2600.0));
        let smooth = line_problem(sx, two_layers(reflector, 2000.0, 2000.0));
        let (full, direct) = (forward_traces::<f32>(&truth).unwrap(), forward_traces::<f32>(&smooth).unwrap());
        // A line of receivers: the half derivative gives the image its zero phase.
        let observed: Vec<Vec<f64>> = full
            .iter()
            .zip(&direct)
            .map(|(a, b)| a.iter().zip(b).map(|(a, b)| a - b).collect::<Vec<f64>>())
            .map(|r| fractional_derivative(&r, -0.5, smooth.dt))
            .collect();
        let mut backend = CpuSolver::<f32>::new(&smooth).unwrap();
        let sums = migrate_shot(&mut backend, &smooth, &observed).unwrap();
        if stack.is_empty() {
            stack = vec![0.0; sums.image.len()];
        }
        add_normalised(&mut stack, &sums);
        last = Some(smooth);
    }
    (last.unwrap(), stack)
}

#[test]
fn a_flat_reflector_images_at_its_true_depth() {
    let depth = 305.0;
    let (_, image) = line_image(|_| depth, &[400.0]);
    for ix in [30, 35, 40, 45, 50] {
        let z = peak_depth(&image, ix);
        eprintln!("flat reflector at {depth} m: column x = {} m images at {z:.1} m", ix * 10);
        assert!((z - depth).abs() <= 10.0, "x = {} m: image at {z} m, reflector at {depth} m", ix * 10);
    }
    // The Laplacian filter keeps the peak where it is.
    let filtered = laplacian_filter(&image, [81, 21, 56], [10.0; 3]);
    let z = peak_depth(&filtered, 40);
    eprintln!("filtered: {z:.1} m");
    assert!((z - depth).abs() <= 10.0, "filtered image at {z} m");
}

#[test]
fn a_dipping_reflector_images_at_its_true_dip() {
    let dip = 10.0f64;
    let reflector = move |x: f64| 305.0 + (x - 400.0) * dip.to_radians().tan();
    let (_, image) = line_image(reflector, &[250.0, 400.0, 550.0]);
    let columns: Vec<usize> = (25..=55).collect();
    let depths: Vec<f64> = columns.iter().map(|&ix| peak_depth(&image, ix)).collect();
    let xs: Vec<f64> = columns.iter().map(|&ix| ix as f64 * 10.0).collect();
    let (mx, mz) = (xs.iter().sum::<f64>() / xs.len() as f64, depths.iter().sum::<f64>() / xs.len() as f64);
    let slope = xs.iter().zip(&depths).map(|(x, z)| (x - mx) * (z - mz)).sum::<f64>()
        / xs.iter().map(|x| (x - mx).powi(2)).sum::<f64>();
    let imaged = slope.atan().to_degrees();
    let offset = mz - reflector(mx);
    eprintln!("dipping reflector at {dip} degrees: imaged at {imaged:.2} degrees, {offset:.1} m off in depth");
    assert!((imaged - dip).abs() <= 1.0, "imaged dip {imaged} degrees, true {dip}");
    assert!(offset.abs() <= 10.0, "imaged {offset} m off the reflector's depth");
}

#[test]
fn the_misfit_gradient_matches_a_finite_difference() {
    let (predicted, finite_difference) = gradient_and_finite_difference("sponge");
    let error = (predicted - finite_difference).abs() / finite_difference.abs();
    eprintln!("gradient . direction = {predicted:.6e}, finite difference = {finite_difference:.6e}: {error:.2e}");
    assert!(error < 0.01, "gradient off the finite difference by {error:e}");
}

/// The `migrate` command on a two-shot line over a flat reflector at 305 m: an image file whose
/// `/image` peaks at the reflector's depth under the line, and whose `/gradient` is written.
#[test]
fn the_migrate_command_writes_an_image_of_the_reflector() {
    let dir = std::env::temp_dir().join(format!("seismic-run-imaging-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = "[grid]\nshape = [81, 21, 56]\nspacing = [10.0, 10.0, 10.0]\n\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\n[stencil]\nradius = 4\n\n[time]\nduration = 0.6\n\n\
         [source]\nposition = [300.0, 100.0, 20.0]\nfrequency = 15.0\ndelay = 0.08\n\n\
         [[receivers]]\nline = { start = [80.0, 100.0, 20.0], end = [720.0, 100.0, 20.0], count = 33 }\n\n\
         [boundary]\nkind = \"sponge\"\nwidth = 8\n\n\
         [survey]\nshots = [[300.0, 100.0, 20.0], [500.0, 100.0, 20.0]]\n\n\
         [imaging]\ntrue_model = { kind = \"layered\", depths = [305.0], velocities = [2000.0, 2600.0] }\n\
         data_derivative = -0.5\nlaplacian = true\ngradient = true\noutput = \"line.h5\"\n";
    std::fs::write(dir.join("line.toml"), input).unwrap();
    let out = process::seismic_run().current_dir(&dir).args(["migrate", "line.toml"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The gradient sums every step, so every step's field is kept (in host memory on the CPU, on
    // the device on a GPU).
    assert!(stdout.contains("source wavefield kept") && stdout.contains("f32: 431 fields"), "{stdout}");
    let f = rust_hdf5::H5File::open(dir.join("line.h5")).unwrap();
    let image: Vec<f64> = f.dataset("image").unwrap().read_raw::<f32>().unwrap().iter().map(|&v| v as f64).collect();
    let gradient = f.dataset("gradient").unwrap().read_raw::<f32>().unwrap();
    assert_eq!(image.len(), 81 * 21 * 56);
    assert!(gradient.iter().any(|&g| g != 0.0) && gradient.iter().all(|g| g.is_finite()));
    for ix in [30, 40, 50] {
        let z = peak_depth(&image, ix);
        eprintln!("migrate command: column x = {} m images at {z:.1} m", ix * 10);
        assert!((z - 305.0).abs() <= 10.0, "x = {} m: image at {z} m", ix * 10);
    }
    assert!(dir.join("line.png").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The imaging condition sampled every `interval` steps (the wavelet's band allows 8 here: 15 Hz,
/// dt 1.5 ms) against every step: the same image up to the sampling, the reflector at the same
/// depth.
#[test]
fn an_image_sampled_every_few_steps_matches_the_every_step_image() {
    let depth = 305.0;
    let truth = line_problem(400.0, two_layers(|_| depth, 2000.0, 2600.0));
    let smooth = line_problem(400.0, two_layers(|_| depth, 2000.0, 2000.0));
    let interval = auto_interval(smooth.dt, smooth.source().wavelet.max_frequency());
    assert_eq!(interval, 4, "15 Hz Ricker (37.5 Hz highest), dt 1.5 ms: 1 / (4 x 37.5 x 1.5e-3) = 4.4 steps");
    let (full, direct) = (forward_traces::<f32>(&truth).unwrap(), forward_traces::<f32>(&smooth).unwrap());
    let observed: Vec<Vec<f64>> =
        full.iter().zip(&direct).map(|(a, b)| a.iter().zip(b).map(|(a, b)| a - b).collect()).collect();
    let image = |interval: usize| {
        let mut backend = CpuSolver::<f32>::new(&smooth).unwrap();
        let mut shot =
            ShotImaging::source_pass(&mut backend, &smooth, ImagingPlan { interval, gradient: false }).unwrap();
        // The source pass's traces are the direct wave modelled in the smooth model.
        assert_eq!(shot.modelled(), &direct[..]);
        shot.image(&observed).unwrap();
        let sums = shot.finish().unwrap();
        // Sampled every `interval` steps, a sum over time is that many times smaller.
        sums.image.iter().map(|v| v * interval as f64).collect::<Vec<f64>>()
    };
    let (every, sampled) = (image(1), image(interval));
    let peak = every.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let worst = every.iter().zip(&sampled).map(|(a, b)| (a - b).abs()).fold(0.0f64, f64::max) / peak;
    eprintln!("image every {interval} steps against every step: {worst:.2e} of the peak");
    assert!(worst < 2e-3, "sampled image off by {worst:e} of its peak");
    for ix in [30, 40, 50] {
        let (a, b) = (peak_depth(&every, ix), peak_depth(&sampled, ix));
        assert!((a - b).abs() < 1.0, "x = {} m: {a} m against {b} m", ix * 10);
    }
}

#[test]
fn the_automatic_interval_is_a_power_of_two_within_the_band() {
    // 1 / (4 f dt) steps, rounded down to a power of two, at most 32.
    assert_eq!(auto_interval(1e-3, 25.0), 8);
    assert_eq!(auto_interval(1e-3, 250.0), 1);
    assert_eq!(auto_interval(1e-5, 25.0), 32);
    assert_eq!(auto_interval(0.6e-3, 25.0), 16);
}
