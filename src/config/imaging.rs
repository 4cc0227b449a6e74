//! `[imaging]`: what `seismic-run migrate` images, and how (docs/imaging.md).

use super::ModelSection;
use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use std::path::PathBuf;

/// `[imaging]`: reverse-time migration of the input's shots in the velocity of `[model]`.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ImagingConfig {
    /// The model the observed data are modelled in: a table with the keys of `[model]`. Exactly
    /// one of `true_model` and `observed` is given.
    pub true_model: Option<toml::Table>,
    /// The observed data as SEG-Y shot gathers: a path or a glob (relative to the input's
    /// directory), one file a shot (imaging::observed).
    pub observed: Option<String>,
    /// Subtracts the shot modelled in `[model]` (its direct wave, and whatever else the migration
    /// model explains) from the observed data before migrating them.
    #[serde(default = "yes")]
    pub subtract_direct: bool,
    /// Order of the time derivative applied to the data before the backward pass: -0.5 for a
    /// line of receivers, -1 for an areal array, 0 for none (imaging::filter).
    #[serde(default)]
    pub data_derivative: f64,
    /// Applies the negative Laplacian to the stacked image.
    #[serde(default)]
    pub laplacian: bool,
    /// Steps between the imaging condition's samples (the source wavefield kept and correlated
    /// there); absent: the longest the wavelet's band allows (`imaging::rtm::auto_interval`).
    pub interval: Option<usize>,
    /// Also the velocity gradient of the misfit between the data modelled in `[model]` and the
    /// observed ones (`/gradient`).
    #[serde(default)]
    pub gradient: bool,
    /// The image file (HDF5); a PNG of its xz section at the middle y is written beside it.
    #[serde(default = "default_image")]
    pub output: PathBuf,
}

fn yes() -> bool {
    true
}

fn default_image() -> PathBuf {
    PathBuf::from("image.h5")
}

impl ImagingConfig {
    /// `true_model` as a `[model]` section (None where the data are read from `observed`);
    /// errors name `imaging.true_model`.
    pub fn true_model(&self) -> Result<Option<ModelSection>> {
        let Some(table) = self.true_model.clone() else { return Ok(None) };
        ModelSection::deserialize(toml::Value::Table(table))
            .map(Some)
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
        ensure!(
            self.interval != Some(0),
            "imaging.interval must be at least 1 (steps between imaging-condition samples)"
        );
        match (&self.true_model, &self.observed) {
            (Some(_), Some(_)) => bail!(
                "imaging.true_model and imaging.observed are exclusive: the observed data are either modelled in \
                 true_model or read from the observed SEG-Y files"
            ),
            (None, None) => bail!(
                "[imaging] needs the observed data: imaging.observed (SEG-Y shot gathers) or imaging.true_model (a \
                 model to compute them in)"
            ),
            _ => {}
        }
        self.true_model()?;
        Ok(())
    }
}
