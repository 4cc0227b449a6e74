//! `[imaging]`: what `seismic-run migrate` images, and how (docs/imaging.md).

use super::ModelSection;
use anyhow::{Context, Result, ensure};
use serde::Deserialize;
use std::path::PathBuf;

/// `[imaging]`: reverse-time migration of the input's shots in the velocity of `[model]`.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ImagingConfig {
    /// The model the observed data are modelled in: a table with the keys of `[model]`. The data
    /// migrated are its traces minus those of `[model]` (the direct wave removed). Required until
    /// observed data can be read from files.
    pub true_model: Option<toml::Table>,
    /// Order of the time derivative applied to the data before the backward pass: -0.5 for a
    /// line of receivers, -1 for an areal array, 0 for none (imaging::filter).
    #[serde(default)]
    pub data_derivative: f64,
    /// Applies the negative Laplacian to the stacked image.
    #[serde(default)]
    pub laplacian: bool,
    /// Also the velocity gradient of the misfit between the data modelled in `[model]` and the
    /// observed ones (`/gradient`).
    #[serde(default)]
    pub gradient: bool,
    /// The image file (HDF5); a PNG of its xz section at the middle y is written beside it.
    #[serde(default = "default_image")]
    pub output: PathBuf,
}

fn default_image() -> PathBuf {
    PathBuf::from("image.h5")
}

impl ImagingConfig {
    /// `true_model` as a `[model]` section; errors name `imaging.true_model`.
    pub fn true_model(&self) -> Result<ModelSection> {
        let table = self.true_model.clone().context(
            "imaging.true_model is required: the observed data are modelled in it (reading them from SEG-Y files \
             is not supported yet)",
        )?;
        ModelSection::deserialize(toml::Value::Table(table))
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("imaging.true_model")
    }

    /// Checks the values no parse checks.
    pub fn check(&self) -> Result<()> {
        ensure!(
            self.data_derivative.is_finite() && (-2.0..=2.0).contains(&self.data_derivative),
            "imaging.data_derivative must be between -2 and 2, got {}",
            self.data_derivative
        );
        self.true_model()?;
        Ok(())
    }
}
