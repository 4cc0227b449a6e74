//! Density (kg/m^3) on the grid of `[grid]`, from `[model] density` ([`DensityConfig`]): Gardner's
//! relation from the sampled velocity, layers, or a gridded file read and resampled through the
//! velocity's machinery ([`super::file`], [`super::segy`], [`super::volume`]). A constant density,
//! or none, gives no field: the run takes the constant-density path.

use super::volume::alloc_planes;
use crate::config::{Config, DensityConfig, GARDNER_EXPONENT, GARDNER_FACTOR, GridConfig, ModelConfig};
use anyhow::{Result, bail, ensure};
use rayon::prelude::*;
use std::ops::Range;
use std::path::Path;

/// The density of the z-planes `planes` of `[grid]` (dense (planes, ny, nx)), `vp` the velocity
/// of the same planes (Gardner's relation reads it), or None for a constant density. A density
/// file is read relative to `input_dir`; with None, a density file is an error (the callers
/// without an input directory build from velocities alone).
pub fn sample_density_planes(
    cfg: &Config,
    input_dir: Option<&Path>,
    planes: Range<usize>,
    vp: &[f32],
    warnings: &mut Vec<String>,
) -> Result<Option<Vec<f32>>> {
    let grid = &cfg.grid;
    let Some(density) = cfg.model.density.as_ref().filter(|d| d.is_variable()) else { return Ok(None) };
    cfg.check_density()?;
    let rho = match density {
        DensityConfig::Constant(_) => unreachable!("filtered above"),
        DensityConfig::Gardner => {
            ensure!(vp.len() == planes.len() * grid.shape[0] * grid.shape[1], "model: velocities of other planes");
            gardner(vp)
        }
        DensityConfig::PerLayer(values) => {
            let ModelConfig::Layered { depths, .. } = &cfg.model.velocity else {
                bail!("model.density as a list (one density per layer) needs kind = \"layered\"")
            };
            fill_layers(grid, planes, depths, values)?
        }
        DensityConfig::Layered { depths, values } => fill_layers(grid, planes, depths, values)?,
        DensityConfig::File { path, format, shape, spacing, units, axis_order, sha256, origin } => {
            let Some(input_dir) = input_dir else {
                bail!("model.density.file: a density file is read by model::sample (with the input's directory)")
            };
            let path = input_dir.join(path);
            super::check_regular_file(&path, "model.density.file")?;
            let spec = super::file::FileSpec {
                path: &path,
                format: *format,
                shape,
                spacing,
                units: *units,
                axis_order,
                sha256: sha256.as_deref(),
                key: "model.density",
            };
            let offset = origin.map(|o| 0.0 - o);
            let (nz, hz) = spec.z_axis()?;
            let needed = super::volume::planes_needed(nz, hz, grid, planes.clone(), offset[2]);
            let volume = spec.read_planes(Some(needed))?;
            let name = format!("density file {}", path.display());
            volume.resample(grid, planes, offset, &name, warnings)?
        }
    };
    Ok(Some(rho))
}

/// Gardner's relation rho = 310 vp^0.25 (kg/m^3 from m/s) at every point of `vp`.
pub fn gardner(vp: &[f32]) -> Vec<f32> {
    vp.par_iter().map(|&v| (GARDNER_FACTOR * (v as f64).powf(GARDNER_EXPONENT)) as f32).collect()
}

/// Horizontal layers on the planes `planes` of `grid`: `values[i]` from the previous depth down
/// to `depths[i]` (a point at a depth belongs to the layer below), the last value below; depth is
/// the grid's z coordinate. The values are checked by the caller.
pub fn fill_layers(grid: &GridConfig, planes: Range<usize>, depths: &[f64], values: &[f64]) -> Result<Vec<f32>> {
    ensure!(values.len() == depths.len() + 1, "{} layer values for {} depths", values.len(), depths.len());
    let [nx, ny, _] = grid.shape;
    let mut out = alloc_planes(grid, planes.len())?;
    for iz in planes {
        let z = grid.origin[2] + iz as f64 * grid.spacing[2];
        let layer = depths.iter().position(|&d| z < d).unwrap_or(depths.len());
        out.resize(out.len() + nx * ny, values[layer] as f32);
    }
    Ok(out)
}

/// The lowest and highest density of `rho` (kg/m^3; NaNs skipped, as in the velocity's range).
pub fn density_range(rho: &[f32]) -> [f32; 2] {
    crate::problem::velocity_range(rho)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(density: &str) -> Config {
        let text = format!(
            "[grid]\nshape = [4, 3, 6]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"layered\"\ndepths = [25.0]\n\
             velocities = [1500.0, 3000.0]\ndensity = {density}\n[time]\nsteps = 1\n[source]\n\
             position = [10.0, 10.0, 10.0]\nfrequency = 10.0\n"
        );
        Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn each_form_samples_its_layers() {
        let plane = 12;
        let vp: Vec<f32> = [1500.0f32, 1500.0, 1500.0, 3000.0, 3000.0, 3000.0]
            .iter()
            .flat_map(|&v| std::iter::repeat_n(v, plane))
            .collect();
        let mut w = Vec::new();
        let per_layer = sample_density_planes(&cfg("[1000.0, 2500.0]"), None, 0..6, &vp, &mut w).unwrap().unwrap();
        assert_eq!(per_layer[2 * plane], 1000.0);
        assert_eq!(per_layer[3 * plane], 2500.0, "z = 30 m lies below the depth 25 m");
        let own = sample_density_planes(
            &cfg("{ depths = [15.0], values = [1100.0, 2000.0] }"),
            None,
            1..4,
            &vp[plane..4 * plane],
            &mut w,
        )
        .unwrap()
        .unwrap();
        assert_eq!(own.len(), 3 * plane);
        assert_eq!((own[0], own[plane], own[2 * plane]), (1100.0, 2000.0, 2000.0));
        let g = sample_density_planes(&cfg("\"gardner\""), None, 0..6, &vp, &mut w).unwrap().unwrap();
        assert_eq!(g[0], (310.0 * 1500f64.powf(0.25)) as f32);
        assert!((g[5 * plane] - 2294.5).abs() < 0.5, "{}", g[5 * plane]);
        assert_eq!(sample_density_planes(&cfg("2000.0"), None, 0..6, &vp, &mut w).unwrap(), None);
    }

    #[test]
    fn a_file_needs_the_input_directory() {
        let c = cfg("{ file = \"rho.npy\", format = \"npy\", shape = [6, 3, 4], spacing = [10.0, 10.0, 10.0] }");
        let err = sample_density_planes(&c, None, 0..6, &[], &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("model.density.file"), "{err}");
    }
}
