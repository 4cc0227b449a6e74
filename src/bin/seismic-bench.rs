//! seismic-bench: the throughput report of the GPU kernels. Measures the copy and
//! 3-read-1-write ceilings, times the fused step, the three-pass step and the Laplacian-only operator
//! across grid sizes and radii, prints a markdown table and writes results.csv, results.json,
//! report.md and PNG plots into `--out`. `--tune` runs the autotuner first and caches its winners,
//! which seismic-run then uses by default on this GPU.

use anyhow::{Result, bail};
use clap::Parser;
use seismic_run::bench::{self, OperatorKind, SweepSpec};
use seismic_run::config::BackendChoice;
use std::path::PathBuf;

/// Throughput report of seismic-run's GPU kernels against the same-run bandwidth ceilings.
#[derive(Parser, Debug)]
#[command(name = "seismic-bench", version)]
struct Cli {
    /// GPU backend (cuda or hip).
    #[arg(long, value_enum, default_value = "cuda")]
    backend: BackendChoice,
    /// Grid sizes of the size sweep: N (a cube), NXxNZ (a 2D grid: the real steps only) or
    /// NXxNYxNZ, comma-separated [default: 256,512,768,1024,2048x2048x64,4096x1024x64].
    #[arg(long)]
    sizes: Option<String>,
    /// Stencil radius of the size sweep.
    #[arg(long, default_value_t = 4)]
    radius: usize,
    /// Radii of the radius sweep, comma-separated [default: 1,2,3,4,5,6,7,8].
    #[arg(long)]
    radii: Option<String>,
    /// Grid of the radius sweep [default: 512].
    #[arg(long)]
    radius_shape: Option<String>,
    /// Operators: fused, three-pass, laplacian, step (the real step), fused-f16, step-f16 (f16
    /// storage), comma-separated [default: the first four].
    #[arg(long)]
    operators: Option<String>,
    /// Timed applications per measurement (the median is reported) [default: 30, 15 with --quick].
    #[arg(long)]
    reps: Option<usize>,
    /// A small sweep (256^3, 512^3, 2048x2048x32 at R=4; R=1,4,8 at 256^3): 35 s with --tune on an H200.
    #[arg(long)]
    quick: bool,
    /// Output directory.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// Run the autotuner for each (radius, shape class) first, for the full step and for the
    /// Laplacian-only operator apart, cache the winners and use them.
    #[arg(long)]
    tune: bool,
    /// Seconds the autotuner may spend on the full step per (radius, shape class); the
    /// Laplacian-only operator's search gets half as much [default: 12, 4 with --quick].
    #[arg(long)]
    tune_budget: Option<f64>,
    /// Use the default launch shapes, not the cached autotuner winners.
    #[arg(long, conflicts_with = "tune")]
    no_tuning: bool,
    /// Skip the PNG plots.
    #[arg(long)]
    no_plots: bool,
    /// No GPU: rewrite the table, CSV and plots of an earlier run's results.json into --out (for
    /// example to draw the plots' labels on a machine that has a font).
    #[arg(long, value_name = "RESULTS_JSON")]
    from_json: Option<PathBuf>,
}

fn spec(cli: &Cli) -> Result<SweepSpec> {
    let mut s = if cli.quick { SweepSpec::quick() } else { SweepSpec::full() };
    if let Some(v) = &cli.sizes {
        s.sizes = bench::parse_list(v, |x| bench::parse_shape(x).map_err(|e| e.context("--sizes")))?;
    }
    if let Some(v) = &cli.radii {
        s.radii = bench::parse_list(v, |x| {
            x.trim().parse::<usize>().map_err(|_| anyhow::anyhow!("--radii: {x:?} is not a radius (1..=8)"))
        })?;
    }
    if let Some(v) = &cli.radius_shape {
        s.radius_shape = bench::parse_shape(v).map_err(|e| e.context("--radius-shape"))?;
    }
    if let Some(v) = &cli.operators {
        s.operators = bench::parse_list(v, OperatorKind::parse)?;
    }
    if let Some(r) = cli.reps {
        s.reps = r;
    }
    s.size_radius = cli.radius;
    s.validate()?;
    Ok(s)
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("seismic-bench: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    if let Some(path) = &cli.from_json {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("--from-json: cannot read {}: {e}", path.display()))?;
        let report: bench::Report = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("--from-json: {} is not a seismic-bench results.json: {e}", path.display()))?;
        bench::check_writable(&cli.out)?;
        return write(&cli, &report);
    }
    let spec = spec(&cli)?;
    let budget = cli.tune_budget.unwrap_or(if cli.quick { 4.0 } else { 12.0 });
    if !(budget.is_finite() && budget > 0.0) {
        bail!("--tune-budget must be a positive number of seconds, got {budget}");
    }
    bench::check_writable(&cli.out)?;
    let report = sweep(&cli, &spec, budget)?;
    write(&cli, &report)
}

fn write(cli: &Cli, report: &bench::Report) -> Result<()> {
    let files = report.write(&cli.out, !cli.no_plots)?;
    print!("{}", report.markdown());
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    Ok(())
}

#[cfg(any(feature = "cuda", feature = "hip"))]
fn sweep(cli: &Cli, spec: &SweepSpec, budget: f64) -> Result<bench::Report> {
    use bench::sweep::{Settings, TuningMode};
    use seismic_run::backend::gpu::GpuRuntime;
    use seismic_run::backend::registry::{self, GpuVendor, RuntimeTask};
    let settings = Settings {
        tuning: if cli.tune {
            TuningMode::Search { budget: std::time::Duration::from_secs_f64(budget) }
        } else if cli.no_tuning {
            TuningMode::Default
        } else {
            TuningMode::Cached
        },
        ceiling_bytes: 1 << 30,
        ceiling_reps: 20,
        tune_reps: 10,
        ring: true,
    };
    /// The sweep, on whichever runtime the registry opens.
    struct Sweep<'a>(&'a SweepSpec, Settings);
    impl RuntimeTask for Sweep<'_> {
        type Output = bench::Report;
        fn run<Rt: GpuRuntime + 'static>(
            self,
            vendor: GpuVendor,
            open: &mut dyn FnMut() -> Result<Rt>,
        ) -> Result<bench::Report> {
            let settings = Settings { ring: vendor.ring, ..self.1 };
            bench::sweep::run(open, self.0, &settings)
        }
    }
    registry::with_runtime(cli.backend, Sweep(spec, settings))
}

#[cfg(not(any(feature = "cuda", feature = "hip")))]
fn sweep(_cli: &Cli, _spec: &SweepSpec, _budget: f64) -> Result<bench::Report> {
    bail!("this build has no GPU backend: build with --features cuda or --features hip")
}
