//! Discretisation: stencil coefficients, the CFL limit and the source wavelets.

pub mod stencil;
pub mod wavelet;
pub mod wavelet_file;

pub use stencil::Stencil;
pub use wavelet::{Ricker, SampledWavelet, Wavelet};

/// Deterministic pseudo-random values in [-1, 1) (benchmarks and tests must not run on zeros),
/// filled in parallel chunks so that the largest grids (2^30 points) take well under a second; the
/// values depend on `len` and `seed` only, not on the number of threads.
pub fn noise(len: usize, seed: u64) -> Vec<f32> {
    use rayon::prelude::*;
    let mut v = vec![0.0f32; len];
    v.par_chunks_mut(1 << 20).enumerate().for_each(|(i, c)| {
        let mut x = (seed ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for e in c {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *e = ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
        }
    });
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn noise_is_deterministic_bounded_and_not_constant() {
        let a = super::noise(3 << 20, 1);
        assert_eq!(a, super::noise(3 << 20, 1));
        assert_ne!(a, super::noise(3 << 20, 2));
        assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
        let mean = a.iter().map(|&v| v as f64).sum::<f64>() / a.len() as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        // Chunks differ from each other.
        assert_ne!(a[..64], a[1 << 20..(1 << 20) + 64]);
    }
}
