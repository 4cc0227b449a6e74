//! `seismic-run migrate`: every shot of an input migrated in the velocity of `[model]` and
//! stacked, the data modelled in `[imaging] true_model` or read from the SEG-Y gathers of
//! `[imaging] observed` (placed by their headers, else by the input's shots), the image (and the
//! misfit's gradient) written to HDF5 with a picture.

use super::filter::{fractional_derivative, laplacian_filter};
use super::observed::{Geometry, gather_paths, read_gather};
use super::output::{ImageFile, write_image};
use super::ranks::{my_shots, sum_to_root};
use super::rtm::{
    ImagingPlan, ShotImaging, ShotSums, add_normalised, auto_interval, check_stop, residuals, source_wavefield_bytes,
    take_device_stack,
};
use crate::backend::{Backend, registry};
use crate::config::{BackendChoice, Config, ImagingConfig};
use crate::parallel::Ranks;
use crate::problem::Problem;
use crate::solver::{Interrupted, RunResult};
use crate::survey::{Shot, shot_input, shots};
use anyhow::{Context, Result, anyhow, ensure};
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

/// Where each shot's observed data come from.
enum Data {
    /// Modelled in `[imaging] true_model`: its problem and a backend on it.
    Modelled { truth: Box<Problem>, backend: Box<dyn Backend> },
    /// Read from SEG-Y gathers, one file a shot, in the order of their names.
    Files(Vec<PathBuf>),
}

/// The problems of one input: in the migration velocity and, where the data are modelled, in the
/// true model, on one dt (the smaller of the two models' when neither input gives it).
fn problems(cfg: &Config, input_dir: &Path, imaging: &ImagingConfig) -> Result<(Problem, Option<Problem>)> {
    let build = |cfg: &Config| -> Result<Problem> {
        let model = crate::model::sample(cfg, input_dir)?;
        Problem::build_with_density(cfg, model.vp, model.rho)
    };
    let Some(true_model) = imaging.true_model()? else { return Ok((build(cfg)?, None)) };
    let mut truth_cfg = cfg.clone();
    truth_cfg.model = true_model;
    let (migration, truth) = (build(cfg)?, build(&truth_cfg).context("imaging.true_model")?);
    if migration.dt == truth.dt {
        return Ok(same_layers(migration, truth));
    }
    let dt = migration.dt.min(truth.dt);
    let (mut a, mut b) = (cfg.clone(), truth_cfg);
    for c in [&mut a, &mut b] {
        c.time.dt = Some(dt);
        if c.time.steps.is_none() && c.time.duration.is_none() {
            c.time.steps = Some(migration.steps);
        }
    }
    Ok(same_layers(build(&a)?, build(&b).context("imaging.true_model")?))
}

/// `truth` with `migration`'s absorbing layers: the CPML profiles follow a model's highest
/// velocity, and the direct wave modelled in the migration model subtracts from the data only
/// where both runs have the same layers (sources and receivers often lie in the top one).
fn same_layers(migration: Problem, mut truth: Problem) -> (Problem, Option<Problem>) {
    truth.boundary = migration.boundary.clone();
    (migration, Some(truth))
}

/// The input of a shot placed by a gather's headers, as TOML text: the input `text` with its
/// source at `geometry.source`, no `[survey]`, and one `[[receivers]]` position per trace (the
/// first receivers entry's interpolation kept). Positions are written [x, z] on a 2D grid.
fn header_shot_input(text: &str, geometry: &Geometry, index: usize, two_d: bool) -> Result<String> {
    let shot = Shot { index, source: geometry.source, shift: [0.0; 3] };
    let mut doc: toml::Table = shot_input(text, &shot)?.parse()?;
    let mut template = toml::Table::new();
    if let Some(first) = doc.get("receivers").and_then(|r| r.as_array()).and_then(|r| r.first()?.as_table()) {
        for key in ["interpolation", "sinc_half_width"] {
            if let Some(v) = first.get(key) {
                template.insert(key.into(), v.clone());
            }
        }
    }
    let receivers = geometry
        .receivers
        .iter()
        .map(|p| {
            let kept = if two_d { vec![p[0], p[2]] } else { p.to_vec() };
            let mut t = template.clone();
            t.insert("position".into(), toml::Value::Array(kept.into_iter().map(toml::Value::Float).collect()));
            toml::Value::Table(t)
        })
        .collect();
    doc.insert("receivers".into(), toml::Value::Array(receivers));
    Ok(toml::to_string(&doc)?)
}

/// Places shot `index` of a migration from gathers: by the gather's headers where they give
/// positions, else by the input's shot of the same index (`list`, the input's shots). Returns
/// the gather's traces, one per receiver of `migration` as placed.
fn place_gather(
    job: &Migration,
    migration: &mut Problem,
    paths: &[PathBuf],
    index: usize,
    list: &[Shot],
) -> Result<Vec<Vec<f64>>> {
    let path = &paths[index];
    let name = path.display();
    let gather = read_gather(path, migration.dt, migration.steps)?;
    if gather.resampled {
        eprintln!(
            "notice: {name}: samples of {} us, the run's dt {:.4} us: resampled onto dt (8-point Lagrange)",
            gather.interval * 1e6,
            migration.dt * 1e6
        );
    }
    let text = match &gather.geometry {
        Some(g) => Some(header_shot_input(job.text, g, index, migration.shape()[1] == 1)?),
        None => {
            let shot = list.get(index).filter(|_| list.len() == paths.len()).with_context(|| {
                format!(
                    "{name}: its trace headers give no positions (source and group x, y, elevations: bytes 41-52, \
                     73-88, all zero), so the input's shots place the gathers, and it has {} shot(s) for {} gathers",
                    list.len(),
                    paths.len()
                )
            })?;
            job.cfg.survey.is_some().then(|| shot_input(job.text, shot)).transpose()?
        }
    };
    if let Some(text) = text {
        let shot_cfg = Config::from_toml(&text).map_err(|e| anyhow!("{name}: {e}"))?;
        for w in migration.set_shot(&shot_cfg).with_context(|| format!("{name}: the shot's positions"))? {
            eprintln!("warning: {name}: {w}");
        }
    }
    ensure!(
        gather.traces.len() == migration.receivers.len(),
        "{name}: {} traces and {} receivers in the input: a gather holds one trace per receiver",
        gather.traces.len(),
        migration.receivers.len()
    );
    Ok(gather.traces)
}

/// The configuration of survey shot `shot` of the input `text` ([`shot_input`]).
fn shot_config(text: &str, shot: &Shot) -> Result<Config> {
    Config::from_toml(&shot_input(text, shot)?).map_err(|e| anyhow!("{e}"))
}

/// Traces as rows of f64 from a backend's (receivers, steps) row-major f32.
fn rows(traces: &[f32], steps: usize) -> Vec<Vec<f64>> {
    traces.chunks_exact(steps).map(|t| t.iter().map(|&v| v as f64).collect()).collect()
}

/// A backend's traces of a whole shot of `problem`.
fn shot_traces(backend: &mut dyn Backend, problem: &Problem) -> Result<Vec<Vec<f64>>> {
    backend.start_shot(problem)?;
    for n in 0..problem.steps {
        check_stop(n, problem.steps)?;
        backend.step(n)?;
    }
    Ok(rows(&backend.traces(problem.steps)?, problem.steps))
}

/// Runs the migration over the job's processes (MPI ranks under a launcher, with the `mpi`
/// feature: each migrates its shots, rank 0 sums the stacks and writes). Returns the paths
/// written (none on the other ranks). An error or a signal on any rank stops every rank within
/// seconds ([`Ranks::finish`]), each naming why.
pub fn migrate(job: &Migration) -> RunResult<Vec<PathBuf>> {
    let ranks = Ranks::init()?;
    let mut written = Vec::new();
    let result = this_ranks_part(&ranks, job, &mut written);
    ranks.finish(&result);
    match result {
        Err(e) if ranks.size > 1 => Err(e.context(ranks.label())),
        other => other.map(|()| written),
    }
}

/// This process's shots, the stack's sum over the ranks and, on rank 0, the image file (its
/// paths into `written`).
fn this_ranks_part(ranks: &Ranks, job: &Migration, written: &mut Vec<PathBuf>) -> RunResult<()> {
    let started = Instant::now();
    let cfg = job.cfg;
    let imaging = cfg.imaging.as_ref().context("the input has no [imaging] section (docs/imaging.md)")?;
    imaging.check()?;
    crate::config::check_output_writable(&job.output, "imaging.output")?;
    let (mut migration, truth) = problems(cfg, job.input_dir, imaging)?;
    super::adjoint::check_adjoint_supported(&migration)?;
    let plan = ImagingPlan {
        interval: imaging
            .interval
            .unwrap_or_else(|| auto_interval(migration.dt, migration.source().wavelet.max_frequency())),
        gradient: imaging.gradient,
    };
    let list = shots(cfg)?;
    let notice = &mut |n: &str| eprintln!("notice: {n}");
    let open = |p: &Problem, choice: BackendChoice, notice: &mut dyn FnMut(&str)| {
        registry::open(p, choice, cfg.run.kernel, ranks.local_rank, notice)
    };
    let mut backend = open(&migration, cfg.run.backend, notice)?;
    let device = backend.info();
    let on_device = backend.device_imaging().is_some();
    if !on_device {
        // The ranks of one node share its memory.
        let limit = crate::resources::available_host_memory().map(|m| m / ranks.local_size.max(1) as u64);
        super::rtm::check_source_wavefield_fits(&migration, &plan, limit)?;
    }
    let mut data = match (truth, &imaging.observed) {
        (Some(truth), _) => {
            let backend = open(&truth, cfg.run.backend, notice).context("imaging.true_model")?;
            Data::Modelled { truth: Box::new(truth), backend }
        }
        (None, Some(pattern)) => Data::Files(gather_paths(pattern, job.input_dir)?),
        (None, None) => return Err(anyhow!("[imaging] gives no observed data").into()),
    };
    let count = match &data {
        Data::Modelled { .. } => list.len(),
        Data::Files(paths) => paths.len(),
    };
    let say = |s: String| {
        if !job.quiet && ranks.is_root() {
            println!("{s}");
        }
    };
    let [nx, ny, nz] = migration.shape();
    let from = match &data {
        Data::Modelled { .. } => "modelled in imaging.true_model".to_string(),
        Data::Files(paths) => format!("{} SEG-Y gather(s)", paths.len()),
    };
    say(format!(
        "migrate: {count} shot(s), data {from}, grid {nx} x {ny} x {nz}, {} steps of {:.3e} s, on {}{}",
        migration.steps,
        migration.dt,
        if device.backend == "cpu" {
            device.name.clone()
        } else {
            format!("{} ({}, {})", device.name, device.backend, device.kernel)
        },
        if ranks.size > 1 { format!(", {} MPI ranks", ranks.size) } else { String::new() }
    ));
    say(format!(
        "imaging condition every {} step(s) ({:.2} ms{}); source wavefield kept {}, f32: {} fields, {:.2} GiB a shot",
        plan.interval,
        plan.interval as f64 * migration.dt * 1e3,
        if imaging.interval.is_none() { ", from the wavelet's band" } else { "" },
        if on_device { "on the device" } else { "in host memory" },
        plan.slots(migration.steps),
        source_wavefield_bytes(&migration, &plan) as f64 / (1u64 << 30) as f64
    ));
    if let Some(sigma) = cfg.model.smoothing {
        say(format!("migration velocity: [model] smoothed by a Gaussian of {sigma} m on the slowness"));
    }
    // Shot aperture: each shot on its box, cut from the whole grid's models.
    let boxes = crate::survey::aperture::MigrationBoxes::new(cfg, job.input_dir, migration.dt, migration.steps)?;
    if let Some(b) = &boxes {
        let shot_cfgs: Vec<Config> = list.iter().map(|s| shot_config(job.text, s)).collect::<Result<_>>()?;
        say(b.saving_line(&shot_cfgs)?);
    }
    let points = migration.layout.points();
    let mut stack = vec![0.0f64; points];
    let mut gradient = imaging.gradient.then(|| vec![0.0f64; points]);
    let mut misfit = [0.0f64];
    for index in my_shots(ranks, count) {
        if ranks.stop_requested() {
            return Err(Interrupted { steps_done: 0, steps: 0 }.into());
        }
        let shot_started = Instant::now();
        // Shot aperture: the shot's problems on its box, their backends its own.
        let boxed = match &boxes {
            Some(b) => Some(b.shot(&shot_config(job.text, &list[index])?)?),
            None => None,
        };
        let mut box_backend = match &boxed {
            Some(b) => Some(open(&b.migration, cfg.run.backend, notice)?),
            None => None,
        };
        let observed = match &mut data {
            Data::Modelled { .. } if boxed.is_some() => {
                let truth = boxed.as_ref().and_then(|b| b.truth.as_ref()).context("the shot's true model")?;
                shot_traces(open(truth, cfg.run.backend, notice)?.as_mut(), truth)?
            }
            Data::Modelled { truth, backend: true_backend } => {
                if cfg.survey.is_some() {
                    let shot_cfg = shot_config(job.text, &list[index])?;
                    for w in migration.set_shot(&shot_cfg)?.into_iter().chain(truth.set_shot(&shot_cfg)?) {
                        eprintln!("warning: shot {index}: {w}");
                    }
                }
                shot_traces(true_backend.as_mut(), truth)?
            }
            Data::Files(paths) => place_gather(job, &mut migration, paths, index, &list)?,
        };
        let (migration, backend): (&Problem, &mut Box<dyn Backend>) = match (&boxed, &mut box_backend) {
            (Some(b), Some(k)) => (&b.migration, k),
            _ => (&migration, &mut backend),
        };
        let data_seconds = shot_started.elapsed().as_secs_f64();
        let migration_started = Instant::now();
        let mut shot = ShotImaging::source_pass(backend.as_mut(), migration, plan)?;
        let source_seconds = migration_started.elapsed().as_secs_f64();
        // The source pass's traces are the shot modelled in the migration model: its direct wave.
        let direct = imaging.subtract_direct.then(|| shot.modelled().to_vec());
        let reflections: Vec<Vec<f64>> = observed
            .iter()
            .enumerate()
            .map(|(r, o)| match &direct {
                Some(d) => o.iter().zip(&d[r]).map(|(o, d)| o - d).collect::<Vec<f64>>(),
                None => o.clone(),
            })
            .map(|r| fractional_derivative(&r, imaging.data_derivative, migration.dt))
            .collect();
        let backward_started = Instant::now();
        shot.image(&reflections)?;
        if gradient.is_some() {
            let (residual, j) = residuals(shot.modelled(), &observed)?;
            shot.gradient(&residual)?;
            misfit[0] += j;
        }
        let backward_seconds = backward_started.elapsed().as_secs_f64();
        let sums_started = Instant::now();
        match &boxed {
            // Shot aperture: the box's image and gradient added at the box's place.
            Some(b) => {
                let sums = shot.finish()?;
                let mut part = vec![0.0; sums.image.len()];
                add_normalised(&mut part, &ShotSums { image: sums.image, illumination: sums.illumination });
                b.add_into(&mut stack, &part);
                if let Some(g) = &mut gradient {
                    b.add_into(g, &sums.gradient);
                }
            }
            // The image stacked where the sums are (on a GPU, downloaded once at the end).
            None => {
                let shot_gradient = shot.finish_into(&mut stack)?;
                if let Some(g) = &mut gradient {
                    g.iter_mut().zip(&shot_gradient).for_each(|(a, b)| *a += b);
                }
            }
        }
        let sums_seconds = sums_started.elapsed().as_secs_f64();
        if !job.quiet {
            let migrated = migration_started.elapsed().as_secs_f64();
            let modelled = match &data {
                Data::Modelled { .. } => {
                    format!(", {:.2}x the data's modelling ({data_seconds:.3} s)", migrated / data_seconds)
                }
                Data::Files(_) => String::new(),
            };
            // Positions as the input writes them: [x, z] on a 2D grid.
            let [x, y, z] = migration.source().position;
            let at = if migration.is_2d() { format!("[{x:?}, {z:?}]") } else { format!("[{x:?}, {y:?}, {z:?}]") };
            // The passes' own time beside the shot's sums (download and stack).
            println!(
                "shot {} of {count} (source at {at} m){}: migrated in {migrated:.3} s (source pass {source_seconds:.3} s, \
                 backward {backward_seconds:.3} s, sums {sums_seconds:.3} s){modelled}",
                index + 1,
                if ranks.size > 1 { format!(", rank {}", ranks.rank) } else { String::new() },
            );
        }
    }
    take_device_stack(backend.as_mut(), &mut stack)?;
    // Every rank here before the sums: a rank that stopped is waited for by none.
    ranks.barrier()?;
    sum_to_root(ranks, &mut stack);
    if let Some(g) = &mut gradient {
        sum_to_root(ranks, g);
        sum_to_root(ranks, &mut misfit);
    }
    if !ranks.is_root() {
        return Ok(());
    }
    let image = if imaging.laplacian { laplacian_filter(&stack, migration.shape(), migration.spacing) } else { stack };
    *written = write_image(&ImageFile {
        path: &job.output,
        problem: &migration,
        region: cfg.model_region(),
        image: &image,
        gradient: gradient.as_deref(),
        misfit: misfit[0],
        shots: count,
    })?;
    say(format!("migrated in {:.1} s", started.elapsed().as_secs_f64()));
    Ok(())
}
