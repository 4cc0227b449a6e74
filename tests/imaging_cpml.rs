//! Imaging with CPML on the CPU: the step's terms (src/imaging/transposed.rs) reproduce the CPU
//! solver's traces; the CPU backend's transposed CPML step (src/backend/cpml_transposed.rs) equals
//! their term-by-term transpose and passes the dot-product test <F x, y> = <x, F^T y> with CPML
//! on every face or under a free surface, off-grid sinc sources and receivers (some inside the
//! layers), and a variable density; the misfit gradient through it matches a finite difference;
//! a flat reflector images at its depth, through the API and the `migrate` command; a 2D grid
//! and f16 storage are refused with CPML.

mod common;
mod process;

use common::Lcg;
use common::imaging::{dot_product_mismatch, gradient_and_finite_difference, peak_depth, small_problem, two_layers};
use seismic_run::backend::cpu::CpuSolver;
use seismic_run::imaging::adjoint::{adjoint_samples, check_backward_supported, forward_traces};
use seismic_run::imaging::filter::fractional_derivative;
use seismic_run::imaging::rtm::{add_normalised, migrate_shot};
use seismic_run::imaging::transposed::{forward_traces_by_terms, transposed_samples};
use seismic_run::problem::Problem;

/// The small grid with CPML 6 points wide (on every face, or under a free surface), two
/// receivers inside the layers.
fn problem(free_surface: bool, density: bool) -> Problem {
    small_problem("cpml", 6, free_surface, density, 60.0)
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

/// max |a - b| / max |b| over rows of samples.
fn relative_difference(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    let peak = b.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
    let worst = a.iter().flatten().zip(b.iter().flatten()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    assert!(peak > 0.0, "a nonzero reference");
    worst / peak
}

#[test]
fn the_backends_transposed_step_equals_the_term_by_term_transpose() {
    for (free_surface, density) in [(false, false), (true, false), (true, true)] {
        let p = problem(free_surface, density);
        let y = common::imaging::random(&mut Lcg(7), p.receivers.len(), p.steps);
        let f64_error =
            relative_difference(&adjoint_samples::<f64>(&p, &y).unwrap(), &transposed_samples::<f64>(&p, &y).unwrap());
        let f32_error =
            relative_difference(&adjoint_samples::<f32>(&p, &y).unwrap(), &transposed_samples::<f64>(&p, &y).unwrap());
        eprintln!(
            "cpml, free surface {free_surface}, density {density}: the backend's F^T off the term-by-term \
             transpose by {f64_error:.2e} (f64), {f32_error:.2e} (f32) of the peak"
        );
        assert!(f64_error < 1e-13, "f64: {f64_error:e}");
        assert!(f32_error < 5e-6, "f32: {f32_error:e}");
    }
}

#[test]
fn a_2d_grid_and_f16_are_refused_with_cpml() {
    let mut p = problem(true, false);
    check_backward_supported(&p).unwrap();
    p.precision = seismic_run::config::Precision::F16;
    let err = check_backward_supported(&p).unwrap_err();
    assert!(format!("{err:#}").contains("run.precision"), "{err:#}");
    let text = "[grid]\nshape = [60, 40]\nspacing = [10.0, 10.0]\n\n[model]\nkind = \"constant\"\nvp = 2000.0\n\n\
                [time]\nsteps = 10\n\n[source]\nposition = [300.0, 200.0]\nfrequency = 10.0\n\n\
                [[receivers]]\nposition = [100.0, 100.0]\n";
    let plane = Problem::build(&seismic_run::config::Config::from_toml(text).unwrap(), vec![2000.0; 60 * 40]).unwrap();
    let err = check_backward_supported(&plane).unwrap_err();
    assert!(format!("{err:#}").contains("3D grids"), "{err:#}");
}

/// The line with CPML on every face.
fn line_problem(source_x: f64, vp: Vec<f32>) -> Problem {
    common::imaging::line_problem("cpml", source_x, vp)
}

#[test]
fn a_flat_reflector_images_at_its_true_depth_with_cpml() {
    let depth = 305.0;
    let truth = line_problem(400.0, two_layers(|_| depth, 2000.0, 2600.0));
    let mut smooth = line_problem(400.0, two_layers(|_| depth, 2000.0, 2000.0));
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

#[test]
fn the_misfit_gradient_matches_a_finite_difference_with_cpml() {
    let (predicted, finite_difference) = gradient_and_finite_difference("cpml");
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
