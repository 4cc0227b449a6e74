//! `[model] density`: the mass density of the medium (kg/m^3), absent for a constant density.
//!
//! One key, in any of these forms:
//! - a number: a constant density (the constant-density equation, as when the key is absent);
//! - `"gardner"`: Gardner's relation rho = 310 vp^0.25 (SI units) from the velocity model;
//! - a list, with `kind = "layered"`: one density per velocity layer (`velocities`' length);
//! - a table `{ depths = [...], values = [...] }`: horizontal layers of their own, as the velocity's
//!   (`values[i]` down to `depths[i]`, the last below), for any velocity model;
//! - a table `{ file = "...", format = ..., shape = ..., ... }`: a gridded file read and resampled
//!   as a velocity file is (the keys of `kind = "file"`, `file` for `path`, `units` in `"kg/m3"`
//!   or `"g/cm3"`).
//!
//! The value is parsed by hand (a number, a string, a list or a table) so that every error names
//! `model.density`.

use super::values::*;
use super::{FileFormat, Units};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de::value::MapAccessDeserializer, de::value::SeqAccessDeserializer};
use std::path::PathBuf;

/// Gardner's relation rho = GARDNER_FACTOR * vp^GARDNER_EXPONENT (rho in kg/m^3, vp in m/s).
pub const GARDNER_FACTOR: f64 = 310.0;
pub const GARDNER_EXPONENT: f64 = 0.25;

/// Smallest density accepted, kg/m^3 (a gas at a thousandth of an atmosphere is lighter).
pub const MIN_DENSITY: f64 = 1e-3;
/// Largest density accepted, kg/m^3 (four times the densest element).
pub const MAX_DENSITY: f64 = 1e5;
/// The densities of rocks and fluids, kg/m^3: one outside is almost always a unit mistake (g/cm^3
/// given as kg/m^3), an error unless `[run] check_units = false`.
pub const USUAL_DENSITY: [f64; 2] = [100.0, 25_000.0];

/// `[model] density`.
#[derive(Debug, Clone, PartialEq)]
pub enum DensityConfig {
    /// The same density everywhere: the constant-density equation.
    Constant(f64),
    /// Gardner's relation from the velocity.
    Gardner,
    /// One density per layer of a layered velocity model.
    PerLayer(Vec<f64>),
    /// Horizontal layers of their own: `values[i]` down to `depths[i]` (m), the last below.
    Layered { depths: Vec<f64>, values: Vec<f64> },
    /// A gridded file, described as a velocity file is ([`super::ModelConfig::File`]).
    File {
        /// Relative to the input file's directory.
        path: PathBuf,
        format: FileFormat,
        shape: Vec<usize>,
        spacing: Vec<f64>,
        /// `"kg/m3"` or `"g/cm3"`.
        units: Units,
        axis_order: String,
        sha256: Option<String>,
        origin: [f64; 3],
    },
}

impl DensityConfig {
    /// Whether the density may vary in space (a constant one takes the constant-density path).
    pub fn is_variable(&self) -> bool {
        !matches!(self, DensityConfig::Constant(_))
    }
}

/// The table forms' keys.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct DensityTable {
    file: Option<PathBuf>,
    format: Option<FileFormat>,
    shape: Option<Vec<usize>>,
    spacing: Option<Vec<f64>>,
    units: Option<Units>,
    axis_order: Option<String>,
    sha256: Option<String>,
    #[serde(default, deserialize_with = "point_opt")]
    origin: Option<[f64; 3]>,
    depths: Option<Vec<f64>>,
    values: Option<Vec<f64>>,
}

impl TryFrom<DensityTable> for DensityConfig {
    type Error = String;

    fn try_from(t: DensityTable) -> Result<DensityConfig, String> {
        let file_keys = [
            ("format", t.format.is_some()),
            ("shape", t.shape.is_some()),
            ("spacing", t.spacing.is_some()),
            ("units", t.units.is_some()),
            ("axis_order", t.axis_order.is_some()),
            ("sha256", t.sha256.is_some()),
            ("origin", t.origin.is_some()),
        ];
        let layer_keys = [("depths", t.depths.is_some()), ("values", t.values.is_some())];
        let Some(path) = t.file else {
            if let Some((k, _)) = file_keys.iter().find(|(_, g)| *g) {
                return Err(format!("model.density.{k} applies to a density file: give model.density.file"));
            }
            let (Some(depths), Some(values)) = (t.depths, t.values) else {
                return Err("model.density: give a table { file = ... } (a gridded file) or { depths = [...], \
                            values = [...] } (layers)"
                    .into());
            };
            return Ok(DensityConfig::Layered { depths, values });
        };
        if let Some((k, _)) = layer_keys.iter().find(|(_, g)| *g) {
            return Err(format!("model.density.{k} does not apply to a density file (model.density.file)"));
        }
        let format = t.format.unwrap_or_default();
        if format != FileFormat::Segy {
            for (k, given) in [("shape", t.shape.is_some()), ("spacing", t.spacing.is_some())] {
                if !given {
                    return Err(format!("model.density.{k} is required for a density file of this format"));
                }
            }
        }
        let units = t.units.unwrap_or(Units::KilogramsPerCubicMetre);
        if !units.is_density() {
            return Err(format!("model.density.units = \"{}\": give \"kg/m3\" or \"g/cm3\"", units.name()));
        }
        Ok(DensityConfig::File {
            path,
            format,
            shape: t.shape.unwrap_or_default(),
            spacing: t.spacing.unwrap_or_default(),
            units,
            axis_order: match (t.axis_order, format) {
                (Some(a), _) => a,
                (None, FileFormat::Segy) => String::new(),
                (None, _) => "zyx".into(),
            },
            sha256: t.sha256,
            origin: t.origin.unwrap_or_default(),
        })
    }
}

struct DensityVisitor;

impl<'de> Visitor<'de> for DensityVisitor {
    type Value = DensityConfig;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(
            "a density in kg/m3, \"gardner\", a list of one density per layer, or a table \
             { depths, values } or { file, format, ... }",
        )
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<DensityConfig, E> {
        Ok(DensityConfig::Constant(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<DensityConfig, E> {
        Ok(DensityConfig::Constant(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<DensityConfig, E> {
        Ok(DensityConfig::Constant(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<DensityConfig, E> {
        match v {
            "gardner" => Ok(DensityConfig::Gardner),
            _ => Err(E::custom(format!(
                "model.density = \"{v}\": the one named relation is \"gardner\" (or give a number, list or table)"
            ))),
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<DensityConfig, A::Error> {
        Vec::<f64>::deserialize(SeqAccessDeserializer::new(seq)).map(DensityConfig::PerLayer)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<DensityConfig, A::Error> {
        let table = DensityTable::deserialize(MapAccessDeserializer::new(map))?;
        DensityConfig::try_from(table).map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for DensityConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DensityConfig, D::Error> {
        d.deserialize_any(DensityVisitor)
    }
}

/// Errors naming `key` unless the density `rho` (kg/m^3) is finite and in range (and, with
/// `check_units`, in [`USUAL_DENSITY`]).
pub fn check_density(key: &str, rho: f64, check_units: bool) -> anyhow::Result<()> {
    finite_in(key, rho, MIN_DENSITY, MAX_DENSITY, "a positive density in kg/m3")?;
    if check_units {
        let [lo, hi] = USUAL_DENSITY;
        anyhow::ensure!(
            (lo..=hi).contains(&rho),
            "{key} = {rho}: densities are in kg/m3; did you mean {}? (densities outside {lo} to {hi} kg/m3 are \
             refused as a likely unit mistake; for such a medium set [run] check_units = false)",
            if rho < lo { rho * 1000.0 } else { rho / 1000.0 }
        );
    }
    Ok(())
}

impl super::Config {
    /// `model.density`'s own values (a file's are checked as it is read): finite, positive, in
    /// range; layers one more than depths, depths increasing; per-layer densities one per velocity
    /// layer; a variable density refused in f16 storage.
    pub fn check_density(&self) -> anyhow::Result<()> {
        use anyhow::ensure;
        let Some(density) = &self.model.density else { return Ok(()) };
        let units = self.run.check_units;
        match density {
            DensityConfig::Constant(rho) => check_density("model.density", *rho, units)?,
            DensityConfig::Gardner => {}
            DensityConfig::PerLayer(values) => {
                let super::ModelConfig::Layered { velocities, .. } = &self.model.velocity else {
                    anyhow::bail!(
                        "model.density as a list (one density per layer) needs kind = \"layered\"; give a table \
                         {{ depths = [...], values = [...] }} for layers of the density's own"
                    );
                };
                ensure!(
                    values.len() == velocities.len(),
                    "model.density has {} values but model.velocities {}: give one density per layer",
                    values.len(),
                    velocities.len()
                );
                for (i, rho) in values.iter().enumerate() {
                    check_density(&format!("model.density[{i}]"), *rho, units)?;
                }
            }
            DensityConfig::Layered { depths, values } => {
                ensure!(
                    values.len() == depths.len() + 1,
                    "model.density.values has {} entries but model.density.depths has {}: give one value more \
                     than depths (the last is the half-space below the last depth)",
                    values.len(),
                    depths.len()
                );
                for (i, d) in depths.iter().enumerate() {
                    finite_in(&format!("model.density.depths[{i}]"), *d, -MAX_LENGTH, MAX_LENGTH, "a depth in m")?;
                    ensure!(
                        i == 0 || *d > depths[i - 1],
                        "model.density.depths must increase: depths[{i}] = {d} follows depths[{}] = {}",
                        i - 1,
                        depths[i - 1]
                    );
                }
                for (i, rho) in values.iter().enumerate() {
                    check_density(&format!("model.density.values[{i}]"), *rho, units)?;
                }
            }
            DensityConfig::File { spacing, origin, .. } => {
                finite3("model.density.origin", *origin, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
                for (i, h) in spacing.iter().enumerate() {
                    finite_in(&format!("model.density.spacing[{i}]"), *h, MIN_SPACING, MAX_LENGTH, "a spacing in m")?;
                }
            }
        }
        ensure!(
            !density.is_variable() || self.run.precision == super::Precision::F32,
            "model.density varies in space, which f16 storage does not take: drop run.precision = \"f16\" (or \
             --precision f16), or give model.density as one number"
        );
        Ok(())
    }
}
