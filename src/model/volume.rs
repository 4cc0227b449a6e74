//! A velocity model on its own regular grid, and its resampling onto the run grid.
//!
//! Models come with their own spacing and extent (a 2D section, a 3D file). Each is described by
//! per-axis extents, spacings and strides into its storage, so any storage order is read in place;
//! an axis the model lacks has extent 1 and stride 0, which extrudes the model along it. The run
//! grid samples the model by multilinear interpolation (bilinear for 2D models); run-grid points
//! beyond the model's extent take the value at its edge, and a warning says so.

use crate::config::GridConfig;
use anyhow::{Context, Result, bail, ensure};
use rayon::prelude::*;

const AXES: [&str; 3] = ["x", "y", "z"];

/// Velocity (m/s) on the model's own grid; axis order x, y, z in every array.
#[derive(Clone, Debug, PartialEq)]
pub struct VelocityVolume {
    /// Values (m/s) in storage order.
    pub values: Vec<f32>,
    /// Points along x, y, z; 1 along an axis the model does not have.
    pub extent: [usize; 3],
    /// Spacing (m) along x, y, z.
    pub spacing: [f64; 3],
    /// Offset in `values` of one step along x, y, z (0 along a missing axis).
    pub strides: [usize; 3],
    /// The model's z-indices `values` holds, from `held_z.start` (all of them unless the volume
    /// was read for a few run-grid planes, see [`planes_needed`]).
    pub held_z: std::ops::Range<usize>,
}

/// Per run-grid point along axis `a`, the model's two samples around it and the weight of the
/// second: the model has `n` samples `h` apart, run-grid point i lies at `origin + i * spacing +
/// offset` (m).
fn axis_taps(n: usize, h: f64, grid: &GridConfig, a: usize, offset: f64) -> Vec<(usize, usize, f64)> {
    let last = (n - 1) as f64;
    (0..grid.shape[a])
        .map(|i| {
            if n == 1 {
                return (0, 0, 0.0);
            }
            let u = ((grid.origin[a] + i as f64 * grid.spacing[a] + offset) / h).clamp(0.0, last);
            let i0 = (u.floor() as usize).min(n - 2);
            (i0, i0 + 1, u - i0 as f64)
        })
        .collect()
}

/// The z-indices of a model of `n` samples `h` apart along z that the run grid's `planes` read
/// when resampled with z offset `offset`: what a rank reads of a model file for its part.
pub fn planes_needed(
    n: usize,
    h: f64,
    grid: &GridConfig,
    planes: std::ops::Range<usize>,
    offset: f64,
) -> std::ops::Range<usize> {
    if planes.is_empty() {
        return 0..0;
    }
    let taps = axis_taps(n, h, grid, 2, offset);
    let lo = taps[planes.clone()].iter().map(|t| t.0).min().unwrap_or(0);
    let hi = taps[planes].iter().map(|t| t.1).max().unwrap_or(0);
    lo..hi + 1
}

/// Axis indices (0 = x, 1 = y, 2 = z) of a storage order string such as "zyx" or "xz", slowest
/// first. Three distinct axes, or two that are x and z (a 2D section, extruded along y).
pub fn parse_axis_order(order: &str, key: &str) -> Result<Vec<usize>> {
    let mut axes = Vec::new();
    for c in order.chars() {
        let a = match c {
            'x' => 0,
            'y' => 1,
            'z' => 2,
            _ => bail!("{key} = {order:?}: letters must be x, y or z"),
        };
        ensure!(!axes.contains(&a), "{key} = {order:?} names axis {c} twice");
        axes.push(a);
    }
    match axes.len() {
        3 => {}
        2 => ensure!(
            !axes.contains(&1),
            "{key} = {order:?}: a 2D model must have axes x and z (\"xz\" or \"zx\"); it is extruded along y"
        ),
        _ => bail!("{key} = {order:?}: give 3 axes (e.g. \"zyx\") or 2 (\"xz\" or \"zx\")"),
    }
    Ok(axes)
}

impl VelocityVolume {
    /// Describes `values`, stored with the axes `axes` (slowest first) of sizes `shape` and
    /// spacings `spacing`, the last axis contiguous.
    pub fn new(values: Vec<f32>, axes: &[usize], shape: &[usize], spacing: &[f64]) -> VelocityVolume {
        let nz = axes.iter().position(|&a| a == 2).map_or(1, |k| shape[k]);
        Self::part(values, axes, shape, spacing, 0..nz)
    }

    /// As [`Self::new`], where `values` holds only the model's z-indices `held_z` (in the same
    /// storage order, the z axis shortened to them).
    pub fn part(
        values: Vec<f32>,
        axes: &[usize],
        shape: &[usize],
        spacing: &[f64],
        held_z: std::ops::Range<usize>,
    ) -> VelocityVolume {
        assert!(axes.len() == shape.len() && axes.len() == spacing.len());
        let held = |k: usize| if axes[k] == 2 { held_z.len() } else { shape[k] };
        assert_eq!(values.len(), (0..axes.len()).map(held).product::<usize>());
        let mut extent = [1; 3];
        let mut h = [1.0; 3];
        let mut strides = [0; 3];
        let mut stride = 1;
        for k in (0..axes.len()).rev() {
            extent[axes[k]] = shape[k];
            h[axes[k]] = spacing[k];
            strides[axes[k]] = stride;
            stride *= held(k);
        }
        VelocityVolume { values, extent, spacing: h, strides, held_z }
    }

    fn at(&self, i: [usize; 3]) -> f64 {
        let z = i[2] - self.held_z.start;
        self.values[i[0] * self.strides[0] + i[1] * self.strides[1] + z * self.strides[2]] as f64
    }

    /// Samples the model at the run grid's points of z-planes `planes`, dense (planes, ny, nx).
    /// Run-grid point p lies at model coordinate `origin + p * spacing + offset` (m), the model's
    /// first sample at 0.
    /// `name` names the model in warnings about the run grid reaching beyond its extent.
    pub fn resample(
        &self,
        grid: &GridConfig,
        planes: std::ops::Range<usize>,
        offset: [f64; 3],
        name: &str,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<f32>> {
        let taps: [Vec<(usize, usize, f64)>; 3] =
            std::array::from_fn(|a| axis_taps(self.extent[a], self.spacing[a], grid, a, offset[a]));
        let needed = planes_needed(self.extent[2], self.spacing[2], grid, planes.clone(), offset[2]);
        ensure!(
            needed.is_empty() || (self.held_z.start <= needed.start && needed.end <= self.held_z.end),
            "{name}: z-planes {planes:?} read model z-indices {needed:?}, but only {:?} were read",
            self.held_z
        );
        for a in 0..3 {
            let n = self.extent[a];
            if n == 1 {
                continue;
            }
            let lo = grid.origin[a] + offset[a];
            let hi = lo + (grid.shape[a] - 1) as f64 * grid.spacing[a];
            let end = (n - 1) as f64 * self.spacing[a];
            let tol = 1e-6 * self.spacing[a].max(grid.spacing[a]);
            if lo < -tol || hi > end + tol {
                // Both extents in the grid's coordinates.
                let (from, to) = (0.0 - offset[a], end - offset[a]);
                let (grid_lo, grid_hi) =
                    (grid.origin[a], grid.origin[a] + (grid.shape[a] - 1) as f64 * grid.spacing[a]);
                warnings.push(format!(
                    "{name}: the model covers {ax} from {from} to {to} m but the grid reaches {ax} from {grid_lo} to \
                     {grid_hi} m; points beyond the model take the velocity at its edge",
                    ax = AXES[a]
                ));
            }
        }

        let [nx, ny, _] = grid.shape;
        let mut out = planes_filled(grid, planes.len(), 0.0)?;
        let extruded_y = self.extent[1] == 1;
        out.par_chunks_mut(nx * ny).enumerate().for_each(|(k, plane)| {
            let (z0, z1, fz) = taps[2][planes.start + k];
            for iy in 0..ny {
                let row = iy * nx;
                if extruded_y && iy > 0 {
                    plane.copy_within(0..nx, row);
                    continue;
                }
                let (y0, y1, fy) = taps[1][iy];
                for (ix, v) in plane[row..row + nx].iter_mut().enumerate() {
                    let (x0, x1, fx) = taps[0][ix];
                    let lerp_x = |y, z| self.at([x0, y, z]) * (1.0 - fx) + self.at([x1, y, z]) * fx;
                    let lower = lerp_x(y0, z0) * (1.0 - fy) + lerp_x(y1, z0) * fy;
                    let upper = lerp_x(y0, z1) * (1.0 - fy) + lerp_x(y1, z1) * fy;
                    *v = (lower * (1.0 - fz) + upper * fz) as f32;
                }
            }
        });
        Ok(out)
    }
}

/// An empty vector with room for one value per point of `planes` z-planes of the grid, or an error
/// naming `grid.shape` when the host cannot hold it (rather than an abort inside the allocator).
pub fn alloc_planes(grid: &GridConfig, planes: usize) -> Result<Vec<f32>> {
    grid.points()?;
    let points = planes * grid.shape[0] * grid.shape[1];
    let mut v = Vec::new();
    v.try_reserve_exact(points).with_context(|| {
        let part = if planes < grid.shape[2] { format!(" of {planes} z-planes") } else { String::new() };
        format!(
            "grid.shape = {:?} needs {:.1} GiB of host memory for the velocity{part} alone, more than can be allocated",
            grid.shape,
            points as f64 * 4.0 / (1u64 << 30) as f64
        )
    })?;
    Ok(v)
}

/// [`alloc_planes`] holding `planes` z-planes of `value`, filled in parallel: the first touch of
/// each page (a model of 288 M points is 1.15 GB) is shared out over the threads.
pub fn planes_filled(grid: &GridConfig, planes: usize, value: f32) -> Result<Vec<f32>> {
    let mut v = alloc_planes(grid, planes)?;
    let n = planes * grid.shape[0] * grid.shape[1];
    v.spare_capacity_mut()[..n].par_chunks_mut(1 << 16).for_each(|c| c.fill(std::mem::MaybeUninit::new(value)));
    // SAFETY: the first n elements were all written just above.
    unsafe { v.set_len(n) };
    Ok(v)
}
