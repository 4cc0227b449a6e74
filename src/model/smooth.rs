//! `[model] smoothing`: the model sampled on the grid, smoothed by a separable Gaussian of a
//! standard deviation in metres, as a migration velocity is made from a true model.
//!
//! The velocity is smoothed as slowness 1/vp (averaging slowness keeps travel times along the
//! smoothed paths); a density field, where there is one, is smoothed as density. The kernel is
//! the Gaussian truncated at three standard deviations and normalised to sum 1 on each axis,
//! applied along x, y and z in turn in f64; points beyond the grid take the value at its edge
//! (clamped). A model the same everywhere is returned unchanged, bit for bit. A 2D grid (one
//! point along y) is smoothed in x and z only.

use anyhow::{Result, ensure};
use rayon::prelude::*;
use std::ops::Range;

/// Reach of the truncated kernel, in standard deviations.
const REACH: f64 = 3.0;

/// A checked `model.smoothing` (m): positive and finite.
pub fn check(sigma: f64) -> Result<()> {
    ensure!(
        sigma.is_finite() && sigma > 0.0,
        "model.smoothing = {sigma}: the standard deviation of the Gaussian smoothing must be a positive, finite \
         length in m (leave the key out for no smoothing)"
    );
    Ok(())
}

/// The kernel's half-width in points along an axis of spacing `h`.
pub fn reach_points(sigma: f64, h: f64) -> usize {
    ((REACH * sigma / h).ceil() as usize).max(1)
}

/// The normalised weights of offsets -r..=r along an axis of spacing `h`.
fn weights(sigma: f64, h: f64) -> Vec<f64> {
    let r = reach_points(sigma, h) as isize;
    let w: Vec<f64> = (-r..=r).map(|j| (-0.5 * (j as f64 * h / sigma).powi(2)).exp()).collect();
    let sum: f64 = w.iter().sum();
    w.into_iter().map(|v| v / sum).collect()
}

/// The z-planes a smoothed part `planes` of a grid of `nz` planes needs sampled: `planes` widened
/// by the kernel's reach, within the grid.
pub fn planes_to_sample(planes: &Range<usize>, nz: usize, sigma: f64, dz: f64) -> Range<usize> {
    let r = reach_points(sigma, dz);
    planes.start.saturating_sub(r)..(planes.end + r).min(nz)
}

/// Smooths `values`, the z-planes `held` of a grid of `shape` points and `spacing` (dense
/// (planes, ny, nx), x fastest), and returns its planes `kept` (within `held`): the values those
/// planes have when the whole grid is smoothed, bit for bit, where `held` is
/// [`planes_to_sample`] of `kept`. `slowness` smooths 1/value (a velocity), else the value.
pub fn smooth_planes(
    values: &[f32],
    shape: [usize; 3],
    spacing: [f64; 3],
    sigma: f64,
    held: Range<usize>,
    kept: Range<usize>,
    slowness: bool,
) -> Result<Vec<f32>> {
    check(sigma)?;
    let [nx, ny, nz] = shape;
    let plane = nx * ny;
    ensure!(values.len() == held.len() * plane, "model.smoothing: {} values for {} planes", values.len(), held.len());
    ensure!(held.start <= kept.start && kept.end <= held.end && held.end <= nz, "planes {kept:?} of {held:?}");
    let to = |v: f32| if slowness { 1.0 / v as f64 } else { v as f64 };
    let mut s: Vec<f64> = values.par_iter().map(|&v| to(v)).collect();
    // Along x, each row on its own.
    if nx > 1 {
        let w = weights(sigma, spacing[0]);
        s.par_chunks_mut(nx).for_each(|row| {
            let line = row.to_vec();
            convolve(&line, &w, |i, v| row[i] = v);
        });
    }
    // Along y, each plane on its own.
    if ny > 1 {
        let w = weights(sigma, spacing[1]);
        s.par_chunks_mut(plane).for_each(|p| {
            let copy = p.to_vec();
            let mut column = vec![0.0; ny];
            for ix in 0..nx {
                for (iy, c) in column.iter_mut().enumerate() {
                    *c = copy[iy * nx + ix];
                }
                convolve(&column, &w, |iy, v| p[iy * nx + ix] = v);
            }
        });
    }
    // Along z, into the kept planes; a plane beyond the grid is its edge plane.
    let w = weights(sigma, spacing[2]);
    let r = (w.len() / 2) as isize;
    let from = |k: isize| (k.clamp(0, nz as isize - 1) as usize - held.start) * plane;
    let mut out = vec![0f32; kept.len() * plane];
    out.par_chunks_mut(plane).enumerate().for_each(|(i, o)| {
        let k = (kept.start + i) as isize;
        let mut sum = vec![0.0f64; plane];
        for (j, wj) in w.iter().enumerate() {
            let src = &s[from(k + j as isize - r)..][..plane];
            sum.iter_mut().zip(src).for_each(|(a, b)| *a += wj * b);
        }
        o.iter_mut().zip(&sum).for_each(|(o, v)| *o = if slowness { (1.0 / v) as f32 } else { *v as f32 });
    });
    Ok(out)
}

/// `line` convolved with the centred weights `w`, ends clamped; each result handed to `put`.
fn convolve(line: &[f64], w: &[f64], mut put: impl FnMut(usize, f64)) {
    let (n, r) = (line.len() as isize, (w.len() / 2) as isize);
    for i in 0..n {
        let v = w.iter().enumerate().map(|(j, wj)| wj * line[(i + j as isize - r).clamp(0, n - 1) as usize]).sum();
        put(i as usize, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_model_is_unchanged_bit_for_bit() {
        for v in [1500.0f32, 2345.678, 4321.1] {
            let values = vec![v; 7 * 5 * 6];
            let out = smooth_planes(&values, [7, 5, 6], [10.0, 10.0, 10.0], 23.0, 0..6, 0..6, true).unwrap();
            assert!(out.iter().all(|&o| o.to_bits() == v.to_bits()), "{v}");
        }
    }

    #[test]
    fn a_part_of_the_planes_equals_the_whole_grid_smoothed() {
        let shape = [5, 3, 40];
        let values: Vec<f32> = (0..5 * 3 * 40).map(|i| 1500.0 + (i * 37 % 101) as f32 * 10.0).collect();
        let whole = smooth_planes(&values, shape, [10.0; 3], 25.0, 0..40, 0..40, true).unwrap();
        let kept = 17..23;
        let held = planes_to_sample(&kept, 40, 25.0, 10.0);
        let part = &values[held.start * 15..held.end * 15];
        let out = smooth_planes(part, shape, [10.0; 3], 25.0, held, kept.clone(), true).unwrap();
        assert_eq!(out, whole[kept.start * 15..kept.end * 15]);
    }

    #[test]
    fn bad_widths_name_the_key() {
        for s in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            assert!(check(s).unwrap_err().to_string().contains("model.smoothing"), "{s}");
        }
    }
}
