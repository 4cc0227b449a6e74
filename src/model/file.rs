//! Gridded velocity and density files: raw little-endian f32 or `.npy`, any axis order, m/s or
//! km/s (kg/m3 or g/cm3 for a density); SEG-Y
//! files are read by [`super::segy`] through the same [`FileSpec`].
//!
//! Everything about the file is checked before it is used, and each error names the file (and the
//! configuration key where one is at fault): shape and spacing against the axis order, the byte
//! count against the shape, the optional SHA-256, and every value (finite and positive).

use super::npy;
use super::volume::{VelocityVolume, parse_axis_order};
use crate::config::{FileFormat, Units};
use anyhow::{Result, bail, ensure};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
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

/// Lowercase hex SHA-256 of what `r` reads to its end, read in pieces (a model file need not fit
/// in memory to be checked).
pub fn sha256_of(r: &mut impl Read) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 22];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
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
        self.read_planes(None)
    }

    /// The model's z-axis: its number of samples and their spacing (m), from the description (a
    /// SEG-Y file's from its headers where the description leaves them out).
    pub fn z_axis(&self) -> Result<(usize, f64)> {
        if self.format == FileFormat::Segy {
            return super::segy::z_axis(self);
        }
        let axes = self.validate()?;
        let k = axes.iter().position(|&a| a == 2).expect("axis orders hold z");
        Ok((self.shape[k], self.spacing[k]))
    }

    /// As [`Self::read`], keeping only the model's z-indices `held_z` (all where None): a rank of a
    /// decomposed run holds its part of the model, not the whole. The file is streamed, so every
    /// value is still checked and the SHA-256 taken over the whole file, with the same errors.
    pub fn read_planes(&self, held_z: Option<Range<usize>>) -> Result<VelocityVolume> {
        if self.format == FileFormat::Segy {
            return super::segy::read_planes(self, held_z);
        }
        let axes = self.validate()?;
        let file = self.path.display();
        let open = || match File::open(self.path) {
            Ok(f) => Ok(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("{}.path: model file {file} does not exist", self.key)
            }
            Err(e) => bail!("{}.path: model file {file} cannot be read: {e}", self.key),
        };
        let mut f = open()?;
        let len = f
            .metadata()
            .map_err(|e| anyhow::anyhow!("{}.path: model file {file} cannot be read: {e}", self.key))?
            .len();
        if let Some(expected) = self.sha256 {
            let actual = sha256_of(&mut f).map_err(|e| anyhow::anyhow!("model file {file} cannot be read: {e}"))?;
            ensure!(
                actual.eq_ignore_ascii_case(expected.trim()),
                "model file {file} has SHA-256 {actual}, expected {expected}: the file is corrupt, \
                 incomplete or a different one"
            );
            f = open()?;
        }
        let count = self.shape.iter().try_fold(1usize, |n, &s| n.checked_mul(s));
        let Some(count) = count else { bail!("{}.shape = {:?} overflows", self.key, self.shape) };
        let data_at = match self.format {
            FileFormat::RawF32 => {
                ensure!(
                    len as u128 == count as u128 * 4,
                    "model file {file} holds {len} bytes, expected {} ({}.shape = {:?} values of 4-byte f32)",
                    count as u128 * 4,
                    self.key,
                    self.shape
                );
                0
            }
            FileFormat::Segy => unreachable!("SEG-Y files are read by model::segy"),
            FileFormat::Npy => {
                let mut head = Vec::with_capacity(npy::HEADER_BYTES);
                (&mut f)
                    .take(npy::HEADER_BYTES as u64)
                    .read_to_end(&mut head)
                    .map_err(|e| anyhow::anyhow!("model file {file} cannot be read: {e}"))?;
                let (shape, at) = npy::parse_header(&head, self.path)?;
                let held = shape.iter().product::<usize>() as u128 * 4;
                ensure!(
                    len as u128 == at as u128 + held,
                    "{file}: .npy shape {shape:?} needs {held} bytes of data, the file holds {}",
                    len.saturating_sub(at as u64)
                );
                ensure!(
                    shape == self.shape,
                    "model file {file} holds an array of shape {shape:?}, but {}.shape = {:?}",
                    self.key,
                    self.shape
                );
                at as u64
            }
        };
        f.seek(SeekFrom::Start(data_at)).map_err(|e| anyhow::anyhow!("model file {file} cannot be read: {e}"))?;

        // The z-index of the flat index i is (i / inner) % nz, inner the values per z-step.
        let kz = axes.iter().position(|&a| a == 2).expect("axis orders hold z");
        let (nz, inner) = (self.shape[kz], self.shape[kz + 1..].iter().product::<usize>());
        let held_z = held_z.unwrap_or(0..nz);
        ensure!(held_z.end <= nz, "{}: model z-indices {held_z:?} of {nz}", self.key);
        let kept = count / nz * held_z.len();
        let mut values = Vec::new();
        values.try_reserve_exact(kept).map_err(|_| {
            anyhow::anyhow!(
                "model file {file}: {:.1} GiB of its values cannot be held",
                kept as f64 * 4.0 / (1u64 << 30) as f64
            )
        })?;
        let scale = self.units.to_si();
        let (si, min, max) = self.units.si_range();
        let mut above: Option<(usize, f32)> = None;
        let mut reader = BufReader::new(f);
        let mut block = vec![0u8; 1 << 22];
        let (mut z, mut within) = (0usize, 0usize);
        for flat in 0..count {
            // The file in blocks of 1M values, each value checked and its z-index followed.
            let at = flat % (block.len() / 4);
            if at == 0 {
                let n = (count - flat).min(block.len() / 4) * 4;
                reader
                    .read_exact(&mut block[..n])
                    .map_err(|e| anyhow::anyhow!("model file {file} cannot be read: {e}"))?;
            }
            let raw = f32::from_le_bytes(block[4 * at..4 * at + 4].try_into().expect("4 bytes"));
            if !raw.is_finite() || raw <= 0.0 {
                let mut index = vec![0; self.shape.len()];
                let mut rest = flat;
                for k in (0..self.shape.len()).rev() {
                    index[k] = rest % self.shape[k];
                    rest /= self.shape[k];
                }
                bail!(
                    "model file {file}: value {raw} at index {index:?} (axes {:?}, flat index {flat}); \
                     {} must be finite and positive",
                    self.axis_order,
                    if self.units.is_density() { "densities" } else { "velocities" }
                );
            }
            let v = raw * scale;
            if above.is_none() && (!v.is_finite() || v as f64 > max || (v as f64) < min) {
                above = Some((flat, v));
            }
            if held_z.contains(&z) {
                values.push(v);
            }
            within += 1;
            if within == inner {
                within = 0;
                z = if z + 1 == nz { 0 } else { z + 1 };
            }
        }
        if let Some((flat, v)) = above {
            bail!(
                "model file {file}: value at flat index {flat} is {v:e} {si} ({}), outside {min:e} to {max:e} {si}: \
                 check {}.units",
                if scale != 1.0 { format!("{} x {scale}", self.units.name()) } else { si.to_string() },
                self.key
            );
        }
        Ok(VelocityVolume::part(values, &axes, self.shape, self.spacing, held_z))
    }
}
