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
    /// A survey: keep the complete shots.
    pub resume: bool,
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
        shot: cfg.shot_number,
    }
}

/// Runs `job`: cheap checks first (every value in range, the output and every file derived from
/// it can be written, the grid fits), then a single run, a survey or a decomposed run.
pub fn run(job: &Job) -> RunResult<()> {
    let cfg = &job.cfg;
    cfg.check_values().map_err(|e| e.context(job.input.display().to_string()))?;
    crate::config::check_output_writable(&job.output, job.output_key)?;
    let derived = derived::for_run(cfg.output.segy, job.plot);
    output::check_derived_paths(&job.output, job.output_key, &derived::paths(&derived, &job.output))?;
    if cfg.run.decomposition.is_some() && cfg.survey.is_none() {
        // Each rank samples and checks its own part of the model: no process holds all of it.
        return decomposed::run(job, &derived);
    }
    let buffers = if cfg.output.snapshot_every > 0 { SNAPSHOT_BUFFERS } else { 0 };
    resources::check_host_bytes(
        cfg.grid.shape,
        resources::base_host_bytes(cfg, buffers),
        "the velocity model and snapshot buffers",
    )?;
    if cfg.survey.is_some() {
        return survey::run(job, &derived);
    }
    if job.resume {
        let e = anyhow::anyhow!("--resume continues a survey, and {} has no [survey]", job.input.display());
        return Err(RunError::Failed(e));
    }
    single::run(job, &derived)
}
