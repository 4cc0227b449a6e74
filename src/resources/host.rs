//! Host memory a run needs, checked before anything large is allocated: the velocity and
//! snapshot buffers, the traces and per-step records, against the host's available memory.

use crate::config::Config;
use crate::grid::{Layout, Section};
use anyhow::{Result, bail, ensure};

/// Host bytes a run needs before any backend exists: the velocity as loaded, the problem's copy,
/// and `snapshot_buffers` f32 snapshot buffers of `cfg`'s sections (see [`snapshot_values`]).
pub fn base_host_bytes(cfg: &Config, snapshot_buffers: usize) -> f64 {
    let points = cfg.run_grid().shape.iter().map(|&n| n as f64).product::<f64>();
    points * 8.0 + 4.0 * (snapshot_buffers * snapshot_values(cfg)) as f64
}

/// Values in one snapshot of the sections `[output]` lists (the volume when none is), from the
/// grid alone (an unknown kind counts as the volume; `OutputPlan::from_config` rejects it later).
pub fn snapshot_values(cfg: &Config) -> usize {
    let grid = cfg.run_grid().shape;
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
    check_bytes(&format!("grid.shape = {shape:?}"), bytes, what)
}

/// [`check_host_bytes`] for a run of `cfg`, naming its `grid.shape` and, where the absorbing
/// layers lie outside the model, the run grid they make.
pub fn check_run_grid_host_bytes(cfg: &Config, bytes: f64, what: &str) -> Result<()> {
    let (shape, run) = (cfg.grid.shape, cfg.run_grid().shape);
    let layers = if run == shape {
        String::new()
    } else {
        format!(" (a run grid of {run:?} points with the absorbing layers outside it)")
    };
    check_bytes(&format!("grid.shape = {shape:?}{layers}"), bytes, what)
}

fn check_bytes(grid: &str, bytes: f64, what: &str) -> Result<()> {
    if let Some(available) = available_host_memory() {
        ensure!(
            bytes <= available as f64,
            "{grid} needs about {:.1} GiB of host memory for {what}, but only {:.1} GiB is available",
            bytes / GIB,
            available as f64 / GIB
        );
    }
    Ok(())
}

pub fn check_host_memory(layout: Layout, bytes_per_point: f64, what: &str) -> Result<()> {
    let shape = [layout.nx, layout.ny, layout.nz];
    check_host_bytes(shape, bytes_per_point * layout.points() as f64, what)
}

pub(super) const GIB: f64 = (1u64 << 30) as f64;

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

/// MemAvailable from /proc/meminfo (None where there is no such file).
pub fn available_host_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
