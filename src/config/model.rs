//! `[grid]` and `[model]`: the grid's shape, spacing and origin, and the velocity model (a
//! constant, layers, a file or the Marmousi model), its keys checked per kind, beside the optional
//! density ([`DensityConfig`]).

use super::DensityConfig;
use super::values::*;
use anyhow::{Context, Result, ensure};
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct GridConfig {
    /// [nx, ny, nz] interior points; [nx, nz] (ny = 1) is a 2D grid ([`GridConfig::is_2d`]).
    #[serde(deserialize_with = "grid_shape")]
    pub shape: [usize; 3],
    /// [dx, dy, dz] in metres ([dx, dz] with a 2D shape).
    #[serde(deserialize_with = "grid_spacing")]
    pub spacing: [f64; 3],
    /// Position of point (0, 0, 0) in metres ([x, z] with a 2D shape).
    #[serde(default, deserialize_with = "grid_origin")]
    pub origin: [f64; 3],
}

/// `[model]`: the velocity model and the density. Parsed through [`ModelTable`] so that wrong
/// types and unknown keys are reported at their own line (an internally tagged enum would buffer
/// the table and lose it).
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(try_from = "ModelTable")]
pub struct ModelSection {
    /// The velocity model, by `kind`.
    pub velocity: ModelConfig,
    /// `density`: None for the constant-density equation.
    pub density: Option<DensityConfig>,
    /// `smoothing`: the standard deviation (m) of the Gaussian the sampled model is smoothed
    /// with (`model::smooth`), as a migration velocity is made; None: no smoothing.
    pub smoothing: Option<f64>,
}

/// The velocity model of `[model]`, by `kind`.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelConfig {
    Constant {
        vp: f64,
    },
    /// Horizontal layers: `velocities[i]` down to `depths[i]` (m), the last one below.
    Layered {
        depths: Vec<f64>,
        velocities: Vec<f64>,
    },
    /// A gridded model in a file. Its first sample sits at `origin` (m, in the grid's
    /// coordinates); 2D files (axes x and z) are extruded along y. A SEG-Y file may leave
    /// `shape`, `spacing` and `axis_order` empty: its headers give them.
    File {
        /// Relative to the input file's directory.
        path: PathBuf,
        format: FileFormat,
        /// Shape of the stored array in the axes of `axis_order` (slowest first).
        shape: Vec<usize>,
        /// Sample spacing (m) in the axes of `axis_order`.
        spacing: Vec<f64>,
        units: Units,
        /// Storage order, slowest axis first, e.g. "zyx" (x fastest) or "xz" (2D, depth fastest).
        axis_order: String,
        /// Optional SHA-256 (hex) of the whole file, checked before use.
        sha256: Option<String>,
        /// Position (m) of the file's first sample, x, y, z.
        origin: [f64; 3],
    },
    /// A named data set from `models/`, resampled to the grid (2D models are extruded along y).
    Marmousi {
        /// Horizontal position (m) in the model where the grid's x = 0 falls.
        x_offset: f64,
    },
}

fn default_axis_order() -> String {
    "zyx".into()
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Constant,
    Layered,
    File,
    Marmousi,
}

/// Every key any model kind takes; [`ModelConfig`] checks that the kind's keys, and only those,
/// are given.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ModelTable {
    pub kind: ModelKind,
    pub vp: Option<f64>,
    pub depths: Option<Vec<f64>>,
    pub velocities: Option<Vec<f64>>,
    pub path: Option<PathBuf>,
    pub format: Option<FileFormat>,
    pub shape: Option<Vec<usize>>,
    pub spacing: Option<Vec<f64>>,
    pub units: Option<Units>,
    pub axis_order: Option<String>,
    pub sha256: Option<String>,
    #[serde(default, deserialize_with = "point_opt")]
    pub origin: Option<[f64; 3]>,
    pub x_offset: Option<f64>,
    pub density: Option<DensityConfig>,
    pub smoothing: Option<f64>,
}

impl TryFrom<ModelTable> for ModelSection {
    type Error = String;

    fn try_from(mut t: ModelTable) -> Result<ModelSection, String> {
        let (density, smoothing) = (t.density.take(), t.smoothing.take());
        Ok(ModelSection { velocity: ModelConfig::try_from(t)?, density, smoothing })
    }
}

impl TryFrom<ModelTable> for ModelConfig {
    type Error = String;

    fn try_from(t: ModelTable) -> Result<ModelConfig, String> {
        let given: Vec<&str> = [
            ("vp", t.vp.is_some()),
            ("depths", t.depths.is_some()),
            ("velocities", t.velocities.is_some()),
            ("path", t.path.is_some()),
            ("format", t.format.is_some()),
            ("shape", t.shape.is_some()),
            ("spacing", t.spacing.is_some()),
            ("units", t.units.is_some()),
            ("axis_order", t.axis_order.is_some()),
            ("sha256", t.sha256.is_some()),
            ("origin", t.origin.is_some()),
            ("x_offset", t.x_offset.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, g)| g.then_some(k))
        .collect();
        let (name, allowed, required): (&str, &[&str], &[&str]) = match t.kind {
            ModelKind::Constant => ("constant", &["vp"], &["vp"]),
            ModelKind::Layered => ("layered", &["depths", "velocities"], &["depths", "velocities"]),
            // A SEG-Y file's headers can give its shape and spacing; other files cannot.
            ModelKind::File if t.format == Some(FileFormat::Segy) => {
                ("file", &["path", "format", "shape", "spacing", "units", "axis_order", "sha256", "origin"], &["path"])
            }
            ModelKind::File => (
                "file",
                &["path", "format", "shape", "spacing", "units", "axis_order", "sha256", "origin"],
                &["path", "shape", "spacing"],
            ),
            ModelKind::Marmousi => ("marmousi", &["x_offset"], &[]),
        };
        if let Some(k) = given.iter().find(|k| !allowed.contains(k)) {
            return Err(format!(
                "model.{k} does not apply to kind = \"{name}\" (its keys: {})",
                if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") }
            ));
        }
        if let Some(k) = required.iter().find(|k| !given.contains(k)) {
            return Err(format!("model.{k} is required for kind = \"{name}\""));
        }
        Ok(match t.kind {
            ModelKind::Constant => ModelConfig::Constant { vp: t.vp.expect("required") },
            ModelKind::Layered => ModelConfig::Layered {
                depths: t.depths.expect("required"),
                velocities: t.velocities.expect("required"),
            },
            ModelKind::File => ModelConfig::File {
                path: t.path.expect("required"),
                format: t.format.unwrap_or_default(),
                // Empty for a SEG-Y file that leaves them to its headers.
                shape: t.shape.unwrap_or_default(),
                spacing: t.spacing.unwrap_or_default(),
                units: t.units.unwrap_or_default(),
                axis_order: match (t.axis_order, t.format) {
                    (Some(a), _) => a,
                    (None, Some(FileFormat::Segy)) => String::new(),
                    (None, _) => default_axis_order(),
                },
                sha256: t.sha256,
                origin: t.origin.unwrap_or_default(),
            },
            ModelKind::Marmousi => ModelConfig::Marmousi { x_offset: t.x_offset.unwrap_or(0.0) },
        })
    }
}

#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FileFormat {
    #[default]
    RawF32,
    Npy,
    /// SEG-Y, one trace per horizontal grid point (`model::segy`).
    Segy,
}

/// A model file's units: of velocity (`[model] units`) or density (`[model] density.units`).
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Units {
    #[default]
    #[serde(rename = "m/s")]
    MetresPerSecond,
    #[serde(rename = "km/s")]
    KilometresPerSecond,
    #[serde(rename = "kg/m3")]
    KilogramsPerCubicMetre,
    #[serde(rename = "g/cm3")]
    GramsPerCubicCentimetre,
}

impl Units {
    /// Whether these are units of density (kg/m3, g/cm3) rather than velocity.
    pub fn is_density(self) -> bool {
        matches!(self, Units::KilogramsPerCubicMetre | Units::GramsPerCubicCentimetre)
    }

    /// The factor into SI units (m/s, kg/m3).
    pub fn to_si(self) -> f32 {
        match self {
            Units::MetresPerSecond | Units::KilogramsPerCubicMetre => 1.0,
            Units::KilometresPerSecond | Units::GramsPerCubicCentimetre => 1000.0,
        }
    }

    /// As written in the input.
    pub fn name(self) -> &'static str {
        match self {
            Units::MetresPerSecond => "m/s",
            Units::KilometresPerSecond => "km/s",
            Units::KilogramsPerCubicMetre => "kg/m3",
            Units::GramsPerCubicCentimetre => "g/cm3",
        }
    }

    /// The SI unit of the quantity, and the range of values (SI) a file may hold.
    pub fn si_range(self) -> (&'static str, f64, f64) {
        if self.is_density() {
            ("kg/m3", super::MIN_DENSITY, super::MAX_DENSITY)
        } else {
            ("m/s", super::MIN_VELOCITY, super::MAX_VELOCITY)
        }
    }
}

impl GridConfig {
    /// Whether this is a 2D grid: one point along y, whether the shape was given as [nx, nz] or
    /// as [nx, 1, nz] (the same run). A 2D run solves the 2D wave equation in x and z: no y
    /// derivative, no y layers, positions [x, z] (or [x, y, z] at the grid's y), and sources that
    /// are line sources along y (their injection divides by the cell area dx dz, not a volume).
    pub fn is_2d(&self) -> bool {
        self.shape[1] == 1
    }

    /// Shape positive, spacing and origin finite and in range; errors name `grid.shape[i]`, ...
    pub fn validate(&self) -> Result<()> {
        for a in 0..3 {
            ensure!(self.shape[a] > 0, "grid.shape[{a}] must be positive, got {}", self.shape[a]);
            ensure!(
                self.spacing[a] > 0.0 && self.spacing[a].is_finite(),
                "grid.spacing[{a}] must be positive and finite, got {}",
                self.spacing[a]
            );
            finite_in(&format!("grid.spacing[{a}]"), self.spacing[a], MIN_SPACING, MAX_LENGTH, "a spacing in m")?;
            ensure!(self.origin[a].is_finite(), "grid.origin[{a}] must be finite, got {}", self.origin[a]);
            finite_in(&format!("grid.origin[{a}]"), self.origin[a], -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
        }
        self.points()?;
        Ok(())
    }

    /// Interior points, or an error naming `grid.shape` when the count overflows.
    pub fn points(&self) -> Result<usize> {
        let [nx, ny, nz] = self.shape;
        nx.checked_mul(ny)
            .and_then(|n| n.checked_mul(nz))
            .with_context(|| format!("grid.shape = {:?} has more points than this machine can address", self.shape))
    }
}
