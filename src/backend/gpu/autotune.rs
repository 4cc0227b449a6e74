//! Autotuner of the interior kernels: for one (device, radius, grid-shape class) it times the fused
//! step over block shapes, vector widths and z-window lengths within a time budget, and keeps the
//! fastest as JSON in [`cache_dir`]`/tuning-<device>.json`. [`tuning_for`] is what `open_cuda` and
//! `open_hip` use: the cached winner for the problem's radius and shape class when there is one,
//! else [`Tuning::for_radius`]. [`disable`] (the CLI's `--no-tuning`) turns the cache off, and a
//! launch shape set by hand ([`TuningOverride`], read when a backend opens) wins over it. The
//! search covers every knob `Tuning` has: block columns and rows, vector width, z-window (the
//! wave-filling automatic choice first), cp.async ring depth, blocks per SM, z unrolling, rows
//! per thread and grid-index order.
//!
//! Shapes are grouped by the rounded log2 of the xy-plane's points and of nz: the plane size decides
//! how many tiles a z-window has and whether neighbouring planes stay in the last-level cache
//! (seed 002), the depth how long the windows can be. A winner is reused for a nearby class (at most
//! two steps away) of the same radius, and dropped when the kernels' source changes.

use super::ceiling::median;
use super::sources::{self, cache_dir, hex};
use super::{GpuRuntime, GpuSolver, Operator, Tuning};
use crate::backend::tuning::TuningOverride;
use crate::config::KernelChoice;
use crate::numerics::noise;
use crate::problem::Problem;
use anyhow::{Context, Result, ensure};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static DISABLED: AtomicBool = AtomicBool::new(false);

/// Turns the tuning cache off for this process (the CLI's `--no-tuning`).
pub fn disable() {
    DISABLED.store(true, Ordering::Relaxed);
}

/// Whether [`tuning_for`] consults the cache: not after [`disable`].
pub fn enabled() -> bool {
    !DISABLED.load(Ordering::Relaxed)
}

/// The group of grid shapes one tuning serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeClass {
    /// round(log2(nx * ny)).
    pub plane_log2: u32,
    /// round(log2(nz)).
    pub depth_log2: u32,
}

fn round_log2(n: usize) -> u32 {
    (n.max(1) as f64).log2().round() as u32
}

impl ShapeClass {
    pub fn of(shape: [usize; 3]) -> ShapeClass {
        ShapeClass { plane_log2: round_log2(shape[0] * shape[1]), depth_log2: round_log2(shape[2]) }
    }

    /// Steps between two classes (0: the same).
    pub fn distance(&self, other: &ShapeClass) -> u32 {
        self.plane_log2.abs_diff(other.plane_log2) + self.depth_log2.abs_diff(other.depth_log2)
    }
}

impl std::fmt::Display for ShapeClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "xy~2^{} z~2^{}", self.plane_log2, self.depth_log2)
    }
}

/// Classes further apart than this do not share a tuning.
pub const MAX_CLASS_DISTANCE: u32 = 2;

/// One autotuner winner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TunedEntry {
    /// What was timed: the fused step (what `seismic-run` uses) or the Laplacian-only operator
    /// (the benchmark's; it runs `Tuning::for_laplacian` of `tuning`, with `tuning.window` as its
    /// own z-window). Records written before the field existed are the fused step's.
    #[serde(default)]
    pub operator: Operator,
    pub radius: usize,
    pub class: ShapeClass,
    /// The grid the search timed.
    pub shape: [usize; 3],
    /// The winner (z-window 0: the automatic choice, which measured fastest).
    #[serde(flatten)]
    pub tuning: Tuning,
    /// Median seconds of the winner's operator, and of the default tuning's, on `shape`.
    pub seconds: f64,
    pub default_seconds: f64,
    /// Candidates timed before the budget ran out, of how many.
    pub tried: usize,
    pub candidates: usize,
    /// Hash of the kernel sources the timings were taken with.
    pub kernels: String,
    /// UTC date of the search (YYYY-MM-DD).
    pub date: String,
}

impl TunedEntry {
    pub fn tuning(&self) -> Tuning {
        self.tuning
    }
}

/// The tuning cache of one device: `tuning-<device>.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TuningCache {
    pub device: String,
    pub vendor: String,
    pub arch: String,
    pub entries: Vec<TunedEntry>,
}

/// Hash of the kernel sources (cached winners are only trusted for the kernels they were timed on).
pub fn kernels_hash() -> String {
    let mut h = Sha256::new();
    for s in sources::STEP.iter().chain([&sources::FUSED_RING]) {
        h.update(s.as_bytes());
    }
    h.update(sources::PRELUDE.as_bytes());
    hex(&h.finalize()[..8])
}

/// File-name form of a device name: ASCII letters and digits, others as '_'.
pub fn device_file_name(device: &str) -> String {
    device.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

impl TuningCache {
    pub fn path(device: &str) -> PathBuf {
        Self::path_in(&cache_dir(), device)
    }

    pub fn path_in(dir: &Path, device: &str) -> PathBuf {
        dir.join(format!("tuning-{}.json", device_file_name(device)))
    }

    /// The device's cache in [`cache_dir`], empty when there is none (or it does not parse: it is
    /// only a cache).
    pub fn load(device: &str) -> TuningCache {
        Self::load_from(&cache_dir(), device)
    }

    pub fn load_from(dir: &Path, device: &str) -> TuningCache {
        std::fs::read_to_string(Self::path_in(dir, device))
            .ok()
            .and_then(|t| serde_json::from_str::<TuningCache>(&t).ok())
            .filter(|c| c.device == device)
            .unwrap_or_else(|| TuningCache { device: device.to_string(), ..Default::default() })
    }

    /// Writes the cache into [`cache_dir`].
    pub fn save(&self) -> Result<PathBuf> {
        self.save_in(&cache_dir())
    }

    /// Writes the cache into `dir` (through a temporary file, so a reader never sees half of it).
    pub fn save_in(&self, dir: &Path) -> Result<PathBuf> {
        let path = Self::path_in(dir, &self.device);
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create the cache directory {}", dir.display()))?;
        let tmp = dir.join(format!(".tuning.{}.tmp", std::process::id()));
        std::fs::write(&tmp, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// Replaces the entry of the same operator, radius and class (and drops entries of other kernel
    /// sources).
    pub fn insert(&mut self, entry: TunedEntry) {
        self.entries.retain(|e| {
            e.kernels == entry.kernels
                && !(e.operator == entry.operator && e.radius == entry.radius && e.class == entry.class)
        });
        self.entries.push(entry);
        self.entries
            .sort_by_key(|e| (e.operator == Operator::Laplacian, e.radius, e.class.plane_log2, e.class.depth_log2));
    }

    /// The winner for this operator, radius and shape: the same class, else the nearest within
    /// [`MAX_CLASS_DISTANCE`] (ties: the larger plane); only entries timed on `kernels`.
    pub fn lookup(&self, op: Operator, radius: usize, shape: [usize; 3], kernels: &str) -> Option<&TunedEntry> {
        let class = ShapeClass::of(shape);
        self.entries
            .iter()
            .filter(|e| e.operator == op && e.radius == radius && e.kernels == kernels)
            .filter(|e| e.class.distance(&class) <= MAX_CLASS_DISTANCE)
            .min_by_key(|e| (e.class.distance(&class), u32::MAX - e.class.plane_log2))
    }
}

/// The tuning a run of this radius and shape uses on `device`: `over` where a shape is set by
/// hand, else the cached winner when the cache is enabled and holds a valid one, else
/// [`Tuning::for_radius`].
pub fn tuning_for(
    device: &str,
    radius: usize,
    shape: [usize; 3],
    over: Option<&TuningOverride>,
) -> (Tuning, Option<TunedEntry>) {
    match over {
        Some(o) => (o.tuning(radius, true, false), None),
        None => tuning_or(device, Operator::Fused, radius, shape, true),
    }
}

/// [`tuning_for`] for operator `op` (the Laplacian-only operator's defaults are its own:
/// [`Tuning::default_for`]); `ring` false for the vendor whose default has the asynchronous ring
/// off ([`Tuning::for_radius_without_ring`], HIP).
pub fn tuning_or(
    device: &str,
    op: Operator,
    radius: usize,
    shape: [usize; 3],
    ring: bool,
) -> (Tuning, Option<TunedEntry>) {
    let laplacian = op == Operator::Laplacian;
    if enabled()
        && let Some(e) = TuningCache::load(device).lookup(op, radius, shape, &kernels_hash())
        && e.tuning().check(radius).is_ok()
    {
        return (e.tuning(), Some(e.clone()));
    }
    (Tuning::default_for(radius, ring, laplacian), None)
}

/// Today's UTC date, YYYY-MM-DD.
pub fn utc_date() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    civil_date(secs / 86400)
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (H. Hinnant's civil-from-days).
pub fn civil_date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

/// The grid a search times for `shape`: the same xy-plane, with nz cut so that a field stays under
/// 2^28 points (1 GiB), which keeps each candidate's set-up short on the largest grids.
pub fn search_shape(shape: [usize; 3], radius: usize) -> [usize; 3] {
    let plane = (shape[0] * shape[1]).max(1);
    let nz = shape[2].min(((1usize << 28) / plane).max(4 * radius + 16));
    [shape[0], shape[1], nz]
}

/// Compile-time launch shapes to try, most promising first: the vendor's `default`, then it with
/// one knob changed (tile shape, grid-index order, cp.async ring depth, halos through the ring,
/// blocks per SM, z unrolling, vector width), each valid for `radius` (window 0: the z-window is searched separately, at run
/// time).
pub fn launch_candidates(radius: usize, default: Tuning) -> Vec<Tuning> {
    let d = Tuning { window: 0, ..default };
    let r = radius as u32;
    let full_unroll = 2 * r + 1;
    // Ordered by what measured closest to the default on an H200, so that a short
    // budget spends itself on the likeliest winners.
    let mut v = vec![
        d,
        if d.rows == 1 {
            Tuning { rows: 2, block_y: 6.max(r), ..d }
        } else {
            Tuning { rows: 1, block_y: 8.max(r), ..d }
        },
        Tuning { tile_ring: 1, rows: 2, block_y: 8.max(r), min_blocks: 1, ..d },
        // Three smaller blocks per SM instead of two (H100, R = 4, Laplacian-only 512^3: 93.3% of
        // copy against 92.3% for the default).
        Tuning { block_y: 4.max(r), rows: 2, min_blocks: 3, ..d },
        // The step's two rows of 6 (for the Laplacian-only operator's search at R = 4).
        Tuning { rows: 2, block_y: 6.max(r), min_blocks: 2, ..d },
        Tuning { order: if d.order == 3 { 0 } else { 3 }, ..d },
        Tuning {
            order: if d.order == 3 { 0 } else { 3 },
            tile_ring: 1,
            rows: 2,
            block_y: 8.max(r),
            min_blocks: 1,
            ..d
        },
        Tuning { halo_ring: 1 - d.halo_ring.min(1), ..d },
        Tuning { order: if d.order == 1 { 0 } else { 1 }, ..d },
        Tuning { block_y: 16.max(r), ..d },
        Tuning { stages: if d.stages == 0 { 2 } else { 0 }, ..d },
        Tuning { min_blocks: if d.min_blocks == 1 { 2 } else { 1 }, ..d },
        Tuning { unroll_z: if d.unroll_z == 1 { full_unroll } else { 1 }, ..d },
        Tuning { stages: 3, ..d },
        Tuning { min_blocks: d.min_blocks + 1, ..d },
        Tuning { vec: 2, stages: 0, ..d },
        Tuning { block_y: 4.max(r), ..d },
        Tuning { block_y: 16.max(r), stages: 0, ..d },
        Tuning { block_y: 32, stages: 0, min_blocks: 1, ..d },
        Tuning { order: 2, ..d },
        Tuning { tile_ring: 1 - d.tile_ring.min(1), ..d },
        Tuning { tile_ring: 1 - d.tile_ring.min(1), rows: 1, block_y: 8.max(r), ..d },
        Tuning { block_x: 16, block_y: (2 * d.block_y).min(32 / d.rows).max(r), ..d },
        Tuning { block_x: 16, block_y: 16.max(r), rows: 1, ..d },
    ];
    // Tall tiles, three or four rows a thread in 8 rows of threads at one block a multiprocessor
    // (H200, R = 4, Laplacian-only: 85.5% of copy at 512^3 and 1024^3 with four rows, against
    // 82.7 / 84.4% with two rows of 6), where the z queue (rows x
    // (2R + 1) vectors) stays within 36 vectors: beyond, ptxas spills.
    let tall = [4, 3].into_iter().filter(|rows| rows * (2 * r + 1) <= 36);
    let at = v.len().min(4);
    v.splice(at..at, tall.map(|rows| Tuning { rows, block_y: 8.max(r), min_blocks: 1, ..d }));
    // A knob that cannot act would only make a duplicate with a misleading label.
    for t in &mut v {
        *t = t.without_idle_rings();
    }
    let mut seen = Vec::new();
    v.retain(|t| {
        let keep = t.check(radius).is_ok() && !seen.contains(t);
        seen.push(*t);
        keep
    });
    v
}

/// Explicit z-window lengths to try on a grid of depth `nz` after the automatic one: 4 to 64
/// planes (longer windows measured slower on every grid), and the whole depth when it is shorter.
pub fn window_candidates(nz: usize) -> Vec<u32> {
    let mut v: Vec<u32> = [4u32, 6, 8, 10, 12, 16, 24, 32, 48, 64].into_iter().filter(|&w| (w as usize) < nz).collect();
    if nz <= 64 {
        v.push(nz as u32);
    }
    v
}

/// One timed candidate.
#[derive(Clone, Debug)]
pub struct Trial {
    pub tuning: Tuning,
    pub seconds: f64,
}

/// What a search found.
#[derive(Clone, Debug)]
pub struct Search {
    pub entry: TunedEntry,
    pub trials: Vec<Trial>,
    /// Launch shapes that failed (compile or launch errors), with the error.
    pub failures: Vec<String>,
}

/// Searches the tuning of operator `op` (the fused step or the Laplacian-only operator) for
/// `radius` and `shape`'s class, around the vendor's `default` (the baseline, timed first), on the
/// device `open` opens (one runtime per candidate launch shape; the z-windows of a launch shape
/// share one solver). Launch shapes are visited in [`launch_candidates`] order until `budget` is
/// spent; the first is always timed completely. `reps` timed steps per candidate (median).
pub fn search<Rt: GpuRuntime>(
    mut open: impl FnMut() -> Result<Rt>,
    op: Operator,
    radius: usize,
    shape: [usize; 3],
    default: Tuning,
    budget: Duration,
    reps: usize,
) -> Result<Search> {
    ensure!(op != Operator::ThreePass, "the autotuner tunes the fused kernel's operators, not the three-pass step");
    let start = Instant::now();
    let tshape = search_shape(shape, radius);
    let problem = Problem::homogeneous_interior(tshape, radius);
    let points = problem.layout.points();
    let (cur, prev) = (noise(points, 11), noise(points, 12));
    let launches = launch_candidates(radius, default);
    let windows = window_candidates(tshape[2]);
    let candidates = launches.len() * (windows.len() + 1);
    let mut trials = Vec::new();
    let mut failures = Vec::new();
    let mut default_seconds = f64::NAN;
    for (i, &tuning) in launches.iter().enumerate() {
        if i > 0 && start.elapsed() >= budget {
            break;
        }
        let rt = open()?;
        let run = || -> Result<Vec<Trial>> {
            let mut s = GpuSolver::new(rt, &problem, KernelChoice::Fused, tuning)?;
            s.set_state(&cur, &prev)?;
            if i == 0 {
                // The default tuning (its own window choice), the baseline of the report.
                default_seconds = median(&mut s.time_interior(op, reps)?);
            }
            // Window 0 (the automatic, wave-filling choice) first: a winner with it carries over to
            // every grid of the class; an explicit length only where it measured faster.
            let auto = s.operator_tuning(op).window;
            let mut out = Vec::new();
            for &w in std::iter::once(&0).chain(windows.iter().filter(|&&w| w != auto)) {
                s.set_operator_window(op, w);
                let seconds = median(&mut s.time_interior(op, reps)?);
                out.push(Trial { tuning: Tuning { window: w, ..tuning }, seconds });
            }
            Ok(out)
        };
        match run() {
            Ok(t) => trials.extend(t),
            Err(e) => failures.push(format!("{}: {e:#}", tuning.label())),
        }
    }
    let best = trials.iter().filter(|t| t.seconds.is_finite()).min_by(|a, b| a.seconds.total_cmp(&b.seconds)).cloned();
    let best = best.with_context(|| {
        format!("autotuning radius {radius} on {tshape:?} timed no candidate: {}", failures.join("; "))
    })?;
    ensure!(best.seconds > 0.0, "autotuning measured a zero time");
    Ok(Search {
        entry: TunedEntry {
            operator: op,
            radius,
            class: ShapeClass::of(shape),
            shape: tshape,
            tuning: best.tuning,
            seconds: best.seconds,
            default_seconds,
            tried: trials.len(),
            candidates,
            kernels: kernels_hash(),
            date: utc_date(),
        },
        trials,
        failures,
    })
}

/// [`search`], then the winner stored in the device's cache; returns the search.
pub fn tune_and_store<Rt: GpuRuntime>(
    mut open: impl FnMut() -> Result<Rt>,
    op: Operator,
    radius: usize,
    shape: [usize; 3],
    default: Tuning,
    budget: Duration,
    reps: usize,
) -> Result<Search> {
    let rt = open()?;
    let (device, vendor, arch) = (rt.device_name(), rt.vendor().to_string(), rt.arch());
    drop(rt);
    let found = search(open, op, radius, shape, default, budget, reps)?;
    let mut cache = TuningCache::load(&device);
    cache.vendor = vendor;
    cache.arch = arch;
    cache.insert(found.entry.clone());
    cache.save()?;
    Ok(found)
}

#[cfg(test)]
mod tests;
