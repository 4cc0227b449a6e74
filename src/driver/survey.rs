//! A run of an input with `[survey]` (the `survey` module says what the shots, their inputs and
//! their files are). The model is loaded, the problem built and the backend opened (kernels
//! compiled, buffers allocated) once per process; each shot then moves the source and receivers,
//! resets the fields and runs the one time loop. Shots are taken dynamically by all processes of
//! the job ([`Ranks`]), each writes its own result file; with `ranks_per_shot`, groups of ranks
//! run each shot decomposed (`decomposed::shot_over`, with `mpi`).

use super::{Job, SNAPSHOT_BUFFERS, report, signals};
use crate::backend::{Backend, DeviceInfo, registry};
use crate::config::Config;
use crate::output::derived::{self, Derived};
use crate::output::hdf5::{Commit, Hdf5Writer, RunMetadata, Volumes};
use crate::output::plan::OutputPlan;
use crate::parallel::Ranks;
use crate::problem::Problem;
use crate::solver::{self, RunContext, RunResult, StepStats};
use crate::survey::{self, ClaimState, ResumeMode, Shot, ShotFile, SurveyFiles, provenance};
use crate::{output, resources};
use anyhow::{Context, Result, bail, ensure};
use std::path::PathBuf;
use std::time::Instant;

/// Test hook (`tests/survey.rs`, builds with the `test-hooks` feature only): a process that has
/// finished this many shots kills itself with SIGKILL right after taking the next, as a lost rank
/// or node would end.
#[cfg(feature = "test-hooks")]
const TEST_KILL_AFTER: &str = "SEISMIC_TEST_KILL_AFTER_SHOTS";

/// Runs the survey of `job`, each shot's result file followed by `derived`. Under MPI, a rank
/// that stops (a signal, an error) stops every rank within seconds ([`Ranks::finish`]), each
/// naming why.
pub fn run(job: &Job, derived: &[Derived]) -> RunResult<()> {
    let mut start_up = report::StartUp::new();
    let ranks = Ranks::init()?;
    start_up.mark("MPI");
    // Before the model is read: a signal in any phase stops the survey.
    signals::install_handlers(false)?;
    let result = shots(&ranks, job, derived, start_up);
    ranks.finish(&result);
    if ranks.size > 1 { result.map_err(|e| e.context(ranks.label())) } else { result }
}

/// This process's part of the survey.
fn shots(ranks: &Ranks, job: &Job, derived: &[Derived], mut start_up: report::StartUp) -> RunResult<()> {
    let (text, cfg, input_dir, out_path, out_key) =
        (job.text.as_str(), &job.cfg, job.input_dir.as_path(), job.output.as_path(), job.output_key);
    let shots = survey::shots(cfg)?;
    let files = SurveyFiles::new(out_path)?;
    // Each shot's SEG-Y numbering: shot 1, 2, ... and trace numbers continuing from the last shot's.
    let mut first_trace = 1u64;
    let inputs: Vec<(String, Config)> = shots
        .iter()
        .map(|s| {
            let t = survey::shot_input(text, s)?;
            let mut c = Config::from_toml(&t)?;
            c.source.resolve_files(input_dir);
            // The command line's overrides (--steps, --backend, --kernel) hold for every shot.
            (c.time, c.run) = (cfg.time.clone(), cfg.run.clone());
            c.shot_number = Some(crate::config::ShotNumber { shot: s.index as u64 + 1, first_trace });
            first_trace += c.receivers.iter().map(|r| r.count()).sum::<Result<usize>>()? as u64;
            Ok((t, c))
        })
        .collect::<Result<_>>()
        .context("survey")?;
    // Each shot's provenance: what its file is computed from (kept by --resume only where equal).
    let model = provenance::data_digest(cfg, input_dir)?;
    let digests: Vec<String> = inputs.iter().map(|(_, c)| provenance::digest(c, model.as_deref())).collect();
    for s in &shots {
        let path = files.shot(s.index);
        let key = format!("{out_key} (shot {})", s.index);
        crate::config::check_output_writable(&path, &key)?;
        output::check_derived_paths(&path, &key, &derived::paths(derived, &path))?;
    }
    start_up.mark("inputs");
    let per_shot = cfg.survey.as_ref().map_or(1, |s| s.ranks_per_shot);
    if per_shot > 1 {
        return grouped(ranks, job, &files, &shots, &inputs, &digests, derived);
    }
    let buffers = if cfg.output.snapshot_every > 0 { SNAPSHOT_BUFFERS } else { 0 };
    resources::check_run_grid_host_bytes(
        cfg,
        resources::base_host_bytes(cfg, buffers),
        "the velocity model and snapshot buffers",
    )?;

    let model = crate::model::load_model(cfg, input_dir).context("model")?;
    let mut problem = Problem::build_with_density(&inputs[0].1, model.vp, model.rho)?;
    start_up.mark("model");
    for w in &problem.warnings {
        eprintln!("warning: {w}");
    }
    // Every shot's source and receivers are checked before the first runs.
    let mut receivers = Vec::with_capacity(shots.len());
    for (s, (_, c)) in shots.iter().zip(&inputs) {
        problem.set_shot(c).with_context(|| format!("survey shot {} at {:?} m", s.index, s.source))?;
        receivers.push(problem.receivers.iter().map(|r| r.position).collect::<Vec<_>>());
    }
    start_up.mark("shots' geometry");
    let plan = OutputPlan::from_config(&inputs[0].1, &problem)?;
    let file_bytes = resources::output_file_bytes(&problem, &plan, text.len());
    if let Some(w) = resources::check_output_space(out_path, out_key, file_bytes * shots.len() as f64)? {
        eprintln!("warning: {w} (all {} shots)", shots.len());
    }
    let mut backend =
        registry::open(&problem, cfg.run.backend, cfg.run.kernel, ranks.local_rank, &mut |n| eprintln!("notice: {n}"))?;
    let device = backend.info();
    start_up.mark("backend");
    if ranks.is_root() && !job.quiet {
        println!(
            "seismic-run {}: survey of {} shots, {} process(es); each shot as below",
            env!("CARGO_PKG_VERSION"),
            shots.len(),
            ranks.size
        );
        report::print_header(&job.input, &problem, &plan, &device, &files.shot(0), file_bytes);
        report::print_smoothing(&job.cfg);
    }

    // Which shots are left: all (a fresh start), or those not complete (--resume).
    if ranks.is_root() {
        let live = prepare(&files, &shots, &receivers, &digests, job.resume)?;
        remove_stale_temporaries(&files, &shots, &live, derived, job.resume.is_some())?;
    }
    ranks.barrier()?;
    start_up.mark("files and the other processes");
    if ranks.is_root() && !job.quiet {
        println!("  start-up  {} (rank 0, before its first shot)", start_up.line());
    }

    let label = ranks.label();
    let start = Instant::now();
    let (mut compute, mut overhead, mut ran) = (0.0, 0.0, 0usize);
    #[cfg(feature = "test-hooks")]
    let kill_after: Option<usize> = std::env::var(TEST_KILL_AFTER).ok().and_then(|v| v.parse().ok());
    // The previous shot's file is synced and renamed, and its line printed, on its own thread
    // while this shot runs (depth 1: at most one shot is between its last step and its report).
    let mut pending: Option<std::thread::JoinHandle<Result<()>>> = None;
    let settle = |pending: &mut Option<std::thread::JoinHandle<Result<()>>>| -> RunResult<()> {
        match pending.take().map(|h| h.join()) {
            Some(Ok(r)) => Ok(r?),
            Some(Err(_)) => Err(anyhow::anyhow!("the thread finishing a shot's files panicked").into()),
            None => Ok(()),
        }
    };
    // An error names its shot; under MPI, `run` tells the other ranks (none waits at the final
    // barrier for this one).
    for (s, (shot_text, shot_cfg)) in shots.iter().zip(&inputs) {
        if ranks.stop_requested() {
            settle(&mut pending)?;
            return Err(solver::Interrupted { steps_done: 0, steps: 0 }.into());
        }
        let digest = digests[s.index].clone();
        let Some(claim) = files.try_claim(s.index, &label, &digest)? else { continue };
        #[cfg(feature = "test-hooks")]
        if kill_after == Some(ran) {
            settle(&mut pending)?;
            // SAFETY: raise has no preconditions; the process ends here with a shot taken and not
            // finished, as a killed rank or a lost node leaves it.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        let shot = ShotRun { shot: s, text: shot_text, cfg: shot_cfg, digest: &digest };
        let shot = run_shot(&shot, &mut problem, backend.as_mut(), &files, &device)
            .run_context(|| format!("survey shot {}", s.index));
        // The previous shot's files are finished (or removed) before this one's error ends the
        // process: a thread left running would leave its temporary file behind.
        let settled = settle(&mut pending);
        let (c, o, commit) = shot?;
        settled?;
        (compute, overhead, ran) = (compute + c, overhead + o, ran + 1);
        let rate = ran as f64 * 3600.0 / start.elapsed().as_secs_f64() * ranks.size as f64;
        let (files, n, index, label, derived) = (files.clone(), shots.len(), s.index, label.clone(), derived.to_vec());
        let all: Vec<usize> = shots.iter().map(|t| t.index).collect();
        pending = Some(std::thread::spawn(move || -> Result<()> {
            // The shot's result and derived files renamed into place together, then its claim
            // marked done.
            derived::commit_with(commit, &derived).with_context(|| format!("survey shot {index}"))?;
            claim.done(&digest)?;
            let done = all.iter().filter(|&&i| files.shot(i).exists()).count();
            println!(
                "shot {index} done ({label}): {c:.2} s steps, {o:.3} s reset and output; {done}/{n} shots, about \
                 {rate:.0} shots/hour, {:.0} s left",
                (n - done) as f64 * 3600.0 / rate.max(1e-9)
            );
            Ok(())
        }));
    }
    settle(&mut pending)?;
    ranks.barrier()?;

    if ranks.is_root() {
        let index = write_index_complete(&files, &shots, &receivers, &digests)?;
        if !job.quiet {
            let wall = start.elapsed().as_secs_f64();
            println!(
                "survey done: {} shots complete, {ran} run by this process in {wall:.2} s ({:.0} shots/hour by all {} \
                 process(es) together)",
                shots.len(),
                (ran * ranks.size) as f64 * 3600.0 / wall.max(1e-9),
                ranks.size
            );
            if ran > 0 {
                println!(
                    "  per shot here: {:.3} s steps, {:.4} s reset and output ({:.2}% of the steps)",
                    compute / ran as f64,
                    overhead / ran as f64,
                    100.0 * overhead / compute.max(1e-12)
                );
            }
            println!("  wrote {}", index.display());
        }
    }
    Ok(())
}

/// The survey's index, and an error naming the shots without a complete result file. Shots that
/// another process holds (a concurrent resume of the same survey) are waited for first, so that
/// the index says how they ended.
fn write_index_complete(
    files: &SurveyFiles,
    shots: &[Shot],
    receivers: &[Vec<[f64; 3]>],
    digests: &[String],
) -> Result<PathBuf> {
    let held: Vec<usize> =
        shots.iter().map(|s| s.index).filter(|&i| matches!(files.claim_state(i), Ok(ClaimState::Live))).collect();
    if !held.is_empty() {
        eprintln!("notice: waiting for survey shots {held:?}, which another process is running");
        for &i in &held {
            files.wait_for(i)?;
        }
    }
    let complete: Vec<bool> = shots
        .iter()
        .zip(receivers)
        .zip(digests)
        .map(|((s, r), d)| files.check(s, r, d, false) == ShotFile::Complete)
        .collect();
    let index = survey::write_index(files, shots, &complete)?;
    let missing: Vec<usize> = shots.iter().zip(&complete).filter(|(_, c)| !**c).map(|(s, _)| s.index).collect();
    ensure!(missing.is_empty(), "survey shots {missing:?} have no complete result file (see {})", index.display());
    Ok(index)
}

/// `survey.ranks_per_shot = K > 1`: the processes in groups of K (consecutive ranks), each group
/// running one shot at a time decomposed over its K ranks (z-slabs, or y-z blocks with
/// `[run] decomposition = "yz"`), as a decomposed run runs one input; the group's first rank
/// claims the shots (the same claims as whole-shot surveys, so `--resume` holds) and writes their
/// files. No process loads the whole model.
#[cfg(not(feature = "mpi"))]
#[allow(clippy::too_many_arguments)]
fn grouped(
    _: &Ranks,
    _: &Job,
    _: &SurveyFiles,
    _: &[Shot],
    _: &[(String, Config)],
    _: &[String],
    _: &[Derived],
) -> RunResult<()> {
    Err(anyhow::anyhow!(
        "survey.ranks_per_shot > 1 needs a build with `--features mpi` (and mpirun to start the processes)"
    )
    .into())
}

#[cfg(feature = "mpi")]
fn grouped(
    ranks: &Ranks,
    job: &Job,
    files: &SurveyFiles,
    shots: &[Shot],
    inputs: &[(String, Config)],
    digests: &[String],
    derived: &[Derived],
) -> RunResult<()> {
    use mpi::topology::Color;
    use mpi::traits::*;
    let cfg = &job.cfg;
    let per_shot = cfg.survey.as_ref().map_or(1, |s| s.ranks_per_shot);
    let world = ranks.world().context("survey.ranks_per_shot > 1 runs under mpirun (or srun)")?;
    if !ranks.size.is_multiple_of(per_shot) {
        return Err(anyhow::anyhow!(
            "survey.ranks_per_shot = {per_shot} does not divide the job's {} processes: start a multiple of it",
            ranks.size
        )
        .into());
    }
    // Every shot's source and receivers checked before the first runs (their taps do not depend
    // on the model).
    let mut receivers = Vec::with_capacity(shots.len());
    for (s, (_, c)) in shots.iter().zip(inputs) {
        let (_, r, _) = crate::problem::shot_geometry(c, 1.0, 1)
            .with_context(|| format!("survey shot {} at {:?} m", s.index, s.source))?;
        receivers.push(r.iter().map(|r| r.position).collect::<Vec<_>>());
    }
    let group = world.split_by_color(Color::with_value((ranks.rank / per_shot) as i32)).context("MPI_Comm_split")?;
    let leader = group.rank() == 0;
    if ranks.is_root() {
        let live = prepare(files, shots, &receivers, digests, job.resume)?;
        remove_stale_temporaries(files, shots, &live, derived, job.resume.is_some())?;
        if !job.quiet {
            let parts = match cfg.run.decomposition {
                Some(crate::config::Decompose::Yz) => "y-z blocks",
                _ => "z-slabs",
            };
            println!(
                "seismic-run {}: survey of {} shots, {} process(es) in {} groups of {per_shot}, each shot split into \
                 {parts} over its group",
                env!("CARGO_PKG_VERSION"),
                shots.len(),
                ranks.size,
                ranks.size / per_shot
            );
        }
    }
    ranks.barrier()?;
    let label = format!("group {} of {}, {}", ranks.rank / per_shot, ranks.size / per_shot, ranks.label());
    let start = Instant::now();
    let (mut next, mut ran) = (0usize, 0usize);
    // What the leader tells its group besides a shot: none left, or its claim failed.
    const NONE_LEFT: u64 = u64::MAX;
    const LEADER_FAILED: u64 = u64::MAX - 1;
    loop {
        // The leader claims the next free shot and tells its group which.
        let mut claimed = Ok(None);
        if leader && !ranks.stop_requested() {
            claimed = claim_next(files, shots, digests, &mut next, &label);
        }
        let mut pick = match &claimed {
            Ok(Some((i, _))) => *i,
            Ok(None) => NONE_LEFT,
            Err(_) => LEADER_FAILED,
        };
        group.process_at_rank(0).broadcast_into(&mut pick);
        if pick == LEADER_FAILED {
            claimed?;
            solver::stop_for(solver::StopCause::RankFailed { rank: ranks.rank - group.rank() as usize });
            return Err(solver::Interrupted { steps_done: 0, steps: 0 }.into());
        }
        if pick == NONE_LEFT {
            break;
        }
        let claim = claimed.ok().flatten().map(|(_, c)| c);
        let (shot, (text, shot_cfg)) = (&shots[pick as usize], &inputs[pick as usize]);
        let t = Instant::now();
        let on_node = (ranks.local_rank, ranks.local_size);
        let path = files.shot(shot.index);
        let digest = &digests[pick as usize];
        let out = super::decomposed::ShotOutput { path: &path, derived, provenance: Some(digest) };
        let written = super::decomposed::shot_over(group.duplicate(), on_node, job, shot_cfg, text, &out, true)
            .and_then(|w| match (w, claim) {
                (Some(w), Some(c)) => c.done(digest).map(|_| Some(w)).map_err(solver::RunError::from),
                (w, _) => Ok(w),
            })
            .run_context(|| format!("survey shot {}", shot.index));
        let written = match written {
            Ok(w) => w,
            // A signal: every group stops its shot at the same step (the claim stays; --resume
            // runs the shot again).
            Err(e) if e.is_interrupted() => break,
            Err(e) => {
                eprintln!("error: {e:#} ({label})");
                ranks.abort(1)
            }
        };
        ran += 1;
        if written.is_some() && !job.quiet {
            let done = shots.iter().filter(|s| files.shot(s.index).exists()).count();
            println!(
                "shot {} done ({label}): {:.2} s; {done}/{} shots",
                shot.index,
                t.elapsed().as_secs_f64(),
                shots.len()
            );
        }
    }
    ranks.barrier()?;
    if solver::stop_requested() {
        return Err(solver::Interrupted { steps_done: 0, steps: 0 }.into());
    }
    if ranks.is_root() {
        let index = write_index_complete(files, shots, &receivers, digests)?;
        if !job.quiet {
            let wall = start.elapsed().as_secs_f64();
            println!(
                "survey done: {} shots complete, {ran} run by this group in {wall:.2} s; wrote {}",
                shots.len(),
                index.display()
            );
        }
    }
    Ok(())
}

/// The next shot from `*next` on that no process has claimed, claimed for `label` with its
/// provenance digest (None when none is left), as `grouped`'s leader hands it to its group.
#[cfg(feature = "mpi")]
fn claim_next(
    files: &SurveyFiles,
    shots: &[Shot],
    digests: &[String],
    next: &mut usize,
    label: &str,
) -> Result<Option<(u64, crate::survey::Claim)>> {
    while *next < shots.len() {
        *next += 1;
        if let Some(claim) = files.try_claim(shots[*next - 1].index, label, &digests[*next - 1])? {
            return Ok(Some(((*next - 1) as u64, claim)));
        }
    }
    Ok(None)
}

/// Before any process takes a shot. A fresh start releases every claim no process holds. A
/// resume reads every shot's file back against its checksums: a complete one computed from this
/// input is marked done, so that no process runs it again; one computed from another input runs
/// again (`--resume=strict`: refused, before anything runs), as does a damaged, missing or
/// unfinished one. A shot another process holds now is left to it; returns those shots.
fn prepare(
    files: &SurveyFiles,
    shots: &[Shot],
    receivers: &[Vec<[f64; 3]>],
    digests: &[String],
    resume: Option<ResumeMode>,
) -> Result<Vec<usize>> {
    let Some(mode) = resume else {
        return files.release(shots.iter().map(|s| s.index));
    };
    let (mut complete, mut elsewhere, mut changed, mut lost, mut rerun) =
        (0, Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((s, r), digest) in shots.iter().zip(receivers).zip(digests) {
        let state = files.claim_state(s.index)?;
        if state == ClaimState::Live {
            elsewhere.push(s.index);
            continue;
        }
        match files.check(s, r, digest, true) {
            ShotFile::Complete => {
                complete += 1;
                files.mark_done(s.index, "complete before this resume", digest)?;
                continue;
            }
            ShotFile::Changed => changed.push(s.index),
            ShotFile::Damaged(why) => eprintln!("resume: shot {} is not kept: {why}", s.index),
            ShotFile::Missing if state == (ClaimState::Left { done: None }) => lost.push(s.index),
            ShotFile::Missing => {}
        }
        rerun.push(s.index);
    }
    if mode == ResumeMode::Strict && !changed.is_empty() {
        bail!(
            "--resume=strict: survey shots {changed:?} were computed from another input, model or numerics version \
             than this one (their provenance differs); nothing was run (--resume runs them again)"
        );
    }
    // Held meanwhile by another process: left to it.
    elsewhere.extend(files.release(rerun.iter().copied())?);
    let n = shots.len();
    eprintln!(
        "resume: {complete} of {n} shots complete, {} run by another process now, running the other {}",
        elsewhere.len(),
        n - complete - elsewhere.len()
    );
    if !changed.is_empty() {
        eprintln!(
            "resume: {} shots {changed:?} were computed from another input, model or numerics version; running them \
             again",
            changed.len()
        );
    }
    if !lost.is_empty() {
        eprintln!(
            "resume: shots {lost:?} had been started but not finished (a run stopped or a rank lost); running them again"
        );
    }
    Ok(elsewhere)
}

/// A shot to run: its input text and configuration, and its provenance digest.
struct ShotRun<'a> {
    shot: &'a Shot,
    text: &'a str,
    cfg: &'a Config,
    digest: &'a str,
}

/// On `--resume`: the temporary files that killed processes left (each shot's result file, the
/// files derived from it, the index), which nothing removed when they ended. The shots in `live`
/// are being run by another process now: their temporary files are its, and so may the index's be.
fn remove_stale_temporaries(
    files: &SurveyFiles,
    shots: &[Shot],
    live: &[usize],
    derived: &[Derived],
    resume: bool,
) -> Result<()> {
    if !resume {
        return Ok(());
    }
    let mut dests = if live.is_empty() { vec![files.index()] } else { Vec::new() };
    for s in shots.iter().filter(|s| !live.contains(&s.index)) {
        let path = files.shot(s.index);
        dests.extend(derived::paths(derived, &path).into_iter().map(|(p, _)| p));
        dests.push(path);
    }
    let removed = output::safe::remove_stale(&dests)?;
    if !removed.is_empty() {
        eprintln!("resume: removed {} temporary file(s) that a stopped run left", removed.len());
    }
    Ok(())
}

/// Runs one shot into its file, all but the sync and rename (the returned [`Commit`]): seconds in
/// the steps, and in the rest on this thread (moving the source and receivers, resetting the
/// fields, writing the file).
fn run_shot(
    run: &ShotRun,
    problem: &mut Problem,
    backend: &mut dyn Backend,
    files: &SurveyFiles,
    device: &DeviceInfo,
) -> RunResult<(f64, f64, Commit)> {
    let (shot, text, cfg) = (run.shot, run.text, run.cfg);
    let t0 = Instant::now();
    problem.set_shot(cfg)?;
    backend.start_shot(problem)?;
    let plan = OutputPlan::from_config(cfg, problem)?;
    let meta = RunMetadata { provenance: Some(run.digest.to_string()), ..super::metadata(text, device.clone(), cfg) };
    let path = files.shot(shot.index);
    let mut steps = 0.0;
    let commit = std::thread::scope(|scope| -> RunResult<_> {
        let mut writer = Hdf5Writer::start(scope, &path, problem, &plan, meta, SNAPSHOT_BUFFERS, Volumes::Whole)?;
        let t = Instant::now();
        let record = solver::run(problem, backend, &plan, &mut writer, &mut |_| {})?;
        steps = t.elapsed().as_secs_f64();
        let stats = StepStats::of(problem, &record);
        Ok(writer.finish_unsynced(record, stats)?)
    })?;
    Ok((steps, t0.elapsed().as_secs_f64() - steps, commit))
}
