//! The input file: a TOML document, parsed strictly (unknown keys are errors with line and column).
//!
//! Parsing catches unknown keys and wrong types; the checks that need no model or discretisation
//! (grid shape and spacing, the output directory) live here too, so a run can stop before it
//! allocates or writes anything. Checks that need the velocity (dt against the CFL limit, source
//! and receivers inside the grid) are in `problem::Problem::build`.

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Deserializer, de::Error as _};
use std::path::{Path, PathBuf};

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub grid: GridConfig,
    pub model: ModelConfig,
    #[serde(default)]
    pub stencil: StencilConfig,
    pub time: TimeConfig,
    pub source: SourceConfig,
    #[serde(default)]
    pub receivers: Vec<ReceiverConfig>,
    #[serde(default)]
    pub boundary: BoundaryConfig,
    #[serde(default)]
    pub output: OutputConfig,
    #[serde(default)]
    pub run: RunConfig,
    /// Many shots over the same model (absent: one shot, at `[source] position`).
    pub survey: Option<SurveyConfig>,
}

/// Largest number of shots a survey may list.
pub const MAX_SHOTS: usize = 1_000_000;

/// `[survey]`: the shot positions (exactly one of `shots`, `line` or `grid`) and whether the
/// receivers stay or move with the shot.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SurveyConfig {
    /// Shot positions one by one, m.
    pub shots: Option<Vec<Vec<f64>>>,
    /// Shots evenly spaced from `start` to `end`.
    pub line: Option<LineConfig>,
    /// Shots on a regular grid, `origin + i*step_a + j*step_b (+ k*step_c)`.
    pub grid: Option<ReceiverGridConfig>,
    /// "fixed" (default): every shot records the `[[receivers]]` as given; "moving": the receivers
    /// move with the shot, by its offset from `[source] position` (a streamer, a moving spread).
    #[serde(default)]
    pub spread: Spread,
    /// Processes running each shot together, its grid split into z-slabs over them (as
    /// `[run] decomposition = "z"`); the job's processes form groups of this many, each group
    /// taking shots in turn. 1 (default): every process runs whole shots on its own.
    #[serde(default = "one_rank")]
    pub ranks_per_shot: usize,
}

fn one_rank() -> usize {
    1
}

/// Whether a survey's receivers move with the shot.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    #[default]
    Fixed,
    Moving,
}

impl SurveyConfig {
    /// The shot positions in order, checked: exactly one of `shots`, `line` or `grid`, at least
    /// one shot and at most [`MAX_SHOTS`], every coordinate finite (errors name `survey.*`).
    pub fn positions(&self) -> Result<Vec<[f64; 3]>> {
        let given = self.shots.is_some() as u8 + self.line.is_some() as u8 + self.grid.is_some() as u8;
        ensure!(given == 1, "survey: give exactly one of `shots`, `line` or `grid` ({given} given)");
        let positions: Vec<[f64; 3]> = if let Some(list) = &self.shots {
            ensure!(list.len() <= MAX_SHOTS, "survey.shots: {} shots, more than {MAX_SHOTS}", list.len());
            list.iter()
                .enumerate()
                .map(|(i, p)| {
                    <[f64; 3]>::try_from(p.as_slice()).map_err(|_| {
                        anyhow::anyhow!("survey.shots[{i}] = {p:?}: a position is exactly 3 coordinates in m")
                    })
                })
                .collect::<Result<_>>()?
        } else if let Some(l) = &self.line {
            ensure!((1..=MAX_SHOTS).contains(&l.count), "survey.line.count = {} must be in 1..={MAX_SHOTS}", l.count);
            let k = |i: usize| if l.count == 1 { 0.0 } else { i as f64 / (l.count - 1) as f64 };
            (0..l.count).map(|i| std::array::from_fn(|a| l.start[a] + k(i) * (l.end[a] - l.start[a]))).collect()
        } else {
            let g = self.grid.as_ref().expect("one of the three");
            let n = g.count_a.checked_mul(g.count_b).and_then(|n| n.checked_mul(g.count_c)).unwrap_or(usize::MAX);
            ensure!(
                (1..=MAX_SHOTS).contains(&n),
                "survey.grid: {} x {} x {} shots must be 1 to {MAX_SHOTS}",
                g.count_a,
                g.count_b,
                g.count_c
            );
            let mut v = Vec::with_capacity(n);
            for k in 0..g.count_c {
                for j in 0..g.count_b {
                    for i in 0..g.count_a {
                        v.push(std::array::from_fn(|a| {
                            g.origin[a] + i as f64 * g.step_a[a] + j as f64 * g.step_b[a] + k as f64 * g.step_c[a]
                        }));
                    }
                }
            }
            v
        };
        ensure!(!positions.is_empty(), "survey.shots is empty: list at least one shot");
        for (i, p) in positions.iter().enumerate() {
            finite3(&format!("survey shot {i}"), *p, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
        }
        Ok(positions)
    }
}

/// A fixed-size array read from a TOML array of exactly 3 values (serde's own `[T; 3]` takes the
/// first 3 of a longer array and ignores the rest).
fn three<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<[T; 3], D::Error> {
    let v = Vec::<T>::deserialize(d)?;
    let n = v.len();
    v.try_into().map_err(|_| D::Error::invalid_length(n, &"an array of exactly 3 values"))
}

fn three_opt<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<[T; 3]>, D::Error> {
    three(d).map(Some)
}

/// Largest velocity accepted, m/s: the fastest rocks are below 10 km/s, so anything above is a
/// unit mix-up (km/s given as m/s, or the reverse applied twice).
pub const MAX_VELOCITY: f64 = 1e5;
/// Smallest velocity accepted, m/s (slower than any fluid; guards against m/s given as km/s).
pub const MIN_VELOCITY: f64 = 1.0;
/// Largest grid spacing or absolute coordinate, m (Earth-sized models are well inside).
pub const MAX_LENGTH: f64 = 1e8;
/// Smallest grid spacing, m.
pub const MIN_SPACING: f64 = 1e-6;
/// Largest |source amplitude|: far above any physical use, far below what overflows f32 fields.
pub const MAX_AMPLITUDE: f64 = 1e15;
/// Largest source frequency, Hz.
pub const MAX_FREQUENCY: f64 = 1e9;
/// Largest simulated time or |source delay|, s.
pub const MAX_TIME: f64 = 1e7;

fn finite_in(key: &str, v: f64, lo: f64, hi: f64, what: &str) -> Result<()> {
    let range =
        if lo == f64::MIN_POSITIVE { format!("positive and at most {hi:e}") } else { format!("from {lo:e} to {hi:e}") };
    ensure!(v.is_finite() && v >= lo && v <= hi, "{key} = {v:e} must be {what}, finite and {range}");
    Ok(())
}

fn finite3(key: &str, v: [f64; 3], lo: f64, hi: f64, what: &str) -> Result<()> {
    for (a, x) in v.iter().enumerate() {
        finite_in(&format!("{key}[{a}]"), *x, lo, hi, what)?;
    }
    Ok(())
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct GridConfig {
    /// [nx, ny, nz] interior points.
    #[serde(deserialize_with = "three")]
    pub shape: [usize; 3],
    /// [dx, dy, dz] in metres.
    #[serde(deserialize_with = "three")]
    pub spacing: [f64; 3],
    /// Position of point (0, 0, 0) in metres.
    #[serde(default, deserialize_with = "three")]
    pub origin: [f64; 3],
}

/// `[model]`, by `kind`. Parsed through [`ModelTable`] so that wrong types and unknown keys are
/// reported at their own line (an internally tagged enum would buffer the table and lose it).
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(try_from = "ModelTable")]
pub enum ModelConfig {
    Constant {
        vp: f64,
    },
    /// Horizontal layers: `velocities[i]` down to `depths[i]` (m), the last one below.
    Layered {
        depths: Vec<f64>,
        velocities: Vec<f64>,
    },
    /// A gridded model in a file. Its first sample sits at coordinate 0 of every axis, in the
    /// grid's coordinates (origin included); 2D files (axes x and z) are extruded along y.
    File {
        /// Relative to the input file's directory.
        path: PathBuf,
        format: FileFormat,
        /// Shape of the stored array in the axes of `axis_order` (slowest first).
        shape: Vec<usize>,
        /// Sample spacing (m) in the axes of `axis_order`.
        spacing: Vec<f64>,
        units: Units,
        /// Storage order, slowest axis first, e.g. "zyx" (x fastest) or "xz" (2D, depth fastest).
        axis_order: String,
        /// Optional SHA-256 (hex) of the whole file, checked before use.
        sha256: Option<String>,
    },
    /// A named data set from `models/`, resampled to the grid (2D models are extruded along y).
    Marmousi {
        /// Horizontal position (m) in the model where the grid's x = 0 falls.
        x_offset: f64,
    },
}

fn default_axis_order() -> String {
    "zyx".into()
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Constant,
    Layered,
    File,
    Marmousi,
}

/// Every key any model kind takes; [`ModelConfig`] checks that the kind's keys, and only those,
/// are given.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ModelTable {
    pub kind: ModelKind,
    pub vp: Option<f64>,
    pub depths: Option<Vec<f64>>,
    pub velocities: Option<Vec<f64>>,
    pub path: Option<PathBuf>,
    pub format: Option<FileFormat>,
    pub shape: Option<Vec<usize>>,
    pub spacing: Option<Vec<f64>>,
    pub units: Option<Units>,
    pub axis_order: Option<String>,
    pub sha256: Option<String>,
    pub x_offset: Option<f64>,
}

impl TryFrom<ModelTable> for ModelConfig {
    type Error = String;

    fn try_from(t: ModelTable) -> Result<ModelConfig, String> {
        let given: Vec<&str> = [
            ("vp", t.vp.is_some()),
            ("depths", t.depths.is_some()),
            ("velocities", t.velocities.is_some()),
            ("path", t.path.is_some()),
            ("format", t.format.is_some()),
            ("shape", t.shape.is_some()),
            ("spacing", t.spacing.is_some()),
            ("units", t.units.is_some()),
            ("axis_order", t.axis_order.is_some()),
            ("sha256", t.sha256.is_some()),
            ("x_offset", t.x_offset.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, g)| g.then_some(k))
        .collect();
        let (name, allowed, required): (&str, &[&str], &[&str]) = match t.kind {
            ModelKind::Constant => ("constant", &["vp"], &["vp"]),
            ModelKind::Layered => ("layered", &["depths", "velocities"], &["depths", "velocities"]),
            ModelKind::File => (
                "file",
                &["path", "format", "shape", "spacing", "units", "axis_order", "sha256"],
                &["path", "shape", "spacing"],
            ),
            ModelKind::Marmousi => ("marmousi", &["x_offset"], &[]),
        };
        if let Some(k) = given.iter().find(|k| !allowed.contains(k)) {
            return Err(format!(
                "model.{k} does not apply to kind = \"{name}\" (its keys: {})",
                if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") }
            ));
        }
        if let Some(k) = required.iter().find(|k| !given.contains(k)) {
            return Err(format!("model.{k} is required for kind = \"{name}\""));
        }
        Ok(match t.kind {
            ModelKind::Constant => ModelConfig::Constant { vp: t.vp.expect("required") },
            ModelKind::Layered => ModelConfig::Layered {
                depths: t.depths.expect("required"),
                velocities: t.velocities.expect("required"),
            },
            ModelKind::File => ModelConfig::File {
                path: t.path.expect("required"),
                format: t.format.unwrap_or_default(),
                shape: t.shape.expect("required"),
                spacing: t.spacing.expect("required"),
                units: t.units.unwrap_or_default(),
                axis_order: t.axis_order.unwrap_or_else(default_axis_order),
                sha256: t.sha256,
            },
            ModelKind::Marmousi => ModelConfig::Marmousi { x_offset: t.x_offset.unwrap_or(0.0) },
        })
    }
}

#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FileFormat {
    #[default]
    RawF32,
    Npy,
}

#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Units {
    #[default]
    #[serde(rename = "m/s")]
    MetresPerSecond,
    #[serde(rename = "km/s")]
    KilometresPerSecond,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct StencilConfig {
    pub radius: usize,
}

impl Default for StencilConfig {
    fn default() -> Self {
        StencilConfig { radius: 4 }
    }
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct TimeConfig {
    /// Simulated time in seconds (or give `steps`).
    pub duration: Option<f64>,
    pub steps: Option<usize>,
    /// Time step in seconds; default: the CFL limit times `cfl_safety`.
    pub dt: Option<f64>,
    #[serde(default = "default_safety")]
    pub cfl_safety: f64,
}

fn default_safety() -> f64 {
    0.8
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Metres, in the grid's coordinates (origin included).
    #[serde(deserialize_with = "three")]
    pub position: [f64; 3],
    /// Ricker peak frequency, Hz.
    pub frequency: f64,
    #[serde(default = "one")]
    pub amplitude: f64,
    /// Time of the wavelet's peak, s (default 1 / frequency).
    pub delay: Option<f64>,
    /// How the point source is spread over grid points: "sinc" (default), "trilinear" or "nearest".
    #[serde(default)]
    pub injection: Injection,
    /// Half-width r of the windowed sinc (2r points per axis); only with injection = "sinc".
    pub sinc_half_width: Option<usize>,
}

fn one() -> f64 {
    1.0
}

/// How a position between grid points is tied to them: a source's spread, a receiver's
/// interpolation (see `problem::Positioning`).
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Injection {
    Nearest,
    Trilinear,
    /// Kaiser-windowed sinc (Hicks 2002).
    #[default]
    Sinc,
}

/// One `[[receivers]]` entry: exactly one of `position`, `line` or `grid`.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct ReceiverConfig {
    #[serde(default, deserialize_with = "three_opt")]
    pub position: Option<[f64; 3]>,
    pub line: Option<LineConfig>,
    pub grid: Option<ReceiverGridConfig>,
    /// How the pressure is read between grid points: "sinc" (default), "trilinear" or "nearest".
    #[serde(default)]
    pub interpolation: Injection,
    /// Half-width r of the windowed sinc (2r points per axis); only with interpolation = "sinc".
    pub sinc_half_width: Option<usize>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct LineConfig {
    #[serde(deserialize_with = "three")]
    pub start: [f64; 3],
    #[serde(deserialize_with = "three")]
    pub end: [f64; 3],
    pub count: usize,
}

/// A regular 2D or 3D grid of receivers: `origin + i*step_a + j*step_b (+ k*step_c)`.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ReceiverGridConfig {
    #[serde(deserialize_with = "three")]
    pub origin: [f64; 3],
    #[serde(deserialize_with = "three")]
    pub step_a: [f64; 3],
    pub count_a: usize,
    #[serde(deserialize_with = "three")]
    pub step_b: [f64; 3],
    pub count_b: usize,
    #[serde(default, deserialize_with = "three")]
    pub step_c: [f64; 3],
    #[serde(default = "one_usize")]
    pub count_c: usize,
}

fn one_usize() -> usize {
    1
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct BoundaryConfig {
    #[serde(default)]
    pub kind: BoundaryKind,
    /// Absorbing layer width in grid points.
    #[serde(default = "default_width")]
    pub width: usize,
    /// Pressure-free top face (z = 0) instead of an absorbing one.
    #[serde(default)]
    pub free_surface: bool,
}

fn default_width() -> usize {
    20
}

impl Default for BoundaryConfig {
    fn default() -> Self {
        BoundaryConfig { kind: BoundaryKind::Cpml, width: default_width(), free_surface: false }
    }
}

#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BoundaryKind {
    #[default]
    Cpml,
    Sponge,
    None,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    #[serde(default = "default_output")]
    pub path: PathBuf,
    /// Steps between snapshots; 0 turns snapshots off.
    #[serde(default)]
    pub snapshot_every: usize,
    #[serde(default)]
    pub snapshot: Vec<SnapshotConfig>,
    #[serde(default)]
    pub plot: bool,
    /// Also write the receiver traces as SEG-Y (`<stem>.sgy` beside the result file).
    #[serde(default)]
    pub segy: bool,
    /// Deflate level 1-9 (with the shuffle filter) for the snapshot datasets; 0: uncompressed.
    #[serde(default)]
    pub compression: u32,
}

impl OutputConfig {
    /// Checks the keys that parsing alone cannot; errors name the key.
    pub fn validate(&self) -> Result<()> {
        ensure!(
            self.compression <= 9,
            "output.compression = {}: deflate levels run from 1 (fastest) to 9 (smallest), 0 is off",
            self.compression
        );
        Ok(())
    }
}

fn default_output() -> PathBuf {
    PathBuf::from("output.h5")
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            path: default_output(),
            snapshot_every: 0,
            snapshot: Vec::new(),
            plot: false,
            segy: false,
            compression: 0,
        }
    }
}

/// What a snapshot holds: the whole volume or a plane through it.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SnapshotConfig {
    /// "volume", "xz", "xy" or "yz".
    pub kind: String,
    /// Position of the plane (m) along its normal axis.
    pub at: Option<f64>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    #[serde(default)]
    pub backend: BackendChoice,
    #[serde(default)]
    pub kernel: KernelChoice,
    /// "z": under mpirun, the grid split into z-slabs, one per rank; "yz": into blocks of rows of
    /// z-slabs (build with `--features mpi`).
    #[serde(default)]
    pub decomposition: Option<Decompose>,
    /// How a decomposed run's halo planes move between GPU ranks.
    #[serde(default)]
    pub halo_exchange: HaloExchange,
    /// Whether a decomposed run moves the halo planes while the rest of the step is computed (the
    /// planes next to each cut computed first): true, false, or "auto" (the default: true, except
    /// for GPU ranks that share a GPU, where the exchange is slower overlapped).
    #[serde(default)]
    pub halo_overlap: HaloOverlap,
    #[serde(default)]
    pub precision: Precision,
}

/// `[run] halo_overlap`: true, false or "auto".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HaloOverlap {
    #[default]
    Auto,
    On,
    Off,
}

impl<'de> Deserialize<'de> for HaloOverlap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Flag(bool),
            Word(String),
        }
        match Raw::deserialize(d).map_err(|_| serde::de::Error::custom("expected true, false or \"auto\""))? {
            Raw::Flag(true) => Ok(HaloOverlap::On),
            Raw::Flag(false) => Ok(HaloOverlap::Off),
            Raw::Word(w) if w == "auto" => Ok(HaloOverlap::Auto),
            Raw::Word(w) => Err(serde::de::Error::custom(format!("\"{w}\": expected true, false or \"auto\""))),
        }
    }
}

/// The path of a decomposed run's halo planes.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HaloExchange {
    /// NCCL where it can run (CUDA ranks, one GPU each, a build with `--features nccl`), the host
    /// otherwise.
    #[default]
    Auto,
    /// Device to device through NCCL on the solvers' streams (an error where it cannot run).
    Nccl,
    /// Through host memory and MPI: every backend, several ranks on one GPU.
    Host,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Decompose {
    /// Slabs along z.
    Z,
    /// Blocks of y-rows within z-slabs (the CPU backend), the split of the ranks chosen to move
    /// the fewest halo points.
    Yz,
}

impl Decompose {
    /// The key's value as written in the input.
    pub fn name(self) -> &'static str {
        match self {
            Decompose::Z => "z",
            Decompose::Yz => "yz",
        }
    }
}

/// How the wavefields and c^2 dt^2 are stored: f32, or f16 (arithmetic stays f32; values are
/// scaled into f16's range, see `Problem::field_scale`).
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    F32,
    F16,
}

impl Precision {
    /// Bytes of one stored value of a wavefield or of c^2 dt^2.
    pub fn bytes(self) -> u64 {
        match self {
            Precision::F32 => 4,
            Precision::F16 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
        }
    }
}

#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    #[default]
    Auto,
    Cpu,
    Cuda,
    Hip,
}

#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum KernelChoice {
    #[default]
    Fused,
    ThreePass,
}

impl Config {
    /// Parses a TOML document. Errors (unknown key, wrong type, missing key) carry the line,
    /// column and key.
    pub fn from_toml(text: &str) -> Result<Config, toml::de::Error> {
        toml::from_str(text)
    }

    /// Reads and parses an input file; errors name the file, then the line, column and key.
    pub fn from_file(path: &Path) -> Result<Config> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read input file {}", path.display()))?;
        Config::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// The checks that need neither the model nor the discretisation: the values, then the
    /// output directory (`base_dir` resolves a relative `output.path`; see [`check_output_writable`]).
    pub fn validate(&self, base_dir: &Path) -> Result<()> {
        self.check_values()?;
        check_output_writable(&base_dir.join(&self.output.path), "output.path")
    }

    /// Every number of the input finite and in a physical range, every count addressable: the
    /// grid, model parameters, time, source, receivers, snapshot planes and the output keys
    /// (compression level; SEG-Y only with receivers). Errors name the key,
    /// the value and the range. (Positions inside the grid and dt against the CFL limit are
    /// checked by `Problem::build`, which knows the velocity.)
    pub fn check_values(&self) -> Result<()> {
        self.grid.validate()?;
        match &self.model {
            ModelConfig::Constant { vp } => {
                finite_in("model.vp", *vp, MIN_VELOCITY, MAX_VELOCITY, "a positive velocity in m/s")?
            }
            ModelConfig::Layered { depths, velocities } => {
                for (i, d) in depths.iter().enumerate() {
                    finite_in(&format!("model.depths[{i}]"), *d, -MAX_LENGTH, MAX_LENGTH, "a depth in m")?;
                }
                for (i, v) in velocities.iter().enumerate() {
                    finite_in(
                        &format!("model.velocities[{i}]"),
                        *v,
                        MIN_VELOCITY,
                        MAX_VELOCITY,
                        "a positive velocity in m/s",
                    )?;
                }
            }
            ModelConfig::File { spacing, .. } => {
                for (i, h) in spacing.iter().enumerate() {
                    finite_in(&format!("model.spacing[{i}]"), *h, MIN_SPACING, MAX_LENGTH, "a spacing in m")?;
                }
            }
            ModelConfig::Marmousi { x_offset } => {
                finite_in("model.x_offset", *x_offset, -MAX_LENGTH, MAX_LENGTH, "a length in m")?
            }
        }
        let t = &self.time;
        if let Some(d) = t.duration {
            finite_in("time.duration", d, f64::MIN_POSITIVE, MAX_TIME, "a positive time in s")?;
        }
        if let Some(dt) = t.dt {
            finite_in("time.dt", dt, f64::MIN_POSITIVE, MAX_TIME, "a positive time in s")?;
        }
        let s = &self.source;
        finite3("source.position", s.position, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
        finite_in("source.frequency", s.frequency, f64::MIN_POSITIVE, MAX_FREQUENCY, "a positive frequency in Hz")?;
        finite_in("source.amplitude", s.amplitude, -MAX_AMPLITUDE, MAX_AMPLITUDE, "an amplitude")?;
        if let Some(d) = s.delay {
            finite_in("source.delay", d, -MAX_TIME, MAX_TIME, "a time in s")?;
        }
        for (i, r) in self.receivers.iter().enumerate() {
            let key = format!("receivers[{i}]");
            if let Some(p) = r.position {
                finite3(&format!("{key}.position"), p, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
            }
            if let Some(l) = &r.line {
                finite3(&format!("{key}.line.start"), l.start, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
                finite3(&format!("{key}.line.end"), l.end, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
            }
            if let Some(g) = &r.grid {
                for (name, v) in
                    [("origin", g.origin), ("step_a", g.step_a), ("step_b", g.step_b), ("step_c", g.step_c)]
                {
                    finite3(&format!("{key}.grid.{name}"), v, -MAX_LENGTH, MAX_LENGTH, "a length in m")?;
                }
            }
        }
        let receivers = self.receiver_count()?;
        for (i, snap) in self.output.snapshot.iter().enumerate() {
            if let Some(at) = snap.at {
                finite_in(&format!("output.snapshot[{i}].at"), at, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
            }
        }
        self.output.validate()?;
        if let Some(survey) = &self.survey {
            survey.positions()?;
            ensure!(
                survey.ranks_per_shot >= 1 && survey.ranks_per_shot <= 1 << 20,
                "survey.ranks_per_shot = {} must be at least 1 (processes running each shot together)",
                survey.ranks_per_shot
            );
        }
        ensure!(
            !self.output.segy || receivers > 0,
            "output.segy = true: the SEG-Y holds receiver traces, and the input has no [[receivers]]"
        );
        Ok(())
    }

    /// The number of receivers all `[[receivers]]` entries give (checked arithmetic).
    pub fn receiver_count(&self) -> Result<usize> {
        self.receivers.iter().enumerate().try_fold(0usize, |n, (i, r)| {
            let here = r.count().with_context(|| format!("receivers[{i}]"))?;
            n.checked_add(here).with_context(|| format!("receivers[{i}]: too many receivers in all"))
        })
    }
}

impl ReceiverConfig {
    /// Receivers this entry gives, with checked arithmetic (a line or grid of absurd counts is an
    /// error here, before anything is allocated for it).
    pub fn count(&self) -> Result<usize> {
        if let Some(l) = &self.line {
            return Ok(l.count);
        }
        if let Some(g) = &self.grid {
            return g.count_a.checked_mul(g.count_b).and_then(|n| n.checked_mul(g.count_c)).with_context(|| {
                format!("receivers grid counts {} x {} x {} overflow", g.count_a, g.count_b, g.count_c)
            });
        }
        Ok(self.position.is_some() as usize)
    }
}

impl GridConfig {
    /// Shape positive, spacing and origin finite and in range; errors name `grid.shape[i]`, ...
    pub fn validate(&self) -> Result<()> {
        for a in 0..3 {
            ensure!(self.shape[a] > 0, "grid.shape[{a}] must be positive, got {}", self.shape[a]);
            ensure!(
                self.spacing[a] > 0.0 && self.spacing[a].is_finite(),
                "grid.spacing[{a}] must be positive and finite, got {}",
                self.spacing[a]
            );
            finite_in(&format!("grid.spacing[{a}]"), self.spacing[a], MIN_SPACING, MAX_LENGTH, "a spacing in m")?;
            ensure!(self.origin[a].is_finite(), "grid.origin[{a}] must be finite, got {}", self.origin[a]);
            finite_in(&format!("grid.origin[{a}]"), self.origin[a], -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
        }
        self.points()?;
        Ok(())
    }

    /// Interior points, or an error naming `grid.shape` when the count overflows.
    pub fn points(&self) -> Result<usize> {
        let [nx, ny, nz] = self.shape;
        nx.checked_mul(ny)
            .and_then(|n| n.checked_mul(nz))
            .with_context(|| format!("grid.shape = {:?} has more points than this machine can address", self.shape))
    }
}

/// Checks, before any work, that the output file can be created: missing parent directories are
/// created, the parent must be a directory that accepts a new file (a probe file is created
/// exclusively and removed again), and the path itself must name a regular file or nothing (a
/// directory, link, device, FIFO or socket is refused: the result is renamed over the path, see
/// [`crate::output::safe`]). Errors name `key` (`output.path`, or `--output` when the option set
/// it) and the directory.
pub fn check_output_writable(path: &Path, key: &str) -> Result<()> {
    if path.file_name().is_none() || path.is_dir() {
        bail!(
            "{key} = {} is a directory; give a file name such as {}",
            path.display(),
            path.join("output.h5").display()
        );
    }
    crate::output::safe::check_replaceable(path, key)?;
    let dir = crate::output::safe::parent_dir(path);
    if let Some(file) = dir.ancestors().find(|a| a.is_file()) {
        bail!("{key} = {}: {} is not a directory", path.display(), file.display());
    }
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("{key} = {}: cannot create the directory {}", path.display(), dir.display()))?;
    crate::output::safe::TempFile::create(&dir.join(".seismic-run-write-probe"), "")
        .with_context(|| format!("{key} = {}: cannot write in directory {}", path.display(), dir.display()))?;
    Ok(())
}
