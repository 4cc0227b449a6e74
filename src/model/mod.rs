//! Velocity models: built-in kinds, files and named data sets, sampled onto the run grid, and the
//! density beside them ([`density`]).
//!
//! `[model] kind` picks one of:
//! - `constant`: `vp` everywhere;
//! - `layered`: horizontal layers, `velocities[i]` from the previous depth down to `depths[i]`
//!   (a point exactly at `depths[i]` belongs to the layer below), `velocities` one longer than
//!   `depths`; depth is the grid's z coordinate (origin included);
//! - `file`: a gridded model in a file ([`file`](mod@file); SEG-Y: [`segy`]), its first sample at
//!   `model.origin` (default 0 on every axis) in the grid's coordinates, resampled trilinearly
//!   (bilinearly for 2D files, extruded along y);
//! - `marmousi`: the named data set ([`dataset`]); the grid's x coordinate plus `x_offset` is the
//!   model's horizontal position, its z coordinate the depth; extruded along y.
//!
//! With `model.smoothing`, the sampled model is then smoothed ([`smooth`]): a Gaussian on the
//! slowness, the density (files, layers) smoothed alike and Gardner's taken from the smoothed
//! velocity.
//! Grid points beyond a gridded model's extent take the velocity at its edge, with a warning.
//! The model is sampled on the grid of `[grid]`; absorbing layers outside it take its edge
//! values on the run grid ([`extend`], [`sample_run_planes`]).
//! Every error names the key or file at fault.

pub mod dataset;
pub mod density;
pub mod extend;
pub mod file;
pub mod npy;
pub mod segy;
pub mod smooth;
pub mod volume;

pub use dataset::{Descriptor, data_dirs, default_fetch_dir, descriptor, descriptors, fetch};

use crate::config::{Config, GridConfig, ModelConfig};
use anyhow::{Result, ensure};
use std::ops::Range;
use std::path::Path;

/// Velocity (and density) on the run grid and what the user should know about how it was made.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// m/s, dense (nz, ny, nx), x fastest.
    pub vp: Vec<f32>,
    /// kg/m^3, on the same points as `vp`; None for a constant density ([`density`]).
    pub rho: Option<Vec<f32>>,
    /// e.g. the grid reaching beyond a file model's extent.
    pub warnings: Vec<String>,
}

/// Velocity (m/s) on the run grid, dense (nz, ny, nx), x fastest. Relative paths in the model
/// section are taken relative to `input_dir` (the directory of the input file). Warnings go to
/// stderr; [`sample`] returns them instead.
pub fn load(cfg: &Config, input_dir: &Path) -> Result<Vec<f32>> {
    Ok(load_model(cfg, input_dir)?.vp)
}

/// As [`load`], the density too ([`Model::rho`]).
pub fn load_model(cfg: &Config, input_dir: &Path) -> Result<Model> {
    let model = sample(cfg, input_dir)?;
    for w in &model.warnings {
        eprintln!("warning: {w}");
    }
    Ok(model)
}

/// As [`load`], with data sets looked for in [`data_dirs`] and warnings returned.
pub fn sample(cfg: &Config, input_dir: &Path) -> Result<Model> {
    sample_with_data_dirs(cfg, input_dir, &data_dirs())
}

/// As [`sample`], with data sets looked for in `dirs`.
pub fn sample_with_data_dirs(cfg: &Config, input_dir: &Path, dirs: &[std::path::PathBuf]) -> Result<Model> {
    cfg.grid.validate()?;
    sample_planes_with_data_dirs(cfg, input_dir, dirs, 0..cfg.grid.shape[2])
}

/// As [`sample`], for the grid's z-planes `planes` only (one rank's part of a decomposed run):
/// the values those planes have in the whole grid's sampling, bit for bit.
pub fn sample_planes(cfg: &Config, input_dir: &Path, planes: Range<usize>) -> Result<Model> {
    cfg.grid.validate()?;
    sample_planes_with_data_dirs(cfg, input_dir, &data_dirs(), planes)
}

/// As [`sample_planes`], for the run grid's z-planes `planes` ([`Config::run_grid`]): with the
/// absorbing layers outside the model, the model's edge values extended into them
/// ([`extend::extend_edges`]).
pub fn sample_run_planes(cfg: &Config, input_dir: &Path, planes: Range<usize>) -> Result<Model> {
    let region = cfg.model_region();
    if region.is_whole() {
        return sample_planes(cfg, input_dir, planes);
    }
    let run_grid = cfg.run_grid();
    ensure!(planes.end <= run_grid.shape[2], "z-planes {planes:?} of {}", run_grid.shape[2]);
    let model_planes = region.model_planes(planes.clone());
    let model = sample_planes(cfg, input_dir, model_planes.clone())?;
    let vp = extend::extend_edges(&region, &run_grid, &model.vp, model_planes.start, planes.clone())?;
    let rho = match &model.rho {
        Some(rho) => Some(extend::extend_edges(&region, &run_grid, rho, model_planes.start, planes)?),
        None => None,
    };
    Ok(Model { vp, rho, warnings: model.warnings })
}

fn sample_planes_with_data_dirs(
    cfg: &Config,
    input_dir: &Path,
    dirs: &[std::path::PathBuf],
    planes: Range<usize>,
) -> Result<Model> {
    let grid = &cfg.grid;
    ensure!(planes.start <= planes.end && planes.end <= grid.shape[2], "z-planes {planes:?} of {}", grid.shape[2]);
    let Some(sigma) = cfg.model.smoothing else {
        let mut warnings = Vec::new();
        let vp = sample_velocity(cfg, input_dir, dirs, planes.clone(), &mut warnings)?;
        let rho = density::sample_density_planes(cfg, Some(input_dir), planes, &vp, &mut warnings)?;
        return Ok(Model { vp, rho, warnings });
    };
    smooth::check(sigma)?;
    // The planes within the kernel's reach are sampled too, so that a part of the grid (a rank's
    // slab) is smoothed as the whole grid is.
    let held = smooth::planes_to_sample(&planes, grid.shape[2], sigma, grid.spacing[2]);
    let mut warnings = Vec::new();
    let raw = sample_velocity(cfg, input_dir, dirs, held.clone(), &mut warnings)?;
    let smoothed = |v: &[f32], slowness| {
        smooth::smooth_planes(v, grid.shape, grid.spacing, sigma, held.clone(), planes.clone(), slowness)
    };
    let vp = smoothed(&raw, true)?;
    let rho = if matches!(cfg.model.density, Some(crate::config::DensityConfig::Gardner)) {
        density::sample_density_planes(cfg, Some(input_dir), planes, &vp, &mut warnings)?
    } else {
        match density::sample_density_planes(cfg, Some(input_dir), held.clone(), &raw, &mut warnings)? {
            Some(rho) => Some(smoothed(&rho, false)?),
            None => None,
        }
    };
    Ok(Model { vp, rho, warnings })
}

/// The velocity of `[model]` on the grid's z-planes `planes`, as sampled (not smoothed).
fn sample_velocity(
    cfg: &Config,
    input_dir: &Path,
    dirs: &[std::path::PathBuf],
    planes: Range<usize>,
    warnings: &mut Vec<String>,
) -> Result<Vec<f32>> {
    let grid = &cfg.grid;
    let vp = match &cfg.model.velocity {
        ModelConfig::Constant { vp } => {
            ensure!(vp.is_finite() && *vp > 0.0, "model.vp must be positive and finite, got {vp}");
            filled(grid, planes.clone(), *vp as f32)?
        }
        ModelConfig::Layered { depths, velocities } => layered(grid, planes.clone(), depths, velocities)?,
        ModelConfig::File { path, format, shape, spacing, units, axis_order, sha256, origin } => {
            check_model_path(cfg, input_dir)?;
            let path = input_dir.join(path);
            let spec = file::FileSpec {
                path: &path,
                format: *format,
                shape,
                spacing,
                units: *units,
                axis_order,
                sha256: sha256.as_deref(),
                key: "model",
            };
            // Model coordinate = grid coordinate - origin (the file's first sample at 0).
            let offset = origin.map(|o| 0.0 - o);
            let (nz, hz) = spec.z_axis()?;
            let volume = spec.read_planes(Some(volume::planes_needed(nz, hz, grid, planes.clone(), offset[2])))?;
            volume.resample(grid, planes.clone(), offset, &format!("model file {}", path.display()), warnings)?
        }
        ModelConfig::Marmousi { x_offset } => {
            ensure!(x_offset.is_finite(), "model.x_offset must be finite, got {x_offset}");
            let d = descriptor("marmousi")?;
            let (nz, hz) = d.z_axis()?;
            let volume = d.load_planes(dirs, Some(volume::planes_needed(nz, hz, grid, planes.clone(), 0.0)))?;
            volume.resample(grid, planes.clone(), [*x_offset, 0.0, 0.0], "model marmousi", warnings)?
        }
    };
    Ok(vp)
}

/// Checks, before anything is read, that a file model's `model.path` and a density file's
/// `model.density.file` (relative to `input_dir`) name regular files (links followed): opening a
/// FIFO would block, a device read without end. Other model kinds have no file of the input's to
/// check.
pub fn check_model_path(cfg: &Config, input_dir: &Path) -> Result<()> {
    if let Some(crate::config::DensityConfig::File { path, .. }) = &cfg.model.density {
        check_regular_file(&input_dir.join(path), "model.density.file")?;
    }
    let ModelConfig::File { path, .. } = &cfg.model.velocity else { return Ok(()) };
    check_regular_file(&input_dir.join(path), "model.path")
}

pub(crate) fn check_regular_file(path: &Path, key: &str) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            let t = m.file_type();
            let what = if t.is_dir() {
                "a directory"
            } else if t.is_fifo() {
                "a FIFO (named pipe)"
            } else if t.is_socket() {
                "a socket"
            } else if t.is_char_device() || t.is_block_device() {
                "a device"
            } else {
                "not a regular file"
            };
            anyhow::bail!("{key}: model file {} is {what}; give the path of a regular file", path.display())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("{key}: model file {} does not exist", path.display())
        }
        Err(e) => anyhow::bail!("{key}: model file {} cannot be read: {e}", path.display()),
    }
}

fn filled(grid: &GridConfig, planes: Range<usize>, v: f32) -> Result<Vec<f32>> {
    volume::planes_filled(grid, planes.len(), v)
}

fn layered(grid: &GridConfig, planes: Range<usize>, depths: &[f64], velocities: &[f64]) -> Result<Vec<f32>> {
    ensure!(
        velocities.len() == depths.len() + 1,
        "model.velocities has {} entries but model.depths has {}: give one velocity more than depths \
         (the last is the half-space below the last depth)",
        velocities.len(),
        depths.len()
    );
    for (i, d) in depths.iter().enumerate() {
        ensure!(d.is_finite(), "model.depths[{i}] must be finite, got {d}");
        if i > 0 {
            ensure!(
                *d > depths[i - 1],
                "model.depths must increase: depths[{i}] = {d} follows depths[{}] = {}",
                i - 1,
                depths[i - 1]
            );
        }
    }
    for (i, v) in velocities.iter().enumerate() {
        ensure!(v.is_finite() && *v > 0.0, "model.velocities[{i}] must be positive and finite, got {v}");
    }
    density::fill_layers(grid, planes, depths, velocities)
}
