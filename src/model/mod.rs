//! Velocity models: built-in kinds, files and named data sets, sampled onto the run grid.

use crate::config::{Config, ModelConfig};
use anyhow::{Result, bail};
use std::path::Path;

/// Velocity (m/s) on the run grid, dense (nz, ny, nx), x fastest. Relative paths in the model
/// section are taken relative to `input_dir` (the directory of the input file).
pub fn load(cfg: &Config, input_dir: &Path) -> Result<Vec<f32>> {
    let [nx, ny, nz] = cfg.grid.shape;
    let _ = input_dir;
    match &cfg.model {
        ModelConfig::Constant { vp } => Ok(vec![*vp as f32; nx * ny * nz]),
        _ => bail!("model kind not implemented yet"),
    }
}
