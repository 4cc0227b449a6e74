//! Gridded velocity files: raw little-endian f32 or `.npy`, any axis order, m/s or km/s.
//!
//! Everything about the file is checked before it is used, and each error names the file (and the
//! configuration key where one is at fault): shape and spacing against the axis order, the byte
//! count against the shape, the optional SHA-256, and every value (finite and positive).

use super::npy;
use super::volume::{VelocityVolume, parse_axis_order};
use crate::config::{FileFormat, Units};
use anyhow::{Result, bail, ensure};
use sha2::{Digest, Sha256};
use std::path::Path;

/// What a velocity file is said to hold, from `[model]` or a data-set descriptor.
#[derive(Clone, Copy, Debug)]
pub struct FileSpec<'a> {
    pub path: &'a Path,
    pub format: FileFormat,
    /// Sizes in the axes of `axis_order`, slowest first.
    pub shape: &'a [usize],
    /// Spacings (m) in the axes of `axis_order`.
    pub spacing: &'a [f64],
    pub units: Units,
    pub axis_order: &'a str,
    /// Expected SHA-256 of the whole file (lowercase or uppercase hex).
    pub sha256: Option<&'a str>,
    /// Prefix of configuration keys in errors ("model"), or the data set's name.
    pub key: &'a str,
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

impl FileSpec<'_> {
    /// Checks the description itself (no file access); errors name `<key>.shape`, ...
    pub fn validate(&self) -> Result<Vec<usize>> {
        let key = self.key;
        let axes = parse_axis_order(self.axis_order, &format!("{key}.axis_order"))?;
        ensure!(
            self.shape.len() == axes.len(),
            "{key}.shape = {:?} has {} entries, but {key}.axis_order = {:?} has {} axes",
            self.shape,
            self.shape.len(),
            self.axis_order,
            axes.len()
        );
        ensure!(
            self.spacing.len() == axes.len(),
            "{key}.spacing = {:?} has {} entries, but {key}.axis_order = {:?} has {} axes",
            self.spacing,
            self.spacing.len(),
            self.axis_order,
            axes.len()
        );
        for (k, (&n, &h)) in self.shape.iter().zip(self.spacing).enumerate() {
            ensure!(n > 0, "{key}.shape[{k}] must be positive, got {n}");
            ensure!(h > 0.0 && h.is_finite(), "{key}.spacing[{k}] must be positive and finite, got {h}");
        }
        Ok(axes)
    }

    /// Reads, checks and converts the file to m/s.
    pub fn read(&self) -> Result<VelocityVolume> {
        let axes = self.validate()?;
        let file = self.path.display();
        let bytes = match std::fs::read(self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("{}.path: model file {file} does not exist", self.key)
            }
            Err(e) => bail!("{}.path: model file {file} cannot be read: {e}", self.key),
        };
        if let Some(expected) = self.sha256 {
            let actual = sha256_hex(&bytes);
            ensure!(
                actual.eq_ignore_ascii_case(expected.trim()),
                "model file {file} has SHA-256 {actual}, expected {expected}: the file is corrupt, \
                 incomplete or a different one"
            );
        }
        let count = self.shape.iter().try_fold(1usize, |n, &s| n.checked_mul(s));
        let Some(count) = count else { bail!("{}.shape = {:?} overflows", self.key, self.shape) };
        let values = match self.format {
            FileFormat::RawF32 => {
                ensure!(
                    bytes.len() as u128 == count as u128 * 4,
                    "model file {file} holds {} bytes, expected {} ({}.shape = {:?} values of 4-byte f32)",
                    bytes.len(),
                    count as u128 * 4,
                    self.key,
                    self.shape
                );
                bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
            }
            FileFormat::Npy => {
                let array = npy::parse(&bytes, self.path)?;
                ensure!(
                    array.shape == self.shape,
                    "model file {file} holds an array of shape {:?}, but {}.shape = {:?}",
                    array.shape,
                    self.key,
                    self.shape
                );
                array.values
            }
        };
        drop(bytes);
        let mut values: Vec<f32> = values;
        if let Some(flat) = values.iter().position(|v| !v.is_finite() || *v <= 0.0) {
            let mut index = vec![0; self.shape.len()];
            let mut rest = flat;
            for k in (0..self.shape.len()).rev() {
                index[k] = rest % self.shape[k];
                rest /= self.shape[k];
            }
            bail!(
                "model file {file}: value {} at index {index:?} (axes {:?}, flat index {flat}); \
                 velocities must be finite and positive",
                values[flat],
                self.axis_order
            );
        }
        if self.units == Units::KilometresPerSecond {
            values.iter_mut().for_each(|v| *v *= 1000.0);
        }
        let max = crate::config::MAX_VELOCITY;
        if let Some(flat) = values.iter().position(|v| !v.is_finite() || *v as f64 > max) {
            bail!(
                "model file {file}: value at flat index {flat} is {:e} m/s ({}), above {max:e} m/s: check {}.units",
                values[flat],
                if self.units == Units::KilometresPerSecond { "km/s x 1000" } else { "m/s" },
                self.key
            );
        }
        Ok(VelocityVolume::new(values, &axes, self.shape, self.spacing))
    }
}
