//! Imaging on the CPU reference: the adjoint of the forward modelling operator F passes the
//! dot-product test <F x, y> = <x, F^T y> for random source samples x and traces y, with sinc
//! positions off the grid, a free surface, a sponge, and a variable velocity and density
//! (src/imaging/adjoint.rs derives why).

mod common;

use common::Lcg;
use seismic_run::config::Config;
use seismic_run::imaging::adjoint::{adjoint_samples, forward_traces, with_source_samples};
use seismic_run::problem::Problem;

/// A 26 x 22 x 24 grid at 10 m with a smooth random velocity (1800..2600 m/s) and, with
/// `density`, a density from Gardner's relation; an off-grid sinc source and five off-grid sinc
/// receivers, some within reach of the free surface and the sponge.
fn problem(boundary: &str, width: usize, free_surface: bool, density: bool) -> Problem {
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
                vp.push((2200.0 + 80.0 * wiggle) as f32);
            }
        }
    }
    // A density that varies with the velocity but not in proportion to it (K and L both vary).
    let rho = density.then(|| vp.iter().map(|&v| 1000.0 + 0.4 * v + 0.0002 * v * v).collect());
    Problem::build_with_density(&cfg, vp, rho).expect("test problem builds")
}

fn random(rng: &mut Lcg, rows: usize, len: usize) -> Vec<Vec<f64>> {
    (0..rows).map(|_| (0..len).map(|_| rng.next()).collect()).collect()
}

fn dot(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter().zip(b).flat_map(|(a, b)| a.iter().zip(b)).map(|(x, y)| x * y).sum()
}

/// |<F x, y> - <x, F^T y>| / max(|<F x, y>|, |<x, F^T y>|) for random x and y, in precision T.
fn dot_product_mismatch<T: seismic_run::backend::cpu::Real>(p: &Problem, seed: u64) -> f64 {
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
fn the_adjoint_refuses_cpml() {
    let p = problem("cpml", 6, false, false);
    let err = adjoint_samples::<f64>(&p, &vec![vec![0.0; p.steps]; p.receivers.len()]).unwrap_err();
    assert!(format!("{err:#}").contains("cpml"), "{err:#}");
}
