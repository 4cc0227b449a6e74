//! `[output]`: the result file, and which snapshots go into it how often.

use anyhow::{Result, ensure};
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    #[serde(default = "default_output")]
    pub path: PathBuf,
    /// Steps between snapshots; 0 turns snapshots off.
    #[serde(default)]
    pub snapshot_every: usize,
    #[serde(default)]
    pub snapshot: Vec<SnapshotConfig>,
    #[serde(default)]
    pub plot: bool,
    /// Also write the receiver traces as SEG-Y (`<stem>.sgy` beside the result file).
    #[serde(default)]
    pub segy: bool,
    /// Deflate level 1-9 (with the shuffle filter) for the snapshot datasets; 0: uncompressed.
    #[serde(default)]
    pub compression: u32,
    /// Copy the velocity model into the result (`/model/vp`). For a model of billions of points
    /// the copy is most of the file and of the shot's time; without it the file keeps the grid
    /// (root attributes shape, spacing, origin) and readers draw no model.
    #[serde(default = "yes")]
    pub model: bool,
}

fn yes() -> bool {
    true
}

impl OutputConfig {
    /// Checks the keys that parsing alone cannot; errors name the key.
    pub fn validate(&self) -> Result<()> {
        ensure!(
            self.compression <= 9,
            "output.compression = {}: deflate levels run from 1 (fastest) to 9 (smallest), 0 is off",
            self.compression
        );
        ensure!(
            self.snapshot.is_empty() || self.snapshot_every > 0,
            "output.snapshot lists {} section(s), but output.snapshot_every = 0 turns snapshots off: give the steps \
             between snapshots (e.g. snapshot_every = 10) or remove output.snapshot",
            self.snapshot.len()
        );
        Ok(())
    }
}

fn default_output() -> PathBuf {
    PathBuf::from("output.h5")
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            path: default_output(),
            snapshot_every: 0,
            snapshot: Vec::new(),
            plot: false,
            segy: false,
            compression: 0,
            model: true,
        }
    }
}

/// What a snapshot holds: the whole volume or a plane through it.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SnapshotConfig {
    /// "volume", "xz", "xy" or "yz".
    pub kind: String,
    /// Position of the plane (m) along its normal axis.
    pub at: Option<f64>,
}
