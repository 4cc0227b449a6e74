//! Shared by the imaging tests (tests/imaging.rs, tests/imaging_cpml.rs): the small grid of the
//! dot-product tests with a smooth random velocity, the survey line over a reflector that the
//! migration and gradient tests image, and what they measure.

use super::Lcg;
use seismic_run::backend::cpu::{CpuSolver, Real};
use seismic_run::config::Config;
use seismic_run::imaging::adjoint::{adjoint_samples, forward_traces, with_source_samples};
use seismic_run::imaging::rtm::misfit_gradient;
use seismic_run::problem::Problem;

/// A 26 x 22 x 24 grid at 10 m with a smooth random velocity (2200 m/s, +-`swing` x 5 at most)
/// and, with `density`, a density that varies with it but not in proportion (K and L both vary);
/// `boundary` `width` points wide inside the grid (under a free surface where asked), an off-grid
/// sinc source and five off-grid sinc receivers, some within reach of the free surface and of
/// the layers.
pub fn small_problem(boundary: &str, width: usize, free_surface: bool, density: bool, swing: f64) -> Problem {
    let shape = [26, 22, 24];
    let mut text = format!(
        "[grid]\nshape = [{}, {}, {}]\nspacing = [10.0, 10.0, 10.0]\n\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\n\
         [stencil]\nradius = 4\n\n[time]\nsteps = 90\ncfl_safety = 0.6\n\n\
         [source]\nposition = [123.4, 108.7, 31.3]\nfrequency = 25.0\ninjection = \"sinc\"\n\n\
         [boundary]\nkind = \"{boundary}\"\nwidth = {width}\nfree_surface = {free_surface}\nplacement = \"inside\"\n",
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
                vp.push((2200.0 + swing * wiggle) as f32);
            }
        }
    }
    let rho = density.then(|| vp.iter().map(|&v| 1000.0 + 0.4 * v + 0.0002 * v * v).collect());
    Problem::build_with_density(&cfg, vp, rho).expect("test problem builds")
}

pub fn random(rng: &mut Lcg, rows: usize, len: usize) -> Vec<Vec<f64>> {
    (0..rows).map(|_| (0..len).map(|_| rng.next()).collect()).collect()
}

pub fn dot(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter().zip(b).flat_map(|(a, b)| a.iter().zip(b)).map(|(x, y)| x * y).sum()
}

/// |<F x, y> - <x, F^T y>| / max(|<F x, y>|, |<x, F^T y>|) for random x and y, in precision T, F
/// from the CPU solver.
pub fn dot_product_mismatch<T: Real>(p: &Problem, seed: u64) -> f64 {
    let mut rng = Lcg(seed);
    let x = random(&mut rng, p.sources.len(), p.steps);
    let y = random(&mut rng, p.receivers.len(), p.steps);
    let fx = forward_traces::<T>(&with_source_samples(p, &x).unwrap()).unwrap();
    let fty = adjoint_samples::<T>(p, &y).unwrap();
    let (a, b) = (dot(&fx, &y), dot(&x, &fty));
    assert!(a.abs() > 0.0 && b.abs() > 0.0, "both sides nonzero");
    (a - b).abs() / a.abs().max(b.abs())
}

/// The line's grid: x 0..800 m, y a thin 21-point slab, z 0..550 m, at 10 m.
pub const LINE: [usize; 3] = [81, 21, 56];

/// A survey line over a 2D-like model on [`LINE`]: the source at `source_x` and 33 receivers at
/// 20 m depth along y = 100 m; `boundary` 8 points wide on every face, inside the grid; dt fixed
/// so that the models with and without the reflector step alike.
pub fn line_problem(boundary: &str, source_x: f64, vp: Vec<f32>) -> Problem {
    let text = format!(
        "[grid]\nshape = [81, 21, 56]\nspacing = [10.0, 10.0, 10.0]\n\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\n\
         [stencil]\nradius = 4\n\n[time]\nduration = 0.6\ndt = 1.5e-3\n\n\
         [source]\nposition = [{source_x}, 100.0, 20.0]\nfrequency = 15.0\ndelay = 0.08\n\n\
         [boundary]\nkind = \"{boundary}\"\nwidth = 8\nplacement = \"inside\"\n\n\
         [[receivers]]\nline = {{ start = [80.0, 100.0, 20.0], end = [720.0, 100.0, 20.0], count = 33 }}\n"
    );
    let cfg = Config::from_toml(&text).expect("test configuration parses");
    Problem::build(&cfg, vp).expect("test problem builds")
}

/// Velocities of the line's grid: `above` m/s where `reflector(x)` (m) is deeper than z, `below`
/// elsewhere.
pub fn two_layers(reflector: impl Fn(f64) -> f64, above: f32, below: f32) -> Vec<f32> {
    let [nx, ny, nz] = LINE;
    let mut vp = Vec::with_capacity(nx * ny * nz);
    for iz in 0..nz {
        for _ in 0..ny {
            for ix in 0..nx {
                vp.push(if (iz as f64 * 10.0) < reflector(ix as f64 * 10.0) { above } else { below });
            }
        }
    }
    vp
}

/// Depth (m) of the image's largest value in column x (index) at the line's y, between 150 m and
/// the bottom layer, refined by a parabola through the peak and its two neighbours.
pub fn peak_depth(image: &[f64], ix: usize) -> f64 {
    let [nx, ny, _] = LINE;
    let at = |iz: usize| image[(iz * ny + 10) * nx + ix];
    let iz = (15..47).max_by(|&a, &b| at(a).total_cmp(&at(b))).unwrap();
    let (m, c, p) = (at(iz - 1), at(iz), at(iz + 1));
    let shift = 0.5 * (m - p) / (m - 2.0 * c + p);
    (iz as f64 + shift) * 10.0
}

/// A smooth random field of unit size over the line's grid (a sum of a few long plane waves).
pub fn smooth_field(seed: u64) -> Vec<f64> {
    let mut rng = Lcg(seed);
    let waves: Vec<([f64; 3], f64)> =
        (0..4).map(|_| ([rng.next() * 0.15, rng.next() * 0.15, rng.next() * 0.15], rng.next() * 3.0)).collect();
    let [nx, ny, nz] = LINE;
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

/// The misfit gradient on the line with `boundary` against a centred finite difference of the
/// misfit along a smooth random velocity change: observed data from a model with a reflector at
/// 305 m, the gradient at a smooth model without it, in f64. Returns (gradient . direction, the
/// finite difference).
pub fn gradient_and_finite_difference(boundary: &str) -> (f64, f64) {
    let observed =
        forward_traces::<f64>(&line_problem(boundary, 400.0, two_layers(|_| 305.0, 2000.0, 2600.0))).unwrap();
    let background = smooth_field(5);
    let model = line_problem(boundary, 400.0, background.iter().map(|b| (2100.0 + 100.0 * b) as f32).collect());
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
    // h in m/s: the finite difference's O(h^2) error and the f32 velocities' rounding both small.
    let h = 2.0;
    let finite_difference = (misfit(h) - misfit(-h)) / (2.0 * h);
    // The perturbed velocities are rounded to f32: the direction they actually take.
    let taken: Vec<f64> = model
        .vp
        .iter()
        .zip(&direction)
        .map(|(&v, d)| (((v as f64 + h * d) as f32) as f64 - ((v as f64 - h * d) as f32) as f64) / (2.0 * h))
        .collect();
    (gradient.iter().zip(&taken).map(|(g, d)| g * d).sum(), finite_difference)
}
