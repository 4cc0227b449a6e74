//! The backend-agnostic time loop: steps, snapshots, receiver traces and per-step statistics.
//!
//! [`run`] drives any [`Backend`] through `problem.steps` steps. Snapshots are copied into a
//! buffer the [`SnapshotSink`] lends (allocated once, before the loop) and handed back to it, so
//! the sink (the HDF5 writer thread) writes while the next steps run. The loop never asks the
//! backend for its step times: that would synchronise a GPU every step. Progress is reported
//! from wall-clock time, at most [`PROGRESS_INTERVAL`] apart, and device seconds per step are
//! read once at the end. A stop request ([`request_stop`], the binary's Ctrl-C handler) ends the
//! loop before the next step with an [`Interrupted`] error, so that the output writer discards
//! its partial file.

use crate::backend::Backend;
use crate::config::{BackendChoice, Config, KernelChoice};
use crate::grid::Layout;
use crate::problem::Problem;
use anyhow::{Context, Result, bail, ensure};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

/// Asks a running [`run`] to stop before its next step; returns whether a stop was already asked.
/// Safe from a signal handler's thread.
pub fn request_stop() -> bool {
    STOP.swap(true, Ordering::Relaxed)
}

/// The error of a run stopped by [`request_stop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    /// Steps completed before the stop.
    pub steps_done: usize,
    pub steps: usize,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted after {} of {} steps: no output file written", self.steps_done, self.steps)
    }
}

impl std::error::Error for Interrupted {}

/// Shortest wall-clock time between two progress reports.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Shortest wall-clock time between two blow-up checks ([`Backend::field_is_finite`]), made at a
/// progress report and after the last step. Not every report: on the CPU a check reads the field
/// once (a few percent of a step), and a GPU check waits for the queued steps.
pub const FINITE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The error of a run whose wavefield became NaN or infinite.
#[derive(Debug, Clone, PartialEq)]
pub struct BlowUp {
    /// Steps done at the last check that found the field finite (0: the start).
    pub last_finite: usize,
    /// Steps done at the check that found it non-finite.
    pub found: usize,
    pub dt: f64,
    /// dt over the CFL limit.
    pub cfl_fraction: f64,
}

impl std::fmt::Display for BlowUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the wavefield became non-finite (NaN or infinite) between step {} and step {} (t = {:.4e} to {:.4e} s); \
             no output file written: ",
            self.last_finite,
            self.found,
            self.last_finite as f64 * self.dt,
            self.found as f64 * self.dt
        )?;
        if self.cfl_fraction > 1.0 {
            write!(
                f,
                "dt = {:.4e} s is {:.0}% of the stability (CFL) limit, which makes the scheme blow up; lower time.dt",
                self.dt,
                100.0 * self.cfl_fraction
            )
        } else {
            write!(
                f,
                "dt is {:.0}% of the stability (CFL) limit, so the likely cause is a source or model value so large \
                 that the pressure overflows single precision (check source.amplitude and the velocities)",
                100.0 * self.cfl_fraction
            )
        }
    }
}

impl std::error::Error for BlowUp {}

pub use crate::grid::Section;

/// One snapshot dataset: its name under `/snapshots`, the section it keeps and, for planes, the
/// grid position of the plane (m) along its normal.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotSpec {
    pub name: String,
    pub section: Section,
    pub at: Option<f64>,
}

/// What the run records besides the traces: snapshot sections and when they are taken.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputPlan {
    /// Steps between snapshots (0: none).
    pub snapshot_every: usize,
    pub snapshots: Vec<SnapshotSpec>,
    /// Number of steps done at each snapshot (the snapshot holds p at time `step * dt`).
    pub snapshot_steps: Vec<usize>,
}

impl OutputPlan {
    /// No snapshots at all.
    pub fn none() -> OutputPlan {
        OutputPlan { snapshot_every: 0, snapshots: Vec::new(), snapshot_steps: Vec::new() }
    }

    /// Reads `[output]`: `snapshot_every` steps apart, the sections of `[[output.snapshot]]`
    /// (the whole volume when none is listed). Planes snap to the nearest grid index.
    pub fn from_config(cfg: &Config, problem: &Problem) -> Result<OutputPlan> {
        let every = cfg.output.snapshot_every;
        if every == 0 {
            return Ok(OutputPlan::none());
        }
        let grid = problem.shape();
        let mut snapshots: Vec<SnapshotSpec> = Vec::new();
        let listed: Vec<_> = if cfg.output.snapshot.is_empty() {
            vec![crate::config::SnapshotConfig { kind: "volume".into(), at: None }]
        } else {
            cfg.output.snapshot.clone()
        };
        for (i, s) in listed.iter().enumerate() {
            let key = format!("output.snapshot[{i}]");
            let axis = match s.kind.as_str() {
                "volume" => None,
                "xz" => Some(1),
                "xy" => Some(2),
                "yz" => Some(0),
                other => bail!("{key}.kind = {other:?}: expected \"volume\", \"xz\", \"xy\" or \"yz\""),
            };
            let (section, at) = match axis {
                None => {
                    ensure!(s.at.is_none(), "{key}.at: a volume snapshot has no plane position");
                    (Section::Volume, None)
                }
                Some(a) => {
                    let at = s.at.with_context(|| format!("{key}.at: a {} plane needs its position (m)", s.kind))?;
                    let u = (at - problem.origin[a]) / problem.spacing[a];
                    ensure!(
                        u > -0.5 && u < grid[a] as f64 - 0.5,
                        "{key}.at = {at} m lies outside the grid along {}",
                        ["x", "y", "z"][a]
                    );
                    let i = (u.round().max(0.0) as usize).min(grid[a] - 1);
                    let section = match a {
                        0 => Section::Yz { ix: i },
                        1 => Section::Xz { iy: i },
                        _ => Section::Xy { iz: i },
                    };
                    (section, Some(problem.origin[a] + i as f64 * problem.spacing[a]))
                }
            };
            let base = if section == Section::Volume { "pressure".to_string() } else { format!("pressure_{}", s.kind) };
            // A second plane of the same kind gets a number: pressure_xz, pressure_xz_1, ...
            let taken = snapshots.iter().filter(|t| same_kind(&t.section, &section)).count();
            let name = if taken == 0 { base } else { format!("{base}_{taken}") };
            snapshots.push(SnapshotSpec { name, section, at });
        }
        let snapshot_steps = (1..=problem.steps / every).map(|k| k * every).collect();
        Ok(OutputPlan { snapshot_every: every, snapshots, snapshot_steps })
    }

    /// Values in one snapshot: every section's, one after the other (the order of `snapshots`).
    pub fn snapshot_len(&self, grid: [usize; 3]) -> usize {
        self.snapshots.iter().map(|s| s.section.len(grid)).sum()
    }

    /// An xz-plane to picture: an xz snapshot, or the volume cut through `iy`.
    pub fn xz_view(&self, iy: usize) -> Option<(usize, Section)> {
        let i = self
            .snapshots
            .iter()
            .position(|s| matches!(s.section, Section::Xz { .. }))
            .or_else(|| self.snapshots.iter().position(|s| s.section == Section::Volume))?;
        let section = match self.snapshots[i].section {
            Section::Volume => Section::Xz { iy },
            s => s,
        };
        Some((i, section))
    }
}

fn same_kind(a: &Section, b: &Section) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Receives snapshots while the loop goes on.
pub trait SnapshotSink {
    /// A buffer of [`OutputPlan::snapshot_len`] values to fill (waits while every buffer is still
    /// being written).
    fn buffer(&mut self) -> Result<Vec<f32>>;
    /// Hands over snapshot `index` (taken after `step` steps); the sink returns the buffer later.
    fn submit(&mut self, index: usize, step: usize, field: Vec<f32>) -> Result<()>;
}

/// What a finished run hands to the outputs.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// Device seconds of each step.
    pub step_seconds: Vec<f64>,
    /// Receiver traces, (nreceivers, steps) row-major; sample n is p at time (n + 1) dt.
    pub traces: Vec<f32>,
    /// Wall-clock seconds of the whole loop, snapshots included.
    pub wall_seconds: f64,
}

/// Per-step rates and their summary, from the device seconds of each step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepStats {
    pub seconds: Vec<f64>,
    /// Theoretical bytes of a step ([`Problem::step_bytes`]) over its seconds, GB/s (1e9): the
    /// seeds' effective bandwidth, which counts the interior only.
    pub effective_gbps: Vec<f64>,
    /// The full step's bytes ([`Problem::full_step_bytes`]: the interior plus the CPML memory
    /// variables) over its seconds, GB/s.
    pub full_step_gbps: Vec<f64>,
    /// Interior points over seconds, 1e9 points per second.
    pub gpts_per_s: Vec<f64>,
    /// Over the run: total bytes (points) over total seconds.
    pub mean_gbps: f64,
    pub median_gbps: f64,
    pub mean_full_step_gbps: f64,
    pub median_full_step_gbps: f64,
    pub mean_gpts: f64,
    pub median_gpts: f64,
}

impl StepStats {
    pub fn new(seconds: &[f64], step_bytes: u64, full_step_bytes: u64, points: usize) -> StepStats {
        let rate = |amount: f64| -> Vec<f64> { seconds.iter().map(|&s| amount / s.max(1e-12) / 1e9).collect() };
        let effective_gbps = rate(step_bytes as f64);
        let full_step_gbps = rate(full_step_bytes as f64);
        let gpts_per_s = rate(points as f64);
        let total: f64 = seconds.iter().sum::<f64>().max(1e-12);
        let n = seconds.len() as f64;
        StepStats {
            mean_gbps: n * step_bytes as f64 / total / 1e9,
            median_gbps: median(&effective_gbps),
            mean_full_step_gbps: n * full_step_bytes as f64 / total / 1e9,
            median_full_step_gbps: median(&full_step_gbps),
            mean_gpts: n * points as f64 / total / 1e9,
            median_gpts: median(&gpts_per_s),
            seconds: seconds.to_vec(),
            effective_gbps,
            full_step_gbps,
            gpts_per_s,
        }
    }
}

/// Median (mean of the two middle values for an even count); 0 for no values.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { 0.5 * (v[m - 1] + v[m]) }
}

/// Runs all steps of `problem` on `backend`. `progress(steps_done)` is called at most every
/// [`PROGRESS_INTERVAL`] and once at the end.
pub fn run(
    problem: &Problem,
    backend: &mut dyn Backend,
    plan: &OutputPlan,
    sink: &mut dyn SnapshotSink,
    progress: &mut dyn FnMut(usize),
) -> Result<RunRecord> {
    let steps = problem.steps;
    let start = Instant::now();
    let mut last_report = start;
    let mut last_check = (start, 0usize);
    let check = |backend: &mut dyn Backend, done: usize, last: &mut (Instant, usize)| -> Result<()> {
        if !backend.field_is_finite().with_context(|| format!("blow-up check after step {done}"))? {
            let cfl_fraction = problem.dt / problem.dt_limit();
            return Err(BlowUp { last_finite: last.1, found: done, dt: problem.dt, cfl_fraction }.into());
        }
        *last = (Instant::now(), done);
        Ok(())
    };
    let mut next_snapshot = plan.snapshot_steps.iter().copied().enumerate().peekable();
    let sections: Vec<Section> = plan.snapshots.iter().map(|s| s.section).collect();
    for n in 0..steps {
        if STOP.load(Ordering::Relaxed) {
            return Err(Interrupted { steps_done: n, steps }.into());
        }
        backend.step(n).with_context(|| format!("time step {n}"))?;
        let done = n + 1;
        if let Some(&(index, at)) = next_snapshot.peek()
            && at == done
        {
            let mut field = sink.buffer()?;
            backend.snapshot_sections(&sections, &mut field).with_context(|| format!("snapshot after step {done}"))?;
            sink.submit(index, done, field)?;
            next_snapshot.next();
        }
        let now = Instant::now();
        if now.duration_since(last_report) >= PROGRESS_INTERVAL {
            progress(done);
            last_report = now;
            if now.duration_since(last_check.0) >= FINITE_CHECK_INTERVAL {
                check(backend, done, &mut last_check)?;
            }
        }
    }
    check(backend, steps, &mut last_check)?;
    // Reading the step times waits for the device: the loop is over.
    let step_seconds = backend.step_seconds()?;
    let wall_seconds = start.elapsed().as_secs_f64();
    progress(steps);
    let traces = backend.traces(steps)?;
    ensure!(
        traces.len() == problem.receivers.len() * steps,
        "backend returned {} trace samples for {} receivers and {steps} steps",
        traces.len(),
        problem.receivers.len()
    );
    ensure!(step_seconds.len() == steps, "backend timed {} of {steps} steps", step_seconds.len());
    Ok(RunRecord { step_seconds, traces, wall_seconds })
}

/// Opens the backend asked for. `auto` tries CUDA, then HIP (those compiled in), then falls back
/// to the CPU; `notice` gets one line saying why.
pub fn open_backend(
    problem: &Problem,
    choice: BackendChoice,
    kernel: KernelChoice,
    notice: &mut dyn FnMut(&str),
) -> Result<Box<dyn Backend>> {
    match choice {
        BackendChoice::Cpu => open_cpu(problem),
        BackendChoice::Cuda => open_cuda(problem, kernel),
        BackendChoice::Hip => open_hip(problem, kernel),
        BackendChoice::Auto => {
            let mut reasons = Vec::new();
            for (name, open) in [("cuda", open_cuda as OpenFn), ("hip", open_hip as OpenFn)] {
                match open(problem, kernel) {
                    Ok(b) => return Ok(b),
                    Err(e) => reasons.push(format!("{name}: {e:#}")),
                }
            }
            notice(&format!("no GPU backend available ({}); running on the CPU", reasons.join("; ")));
            open_cpu(problem)
        }
    }
}

type OpenFn = fn(&Problem, KernelChoice) -> Result<Box<dyn Backend>>;

fn open_cpu(problem: &Problem) -> Result<Box<dyn Backend>> {
    if problem.precision == crate::config::Precision::F16 {
        // f32 values, p^n, p^{n-1}, c^2 dt^2 and psi (twice) and zeta for all three axes.
        let padded = problem.layout.len() as f64 / problem.layout.points().max(1) as f64;
        check_host_memory(problem.layout, 3.0 * 4.0 * padded + 28.0 + 12.0, "the CPU backend (f16 reference)")?;
        return Ok(Box::new(crate::backend::cpu_half::CpuHalfSolver::new(problem)?));
    }
    check_host_memory(problem.layout, cpu_bytes_per_point(problem.layout), "the CPU backend")?;
    Ok(Box::new(crate::backend::cpu::CpuSolver::<f32>::new(problem)?))
}

#[cfg(feature = "cuda")]
fn open_cuda(problem: &Problem, kernel: KernelChoice) -> Result<Box<dyn Backend>> {
    crate::backend::gpu::open_cuda(problem, kernel)
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: &Problem, _: KernelChoice) -> Result<Box<dyn Backend>> {
    bail!("this build has no CUDA support (build with --features cuda)")
}

#[cfg(feature = "hip")]
fn open_hip(problem: &Problem, kernel: KernelChoice) -> Result<Box<dyn Backend>> {
    crate::backend::gpu::open_hip(problem, kernel)
}

#[cfg(not(feature = "hip"))]
fn open_hip(_: &Problem, _: KernelChoice) -> Result<Box<dyn Backend>> {
    bail!("this build has no HIP support (build with --features hip)")
}

/// Host bytes per interior point the CPU backend needs on top of the problem: three padded f32
/// fields (p^n, p^{n-1}, c^2 dt^2) plus the f64 and f32 dense copies made while building them.
fn cpu_bytes_per_point(layout: Layout) -> f64 {
    let padded = layout.len() as f64 / layout.points().max(1) as f64;
    3.0 * 4.0 * padded + 8.0 + 4.0
}

/// Host bytes a run needs before any backend exists: the velocity as loaded, the problem's copy,
/// and `snapshot_buffers` f32 snapshot buffers of `cfg`'s sections (see [`snapshot_values`]).
pub fn base_host_bytes(cfg: &Config, snapshot_buffers: usize) -> f64 {
    let points = cfg.grid.shape.iter().map(|&n| n as f64).product::<f64>();
    points * 8.0 + 4.0 * (snapshot_buffers * snapshot_values(cfg)) as f64
}

/// Values in one snapshot of the sections `[output]` lists (the volume when none is), from the
/// grid alone (an unknown kind counts as the volume; [`OutputPlan::from_config`] rejects it later).
pub fn snapshot_values(cfg: &Config) -> usize {
    let grid = cfg.grid.shape;
    let section = |kind: &str| match kind {
        "xz" => Section::Xz { iy: 0 },
        "xy" => Section::Xy { iz: 0 },
        "yz" => Section::Yz { ix: 0 },
        _ => Section::Volume,
    };
    if cfg.output.snapshot.is_empty() {
        return Section::Volume.len(grid);
    }
    cfg.output.snapshot.iter().map(|s| section(&s.kind).len(grid)).sum()
}

/// Fails, naming `grid.shape`, when `bytes` more than what the host has available.
pub fn check_host_bytes(shape: [usize; 3], bytes: f64, what: &str) -> Result<()> {
    if let Some(available) = available_host_memory() {
        ensure!(
            bytes <= available as f64,
            "grid.shape = {shape:?} needs about {:.1} GiB of host memory for {what}, but only {:.1} GiB is available",
            bytes / GIB,
            available as f64 / GIB
        );
    }
    Ok(())
}

fn check_host_memory(layout: Layout, bytes_per_point: f64, what: &str) -> Result<()> {
    let shape = [layout.nx, layout.ny, layout.nz];
    check_host_bytes(shape, bytes_per_point * layout.points() as f64, what)
}

const GIB: f64 = (1u64 << 30) as f64;

/// Host bytes per receiver besides its trace: position, taps (up to 8 of 32 bytes) and headers.
const RECEIVER_BYTES: f64 = 24.0 + 8.0 * 32.0 + 48.0;

/// The host memory a run needs on top of the velocity (see [`base_host_bytes`]), by item:
/// receiver traces (receivers x steps f32, held three times: on the backend, in the record and in
/// the writer's copy), the receivers themselves, the source samples (f64 per step) and the
/// per-step statistics (step number, seconds and two rates: 4 x 8 bytes per step, twice).
pub fn run_host_items(steps: usize, receivers: usize) -> Vec<(String, f64)> {
    let (s, r) = (steps as f64, receivers as f64);
    vec![
        (format!("traces of {receivers} receivers x {steps} steps"), 3.0 * 4.0 * r * s),
        (format!("{receivers} receivers"), RECEIVER_BYTES * r),
        (format!("source samples and statistics of {steps} steps"), 8.0 * s + 2.0 * 32.0 * s),
    ]
}

/// The budget check of a run, before any per-step or per-receiver array is allocated: the
/// velocity, snapshot buffers (see [`base_host_bytes`]) and [`run_host_items`] against the host's
/// available memory. The error lists every item with its size.
pub fn check_run_host_bytes(cfg: &Config, steps: usize, receivers: usize) -> Result<()> {
    let buffers = if cfg.output.snapshot_every > 0 { 2 } else { 0 };
    let mut items = vec![("the velocity model and snapshot buffers".to_string(), base_host_bytes(cfg, buffers))];
    items.extend(run_host_items(steps, receivers));
    let need: f64 = items.iter().map(|(_, b)| b).sum();
    // 2^64 bytes is more than any machine, whether or not its available memory is known.
    let available = available_host_memory().map(|a| a as f64).unwrap_or(u64::MAX as f64);
    if need > available {
        let list: Vec<String> = items.iter().map(|(what, b)| format!("{what}: {:.3} GiB", b / GIB)).collect();
        bail!(
            "this run needs about {:.3} GiB of host memory ({}), but only {:.1} GiB is available: reduce the \
             steps (time.duration or time.steps), the receivers or grid.shape",
            need / GIB,
            list.join("; "),
            available / GIB
        );
    }
    Ok(())
}

/// Bytes the result file will hold: the velocity, snapshots, traces and positions, statistics,
/// plus the input text and headers.
pub fn output_file_bytes(problem: &Problem, plan: &OutputPlan, input_len: usize) -> f64 {
    let points = problem.layout.points() as f64;
    let snapshots = plan.snapshot_steps.len() as f64 * plan.snapshot_len(problem.shape()) as f64 * 4.0
        + plan.snapshot_steps.len() as f64 * 16.0;
    let receivers = problem.receivers.len() as f64;
    let traces = receivers * problem.steps as f64 * 4.0 + receivers * 24.0;
    let stats = problem.steps as f64 * 32.0;
    4.0 * points + snapshots + traces + stats + input_len as f64 + 64.0 * 1024.0
}

/// Free bytes for an unprivileged user on the file system holding `dir` (statvfs); None where
/// it cannot be told.
pub fn free_disk_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` points to writable memory for one statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // The field types differ between platforms (u32 on some 32-bit ones).
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Result files above this size are said in a warning, bytes.
pub const LARGE_OUTPUT: f64 = 10.0 * GIB;

/// Errors when the result file (of [`output_file_bytes`]) cannot fit in the free space of the
/// file system holding `path`, with both figures; returns a warning line when it is large (above
/// [`LARGE_OUTPUT`] or half the free space).
pub fn check_output_space(path: &std::path::Path, key: &str, file_bytes: f64) -> Result<Option<String>> {
    let dir = crate::output::safe::parent_dir(path);
    let Some(free) = free_disk_bytes(&dir) else { return Ok(None) };
    let free = free as f64;
    ensure!(
        file_bytes <= free,
        "{key} = {}: the result file needs about {:.3} GiB, but the file system holding {} has only {:.3} GiB \
         free: reduce the snapshots (output.snapshot_every, output.snapshot), the receivers or the steps",
        path.display(),
        file_bytes / GIB,
        dir.display(),
        free / GIB
    );
    Ok((file_bytes > LARGE_OUTPUT || file_bytes > 0.5 * free).then(|| {
        format!(
            "the result file {} will be about {:.2} GiB ({:.2} GiB free there)",
            path.display(),
            file_bytes / GIB,
            free / GIB
        )
    }))
}

/// MemAvailable from /proc/meminfo (None where there is no such file).
pub fn available_host_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_extract_the_right_points() {
        let grid = [4, 3, 2];
        let field: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let mut out = Vec::new();
        Section::Xz { iy: 1 }.extract(grid, &field, &mut out);
        assert_eq!(out, vec![4.0, 5.0, 6.0, 7.0, 16.0, 17.0, 18.0, 19.0]);
        Section::Xy { iz: 1 }.extract(grid, &field, &mut out);
        assert_eq!(out, (12..24).map(|i| i as f32).collect::<Vec<_>>());
        Section::Yz { ix: 2 }.extract(grid, &field, &mut out);
        assert_eq!(out, vec![2.0, 6.0, 10.0, 14.0, 18.0, 22.0]);
        assert_eq!(Section::Yz { ix: 2 }.shape(grid), vec![2, 3]);
    }

    fn config_for(snapshots: &str) -> Config {
        let text = format!(
            "[grid]\nshape = [10, 8, 6]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 1500.0\n\
             [time]\nsteps = 25\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n\
             [boundary]\nkind = \"none\"\n[output]\nsnapshot_every = 10\n{snapshots}"
        );
        Config::from_toml(&text).unwrap()
    }

    fn plan_for(snapshots: &str) -> Result<OutputPlan> {
        let cfg = config_for(snapshots);
        let problem = Problem::build(&cfg, vec![1500.0; 480]).unwrap();
        OutputPlan::from_config(&cfg, &problem)
    }

    #[test]
    fn snapshot_buffers_hold_the_planned_sections_only() {
        for list in
            ["", "snapshot = [{ kind = \"xz\", at = 34.0 }, { kind = \"yz\", at = 0.0 }, { kind = \"xy\", at = 10.0 }]"]
        {
            let (cfg, plan) = (config_for(list), plan_for(list).unwrap());
            assert_eq!(snapshot_values(&cfg), plan.snapshot_len([10, 8, 6]), "{list}");
        }
        // xz 6 x 10, yz 6 x 8, xy 8 x 10: 188 values instead of the volume's 480.
        assert_eq!(
            snapshot_values(&config_for(
                "snapshot = [{ kind = \"xz\", at = 34.0 }, { kind = \"yz\", at = 0.0 }, { kind = \"xy\", at = 10.0 }]"
            )),
            188
        );
        assert_eq!(base_host_bytes(&config_for(""), 2), 480.0 * 8.0 + 4.0 * 2.0 * 480.0);
    }

    #[test]
    fn plans_name_sections_and_reject_bad_ones() {
        let plan = plan_for("").unwrap();
        assert_eq!(plan.snapshot_steps, vec![10, 20]);
        assert_eq!(plan.snapshots.len(), 1);
        assert_eq!((plan.snapshots[0].name.as_str(), plan.snapshots[0].section), ("pressure", Section::Volume));
        let plan = plan_for(
            "snapshot = [{ kind = \"xz\", at = 34.0 }, { kind = \"xz\", at = 0.0 }, { kind = \"volume\" }, \
             { kind = \"yz\", at = 90.0 }]",
        )
        .unwrap();
        let names: Vec<_> = plan.snapshots.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["pressure_xz", "pressure_xz_1", "pressure", "pressure_yz"]);
        assert_eq!(plan.snapshots[0].section, Section::Xz { iy: 3 });
        assert_eq!(plan.snapshots[0].at, Some(30.0));
        assert_eq!(plan.snapshots[3].section, Section::Yz { ix: 9 });
        assert_eq!(plan.xz_view(5), Some((0, Section::Xz { iy: 3 })));
        let err = plan_for("snapshot = [{ kind = \"xq\" }]").unwrap_err().to_string();
        assert!(err.contains("output.snapshot[0].kind"), "{err}");
        let err = plan_for("snapshot = [{ kind = \"xy\", at = 500.0 }]").unwrap_err().to_string();
        assert!(err.contains("output.snapshot[0].at"), "{err}");
        let err = plan_for("snapshot = [{ kind = \"xy\" }]").unwrap_err().to_string();
        assert!(err.contains("output.snapshot[0].at"), "{err}");
    }

    /// A backend whose field is the number of steps done, counting the calls the loop makes.
    struct Counter {
        done: usize,
        receivers: usize,
        timing_reads: usize,
        finite_checks: usize,
        /// The field reads non-finite from this many steps on.
        blow_up_at: usize,
    }

    impl Backend for Counter {
        fn info(&self) -> crate::backend::DeviceInfo {
            crate::backend::DeviceInfo { backend: "cpu", name: "counter".into(), kernel: "none".into() }
        }
        fn step(&mut self, n: usize) -> Result<()> {
            assert_eq!(n, self.done, "steps in order");
            self.done += 1;
            Ok(())
        }
        fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
            out.fill(self.done as f32);
            Ok(())
        }
        fn snapshot_sections(&mut self, _: &[Section], out: &mut [f32]) -> Result<()> {
            self.snapshot(out)
        }
        fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
            Ok(vec![0.0; steps * self.receivers])
        }
        fn field_is_finite(&mut self) -> Result<bool> {
            self.finite_checks += 1;
            Ok(self.done < self.blow_up_at)
        }
        fn step_seconds(&mut self) -> Result<Vec<f64>> {
            self.timing_reads += 1;
            Ok(vec![1e-3; self.done])
        }
    }

    #[derive(Default)]
    struct Collect(Vec<(usize, usize, f32, usize)>);

    impl SnapshotSink for Collect {
        fn buffer(&mut self) -> Result<Vec<f32>> {
            Ok(vec![-1.0; 480])
        }
        fn submit(&mut self, index: usize, step: usize, field: Vec<f32>) -> Result<()> {
            self.0.push((index, step, field[0], field.len()));
            Ok(())
        }
    }

    #[test]
    fn loop_snapshots_on_schedule_and_reads_timers_once() {
        let plan = plan_for("").unwrap();
        let text = "[grid]\nshape = [10, 8, 6]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                    vp = 1500.0\n[time]\nsteps = 25\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n\
                    [[receivers]]\nposition = [30.0, 30.0, 30.0]\n[boundary]\nkind = \"none\"";
        let problem = Problem::build(&Config::from_toml(text).unwrap(), vec![1500.0; 480]).unwrap();
        let mut backend = Counter { done: 0, receivers: 1, timing_reads: 0, finite_checks: 0, blow_up_at: usize::MAX };
        let mut sink = Collect::default();
        let mut reports = Vec::new();
        let record = run(&problem, &mut backend, &plan, &mut sink, &mut |d| reports.push(d)).unwrap();
        assert_eq!(sink.0, vec![(0, 10, 10.0, 480), (1, 20, 20.0, 480)]);
        assert_eq!(backend.timing_reads, 1);
        assert_eq!(record.step_seconds.len(), 25);
        assert_eq!(record.traces.len(), 25);
        assert_eq!(reports.last(), Some(&25));
        // A fast run is checked once, after its last step.
        assert_eq!(backend.finite_checks, 1);
    }

    #[test]
    fn a_non_finite_field_stops_the_run_with_the_steps_and_the_likely_cause() {
        let plan = OutputPlan::none();
        let text = "[grid]\nshape = [10, 8, 6]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                    vp = 1500.0\n[time]\nsteps = 25\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n\
                    [boundary]\nkind = \"none\"";
        let mut problem = Problem::build(&Config::from_toml(text).unwrap(), vec![1500.0; 480]).unwrap();
        let mut backend = Counter { done: 0, receivers: 0, timing_reads: 0, finite_checks: 0, blow_up_at: 20 };
        let e = run(&problem, &mut backend, &plan, &mut Collect::default(), &mut |_| {}).unwrap_err();
        let b = e.downcast_ref::<BlowUp>().expect("a BlowUp error");
        assert_eq!((b.last_finite, b.found), (0, 25));
        let msg = e.to_string();
        assert!(msg.contains("between step 0 and step 25") && msg.contains("overflows single precision"), "{msg}");
        assert_eq!(backend.timing_reads, 0, "no timings read from a blown-up run");
        problem.dt = 2.0 * problem.dt_limit();
        let mut backend = Counter { done: 0, receivers: 0, timing_reads: 0, finite_checks: 0, blow_up_at: 3 };
        let msg = run(&problem, &mut backend, &plan, &mut Collect::default(), &mut |_| {}).unwrap_err().to_string();
        assert!(msg.contains("200% of the stability (CFL) limit") && msg.contains("lower time.dt"), "{msg}");
    }

    #[test]
    fn stats_and_median() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let s = StepStats::new(&[1.0, 0.5], 2_000_000_000, 3_000_000_000, 1_000_000_000);
        assert_eq!(s.effective_gbps, vec![2.0, 4.0]);
        assert_eq!(s.full_step_gbps, vec![3.0, 6.0]);
        assert!((s.mean_full_step_gbps - 6.0 / 1.5).abs() < 1e-12);
        assert_eq!(s.gpts_per_s, vec![1.0, 2.0]);
        assert!((s.mean_gbps - 4.0 / 1.5).abs() < 1e-12);
        assert_eq!(s.median_gpts, 1.5);
    }
}
