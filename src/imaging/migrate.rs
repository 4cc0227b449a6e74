//! `seismic-run migrate`: every shot of an input migrated in the velocity of `[model]` and
//! stacked, the data modelled in `[imaging] true_model`, the image (and the misfit's gradient)
//! written to HDF5 with a picture.

use super::filter::{fractional_derivative, laplacian_filter};
use super::output::{ImageFile, write_image};
use super::rtm::{add_normalised, migrate_shot, misfit_gradient, source_wavefield_bytes};
use crate::backend::Backend;
use crate::backend::cpu::CpuSolver;
use crate::config::{BackendChoice, Config, ImagingConfig};
use crate::problem::Problem;
use crate::survey::{shot_input, shots};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A migration job: the input as read, where it came from and where the image goes.
pub struct Migration<'a> {
    pub cfg: &'a Config,
    /// The input's text (each shot's input is made from it).
    pub text: &'a str,
    pub input_dir: &'a Path,
    pub output: PathBuf,
    pub quiet: bool,
}

/// The problems of one input: in the migration velocity and in the true model, on one dt (the
/// smaller of the two models' when neither input gives it).
fn problems(cfg: &Config, input_dir: &Path, imaging: &ImagingConfig) -> Result<(Problem, Problem)> {
    let mut truth_cfg = cfg.clone();
    truth_cfg.model = imaging.true_model()?;
    let build = |cfg: &Config| -> Result<Problem> {
        let model = crate::model::sample(cfg, input_dir)?;
        Problem::build_with_density(cfg, model.vp, model.rho)
    };
    let (migration, truth) = (build(cfg)?, build(&truth_cfg).context("imaging.true_model")?);
    if migration.dt == truth.dt {
        return Ok((migration, truth));
    }
    let dt = migration.dt.min(truth.dt);
    let (mut a, mut b) = (cfg.clone(), truth_cfg);
    for c in [&mut a, &mut b] {
        c.time.dt = Some(dt);
        if c.time.steps.is_none() && c.time.duration.is_none() {
            c.time.steps = Some(migration.steps);
        }
    }
    Ok((build(&a)?, build(&b).context("imaging.true_model")?))
}

/// Traces as rows of f64 from a backend's (receivers, steps) row-major f32.
fn rows(traces: &[f32], steps: usize) -> Vec<Vec<f64>> {
    traces.chunks_exact(steps).map(|t| t.iter().map(|&v| v as f64).collect()).collect()
}

/// A backend's traces of a whole shot of `problem`.
fn shot_traces(backend: &mut dyn Backend, problem: &Problem) -> Result<Vec<Vec<f64>>> {
    backend.start_shot(problem)?;
    for n in 0..problem.steps {
        backend.step(n)?;
    }
    Ok(rows(&backend.traces(problem.steps)?, problem.steps))
}

/// Runs the migration: returns the paths written.
pub fn migrate(job: &Migration) -> Result<Vec<PathBuf>> {
    let started = Instant::now();
    let cfg = job.cfg;
    let imaging = cfg.imaging.as_ref().context("the input has no [imaging] section (docs/imaging.md)")?;
    imaging.check()?;
    if !matches!(cfg.run.backend, BackendChoice::Cpu | BackendChoice::Auto) {
        bail!("migrate runs on the CPU backend so far (run.backend = \"cpu\" or \"auto\")");
    }
    crate::config::check_output_writable(&job.output, "imaging.output")?;
    let (mut migration, mut truth) = problems(cfg, job.input_dir, imaging)?;
    super::rtm::check_source_wavefield_fits(&migration, None)?;
    let list = shots(cfg)?;
    let say = |s: String| {
        if !job.quiet {
            println!("{s}");
        }
    };
    let [nx, ny, nz] = migration.shape();
    say(format!(
        "migrate: {} shot(s), grid {nx} x {ny} x {nz}, {} steps of {:.3e} s, CPU backend",
        list.len(),
        migration.steps,
        migration.dt
    ));
    say(format!(
        "source wavefield: stored in memory, f32, every step: {:.2} GiB a shot",
        source_wavefield_bytes(&migration) as f64 / (1u64 << 30) as f64
    ));
    let mut backend = CpuSolver::<f32>::new(&migration)?.flushing_subnormals(true);
    let mut true_backend = CpuSolver::<f32>::new(&truth)?.flushing_subnormals(true);
    let points = migration.layout.points();
    let mut stack = vec![0.0f64; points];
    let mut gradient = imaging.gradient.then(|| vec![0.0f64; points]);
    let mut misfit = 0.0;
    for shot in &list {
        let shot_started = Instant::now();
        if cfg.survey.is_some() {
            let shot_cfg = Config::from_toml(&shot_input(job.text, shot)?).map_err(|e| anyhow::anyhow!("{e}"))?;
            for w in migration.set_shot(&shot_cfg)?.into_iter().chain(truth.set_shot(&shot_cfg)?) {
                eprintln!("warning: shot {}: {w}", shot.index);
            }
        }
        let observed = shot_traces(&mut true_backend, &truth)?;
        let direct = shot_traces(&mut backend, &migration)?;
        let reflections: Vec<Vec<f64>> = observed
            .iter()
            .zip(&direct)
            .map(|(o, d)| o.iter().zip(d).map(|(o, d)| o - d).collect::<Vec<f64>>())
            .map(|r| fractional_derivative(&r, imaging.data_derivative, migration.dt))
            .collect();
        let sums = migrate_shot(&mut backend, &migration, &reflections)?;
        add_normalised(&mut stack, &sums);
        if let Some(g) = &mut gradient {
            let (shot_gradient, j) = misfit_gradient(&mut backend, &migration, &observed)?;
            g.iter_mut().zip(&shot_gradient).for_each(|(a, b)| *a += b);
            misfit += j;
        }
        say(format!(
            "shot {} of {} (source at {:?} m): {:.1} s",
            shot.index + 1,
            list.len(),
            migration.source().position,
            shot_started.elapsed().as_secs_f64()
        ));
    }
    let image = if imaging.laplacian { laplacian_filter(&stack, migration.shape(), migration.spacing) } else { stack };
    let written = write_image(&ImageFile {
        path: &job.output,
        problem: &migration,
        region: cfg.model_region(),
        image: &image,
        gradient: gradient.as_deref(),
        misfit,
        shots: list.len(),
    })?;
    say(format!("migrated in {:.1} s", started.elapsed().as_secs_f64()));
    Ok(written)
}
