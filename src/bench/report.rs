//! A sweep's [`Report`]: the run's rows and ceilings, the throughput targets it checks, and its
//! files (markdown, CSV, JSON and plots), each written atomically.

use super::*;
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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
            .filter(|r| matches!(r.operator, OperatorKind::RealStep | OperatorKind::RealStepDefaultBoundary))
            .filter_map(|r| {
                let interior = self.find(r.shape, r.radius, OperatorKind::FusedStep)?;
                let with = if r.operator == OperatorKind::RealStep { "" } else { " (the default boundary)" };
                Some(format!(
                    "{} R={}{with}: {:.2}x the interior-only step's time",
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
        if self.rows.iter().any(|r| is_2d(r.shape)) {
            s.push_str(
                "\nA 2D grid (nx x nz, one point along y) runs the 2D real step: its bound is p^n read with its x \
                 and z halos, p^{n-1} and c^2 dt^2 read and p^{n+1} written (16 B a point), plus the x and z CPML \
                 layers' memory variables, 16 B a layer point per axis; its GB/s and GPts/s are the 2D step's, \
                 against the same-run 3R1W ceiling.\n",
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
