//! The input file: a TOML document, parsed strictly (unknown keys are errors with line and column).
//!
//! Parsing catches unknown keys and wrong types; the checks that need no model or discretisation
//! (grid shape and spacing, the output directory) live here too, so a run can stop before it
//! allocates or writes anything. Checks that need the velocity (dt against the CFL limit, source
//! and receivers inside the grid) are in `problem::Problem::build`.

mod density;
mod imaging;
mod layer;
mod model;
mod output;
mod plane;
mod run;
mod shot;
mod survey;
mod values;

pub use density::*;
pub use imaging::*;
pub use layer::*;
pub use model::*;
pub use output::*;
pub use run::*;
pub use shot::*;
pub use survey::*;
pub use values::{
    MAX_AMPLITUDE, MAX_FREQUENCY, MAX_LENGTH, MAX_TIME, MAX_VELOCITY, MIN_SPACING, MIN_VELOCITY, USUAL_MIN_SPACING,
    USUAL_VELOCITY,
};

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use std::path::Path;
use values::{check_spacing_units, finite_in, finite3};

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub grid: GridConfig,
    pub model: ModelSection,
    #[serde(default)]
    pub stencil: StencilConfig,
    pub time: TimeConfig,
    /// `[source]` or `[[source]]`.
    pub source: Sources,
    #[serde(default)]
    pub receivers: Vec<ReceiverConfig>,
    #[serde(default)]
    pub boundary: BoundaryConfig,
    #[serde(default)]
    pub output: OutputConfig,
    #[serde(default)]
    pub run: RunConfig,
    /// Many shots over the same model (absent: one shot, at `[source] position`).
    pub survey: Option<SurveyConfig>,
    /// `seismic-run migrate`'s section (docs/imaging.md); other commands ignore it.
    pub imaging: Option<ImagingConfig>,
    /// A survey shot's place in the survey, set by the survey driver (never read from the input):
    /// its SEG-Y numbering.
    #[serde(skip)]
    pub shot_number: Option<ShotNumber>,
}

/// A shot's numbering in its SEG-Y file: field record and source point `shot` (1-based), trace
/// sequence numbers within the line from `first_trace` (continuing across a survey's files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShotNumber {
    pub shot: u64,
    pub first_trace: u64,
}

impl Default for ShotNumber {
    /// A single run: shot 1, traces from 1.
    fn default() -> ShotNumber {
        ShotNumber { shot: 1, first_trace: 1 }
    }
}

impl Config {
    /// Parses a TOML document. Errors (unknown key, wrong type, missing key) carry the line,
    /// column and key.
    /// Positions given as [x, z] are resolved against the grid ([`Config::resolve_plane`]).
    pub fn from_toml(text: &str) -> Result<Config, toml::de::Error> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| shot::source_forms_mixed(text).unwrap_or(e))?;
        cfg.resolve_plane().map_err(|e| <toml::de::Error as serde::de::Error>::custom(format!("{e:#}")))?;
        Ok(cfg)
    }

    /// The absorbing layers' width in points: `boundary.width`, or when the input does not give
    /// it the default for `stencil.radius` ([`crate::boundary::default_width`]).
    pub fn boundary_width(&self) -> usize {
        self.boundary.width.unwrap_or_else(|| crate::boundary::default_width(self.stencil.radius))
    }

    /// Reads and parses an input file; errors name the file, then the line, column and key.
    pub fn from_file(path: &Path) -> Result<Config> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read input file {}", path.display()))?;
        Config::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// The checks that need neither the model nor the discretisation: the values, then the
    /// output directory (`base_dir` resolves a relative `output.path`; see [`check_output_writable`]).
    pub fn validate(&self, base_dir: &Path) -> Result<()> {
        self.check_values()?;
        check_output_writable(&base_dir.join(&self.output.path), "output.path")
    }

    /// Every number of the input finite and in a physical range, every count addressable: the
    /// grid, model parameters, time, source, receivers, snapshot planes and the output keys
    /// (compression level; SEG-Y only with receivers). Errors name the key,
    /// the value and the range. (Positions inside the grid and dt against the CFL limit are
    /// checked by `Problem::build`, which knows the velocity.)
    pub fn check_values(&self) -> Result<()> {
        self.grid.validate()?;
        self.check_run_grid()?;
        self.check_plane_run()?;
        if self.run.check_units {
            for (a, h) in self.grid.spacing.iter().enumerate() {
                check_spacing_units(&format!("grid.spacing[{a}]"), *h)?;
            }
        }
        match &self.model.velocity {
            ModelConfig::Constant { vp } => {
                finite_in("model.vp", *vp, MIN_VELOCITY, MAX_VELOCITY, "a positive velocity in m/s")?;
                self.check_velocity_units("model.vp", *vp)?;
            }
            ModelConfig::Layered { depths, velocities } => {
                for (i, d) in depths.iter().enumerate() {
                    finite_in(&format!("model.depths[{i}]"), *d, -MAX_LENGTH, MAX_LENGTH, "a depth in m")?;
                }
                for (i, v) in velocities.iter().enumerate() {
                    finite_in(
                        &format!("model.velocities[{i}]"),
                        *v,
                        MIN_VELOCITY,
                        MAX_VELOCITY,
                        "a positive velocity in m/s",
                    )?;
                    self.check_velocity_units(&format!("model.velocities[{i}]"), *v)?;
                }
            }
            ModelConfig::File { spacing, origin, units, .. } => {
                ensure!(
                    !units.is_density(),
                    "model.units = \"{}\" is a density unit: the velocity file's units are \"m/s\" or \"km/s\"",
                    units.name()
                );
                finite3("model.origin", *origin, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
                for (i, h) in spacing.iter().enumerate() {
                    finite_in(&format!("model.spacing[{i}]"), *h, MIN_SPACING, MAX_LENGTH, "a spacing in m")?;
                    if self.run.check_units {
                        check_spacing_units(&format!("model.spacing[{i}]"), *h)?;
                    }
                }
            }
            ModelConfig::Marmousi { x_offset } => {
                finite_in("model.x_offset", *x_offset, -MAX_LENGTH, MAX_LENGTH, "a length in m")?
            }
        }
        self.check_density()?;
        if let Some(sigma) = self.model.smoothing {
            crate::model::smooth::check(sigma)?;
        }
        let t = &self.time;
        if let Some(d) = t.duration {
            finite_in("time.duration", d, f64::MIN_POSITIVE, MAX_TIME, "a positive time in s")?;
        }
        if let Some(dt) = t.dt {
            finite_in("time.dt", dt, f64::MIN_POSITIVE, MAX_TIME, "a positive time in s")?;
        }
        // Far below any useful fraction, far above one whose dt rounds to 0.
        finite_in("time.cfl_safety", t.cfl_safety, 1e-6, 1.0, "a fraction of the stability (CFL) limit")?;
        self.source.check_values()?;
        for (i, r) in self.receivers.iter().enumerate() {
            let key = format!("receivers[{i}]");
            if let Some(p) = r.position {
                finite3(&format!("{key}.position"), p, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
            }
            if let Some(l) = &r.line {
                finite3(&format!("{key}.line.start"), l.start, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
                finite3(&format!("{key}.line.end"), l.end, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
            }
            if let Some(g) = &r.grid {
                for (name, v) in
                    [("origin", g.origin), ("step_a", g.step_a), ("step_b", g.step_b), ("step_c", g.step_c)]
                {
                    finite3(&format!("{key}.grid.{name}"), v, -MAX_LENGTH, MAX_LENGTH, "a length in m")?;
                }
            }
        }
        let receivers = self.receiver_count()?;
        for (i, snap) in self.output.snapshot.iter().enumerate() {
            if let Some(at) = snap.at {
                finite_in(&format!("output.snapshot[{i}].at"), at, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
            }
        }
        self.output.validate()?;
        if let Some(survey) = &self.survey {
            survey.positions()?;
            ensure!(
                survey.ranks_per_shot >= 1 && survey.ranks_per_shot <= 1 << 20,
                "survey.ranks_per_shot = {} must be at least 1 (processes running each shot together)",
                survey.ranks_per_shot
            );
            if let Some(margin) = survey.aperture {
                crate::survey::aperture::check_margin(margin)?;
                ensure!(
                    survey.ranks_per_shot == 1,
                    "survey.aperture with survey.ranks_per_shot = {}: a shot on its box runs in one process; give                      ranks_per_shot = 1 (the default) or leave the aperture out",
                    survey.ranks_per_shot
                );
            }
        }
        ensure!(
            !self.output.segy || receivers > 0,
            "output.segy = true: the SEG-Y holds receiver traces, and the input has no [[receivers]]"
        );
        Ok(())
    }

    /// The unit check of the velocity `v` of `key` (`values::check_velocity_units`), unless
    /// `[run] check_units = false`. Every model kind's velocities pass it: constant and layered
    /// models here, sampled models in `Problem::build` (over their whole range).
    pub fn check_velocity_units(&self, key: &str, v: f64) -> Result<()> {
        if self.run.check_units { values::check_velocity_units(key, v) } else { Ok(()) }
    }

    /// The number of receivers all `[[receivers]]` entries give (checked arithmetic).
    pub fn receiver_count(&self) -> Result<usize> {
        self.receivers.iter().enumerate().try_fold(0usize, |n, (i, r)| {
            let here = r.count().with_context(|| format!("receivers[{i}]"))?;
            n.checked_add(here).with_context(|| format!("receivers[{i}]: too many receivers in all"))
        })
    }
}

/// Checks, before any work, that the output file can be created: missing parent directories are
/// created, the parent must be a directory that accepts a new file (a probe file is created
/// exclusively and removed again), and the path itself must name a regular file or nothing (a
/// directory, link, device, FIFO or socket is refused: the result is renamed over the path, see
/// [`crate::output::safe`]). Errors name `key` (`output.path`, or `--output` when the option set
/// it) and the directory.
pub fn check_output_writable(path: &Path, key: &str) -> Result<()> {
    // "out/" names a directory even where none exists yet (Path drops the trailing slash).
    let names_a_directory = path.as_os_str().as_encoded_bytes().ends_with(b"/");
    if names_a_directory || path.file_name().is_none() || path.is_dir() {
        bail!(
            "{key} = {} is a directory; give a file name such as {}",
            path.display(),
            path.join("output.h5").display()
        );
    }
    crate::output::safe::check_replaceable(path, key)?;
    let dir = crate::output::safe::parent_dir(path);
    if let Some(file) = dir.ancestors().find(|a| a.is_file()) {
        bail!("{key} = {}: {} is not a directory", path.display(), file.display());
    }
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("{key} = {}: cannot create the directory {}", path.display(), dir.display()))?;
    crate::output::safe::TempFile::create(&dir.join(".seismic-run-write-probe"), "")
        .with_context(|| format!("{key} = {}: cannot write in directory {}", path.display(), dir.display()))?;
    Ok(())
}
