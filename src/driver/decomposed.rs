//! `[run] decomposition = "z"` (or "yz"): this process is one rank of an mpirun, running its
//! z-slab (or y-z block) of one run through the one time loop
//! ([`Decomposed`](crate::decomposition::Decomposed)); rank 0 writes the result file and the files
//! derived from it (XDMF, SEG-Y, pictures: renamed into place together, as a single run's). A
//! survey with `ranks_per_shot` runs each shot this way over a group of ranks (`shot_over`, with
//! `mpi`).

use super::Job;
#[cfg(feature = "mpi")]
use super::{SNAPSHOT_BUFFERS, report, signals};
#[cfg(feature = "mpi")]
use crate::config::{BackendChoice, Config, Decompose, Precision};
use crate::output::derived::Derived;
#[cfg(feature = "mpi")]
use crate::output::hdf5::{RunMetadata, Written};
#[cfg(feature = "mpi")]
use crate::solver::RunError;
use crate::solver::RunResult;

/// Runs `job` as this rank's part; rank 0 writes the result and `derived`.
#[cfg(not(feature = "mpi"))]
pub fn run(job: &Job, _: &[Derived]) -> RunResult<()> {
    let kind = job.cfg.run.decomposition.map_or("z", |k| k.name());
    Err(anyhow::anyhow!(
        "run.decomposition = \"{kind}\" needs a build with `--features mpi` (and mpirun to start the ranks)"
    )
    .into())
}

/// Runs `job` as this rank's part; rank 0 writes the result and `derived`.
#[cfg(feature = "mpi")]
pub fn run(job: &Job, derived: &[Derived]) -> RunResult<()> {
    use anyhow::Context;
    use mpi::traits::Communicator;
    // Serialized: the overlapping halo exchange calls MPI from a thread of its own.
    let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized)
        .context("MPI could not be initialised (run under mpirun)")?;
    let world = universe.world();
    crate::parallel::abort_all_on_panic();
    let node = world.split_shared(0);
    let on_node = (node.rank() as usize, node.size() as usize);
    signals::install_handlers(false)?;
    let out = ShotOutput { path: &job.output, derived, provenance: None };
    let result = shot_over(universe.world(), on_node, job, &job.cfg, &job.text, &out, job.quiet).map(|_| ());
    match result {
        // The other ranks would wait for this one's halos for ever: end them all (a stop by
        // signal is every rank's at the same step: each ends by itself).
        Err(e) if world.size() > 1 && !e.is_interrupted() => {
            eprintln!("error: rank {} of {}: {e:#}", world.rank(), world.size());
            world.abort(1)
        }
        // The ranks end together; the launcher's SIGTERM to the others once the first has ended
        // must not cut their last line, and none outlives the deadline.
        Err(e) if world.size() > 1 => {
            if let Some(cause) = crate::solver::stop_cause() {
                signals::stop_deadline(cause);
            }
            signals::ending();
            Err(e)
        }
        r => r,
    }
}

/// Where a decomposed run's rank 0 writes: the result file, the files derived from it, and the
/// provenance the result records (a survey shot's).
pub struct ShotOutput<'a> {
    pub path: &'a std::path::Path,
    pub derived: &'a [Derived],
    pub provenance: Option<&'a str>,
}

/// One shot of `cfg` (its input `text`) over the ranks of `comm` (every rank calls it), each rank
/// sampling and running its z-slab; rank 0 of `comm` writes `out` and gets what it wrote.
/// `on_node`: this process's rank among its node's processes and their number (the GPU it takes,
/// its share of the host's memory). `quiet`: no header, progress or summary.
#[cfg(feature = "mpi")]
pub fn shot_over(
    comm: mpi::topology::SimpleCommunicator,
    on_node: (usize, usize),
    job: &Job,
    cfg: &Config,
    text: &str,
    out: &ShotOutput,
    quiet: bool,
) -> RunResult<Option<Written>> {
    let started = std::time::Instant::now();
    let out_path = out.path;
    use crate::backend::registry;
    use crate::decomposition::{self, Decomposition, Domain, Exchange, mpi::MpiExchange};
    use crate::output::hdf5::{Hdf5Writer, Volumes};
    use crate::output::plan::OutputPlan;
    use crate::output::progress::Progress;
    use crate::problem::Problem;
    use crate::solver::StepStats;
    use crate::{model, resources};
    use anyhow::{Context, anyhow};
    let mut host = MpiExchange::new(comm);
    let (rank, ranks) = (host.rank(), host.size());
    let kind = cfg.run.decomposition.unwrap_or(Decompose::Z);
    let key = format!("run.decomposition = \"{}\"", kind.name());
    if cfg.run.precision != Precision::F32 {
        return Err(anyhow!("{key} runs in f32 only: drop run.precision = \"f16\" (or --precision f16)").into());
    }
    if cfg.run.backend == BackendChoice::Auto {
        return Err(anyhow!("{key} needs run.backend set: \"cpu\", \"cuda\" or \"hip\" (every rank the same)").into());
    }
    // y-z blocks: rows x slabs, the split moving the fewest halo points.
    let shape = cfg.run_grid().shape;
    let (py, pz) = match kind {
        Decompose::Z => (1, ranks),
        Decompose::Yz => Decomposition::block_counts(shape, ranks, 2 * cfg.stencil.radius),
    };
    // The model, this rank's planes only: first its slab's share of an even split, for the whole
    // model's velocity range (the time step and the boundary depend on it) and the
    // decomposition's halo; then the planes it holds, ghost planes included.
    let nz = shape[2];
    let share = Decomposition::even_planes(nz, pz)?[rank / py].clone();
    let part = model::sample_run_planes(cfg, &job.input_dir, share.clone()).context("model")?;
    if rank == 0 {
        for w in &part.warnings {
            eprintln!("warning: {w}");
        }
    }
    let [lo, hi] = crate::problem::velocity_range(&part.vp);
    let range = [-host.max(-lo as f64)? as f32, host.max(hi as f64)? as f32];
    // The whole model's lowest and highest density (every rank samples one where any does): a
    // uniform one takes the constant-density path on every rank.
    let rho_range = match &part.rho {
        Some(rho) => {
            let [lo, hi] = model::density::density_range(rho);
            Some([-host.max(-lo as f64)? as f32, host.max(hi as f64)? as f32])
        }
        None => None,
    };
    let skeleton = Problem::build_part(cfg, part.vp, share.start, range, None)?;
    // GPUs: cuts balanced for the step's cost and clear of the CPML layers (Decomposition::for_gpus).
    let d = match cfg.run.backend {
        BackendChoice::Cpu => Decomposition::even_blocks(&skeleton, pz, py)?,
        _ => Decomposition::for_gpus(&skeleton, pz, py)?,
    };
    drop(skeleton);
    let held = d.planes_held(rank);
    // A variable density's part reaches R planes beyond the held ones, where the grid has them.
    let sampled = match rho_range {
        Some([lo, hi]) if lo != hi => {
            held.start.saturating_sub(cfg.stencil.radius)..(held.end + cfg.stencil.radius).min(nz)
        }
        _ => held.clone(),
    };
    let mut part = model::sample_run_planes(cfg, &job.input_dir, sampled.clone()).context("model")?;
    let plane = shape[0] * shape[1];
    part.vp.truncate((held.end - sampled.start) * plane);
    part.vp.drain(..(held.start - sampled.start) * plane);
    let density = match (part.rho, rho_range) {
        (Some(rho), Some([lo, hi])) if lo != hi => {
            Some(crate::problem::Density { rho, first: sampled.start, rho_ref: lo, rho_max: hi })
        }
        _ => None,
    };
    let mut problem = Problem::build_part(cfg, part.vp, held.start, range, density)?;
    // The model moves into the subdomain; the model file gets the owned block from it.
    let sub = d.subdomain_taking(&mut problem, rank)?;
    let model_ready = started.elapsed();
    if rank == 0 {
        for w in &problem.warnings {
            eprintln!("warning: {w}");
        }
    }
    if cfg.run.backend != BackendChoice::Cpu {
        d.check_gpu(&problem)?;
    }
    let (node_rank, node_size) = on_node;
    if cfg.run.backend == BackendChoice::Cpu
        && let Some(avail) = resources::available_host_memory()
    {
        // The ranks of one host share its memory.
        sub.check_fits(&d, problem.shape(), avail / node_size.max(1) as u64)?;
    }
    let plan = OutputPlan::from_config(cfg, &problem)?;
    // GPUs: the node-local rank picks the device (modulo the devices present; several ranks may
    // share one), whose free memory the backend checks the slab against. The CPU solver of a
    // subdomain keeps the whole grid's CPML layers.
    let backend = match cfg.run.backend {
        BackendChoice::Cpu => sub.cpu_backend()?,
        gpu => registry::open_gpu(&sub.problem, gpu, cfg.run.kernel, node_rank)?,
    };
    let device = backend.info();
    let backend_ready = started.elapsed();
    let (mut exchange, path) = super::halo::halo_exchange(cfg, host, node_size, backend.as_ref(), d.blocks())?;
    let exchange = exchange.as_mut();
    let quiet = quiet || rank != 0;
    if !quiet {
        let file_bytes = resources::output_file_bytes(&problem, &plan, text.len());
        report::print_header(&job.input, &problem, &plan, &device, out_path, file_bytes);
        report::print_smoothing(&job.cfg);
        let planes: Vec<usize> = d.slabs.iter().map(|s| s.1 - s.0).collect();
        let blocks = if d.blocks() {
            let rows: Vec<usize> = d.rows.iter().map(|r| r.1 - r.0).collect();
            format!("{ranks} y-z blocks: {} z-slabs of {planes:?} planes x {} row blocks of {rows:?} rows", pz, py)
        } else {
            format!("{ranks} z-slabs of {planes:?} planes")
        };
        println!(
            "  ranks     {blocks}, {} halo planes per cut ({:.2} MB each way), {path}",
            d.halo,
            d.halo_bytes_per_cut(&problem) as f64 / 2e6
        );
    }
    // This rank's owned block of the model, (planes, rows, nx), for /model/vp (none without it).
    let l = sub.problem.layout;
    let mut owned_vp = Vec::new();
    let copied_planes = if plan.model { sub.owned_local()..sub.owned.1 - sub.first } else { 0..0 };
    for z in copied_planes {
        let at = z * l.ny * l.nx;
        let rows = sub.owned_rows_local()..sub.owned_rows.1 - sub.first_row;
        owned_vp.extend_from_slice(&sub.problem.vp[at + rows.start * l.nx..at + rows.end * l.nx]);
    }
    let mut domains = vec![Domain { sub, backend }];
    let mut bar = Progress::new(problem.steps, problem.layout.points(), quiet);
    if rank != 0 {
        if plan.model {
            exchange.stream_to_root(vec![owned_vp], &mut |_, _| Ok(()))?;
        }
        decomposition::run(&problem, &d, &mut domains, exchange, &plan, None, &mut |_| {})?;
        return Ok(None);
    }
    let meta = RunMetadata { provenance: out.provenance.map(str::to_string), ..super::metadata(text, device, cfg) };
    let (record, commit, model_copied) = std::thread::scope(|scope| -> RunResult<_> {
        let mut writer = Hdf5Writer::start(scope, out_path, &problem, &plan, meta, SNAPSHOT_BUFFERS, Volumes::Slabs)?;
        // /model/vp from each rank's owned planes, one rank at a time.
        if plan.model {
            let mut join = decomposition::gather::SlabJoin::new(&d, problem.layout.nx);
            exchange.stream_to_root(vec![owned_vp], &mut |r, values| match join.push(r, values)? {
                Some((first, planes)) => writer.model_planes(first, planes),
                None => Ok(()),
            })?;
        }
        let model_copied = started.elapsed();
        let record = decomposition::run(&problem, &d, &mut domains, exchange, &plan, Some(&mut writer), &mut |done| {
            bar.update(done)
        });
        bar.finish();
        let record = record?.ok_or_else(|| RunError::from(anyhow!("rank 0 gathers the result")))?;
        let commit = writer.finish_unsynced(record.clone(), StepStats::of(&problem, &record))?;
        Ok((record, commit, model_copied))
    })?;
    let (written, derived) = crate::output::derived::commit_with(commit, out.derived)?;
    if !quiet {
        let n = problem.steps.max(1) as f64;
        let exchange_seconds = record.exchange_seconds.as_deref().unwrap_or_default();
        println!(
            "done: {} steps on {ranks} ranks in {:.2} s wall; per step {:.3} ms, of which the halo exchange {:.3} ms",
            problem.steps,
            record.wall_seconds,
            1e3 * record.step_seconds.iter().sum::<f64>() / n,
            1e3 * exchange_seconds.iter().sum::<f64>() / n
        );
        let [model, backend, copied, total] =
            [model_ready, backend_ready, model_copied, started.elapsed()].map(|t| t.as_secs_f64());
        // Between the backend and the time loop: the halo exchange's set-up (NCCL's communicator)
        // and the model's copy into the result, where it is made.
        let exchange_and_model = if plan.model {
            "the halo exchange's set-up and the model into the result"
        } else {
            "the halo exchange's set-up"
        };
        println!(
            "  whole shot (rank 0)  {total:.2} s: model {model:.2} s, backend set-up {:.2} s, {exchange_and_model} \
             {:.2} s, time loop {:.2} s, files {:.2} s",
            backend - model,
            copied - backend,
            record.wall_seconds,
            total - copied - record.wall_seconds,
        );
        println!("  wrote {}", written.path.display());
        for p in &derived {
            println!("  wrote {}", p.display());
        }
    }
    Ok(Some(written))
}
