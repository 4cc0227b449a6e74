//! The throughput report of `seismic-bench`: which grids, radii and operators a sweep times, and
//! how its results are written (a markdown table on stdout, `results.csv`, `results.json`,
//! `report.md` and PNG plots). The GPU part, [`sweep`], times the interior operators against the
//! STREAM-like ceilings measured in the same run; everything here is plain data and formatting.
//!
//! The figure of merit is the effective bandwidth of the seeds (000, 002): the bytes a step must
//! move at the least (`problem::step_bytes`: each field read or written once plus the 2R halo
//! planes) over the median kernel time. A full leapfrog step reads p^n, p^{n-1} and c^2 dt^2 and
//! writes p^{n+1}, so it is compared with the 3-read-1-write ceiling; the Laplacian-only operator
//! reads one field and writes one, so with the copy ceiling.

#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod interior;
pub mod plot;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub mod sweep;

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The operators a sweep times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OperatorKind {
    /// The fused one-pass leapfrog step (interior only).
    #[default]
    FusedStep,
    /// x, y and z passes into a scratch Laplacian, then the update.
    ThreePassStep,
    /// out = L p by the fused kernel.
    LaplacianOnly,
    /// What a run does each step: the fused step, CPML of [`REAL_STEP_CPML`] points on every face,
    /// one source and [`REAL_STEP_RECEIVERS`] receivers; its bytes are the full step's bound
    /// (`problem::full_step_bytes`).
    RealStep,
    /// The fused step with f16 storage (kernels/fused_half.cu; `problem::step_bytes_f16`).
    FusedStepF16,
    /// The real step with f16 storage (the CPML memory variables stay f32).
    RealStepF16,
}

/// CPML width of the [`OperatorKind::RealStep`] operator, points.
pub const REAL_STEP_CPML: usize = 20;
/// Receivers of the [`OperatorKind::RealStep`] operator.
pub const REAL_STEP_RECEIVERS: usize = 1000;

impl OperatorKind {
    /// The operators a sweep times unless told otherwise.
    pub const ALL: [OperatorKind; 4] =
        [OperatorKind::FusedStep, OperatorKind::ThreePassStep, OperatorKind::LaplacianOnly, OperatorKind::RealStep];
    /// [`Self::ALL`] and the f16 steps (asked for by name: `--operators fused,fused-f16`).
    pub const KNOWN: [OperatorKind; 6] = [
        OperatorKind::FusedStep,
        OperatorKind::ThreePassStep,
        OperatorKind::LaplacianOnly,
        OperatorKind::RealStep,
        OperatorKind::FusedStepF16,
        OperatorKind::RealStepF16,
    ];

    /// The table's name.
    pub fn label(&self) -> &'static str {
        match self {
            OperatorKind::FusedStep => "fused step",
            OperatorKind::ThreePassStep => "three-pass step",
            OperatorKind::LaplacianOnly => "Laplacian-only",
            OperatorKind::RealStep => "real step",
            OperatorKind::FusedStepF16 => "fused step f16",
            OperatorKind::RealStepF16 => "real step f16",
        }
    }

    /// The command line's and the CSV's name.
    pub fn key(&self) -> &'static str {
        match self {
            OperatorKind::FusedStep => "fused",
            OperatorKind::ThreePassStep => "three-pass",
            OperatorKind::LaplacianOnly => "laplacian",
            OperatorKind::RealStep => "step",
            OperatorKind::FusedStepF16 => "fused-f16",
            OperatorKind::RealStepF16 => "step-f16",
        }
    }

    pub fn parse(s: &str) -> Result<OperatorKind> {
        OperatorKind::KNOWN.into_iter().find(|o| o.key() == s.trim()).with_context(|| {
            format!(
                "--operators: unknown operator {s:?} (expected fused, three-pass, laplacian, step, fused-f16 or step-f16)"
            )
        })
    }

    /// The ceiling this operator's bandwidth is compared with.
    pub fn ceiling(&self) -> CeilingKind {
        match self {
            OperatorKind::LaplacianOnly => CeilingKind::Copy,
            _ => CeilingKind::ThreeReadOneWrite,
        }
    }

    /// Whether it writes the leapfrog update (4 fields per point) rather than L p (2).
    pub fn leapfrog(&self) -> bool {
        *self != OperatorKind::LaplacianOnly
    }

    /// Theoretical bytes of one application on `shape` (the effective-bandwidth numerator).
    pub fn bytes(&self, shape: [usize; 3], radius: usize) -> u64 {
        use crate::problem::{full_step_bytes, step_bytes, step_bytes_f16};
        let cpml = full_step_bytes(shape, radius, REAL_STEP_CPML, false) - step_bytes(shape, radius, true);
        match self {
            OperatorKind::RealStep => step_bytes(shape, radius, true) + cpml,
            OperatorKind::FusedStepF16 => step_bytes_f16(shape, radius),
            OperatorKind::RealStepF16 => step_bytes_f16(shape, radius) + cpml,
            _ => step_bytes(shape, radius, self.leapfrog()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CeilingKind {
    Copy,
    ThreeReadOneWrite,
}

impl CeilingKind {
    pub fn label(&self) -> &'static str {
        match self {
            CeilingKind::Copy => "copy",
            CeilingKind::ThreeReadOneWrite => "3R1W",
        }
    }
}

/// STREAM-like ceilings measured in the run (GB/s = 1e9 bytes/s, reads plus writes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    pub copy_gbs: f64,
    pub three_read_one_write_gbs: f64,
    pub array_bytes: u64,
    pub repetitions: usize,
}

#[cfg(any(feature = "cuda", feature = "hip"))]
impl From<crate::backend::gpu::Ceiling> for Ceilings {
    fn from(c: crate::backend::gpu::Ceiling) -> Ceilings {
        Ceilings {
            copy_gbs: c.copy_gbs,
            three_read_one_write_gbs: c.three_read_one_write_gbs,
            array_bytes: c.array_bytes,
            repetitions: c.repetitions,
        }
    }
}

impl Ceilings {
    pub fn gbs(&self, kind: CeilingKind) -> f64 {
        match kind {
            CeilingKind::Copy => self.copy_gbs,
            CeilingKind::ThreeReadOneWrite => self.three_read_one_write_gbs,
        }
    }
}

/// What to time: `sizes` at radius `size_radius`, and radii `radii` on `radius_shape`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepSpec {
    pub sizes: Vec<[usize; 3]>,
    pub size_radius: usize,
    pub radii: Vec<usize>,
    pub radius_shape: [usize; 3],
    pub operators: Vec<OperatorKind>,
    /// Timed applications per measurement (median).
    pub reps: usize,
}

impl SweepSpec {
    /// The sweep: cubes 256..1024 and two shapes whose xy-planes overflow a 50 MB
    /// last-level cache (seed 002) at R = 4, and R = 1..8 at 512^3; every operator.
    pub fn full() -> SweepSpec {
        SweepSpec {
            sizes: vec![
                [256, 256, 256],
                [512, 512, 512],
                [768, 768, 768],
                [1024, 1024, 1024],
                [2048, 2048, 64],
                [4096, 1024, 64],
            ],
            size_radius: 4,
            radii: (1..=8).collect(),
            radius_shape: [512, 512, 512],
            operators: OperatorKind::ALL.to_vec(),
            reps: 30,
        }
    }

    /// A small sweep (35 s with tuning on an H200, well under two minutes): 256^3, 512^3 and one large-plane
    /// shape at R = 4; R = 1, 4, 8 at 256^3.
    pub fn quick() -> SweepSpec {
        SweepSpec {
            sizes: vec![[256, 256, 256], [512, 512, 512], [2048, 2048, 32]],
            size_radius: 4,
            radii: vec![1, 4, 8],
            radius_shape: [256, 256, 256],
            operators: OperatorKind::ALL.to_vec(),
            reps: 15,
        }
    }

    /// Every (shape, radius) to time, in order, each once.
    pub fn cases(&self) -> Vec<([usize; 3], usize)> {
        let mut v: Vec<([usize; 3], usize)> = self.sizes.iter().map(|&s| (s, self.size_radius)).collect();
        for &r in &self.radii {
            if !v.contains(&(self.radius_shape, r)) {
                v.push((self.radius_shape, r));
            }
        }
        v
    }

    pub fn validate(&self) -> Result<()> {
        ensure!(!self.operators.is_empty(), "--operators: give at least one operator");
        ensure!(self.reps >= 3, "--reps must be at least 3, got {}", self.reps);
        ensure!(
            !self.sizes.is_empty() || !self.radii.is_empty(),
            "nothing to time: --sizes and --radii are both empty"
        );
        for &r in self.radii.iter().chain(std::iter::once(&self.size_radius)) {
            ensure!((1..=8).contains(&r), "radius {r} is out of range: the stencils have radius 1..=8");
        }
        for (shape, r) in self.cases() {
            ensure!(
                shape.iter().all(|&n| n > 2 * r),
                "grid {} is too small for radius {r}: every axis needs more than 2R points",
                shape_label(shape)
            );
        }
        Ok(())
    }
}

/// "N" (a cube) or "NXxNYxNZ".
pub fn parse_shape(s: &str) -> Result<[usize; 3]> {
    let parts: Vec<&str> = s.trim().split(['x', 'X']).collect();
    let nums: Vec<usize> = parts
        .iter()
        .map(|p| p.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .with_context(|| format!("grid size {s:?}: expected N or NXxNYxNZ with positive integers"))?;
    let shape = match nums[..] {
        [n] => [n, n, n],
        [x, y, z] => [x, y, z],
        _ => bail!("grid size {s:?}: expected N or NXxNYxNZ"),
    };
    ensure!(shape.iter().all(|&n| n > 0), "grid size {s:?}: every axis must be positive");
    Ok(shape)
}

/// "512x512x512".
pub fn shape_label(s: [usize; 3]) -> String {
    format!("{}x{}x{}", s[0], s[1], s[2])
}

/// A comma-separated list, each item parsed by `item`.
pub fn parse_list<T>(s: &str, item: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    s.split(',').filter(|p| !p.trim().is_empty()).map(item).collect()
}

/// The launch shape of a measurement.
pub type Launch = crate::backend::tuning::Tuning;

/// One measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub shape: [usize; 3],
    pub radius: usize,
    pub operator: OperatorKind,
    pub launch: Launch,
    /// "default", "cached" (an earlier search) or "tuned" (searched in this run).
    pub tuning: String,
    /// Median device seconds per application.
    pub seconds: f64,
    /// Effective bandwidth, GB/s.
    pub gbs: f64,
    /// Grid points per second, billions.
    pub gpts: f64,
    pub ceiling: CeilingKind,
    /// gbs as a percentage of the ceiling.
    pub percent: f64,
    /// gbs as a percentage of the same ceiling measured on arrays of this grid's size: a grid of
    /// 64 MiB fields moves too few bytes per launch for the memory system to reach its 1 GiB rate
    /// (H100: a 64 MiB copy at 79-92% of the 1 GiB copy, varying from run to run), and this says
    /// how much of the shortfall is the kernel's. None where it was not measured.
    #[serde(default)]
    pub percent_same_size: Option<f64>,
}

impl Row {
    /// A row from a median time: bandwidth from `problem::step_bytes`, percent of the operator's
    /// ceiling.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        shape: [usize; 3],
        radius: usize,
        operator: OperatorKind,
        launch: Launch,
        tuning: &str,
        seconds: f64,
        ceilings: &Ceilings,
    ) -> Row {
        let bytes = operator.bytes(shape, radius) as f64;
        let points = shape.iter().product::<usize>() as f64;
        let gbs = bytes / seconds / 1e9;
        let ceiling = operator.ceiling();
        Row {
            shape,
            radius,
            operator,
            launch,
            tuning: tuning.to_string(),
            seconds,
            gbs,
            gpts: points / seconds / 1e9,
            ceiling,
            percent: 100.0 * gbs / ceilings.gbs(ceiling),
            percent_same_size: None,
        }
    }

    /// The row with its percentage of `same_size`, the ceilings measured on arrays of its grid's size.
    pub fn with_same_size(self, same_size: Option<&Ceilings>) -> Row {
        let percent_same_size = same_size.map(|c| 100.0 * self.gbs / c.gbs(self.ceiling));
        Row { percent_same_size, ..self }
    }

    pub fn launch_label(&self) -> String {
        self.launch.label()
    }
}

/// A case the sweep could not time (too large for the device, a failed compile...).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub shape: [usize; 3],
    pub radius: usize,
    pub operator: Option<OperatorKind>,
    pub error: String,
}

/// One autotuner search of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneSummary {
    /// The operator searched (records written before the field existed: the fused step).
    #[serde(default)]
    pub operator: OperatorKind,
    pub radius: usize,
    pub class: String,
    /// The grid the search timed.
    pub shape: [usize; 3],
    pub launch: Launch,
    pub seconds: f64,
    pub default_seconds: f64,
    pub tried: usize,
    pub candidates: usize,
    pub search_seconds: f64,
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub device: String,
    pub vendor: String,
    pub arch: String,
    /// UTC date, YYYY-MM-DD.
    pub date: String,
    pub ceilings: Ceilings,
    /// The same ceilings on arrays of each grid's field size (smallest first).
    #[serde(default)]
    pub same_size_ceilings: Vec<Ceilings>,
    pub spec: SweepSpec,
    pub rows: Vec<Row>,
    pub tuning: Vec<TuneSummary>,
    pub skipped: Vec<Skipped>,
}

/// A throughput target and whether the run meets it.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetCheck {
    pub what: String,
    /// None: the run has no row for it.
    pub percent: Option<f64>,
    pub goal: f64,
}

impl TargetCheck {
    pub fn verdict(&self) -> &'static str {
        match self.percent {
            None => "not measured",
            Some(p) if p >= self.goal => "met",
            Some(_) => "MISSED",
        }
    }
}

impl Report {
    pub fn find(&self, shape: [usize; 3], radius: usize, op: OperatorKind) -> Option<&Row> {
        self.rows.iter().find(|r| r.shape == shape && r.radius == radius && r.operator == op)
    }

    /// The interior throughput targets: at R = 4 on 512^3 and 1024^3 the fused step >= 90% of 3R1W and the fused
    /// Laplacian >= 90% of copy; no fused row (step or Laplacian) of the size sweep under 80%.
    pub fn targets(&self) -> Vec<TargetCheck> {
        let mut v = Vec::new();
        for n in [512, 1024] {
            for op in [OperatorKind::FusedStep, OperatorKind::LaplacianOnly] {
                v.push(TargetCheck {
                    what: format!("{} R=4 {n}^3 >= 90% of {}", op.label(), op.ceiling().label()),
                    percent: self.find([n, n, n], 4, op).map(|r| r.percent),
                    goal: 90.0,
                });
            }
        }
        // "No size below 80%", for each operator the fused kernel runs, against its own ceiling.
        for op in [OperatorKind::FusedStep, OperatorKind::LaplacianOnly] {
            let worst = self
                .rows
                .iter()
                .filter(|r| r.operator == op && r.radius == self.spec.size_radius)
                .filter(|r| self.spec.sizes.contains(&r.shape))
                .map(|r| r.percent)
                .min_by(|a, b| a.total_cmp(b));
            v.push(TargetCheck {
                what: format!(
                    "{}, every size of the sweep (R={}) >= 80% of {}",
                    op.label(),
                    self.spec.size_radius,
                    op.ceiling().label()
                ),
                percent: worst,
                goal: 80.0,
            });
        }
        v
    }

    /// The report as markdown: heading, ceilings, table, targets, tuning, skipped cases.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let c = &self.ceilings;
        let _ = writeln!(s, "## seismic-bench: {} ({}, {}), {}\n", self.device, self.vendor, self.arch, self.date);
        let _ = writeln!(
            s,
            "Ceilings measured in the same run ({} MiB arrays, float4, median of {}): copy **{:.0} GB/s**, \
             3-read-1-write **{:.0} GB/s**. Effective bandwidth = bytes a step must move (each field once, \
             plus the 2R halo planes) / median kernel time; f32; interior only (no boundary, source or \
             receivers) except the real step, whose bytes are the full step's bound (below). Full steps are compared with 3R1W, the Laplacian-only operator with copy. \
             The autotuner searches the full step and the Laplacian-only operator separately (the \
             Laplacian's shape runs one cp.async stage deeper than its label's base).\n",
            c.array_bytes >> 20,
            c.repetitions,
            c.copy_gbs,
            c.three_read_one_write_gbs
        );
        if !self.same_size_ceilings.is_empty() {
            s.push_str(
                "The same ceilings on arrays of each grid's field size (the last column of the table compares \
                 with these; a launch that moves fewer bytes runs further from the 1 GiB rate):",
            );
            for c in &self.same_size_ceilings {
                let _ = write!(
                    s,
                    " {} MiB: copy {:.0} GB/s ({:.1}%), 3R1W {:.0} GB/s ({:.1}%);",
                    c.array_bytes >> 20,
                    c.copy_gbs,
                    100.0 * c.copy_gbs / self.ceilings.copy_gbs,
                    c.three_read_one_write_gbs,
                    100.0 * c.three_read_one_write_gbs / self.ceilings.three_read_one_write_gbs
                );
            }
            s.pop();
            s.push_str(".\n\n");
        }
        s.push_str(
            "| grid | R | operator | tuning | time/step (ms) | GB/s | GPts/s | % of ceiling | % of same-size ceiling |\n",
        );
        s.push_str("|---|---:|---|---|---:|---:|---:|---:|---:|\n");
        for r in &self.rows {
            let same = r.percent_same_size.map(|p| format!("{p:.1}%")).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} ({}) | {:.3} | {:.0} | {:.2} | {:.1}% of {} | {same} |",
                shape_label(r.shape),
                r.radius,
                r.operator.label(),
                r.launch_label(),
                r.tuning,
                r.seconds * 1e3,
                r.gbs,
                r.gpts,
                r.percent,
                r.ceiling.label()
            );
        }
        let real: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.operator == OperatorKind::RealStep)
            .filter_map(|r| {
                let interior = self.find(r.shape, r.radius, OperatorKind::FusedStep)?;
                Some(format!(
                    "{} R={}: {:.2}x the interior-only step's time",
                    shape_label(r.shape),
                    r.radius,
                    r.seconds / interior.seconds
                ))
            })
            .collect();
        if self.rows.iter().any(|r| r.operator == OperatorKind::RealStep) {
            let _ = writeln!(
                s,
                "\nThe real step is what a run does each step: the fused step, CPML of {REAL_STEP_CPML} points on \
                 every face, one source and {REAL_STEP_RECEIVERS} receivers. Its bytes are the full step's bound: \
                 the interior's plus each CPML layer point's memory variables (psi and zeta) read and written \
                 once, 16 B a point per axis. {}",
                if real.is_empty() { String::new() } else { real.join("; ") + "." }
            );
        }
        s.push_str("\nTargets:\n\n");
        for t in self.targets() {
            let p = t.percent.map(|p| format!("{p:.1}%")).unwrap_or_else(|| "-".into());
            let _ = writeln!(s, "- {}: {} ({})", t.what, p, t.verdict());
        }
        if !self.tuning.is_empty() {
            s.push_str(
                "\nAutotuner winners (by = block rows, v = vector width, w = z-window (0: automatic), s = \
                 cp.async stages, m = blocks per SM, u = z unrolling, r = rows per thread, o = grid-index order, \
                 t = tile ring, h = halos through the ring):\n\n",
            );
            s.push_str(
                "| operator | R | shape class | searched on | winner | ms | default ms | gain | tried | search s |\n",
            );
            s.push_str("|---|---:|---|---|---|---:|---:|---:|---:|---:|\n");
            for t in &self.tuning {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:+.1}% | {}/{} | {:.1} |",
                    t.operator.label(),
                    t.radius,
                    t.class,
                    shape_label(t.shape),
                    t.launch.label(),
                    t.seconds * 1e3,
                    t.default_seconds * 1e3,
                    100.0 * (t.default_seconds / t.seconds - 1.0),
                    t.tried,
                    t.candidates,
                    t.search_seconds
                );
            }
        }
        if !self.skipped.is_empty() {
            s.push_str("\nNot measured:\n\n");
            for k in &self.skipped {
                let op = k.operator.map(|o| format!(" {}", o.label())).unwrap_or_default();
                let _ = writeln!(s, "- {} R={}{op}: {}", shape_label(k.shape), k.radius, k.error.replace('\n', " "));
            }
        }
        s
    }

    /// One line per row, with a header.
    pub fn csv(&self) -> String {
        let mut s = String::from(
            "device,date,nx,ny,nz,radius,operator,block_x,block_y,vec,window,stages,min_blocks,unroll_z,rows,order,tile_ring,halo_ring,tuning,seconds,gbs,gpts,\
             ceiling,ceiling_gbs,percent,percent_same_size\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6e},{:.2},{:.4},{},{:.2},{:.2},{}",
                csv_field(&self.device),
                self.date,
                r.shape[0],
                r.shape[1],
                r.shape[2],
                r.radius,
                r.operator.key(),
                r.launch.block_x,
                r.launch.block_y,
                r.launch.vec,
                r.launch.window,
                r.launch.stages,
                r.launch.min_blocks,
                r.launch.unroll_z,
                r.launch.rows,
                r.launch.order,
                r.launch.tile_ring,
                r.launch.halo_ring,
                csv_field(&r.tuning),
                r.seconds,
                r.gbs,
                r.gpts,
                r.ceiling.label(),
                self.ceilings.gbs(r.ceiling),
                r.percent,
                r.percent_same_size.map(|p| format!("{p:.2}")).unwrap_or_default()
            );
        }
        s
    }

    /// Writes results.csv, results.json, report.md and (unless `plots` is false) the PNG plots into
    /// `dir`; returns the paths written.
    pub fn write(&self, dir: &Path, plots: bool) -> Result<Vec<PathBuf>> {
        let mut out = vec![
            write_atomic(&dir.join("results.csv"), self.csv().as_bytes())?,
            write_atomic(&dir.join("results.json"), serde_json::to_string_pretty(self)?.as_bytes())?,
            write_atomic(&dir.join("report.md"), self.markdown().as_bytes())?,
        ];
        if plots {
            out.extend(plot::draw(self, dir, plot::system_font())?);
        }
        Ok(out)
    }
}

/// A CSV field, quoted when it holds a comma, quote or line break.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// Checks that `dir` can be created and written before any GPU time is spent.
pub fn check_writable(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--out: cannot create the directory {}", dir.display()))?;
    let probe = dir.join(format!(".seismic-bench-probe.{}", std::process::id()));
    std::fs::write(&probe, b"").with_context(|| format!("--out: cannot write into {}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `bytes` to `path` through a temporary file in the same directory (no half-written file).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAUNCH: Launch = Launch {
        block_x: 32,
        block_y: 8,
        vec: 4,
        window: 64,
        stages: 2,
        min_blocks: 2,
        unroll_z: 9,
        rows: 1,
        order: 0,
        tile_ring: 0,
        halo_ring: 0,
    };

    fn ceilings() -> Ceilings {
        Ceilings { copy_gbs: 3000.0, three_read_one_write_gbs: 3200.0, array_bytes: 1 << 30, repetitions: 20 }
    }

    pub(super) fn sample_report() -> Report {
        let c = ceilings();
        let spec = SweepSpec::quick();
        let mut rows = Vec::new();
        for (shape, r) in spec.cases() {
            for (i, op) in OperatorKind::ALL.into_iter().enumerate() {
                let bytes = op.bytes(shape, r) as f64;
                let gbs = [2950.0, 1500.0, 2800.0, 2000.0][i] - 10.0 * r as f64;
                rows.push(Row::new(shape, r, op, LAUNCH, "default", bytes / (gbs * 1e9), &c));
            }
        }
        // The 256^3 cases measured against ceilings on 64 MiB arrays at 80% of the 1 GiB ones.
        let small = Ceilings { copy_gbs: 2400.0, three_read_one_write_gbs: 2560.0, array_bytes: 64 << 20, ..c.clone() };
        for row in rows.iter_mut().filter(|r| r.shape == [256; 3]) {
            *row = row.clone().with_same_size(Some(&small));
        }
        Report {
            device: "Test GPU, rev \"A\"".into(),
            vendor: "cuda".into(),
            arch: "sm_90".into(),
            date: "2026-11-22".into(),
            ceilings: c,
            same_size_ceilings: vec![small],
            spec,
            rows,
            tuning: vec![TuneSummary {
                operator: OperatorKind::FusedStep,
                radius: 4,
                class: "xy~2^18 z~2^9".into(),
                shape: [512, 512, 512],
                launch: Launch { block_y: 16, window: 32, ..LAUNCH },
                seconds: 1.0e-3,
                default_seconds: 1.1e-3,
                tried: 15,
                candidates: 40,
                search_seconds: 9.5,
            }],
            skipped: vec![Skipped {
                shape: [4096, 4096, 4096],
                radius: 4,
                operator: None,
                error: "needs 768 GiB".into(),
            }],
        }
    }

    #[test]
    fn rows_use_step_bytes_and_the_operator_ceiling() {
        let c = ceilings();
        let shape = [512, 512, 512];
        let bytes = crate::problem::step_bytes(shape, 4, true) as f64;
        let r = Row::new(shape, 4, OperatorKind::FusedStep, LAUNCH, "tuned", bytes / 2.88e12, &c);
        assert!((r.gbs - 2880.0).abs() < 1e-6);
        assert!((r.percent - 90.0).abs() < 1e-9);
        assert_eq!(r.ceiling, CeilingKind::ThreeReadOneWrite);
        assert!((r.gpts - 512.0f64.powi(3) / r.seconds / 1e9).abs() < 1e-9);
        let lap_bytes = crate::problem::step_bytes(shape, 4, false) as f64;
        let l = Row::new(shape, 4, OperatorKind::LaplacianOnly, LAUNCH, "tuned", lap_bytes / 2.7e12, &c);
        assert_eq!(l.ceiling, CeilingKind::Copy);
        assert!((l.percent - 90.0).abs() < 1e-9);
    }

    #[test]
    fn shapes_and_lists_parse_with_clear_errors() {
        assert_eq!(parse_shape("512").unwrap(), [512; 3]);
        assert_eq!(parse_shape("2048x1024X64").unwrap(), [2048, 1024, 64]);
        for bad in ["", "0", "12x12", "axbxc", "1x2x3x4", "-5"] {
            let e = parse_shape(bad).unwrap_err().to_string();
            assert!(e.contains("grid size"), "{bad}: {e}");
        }
        assert_eq!(parse_list("1, 4,8", |s| Ok(s.trim().parse::<usize>()?)).unwrap(), vec![1, 4, 8]);
        let ops = parse_list("fused,laplacian", OperatorKind::parse).unwrap();
        assert_eq!(ops, vec![OperatorKind::FusedStep, OperatorKind::LaplacianOnly]);
        assert!(OperatorKind::parse("twopass").unwrap_err().to_string().contains("--operators"));
    }

    #[test]
    fn cases_cover_sizes_then_radii_without_repeats() {
        let s = SweepSpec::full();
        let c = s.cases();
        assert_eq!(c.len(), 6 + 7, "R=4 at 512^3 is shared");
        assert_eq!(c[0], ([256; 3], 4));
        assert!(c.contains(&([512; 3], 1)) && c.contains(&([512; 3], 8)));
        s.validate().unwrap();
        SweepSpec::quick().validate().unwrap();
        let bad = SweepSpec { radii: vec![9], ..SweepSpec::quick() };
        assert!(bad.validate().unwrap_err().to_string().contains("radius 9"));
        let small = SweepSpec { sizes: vec![[8, 8, 8]], size_radius: 4, ..SweepSpec::quick() };
        assert!(small.validate().unwrap_err().to_string().contains("8x8x8"));
    }

    #[test]
    fn markdown_has_every_row_and_the_ceilings() {
        let rep = sample_report();
        let md = rep.markdown();
        assert!(md.contains("copy **3000 GB/s**") && md.contains("3-read-1-write **3200 GB/s**"), "{md}");
        let table_rows = md.lines().filter(|l| l.contains("% of 3R1W |") || l.contains("% of copy |")).count();
        assert_eq!(table_rows, rep.rows.len());
        assert!(md.contains("64 MiB: copy 2400 GB/s (80.0%), 3R1W 2560 GB/s (80.0%)."), "{md}");
        // 256^3, R = 4, Laplacian-only: 2800 - 40 GB/s is 92.0% of 3000 and 115.0% of 2400.
        assert!(md.contains("| 92.0% of copy | 115.0% |"), "{md}");
        assert!(md.contains("% of 3R1W | - |"), "{md}");
        // The real step's time against the interior-only step's, from the same rows.
        let (real, fused) = (
            rep.find([512; 3], 4, OperatorKind::RealStep).unwrap(),
            rep.find([512; 3], 4, OperatorKind::FusedStep).unwrap(),
        );
        let ratio = format!("512x512x512 R=4: {:.2}x the interior-only step's time", real.seconds / fused.seconds);
        assert!(md.contains(&ratio), "{md}");
        assert!(!md.contains("issue"), "{md}");
        assert!(
            md.contains("| 512x512x512 | 4 | fused step | bx32 by8 v4 w64 s2 m2 u9 r1 o0 t0 h0 (default) |"),
            "{md}"
        );
        // 2950 - 40 GB/s of 3200.
        assert!(md.contains("| 2910 |") && md.contains("90.9% of 3R1W"), "{md}");
        assert!(
            md.contains(
                "| fused step | 4 | xy~2^18 z~2^9 | 512x512x512 | bx32 by16 v4 w32 s2 m2 u9 r1 o0 t0 h0 | 1.000 | 1.100 | +10.0% | 15/40 |"
            ),
            "{md}"
        );
        assert!(md.contains("4096x4096x4096 R=4: needs 768 GiB"));
    }

    #[test]
    fn targets_follow_the_rows() {
        let rep = sample_report();
        let t = rep.targets();
        // The quick sweep has 512^3 at R=4 but not 1024^3.
        assert_eq!(t[0].verdict(), "met", "{t:?}");
        assert_eq!(t[2].verdict(), "not measured");
        let (fused, laplacian) = (&t[4], &t[5]);
        assert_eq!(fused.verdict(), "met");
        assert!((fused.percent.unwrap() - 100.0 * 2910.0 / 3200.0).abs() < 1e-6, "{fused:?}");
        assert!((laplacian.percent.unwrap() - 100.0 * 2760.0 / 3000.0).abs() < 1e-6, "{laplacian:?}");
        let mut worse = rep.clone();
        worse.rows[0].percent = 50.0; // the fused step at 256^3
        assert_eq!(worse.targets()[4].verdict(), "MISSED");
        assert_eq!(worse.targets()[5].verdict(), "met");
    }

    #[test]
    fn csv_has_a_header_and_one_line_per_row_and_quotes_the_device() {
        let rep = sample_report();
        let csv = rep.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), rep.rows.len() + 1);
        let header: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(header.len(), 26);
        assert!(lines[1].starts_with(
            "\"Test GPU, rev \"\"A\"\"\",2026-11-22,256,256,256,4,fused,32,8,4,64,2,2,9,1,0,0,0,default,"
        ));
        // After the quoted device, every line has the header's other 25 fields; the same-size
        // percentage is empty where it was not measured.
        for l in &lines[1..] {
            assert_eq!(l.split_once("\",").unwrap().1.split(',').count(), 25, "{l}");
        }
        assert!(lines[1].ends_with(",90.94,113.67"), "{}", lines[1]);
        let l512 = lines.iter().find(|l| l.contains(",512,512,512,")).unwrap();
        assert!(l512.ends_with(','), "{l512}");
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn report_round_trips_and_writes_its_files() {
        let rep = sample_report();
        let json = serde_json::to_string(&rep).unwrap();
        assert!(json.contains("\"operator\":\"fused-step\""));
        // serde_json may round the last bit of a float: compare the text of a second round.
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back.rows.len(), rep.rows.len());
        assert_eq!(back.markdown(), rep.markdown());
        let dir = std::env::temp_dir().join(format!("seismic-bench-test-{}", std::process::id()));
        check_writable(&dir).unwrap();
        let files = rep.write(&dir, false).unwrap();
        assert_eq!(files.len(), 3);
        assert_eq!(std::fs::read_to_string(dir.join("results.csv")).unwrap(), rep.csv());
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "no temporary files left: {names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
