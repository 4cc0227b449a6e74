//! Running an input, from a checked configuration to the result files: the drivers the command
//! line dispatches to. Each drives the one time loop ([`solver::drive`](crate::solver::drive)):
//! - [`single`]: one run on one backend (the whole grid in this process);
//! - [`survey`]: many shots over one model, shared among the processes of a job, each shot a
//!   single run (or, with `ranks_per_shot`, a decomposed run over a group of ranks);
//! - [`decomposed`]: one run split into z-slabs or y-z blocks over MPI ranks, with the halo
//!   exchange `halo` chooses (with `mpi`).
//!
//! [`signals`] turns SIGINT, SIGTERM and SIGHUP into a stop of the loop; [`report`] prints a run's
//! header.

pub mod decomposed;
#[cfg(feature = "mpi")]
pub mod halo;
pub mod report;
pub mod signals;
pub mod single;
pub mod survey;

use crate::config::Config;
use crate::output::derived;
use crate::output::hdf5::RunMetadata;
use crate::solver::{RunError, RunResult};
use crate::{output, resources};
use anyhow::Context;
use std::path::PathBuf;
use std::time::Instant;

/// Number of snapshot buffers in flight: one being filled while one is written.
pub const SNAPSHOT_BUFFERS: usize = 2;

/// One invocation: an input with the command line's overrides applied.
pub struct Job {
    /// The input file (for messages and the header) and its folder (model files are relative to it).
    pub input: PathBuf,
    pub input_dir: PathBuf,
    /// The input's text, stored in every result file.
    pub text: String,
    pub cfg: Config,
    /// The result file, and the setting that named it (`--output` or `output.path`).
    pub output: PathBuf,
    pub output_key: &'static str,
    /// Pictures beside the result (`--plot` or `[output] plot`).
    pub plot: bool,
    /// No header, progress bar or summary.
    pub quiet: bool,
    /// A survey: keep the complete shots computed from this input (`--resume`, `--resume=strict`).
    pub resume: Option<crate::survey::ResumeMode>,
    /// When the invocation began (the summary's whole-run time).
    pub started: Instant,
}

/// The metadata of a result file of the input `text` (parsed: `cfg`) run on `device`.
fn metadata(text: &str, device: crate::backend::DeviceInfo, cfg: &Config) -> RunMetadata {
    RunMetadata {
        input_toml: text.to_string(),
        version: env!("CARGO_PKG_VERSION").into(),
        device,
        compression: cfg.output.compression,
        provenance: None,
        shot: cfg.shot_number,
    }
}

/// Runs `job`: the validation pass first ([`validate`]), then a single run, a survey or a
/// decomposed run.
pub fn run(job: &Job) -> RunResult<()> {
    let cfg = &job.cfg;
    let derived = validate(job)?;
    if cfg.run.decomposition.is_some() && cfg.survey.is_none() {
        // Each rank samples and checks its own part of the model: no process holds all of it.
        return decomposed::run(job, &derived);
    }
    if cfg.survey.is_some() {
        return survey::run(job, &derived);
    }
    single::run(job, &derived)
}

/// The validation pass, before any work: every value of the input in range, every path the run
/// will use (the model file, the result file, each survey shot's, the survey index and every file
/// derived from them) usable, the options consistent, and the host memory for the velocity, the
/// snapshot buffers and (on the CPU backend) the fields. Returns the derived files of the run.
pub fn validate(job: &Job) -> RunResult<Vec<derived::Derived>> {
    let cfg = &job.cfg;
    cfg.check_values().map_err(|e| e.context(job.input.display().to_string()))?;
    if job.resume.is_some() && cfg.survey.is_none() {
        let e = anyhow::anyhow!("--resume continues a survey, and {} has no [survey]", job.input.display());
        return Err(RunError::Failed(e));
    }
    crate::model::check_model_path(cfg, &job.input_dir)?;
    crate::config::check_output_writable(&job.output, job.output_key)?;
    let derived = derived::for_run(cfg.output.segy, job.plot);
    output::check_derived_paths(&job.output, job.output_key, &derived::paths(&derived, &job.output))?;
    if cfg.survey.is_some() {
        let files = crate::survey::SurveyFiles::new(&job.output)?;
        let index = files.index();
        crate::output::safe::check_replaceable(&index, "the survey index").with_context(|| {
            format!("{} = {}: the survey's files go beside it", job.output_key, job.output.display())
        })?;
        for shot in crate::survey::shots(cfg)? {
            let path = files.shot(shot.index);
            let key = format!("{} (shot {})", job.output_key, shot.index);
            crate::config::check_output_writable(&path, &key)?;
            output::check_derived_paths(&path, &key, &derived::paths(&derived, &path))?;
        }
    }
    if cfg.run.decomposition.is_none() || cfg.survey.is_some() {
        // A decomposed run checks each rank's share of the grid itself.
        let buffers = if cfg.output.snapshot_every > 0 { SNAPSHOT_BUFFERS } else { 0 };
        let base = resources::base_host_bytes(cfg, buffers);
        let shape = cfg.run_grid().shape;
        resources::check_run_grid_host_bytes(cfg, base, "the velocity model and snapshot buffers")?;
        if cfg.run.backend == crate::config::BackendChoice::Cpu {
            // The grid fits the host's memory by now, so its padded layout's size is addressable.
            let radius = cfg.stencil.radius.clamp(1, crate::numerics::stencil::MAX_RADIUS);
            let layout = crate::grid::Layout::new(shape, radius);
            let per_point = crate::backend::registry::cpu_host_bytes_per_point(layout, cfg.run.precision);
            let bytes = base + per_point * layout.points() as f64;
            resources::check_run_grid_host_bytes(cfg, bytes, "the velocity model, snapshot buffers and CPU fields")?;
        }
    }
    Ok(derived)
}
