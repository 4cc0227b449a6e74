//! The `seismic-run` command: reads an input TOML, runs it on a CPU or GPU backend and writes an
//! HDF5 result file (plus pictures with `--plot`). `seismic-run --help` lists every option.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use seismic_run::config::{BackendChoice, Config, KernelChoice, Precision};
use seismic_run::driver::{self, Job, signals};
use seismic_run::output::derived::{self, DerivedList, Pictures, Segy, Xdmf};
use seismic_run::output::result;
use seismic_run::solver::{RunError, RunResult};
use seismic_run::survey::ResumeMode;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

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
    /// Download a named velocity model (e.g. marmousi) and check its SHA-256; with --segy, also
    /// write it as a SEG-Y model.
    FetchModel(FetchArgs),
    /// Write files derived from an existing result file: the SEG-Y of its receiver traces (the
    /// default), its XDMF sidecar, its pictures.
    Export(ExportArgs),
    /// Reverse-time migration of an input's shots in the velocity of its [model], the data
    /// modelled in its [imaging] true_model or read from SEG-Y gathers ([imaging] observed): the
    /// image to HDF5 and a picture (docs/imaging.md).
    Migrate(MigrateArgs),
    // Further subcommands (e.g. a benchmark) go here, each with its own Args struct.
}

#[derive(Args, Debug, Clone)]
struct FetchArgs {
    /// Data set name (see models/).
    name: String,
    /// Folder to put it in (default: $SEISMIC_DATA_DIR when set, else ./data).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Also write the model as a SEG-Y file (m/s, as the public models ship; `format = "segy"`
    /// reads it).
    #[arg(long, value_name = "OUT.sgy")]
    segy: Option<PathBuf>,
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
struct MigrateArgs {
    /// The input file (TOML) with an [imaging] section.
    #[arg(value_name = "INPUT.toml")]
    input: PathBuf,
    /// Image file (HDF5). Overrides [imaging] output.
    #[arg(long, short, value_name = "PATH")]
    output: Option<PathBuf>,
    /// Print nothing but warnings and errors.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug, Clone)]
struct RunArgs {
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
    /// seismic-bench --tune).
    #[arg(long)]
    no_tuning: bool,
    /// A survey: keep the shots whose result files are complete, verify against their checksums
    /// and were computed from this input, and run the others (without it, every shot runs and its
    /// files are replaced). Shots computed from another input (frequency, model, steps...) run
    /// again; `--resume=strict` refuses to start instead.
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1, require_equals = true, default_missing_value = "rerun")]
    resume: Option<ResumeMode>,
    /// A survey: run each shot over this many processes, its grid split into z-slabs (as
    /// `[survey] ranks_per_shot`; under mpirun, a build with `--features mpi`).
    #[arg(long, value_name = "N")]
    ranks_per_shot: Option<usize>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Run(args)) => run(&args),
        Some(Command::FetchModel(args)) => fetch_model(&args).map_err(RunError::from),
        Some(Command::Export(args)) => export(&args).map_err(RunError::from),
        Some(Command::Migrate(args)) => migrate(&args),
        None => run(&cli.run),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_interrupted() => {
            // The shell's convention: 128 + the signal (130 for SIGINT, 143 for SIGTERM, 129 for
            // SIGHUP), also on the ranks another rank's signal stopped; 1 where a rank failed.
            let (cause, why) = signals::received();
            last_line(format!("{e:#} ({why})"));
            ExitCode::from(cause.exit_status())
        }
        Err(e) => {
            last_line(format!("error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// Prints the line saying why the command failed or stopped on stderr in one write, so that the
/// lines of the ranks of one job, sharing their stderr, do not interleave.
fn last_line(line: String) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

fn fetch_model(args: &FetchArgs) -> Result<()> {
    let dir = args.dir.clone().unwrap_or_else(seismic_run::model::default_fetch_dir);
    let path = seismic_run::model::fetch(&args.name, &dir)?;
    println!("{}", path.display());
    if let Some(out) = &args.segy {
        seismic_run::config::check_output_writable(out, "--segy")?;
        let d = seismic_run::model::descriptor(&args.name)?;
        d.write_segy(&[dir], out)?;
        println!("{}", out.display());
    }
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
    let mut list: DerivedList = Vec::new();
    if let Some(path) = segy_path {
        list.push(Arc::new(Segy { path: Some(path), what: segy_key }));
    }
    if args.xdmf {
        list.push(Arc::new(Xdmf { what: "the XDMF sidecar (--xdmf)" }));
    }
    if args.plot {
        list.push(Arc::new(Pictures));
    }
    seismic_run::output::check_derived_paths(h5, "RESULT.h5", &derived::paths(&list, h5))?;
    // A signal removes the temporary files of what is being written.
    signals::install_handlers(true)?;
    for p in derived::write_all(&list, h5)? {
        println!("wrote {}", p.display());
    }
    Ok(())
}

fn migrate(args: &MigrateArgs) -> RunResult<()> {
    let input = &args.input;
    let text = std::fs::read_to_string(input).with_context(|| format!("cannot read input file {}", input.display()))?;
    let mut cfg = Config::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?;
    let input_dir = input.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    cfg.source.resolve_files(&input_dir);
    let output = match (&args.output, &cfg.imaging) {
        (Some(p), _) => p.clone(),
        (None, Some(i)) => i.output.clone(),
        (None, None) => {
            return Err(anyhow::anyhow!("{} has no [imaging] section (docs/imaging.md)", input.display()).into());
        }
    };
    signals::install_handlers(true)?;
    let job = seismic_run::imaging::migrate::Migration {
        cfg: &cfg,
        text: &text,
        input_dir: &input_dir,
        output,
        quiet: args.quiet,
    };
    for p in seismic_run::imaging::migrate::migrate(&job)? {
        println!("wrote {}", p.display());
    }
    Ok(())
}

/// `seismic-run run`: the input read, the command line's overrides applied, and the job handed
/// to the drivers.
fn run(args: &RunArgs) -> RunResult<()> {
    let started = std::time::Instant::now();
    let input = args.input.as_deref().expect("clap requires INPUT");
    let text = std::fs::read_to_string(input).with_context(|| format!("cannot read input file {}", input.display()))?;
    let mut cfg = Config::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?;
    let input_dir = input.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    cfg.source.resolve_files(&input_dir);

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
    let (output, output_key) = match &args.output {
        Some(p) => (p.clone(), "--output"),
        None => (cfg.output.path.clone(), "output.path"),
    };
    let plot = args.plot || cfg.output.plot;
    let job = Job {
        input: input.to_path_buf(),
        input_dir,
        text,
        cfg,
        output,
        output_key,
        plot,
        quiet: args.quiet,
        resume: args.resume,
        started,
    };
    driver::run(&job)
}
