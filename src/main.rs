//! The `seismic-run` command: reads an input TOML, runs it on a CPU or GPU backend and writes an
//! HDF5 result file (plus pictures with `--plot`). `seismic-run --help` lists every option.

use anyhow::{Context, Result, ensure};
use clap::{Args, Parser, Subcommand};
use seismic_run::config::{BackendChoice, Config, KernelChoice, Precision};
use seismic_run::output::hdf5::{Hdf5Writer, RunMetadata, Volumes};
use seismic_run::output::plan::OutputPlan;
use seismic_run::output::result::{self, ResultFile};
use seismic_run::output::{self, plot, progress::Progress, segy, xdmf};
use seismic_run::problem::Problem;
use seismic_run::resources;
use seismic_run::solver::{self, StepStats};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};

mod survey_run;

/// The signal (SIGINT, SIGTERM or SIGHUP) that stopped the run, 0 while none has come.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// 3D acoustic seismic wave propagation on GPUs (CUDA, HIP) with a rayon CPU reference.
///
/// `seismic-run INPUT.toml` runs an input file (the same as `seismic-run run INPUT.toml`).
#[derive(Parser, Debug)]
#[command(version, args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run an input file (the default command).
    Run(RunArgs),
    /// Download a named velocity model (e.g. marmousi) and check its SHA-256.
    FetchModel(FetchArgs),
    /// Write files derived from an existing result file: the SEG-Y of its receiver traces (the
    /// default), its XDMF sidecar, its pictures.
    Export(ExportArgs),
    // Further subcommands (e.g. a benchmark) go here, each with its own Args struct.
}

#[derive(Args, Debug, Clone)]
struct FetchArgs {
    /// Data set name (see models/).
    name: String,
    /// Folder to put it in (default: $SEISMIC_DATA_DIR when set, else ./data).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
struct ExportArgs {
    /// A result file written by `seismic-run run`.
    #[arg(value_name = "RESULT.h5")]
    result: PathBuf,
    /// Write the receiver traces as SEG-Y rev 2 to OUT (default when no other output is asked
    /// for: <stem>.sgy beside the result file).
    #[arg(long, value_name = "OUT.sgy")]
    segy: Option<PathBuf>,
    /// Write the XDMF sidecar (<stem>.xdmf beside the result file).
    #[arg(long)]
    xdmf: bool,
    /// Draw the pictures and the snapshot animation beside the result file.
    #[arg(long)]
    plot: bool,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct RunArgs {
    /// The input file (TOML; README "Configuration reference").
    #[arg(value_name = "INPUT.toml", required = true)]
    input: Option<PathBuf>,
    /// Compute backend: auto uses a GPU if one works, else the CPU (with a one-line notice).
    /// Overrides [run] backend.
    #[arg(long, value_enum)]
    backend: Option<BackendChoice>,
    /// GPU kernel variant: one fused xyz pass or three passes. Overrides [run] kernel; the CPU
    /// backend has one kernel and ignores it.
    #[arg(long, value_enum)]
    kernel: Option<KernelChoice>,
    /// Storage of the wavefields: f32, or f16 (f32 arithmetic; README "Precision"). Overrides
    /// [run] precision.
    #[arg(long, value_enum)]
    precision: Option<Precision>,
    /// Result file (HDF5). Overrides [output] path; relative paths are taken from the current
    /// directory.
    #[arg(long, short, value_name = "PATH")]
    output: Option<PathBuf>,
    /// Number of time steps. Overrides [time] steps and duration.
    #[arg(long, value_name = "N")]
    steps: Option<usize>,
    /// Also write pictures beside the result file (last xz snapshot over the model, shot gather,
    /// an animated GIF of the xz snapshots). Same as [output] plot = true.
    #[arg(long)]
    plot: bool,
    /// Print nothing but warnings and errors (no header, progress bar or summary).
    #[arg(long, short)]
    quiet: bool,
    /// GPU: use the default launch shapes, not the autotuner's cached winners for this GPU (see
    /// seismic-bench --tune). Same as SEISMIC_NO_TUNING=1.
    #[arg(long)]
    no_tuning: bool,
    /// A survey: keep the shots whose result files are complete and run the others (without it,
    /// every shot runs and its file is replaced).
    #[arg(long)]
    resume: bool,
    /// A survey: run each shot over this many processes, its grid split into z-slabs (as
    /// `[survey] ranks_per_shot`; under mpirun, a build with `--features mpi`).
    #[arg(long, value_name = "N")]
    ranks_per_shot: Option<usize>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Run(args)) => run(&args),
        Some(Command::FetchModel(args)) => fetch_model(&args),
        Some(Command::Export(args)) => export(&args),
        None => run(&cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<solver::Interrupted>().is_some() => {
            // The shell's convention: 128 + the signal (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).
            let sig = match SIGNAL.load(Ordering::Relaxed) {
                0 => signal_hook::consts::SIGINT,
                s => s,
            };
            eprintln!("{e:#} ({})", signal_name(sig));
            ExitCode::from((128 + sig) as u8)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        signal_hook::consts::SIGTERM => "SIGTERM",
        signal_hook::consts::SIGHUP => "SIGHUP",
        _ => "SIGINT",
    }
}

/// SIGINT, SIGTERM and SIGHUP (Ctrl-C, `timeout`, batch schedulers, a closed terminal) stop the
/// loop between steps, and the temporary output file is removed; a second signal removes the
/// temporary files and exits at once with 128 + the signal. With `at_once` (no time loop to stop)
/// the first signal does so.
pub(crate) fn install_signal_handlers(at_once: bool) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("cannot install the SIGINT, SIGTERM and SIGHUP handlers")?;
    std::thread::spawn(move || {
        for sig in signals.forever() {
            SIGNAL.store(sig, Ordering::Relaxed);
            if solver::request_stop() || at_once {
                seismic_run::output::safe::remove_pending();
                std::process::exit(128 + sig);
            }
        }
    });
    Ok(())
}

fn fetch_model(args: &FetchArgs) -> Result<()> {
    let dir = args.dir.clone().unwrap_or_else(seismic_run::model::default_fetch_dir);
    let path = seismic_run::model::fetch(&args.name, &dir)?;
    println!("{}", path.display());
    Ok(())
}

fn export(args: &ExportArgs) -> Result<()> {
    let h5 = &args.result;
    // Every output checked before anything is read or written.
    let segy_path = match &args.segy {
        Some(p) => Some(p.clone()),
        None if !args.xdmf && !args.plot => Some(result::sibling(h5, "sgy")),
        None => None,
    };
    let segy_key = if args.segy.is_some() { "--segy" } else { "the SEG-Y file" };
    if let Some(p) = &segy_path {
        seismic_run::config::check_output_writable(p, segy_key)?;
    }
    let mut outputs: Vec<(PathBuf, &str)> = segy_path.iter().map(|p| (p.clone(), segy_key)).collect();
    if args.xdmf {
        outputs.push((result::sibling(h5, "xdmf"), "the XDMF sidecar (--xdmf)"));
    }
    if args.plot {
        outputs.extend(plot::picture_paths(h5).map(|p| (p, "the picture (--plot)")));
    }
    output::check_derived_paths(h5, "RESULT.h5", &outputs)?;
    // A signal removes the temporary files of what is being written.
    install_signal_handlers(true)?;

    let r = ResultFile::open(h5)?;
    let mut written = Vec::new();
    if let Some(path) = segy_path {
        if let Some(n) = segy::write(&r, &path)? {
            eprintln!("notice: {n}");
        }
        written.push(path);
    }
    if args.xdmf {
        let path = result::sibling(&r.path, "xdmf");
        xdmf::write(&r, &path)?;
        written.push(path);
    }
    if args.plot {
        written.extend(plot::draw_all(&r)?);
    }
    for p in written {
        println!("wrote {}", p.display());
    }
    Ok(())
}

/// Writes the files derived from the finished result file `h5`: the XDMF sidecar, the SEG-Y when
/// `segy`, the pictures when `plot`. Returns the paths written.
pub(crate) fn write_derived(h5: &Path, segy: bool, plot: bool) -> Result<Vec<PathBuf>> {
    let result = ResultFile::open(h5)?;
    let mut derived = vec![result::sibling(h5, "xdmf")];
    xdmf::write(&result, &derived[0])?;
    if segy {
        let path = result::sibling(h5, "sgy");
        if let Some(n) = segy::write(&result, &path)? {
            eprintln!("notice: {n}");
        }
        derived.push(path);
    }
    if plot {
        derived.extend(plot::draw_all(&result)?);
    }
    Ok(derived)
}

/// `[run] decomposition = "z"`: this process is one rank of an mpirun, running its z-slab.
mod decomposed {
    use super::*;

    #[cfg(not(feature = "mpi"))]
    pub fn run(_: &RunArgs, cfg: &Config, _: &str, _: &Path, _: &Path) -> Result<()> {
        let kind = cfg.run.decomposition.map_or("z", |k| k.name());
        anyhow::bail!(
            "run.decomposition = \"{kind}\" needs a build with `--features mpi` (and mpirun to start the ranks)"
        )
    }

    #[cfg(feature = "mpi")]
    pub fn run(args: &RunArgs, cfg: &Config, text: &str, input_dir: &Path, out_path: &Path) -> Result<()> {
        use mpi::traits::Communicator;
        // Serialized: the overlapping halo exchange calls MPI from a thread of its own.
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .context("MPI could not be initialised (run under mpirun)")?;
        let world = universe.world();
        let node = world.split_shared(0);
        let on_node = (node.rank() as usize, node.size() as usize);
        install_signal_handlers(false)?;
        let result = shot_over(universe.world(), on_node, args, cfg, text, input_dir, out_path).map(|_| ());
        match result {
            // The other ranks would wait for this one's halos for ever: end them all (a stop by
            // signal is every rank's at the same step: each ends by itself).
            Err(e) if world.size() > 1 && e.downcast_ref::<solver::Interrupted>().is_none() => {
                eprintln!("error: rank {} of {}: {e:#}", world.rank(), world.size());
                world.abort(1)
            }
            r => r,
        }
    }

    /// One shot of `cfg` over the ranks of `comm` (every rank calls it), each rank sampling and
    /// running its z-slab; rank 0 of `comm` writes `out_path` and gets what it wrote. `on_node`:
    /// this process's rank among its node's processes and their number (the GPU it takes, its
    /// share of the host's memory).
    #[cfg(feature = "mpi")]
    pub fn shot_over(
        comm: mpi::topology::SimpleCommunicator,
        on_node: (usize, usize),
        args: &RunArgs,
        cfg: &Config,
        text: &str,
        input_dir: &Path,
        out_path: &Path,
    ) -> Result<Option<seismic_run::output::hdf5::Written>> {
        use seismic_run::decomposition::{self, Decomposition, Domain, Exchange, mpi::MpiExchange};
        use seismic_run::model;
        let mut host = MpiExchange::new(comm);
        let (rank, ranks) = (host.rank(), host.size());
        let kind = cfg.run.decomposition.unwrap_or(seismic_run::config::Decompose::Z);
        let key = format!("run.decomposition = \"{}\"", kind.name());
        anyhow::ensure!(
            cfg.run.precision == seismic_run::config::Precision::F32,
            "{key} runs in f32 only: drop run.precision = \"f16\" (or --precision f16)"
        );
        anyhow::ensure!(
            cfg.run.backend != BackendChoice::Auto,
            "{key} needs run.backend set: \"cpu\", \"cuda\" or \"hip\" (every rank the same)"
        );
        // y-z blocks: rows x slabs, the split moving the fewest halo points.
        let shape = cfg.grid.shape;
        let (py, pz) = match kind {
            seismic_run::config::Decompose::Z => (1, ranks),
            seismic_run::config::Decompose::Yz => Decomposition::block_counts(shape, ranks, 2 * cfg.stencil.radius),
        };
        // The model, this rank's planes only: first its slab's share of an even split, for the
        // whole model's velocity range (the time step and the boundary depend on it) and the
        // decomposition's halo; then the planes it holds, ghost planes included.
        let nz = shape[2];
        let share = Decomposition::even_planes(nz, pz)?[rank / py].clone();
        let part = model::sample_planes(cfg, input_dir, share.clone()).context("model")?;
        if rank == 0 {
            for w in &part.warnings {
                eprintln!("warning: {w}");
            }
        }
        let [lo, hi] = seismic_run::problem::velocity_range(&part.vp);
        let range = [-host.max(-lo as f64)? as f32, host.max(hi as f64)? as f32];
        let skeleton = Problem::build_part(cfg, part.vp, share.start, range)?;
        let d = Decomposition::even_blocks(&skeleton, pz, py)?;
        drop(skeleton);
        let held = d.planes_held(rank);
        let part = model::sample_planes(cfg, input_dir, held.clone()).context("model")?;
        let mut problem = Problem::build_part(cfg, part.vp, held.start, range)?;
        let sub = d.subdomain(&problem, rank)?;
        // The subdomain has its own copy; the model file gets the owned block from it.
        problem.vp = Vec::new();
        problem.vp_first = 0;
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
            && let Some(avail) = seismic_run::resources::available_host_memory()
        {
            // The ranks of one host share its memory.
            sub.check_fits(&d, problem.shape(), avail / node_size.max(1) as u64)?;
        }
        let plan = OutputPlan::from_config(cfg, &problem)?;
        // GPUs: the node-local rank picks the device (modulo the devices present; several ranks
        // may share one), whose free memory the backend checks the slab against.
        let backend = match cfg.run.backend {
            #[cfg(feature = "cuda")]
            BackendChoice::Cuda => seismic_run::backend::gpu::open_cuda_on(&sub.problem, cfg.run.kernel, node_rank)?,
            #[cfg(feature = "hip")]
            BackendChoice::Hip => seismic_run::backend::gpu::open_hip_on(&sub.problem, cfg.run.kernel, node_rank)?,
            BackendChoice::Cpu => sub.cpu_backend()?,
            other => anyhow::bail!("run.backend = {other:?}: this build has no such backend"),
        };
        let device = backend.info();
        let (mut exchange, path) = halo_exchange(cfg, host, node_size, backend.as_ref(), d.blocks())?;
        let exchange = exchange.as_mut();
        let quiet = args.quiet || rank != 0;
        if !quiet {
            let file_bytes = seismic_run::resources::output_file_bytes(&problem, &plan, text.len());
            print_header(args.input.as_deref().expect("input"), &problem, &plan, &device, out_path, file_bytes);
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
        // This rank's owned block of the model, (planes, rows, nx).
        let l = sub.problem.layout;
        let mut owned_vp = Vec::new();
        for z in sub.owned_local()..sub.owned.1 - sub.first {
            let at = z * l.ny * l.nx;
            let rows = sub.owned_rows_local()..sub.owned_rows.1 - sub.first_row;
            owned_vp.extend_from_slice(&sub.problem.vp[at + rows.start * l.nx..at + rows.end * l.nx]);
        }
        let mut domains = vec![Domain { sub, backend }];
        let mut bar = Progress::new(problem.steps, problem.layout.points(), quiet);
        if rank != 0 {
            exchange.stream_to_root(vec![owned_vp], &mut |_, _| Ok(()))?;
            decomposition::run(&problem, &d, &mut domains, exchange, &plan, None, &mut |_| {})?;
            return Ok(None);
        }
        let meta = RunMetadata {
            input_toml: text.to_string(),
            version: env!("CARGO_PKG_VERSION").into(),
            device,
            compression: cfg.output.compression,
        };
        let (out, written) = std::thread::scope(|scope| -> Result<_> {
            let mut writer =
                Hdf5Writer::start(scope, out_path, &problem, &plan, meta, SNAPSHOT_BUFFERS, Volumes::Slabs)?;
            // /model/vp from each rank's owned planes, one rank at a time.
            let mut join = decomposition::run::SlabJoin::new(&d, problem.layout.nx);
            exchange.stream_to_root(vec![owned_vp], &mut |r, values| match join.push(r, values)? {
                Some((first, planes)) => writer.model_planes(first, planes),
                None => Ok(()),
            })?;
            let out = decomposition::run(&problem, &d, &mut domains, exchange, &plan, Some(&mut writer), &mut |done| {
                bar.update(done)
            });
            bar.finish();
            let out = out?.context("rank 0 gathers the result")?;
            let stats = StepStats::new(
                &out.record.step_seconds,
                problem.step_bytes(),
                problem.full_step_bytes(),
                problem.layout.points(),
            )
            .with_exchange(&out.exchange_seconds);
            let written = writer.finish(out.record.clone(), stats)?;
            Ok((out, written))
        })?;
        if !args.quiet {
            let n = problem.steps.max(1) as f64;
            println!(
                "done: {} steps on {ranks} ranks in {:.2} s wall; per step {:.3} ms, of which the halo exchange {:.3} ms",
                problem.steps,
                out.record.wall_seconds,
                1e3 * out.record.step_seconds.iter().sum::<f64>() / n,
                1e3 * out.exchange_seconds.iter().sum::<f64>() / n
            );
            println!("  wrote {}", written.path.display());
        }
        Ok(Some(written))
    }

    /// The halo exchange `run.halo_exchange` asks for, and a phrase naming it: NCCL device to
    /// device where every rank of the node has a CUDA GPU of its own (`auto` falls back to the
    /// host-staged MPI path otherwise, `nccl` is an error), the host path elsewhere.
    #[cfg(feature = "mpi")]
    fn halo_exchange(
        cfg: &Config,
        host: seismic_run::decomposition::mpi::MpiExchange,
        ranks_on_node: usize,
        backend: &dyn seismic_run::backend::Backend,
        blocks: bool,
    ) -> Result<(Box<dyn seismic_run::decomposition::Exchange>, String)> {
        use seismic_run::config::HaloExchange;
        let field = backend.device_field();
        let asked = cfg.run.halo_exchange;
        if asked == HaloExchange::Host || host.size() == 1 || blocks {
            return host_exchange(cfg, host, backend, "", blocks, ranks_on_node);
        }
        let why_not: Option<String> = if cfg.run.backend != BackendChoice::Cuda {
            Some(format!("run.backend = {:?} (NCCL moves CUDA device memory)", cfg.run.backend))
        } else if !cfg!(feature = "nccl") {
            Some("this build has no NCCL (build with `--features mpi,nccl`)".into())
        } else if field.is_none() {
            Some("the backend stores no f32 wavefield on the device".into())
        } else {
            gpus_per_rank(ranks_on_node)
        };
        // Every rank takes the same path, or the ranks would wait on each other for ever.
        let mut host = host;
        use seismic_run::decomposition::Exchange;
        let all_can = host.all(why_not.is_none())?;
        if !all_can {
            let why = why_not.unwrap_or_else(|| "another rank cannot use NCCL".into());
            anyhow::ensure!(
                asked == HaloExchange::Auto,
                "run.halo_exchange = \"nccl\": {why}; use \"host\" or \"auto\""
            );
            return host_exchange(cfg, host, backend, &format!("; not NCCL: {why}"), false, ranks_on_node);
        }
        let overlap = cfg.run.halo_overlap != seismic_run::config::HaloOverlap::Off && backend.splits_steps();
        nccl_exchange(host, field, overlap)
    }

    /// The host-staged exchange, overlapping the step where `run.halo_overlap` asks for it (under
    /// "auto", unless GPU ranks share a GPU), the grid is cut along z alone, the backend computes a
    /// step in parts and MPI allows a thread of its own (the phrase says which; `why` is appended
    /// to it). Every rank calls it, and every rank decides alike.
    #[cfg(feature = "mpi")]
    fn host_exchange(
        cfg: &Config,
        host: seismic_run::decomposition::mpi::MpiExchange,
        backend: &dyn seismic_run::backend::Backend,
        why: &str,
        blocks: bool,
        ranks_on_node: usize,
    ) -> Result<(Box<dyn seismic_run::decomposition::Exchange>, String)> {
        use seismic_run::config::HaloOverlap;
        use seismic_run::decomposition::Exchange;
        let path = "halo exchange through host memory (MPI)";
        let asked = cfg.run.halo_overlap;
        if asked == HaloOverlap::Off || host.size() == 1 {
            return Ok((Box::new(host), format!("{path}{why}")));
        }
        if blocks {
            return Ok((Box::new(host), format!("{path} after the step (y-z blocks: rows, then planes){why}")));
        }
        if !backend.splits_steps() {
            let name = backend.info().backend;
            return Ok((Box::new(host), format!("{path} after the step (the {name} backend computes it whole){why}")));
        }
        let mut host = host;
        if asked == HaloOverlap::Auto {
            // Ranks sharing a GPU: the rest of a rank's step is too short to hide the exchange
            // behind, and splitting it costs launches (README, "Overlap").
            // (CUDA only: the GPUs of a node are counted there.)
            let shared = backend.info().backend == "cuda" && gpus_per_rank(ranks_on_node).is_some();
            if !host.all(!shared)? {
                return Ok((Box::new(host), format!("{path} after the step (ranks share a GPU){why}")));
            }
        }
        Ok(match host.overlap() {
            Ok(()) => (Box::new(host), format!("{path}, overlapping the step{why}")),
            Err(not) => (Box::new(host), format!("{path} after the step ({not}){why}")),
        })
    }

    /// `Some(why)` when the node's ranks outnumber its CUDA GPUs (NCCL needs one GPU per rank).
    #[cfg(feature = "mpi")]
    fn gpus_per_rank(ranks_on_node: usize) -> Option<String> {
        #[cfg(feature = "cuda")]
        {
            let gpus = seismic_run::backend::gpu::cuda::device_count().unwrap_or(0);
            (ranks_on_node > gpus).then(|| {
                format!("{ranks_on_node} ranks share {gpus} GPU(s) on this node (NCCL needs a GPU for each rank)")
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ranks_on_node;
            Some("this build has no CUDA".into())
        }
    }

    #[cfg(all(feature = "mpi", feature = "nccl"))]
    fn nccl_exchange(
        host: seismic_run::decomposition::mpi::MpiExchange,
        field: Option<seismic_run::backend::DeviceField>,
        overlap: bool,
    ) -> Result<(Box<dyn seismic_run::decomposition::Exchange>, String)> {
        use seismic_run::decomposition::nccl;
        let device = field.context("a device field")?.device;
        let version = nccl::version()?;
        let exchange = nccl::NcclExchange::over_mpi(device, host)?;
        if overlap {
            let path = format!("halo exchange device to device (NCCL {version}), overlapping the step");
            return Ok((Box::new(exchange.overlapping()), path));
        }
        Ok((Box::new(exchange), format!("halo exchange device to device (NCCL {version})")))
    }

    #[cfg(all(feature = "mpi", not(feature = "nccl")))]
    fn nccl_exchange(
        _: seismic_run::decomposition::mpi::MpiExchange,
        _: Option<seismic_run::backend::DeviceField>,
        _: bool,
    ) -> Result<(Box<dyn seismic_run::decomposition::Exchange>, String)> {
        unreachable!("the path is chosen only in builds with NCCL")
    }
}

/// Number of snapshot buffers in flight: one being filled while one is written.
pub(crate) const SNAPSHOT_BUFFERS: usize = 2;

fn run(args: &RunArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let input = args.input.as_deref().expect("clap requires INPUT");
    let text = std::fs::read_to_string(input).with_context(|| format!("cannot read input file {}", input.display()))?;
    let mut cfg = Config::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?;
    let input_dir = input.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();

    if args.no_tuning {
        #[cfg(any(feature = "cuda", feature = "hip"))]
        seismic_run::backend::gpu::autotune::disable();
    }
    if let Some(b) = args.backend {
        cfg.run.backend = b;
    }
    if let Some(k) = args.kernel {
        cfg.run.kernel = k;
    }
    if let Some(p) = args.precision {
        cfg.run.precision = p;
    }
    if let Some(n) = args.steps {
        cfg.time.steps = Some(n);
        cfg.time.duration = None;
    }
    if let Some(k) = args.ranks_per_shot {
        cfg.survey
            .as_mut()
            .with_context(|| format!("--ranks-per-shot: {} has no [survey]", input.display()))?
            .ranks_per_shot = k;
    }
    let (out_path, out_key) = match &args.output {
        Some(p) => (p.clone(), "--output"),
        None => (cfg.output.path.clone(), "output.path"),
    };
    let want_plot = args.plot || cfg.output.plot;

    // Cheap checks before the model is loaded: every value in range, the output and every file
    // derived from it can be written (each a regular file or nothing), the grid fits.
    cfg.check_values().map_err(|e| e.context(input.display().to_string()))?;
    seismic_run::config::check_output_writable(&out_path, out_key)?;
    output::check_derived_paths(&out_path, out_key, &output::derived_paths(&out_path, cfg.output.segy, want_plot))?;
    if cfg.run.decomposition.is_some() && cfg.survey.is_none() {
        // Each rank samples and checks its own part of the model: no process holds all of it.
        return decomposed::run(args, &cfg, &text, &input_dir, &out_path);
    }
    let buffers = if cfg.output.snapshot_every > 0 { SNAPSHOT_BUFFERS } else { 0 };
    resources::check_host_bytes(
        cfg.grid.shape,
        resources::base_host_bytes(&cfg, buffers),
        "the velocity model and snapshot buffers",
    )?;

    if cfg.survey.is_some() {
        return survey_run::run(args, &text, &cfg, &input_dir, &out_path, out_key, want_plot);
    }
    ensure!(!args.resume, "--resume continues a survey, and {} has no [survey]", input.display());

    let vp = seismic_run::model::load(&cfg, &input_dir).context("model")?;
    let problem = Problem::build(&cfg, vp)?;
    let model_ready = started.elapsed();
    for w in &problem.warnings {
        eprintln!("warning: {w}");
    }
    let plan = OutputPlan::from_config(&cfg, &problem)?;
    let file_bytes = resources::output_file_bytes(&problem, &plan, text.len());
    if let Some(w) = resources::check_output_space(&out_path, out_key, file_bytes)? {
        eprintln!("warning: {w}");
    }
    let mut backend = seismic_run::backend::open_backend(&problem, cfg.run.backend, cfg.run.kernel, 0, &mut |n| {
        eprintln!("notice: {n}");
    })?;
    let backend_ready = started.elapsed();
    let device = backend.info();
    if !args.quiet {
        print_header(input, &problem, &plan, &device, &out_path, file_bytes);
    }

    install_signal_handlers(false)?;
    let meta = RunMetadata {
        input_toml: text.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
        device,
        compression: cfg.output.compression,
    };
    let mut bar = Progress::new(problem.steps, problem.layout.points(), args.quiet);
    let (record, stats, written) = std::thread::scope(|scope| -> Result<_> {
        let mut writer = Hdf5Writer::start(scope, &out_path, &problem, &plan, meta, SNAPSHOT_BUFFERS, Volumes::Whole)?;
        let record = solver::run(&problem, backend.as_mut(), &plan, &mut writer, &mut |done| bar.update(done));
        bar.finish();
        let record = record?;
        let stats = StepStats::new(
            &record.step_seconds,
            problem.step_bytes(),
            problem.full_step_bytes(),
            problem.layout.points(),
        );
        let written = writer.finish(record.clone(), stats.clone())?;
        Ok((record, stats, written))
    })?;

    // The derived files are made from the finished result file, as `seismic-run export` makes
    // them. The result is complete by now: a failed derived file leaves it in place (exit status 1).
    let derived = write_derived(&written.path, cfg.output.segy, want_plot).with_context(|| {
        format!("the result file {} is complete and kept, but a file derived from it failed", written.path.display())
    })?;
    if !args.quiet {
        println!(
            "done: {} steps in {:.2} s wall ({:.2} s in steps)",
            problem.steps,
            record.wall_seconds,
            stats.seconds.iter().sum::<f64>()
        );
        println!("  effective bandwidth  mean {:.2} GB/s, median {:.2} GB/s", stats.mean_gbps, stats.median_gbps);
        if problem.full_step_bytes() != problem.step_bytes() {
            println!(
                "  full-step bandwidth  mean {:.2} GB/s, median {:.2} GB/s (interior and CPML memory variables)",
                stats.mean_full_step_gbps, stats.median_full_step_gbps
            );
        }
        println!("  throughput           mean {:.4} GPts/s, median {:.4} GPts/s", stats.mean_gpts, stats.median_gpts);
        let (model_s, total_s) = (model_ready.as_secs_f64(), started.elapsed().as_secs_f64());
        println!(
            "  whole run            {total_s:.2} s: model {model_s:.2} s, backend set-up {:.2} s, time loop {:.2} s, \
             files {:.2} s",
            backend_ready.as_secs_f64() - model_s,
            record.wall_seconds,
            total_s - backend_ready.as_secs_f64() - record.wall_seconds,
        );
        println!("  wrote {}", written.path.display());
        for p in &derived {
            println!("  wrote {}", p.display());
        }
    }
    Ok(())
}

fn print_header(
    input: &Path,
    problem: &Problem,
    plan: &OutputPlan,
    device: &seismic_run::backend::DeviceInfo,
    out: &Path,
    file_bytes: f64,
) {
    let [nx, ny, nz] = problem.shape();
    let [dx, dy, dz] = problem.spacing;
    let b = &problem.boundary;
    println!("seismic-run {}: {}", env!("CARGO_PKG_VERSION"), input.display());
    println!(
        "  grid      {nx} x {ny} x {nz} = {:.2} M points, spacing {dx} x {dy} x {dz} m, stencil radius {}",
        problem.layout.points() as f64 / 1e6,
        problem.stencil.radius
    );
    println!(
        "  time      dt = {:.4e} s ({:.0}% of the CFL limit), {} steps, {:.3} s",
        problem.dt,
        100.0 * problem.dt / problem.dt_limit(),
        problem.steps,
        problem.dt * problem.steps as f64
    );
    println!(
        "  boundary  {}, {} points{}",
        format!("{:?}", b.kind).to_lowercase(),
        b.width,
        if b.free_surface { ", free surface at z = 0" } else { "" }
    );
    println!(
        "  backend   {}: {}, kernel {}, {} storage",
        device.backend,
        device.name,
        device.kernel,
        problem.precision.name()
    );
    println!(
        "  output    {} (about {:.3} GiB: {} receivers, {} snapshots of {})",
        out.display(),
        file_bytes / (1u64 << 30) as f64,
        problem.receivers.len(),
        plan.snapshot_steps.len(),
        if plan.snapshots.is_empty() {
            "nothing".to_string()
        } else {
            plan.snapshots.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
        }
    );
}
