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

mod report;

pub use report::{Report, TargetCheck, check_writable, csv_field, write_atomic};

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};

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
    /// The real step where the density varies (kernels/density.cu and the layers scaled by K bh):
    /// the buoyancy read too (`problem::step_bytes_with`).
    RealStepDensity,
    /// The real step with the radius's default CPML width ([`crate::boundary::default_width`]) in
    /// place of [`REAL_STEP_CPML`].
    RealStepDefaultBoundary,
}

/// CPML width of the [`OperatorKind::RealStep`] operator, points.
pub const REAL_STEP_CPML: usize = 20;
/// Receivers of the [`OperatorKind::RealStep`] operator.
pub const REAL_STEP_RECEIVERS: usize = 1000;

impl OperatorKind {
    /// The operators a sweep times unless told otherwise.
    pub const ALL: [OperatorKind; 4] =
        [OperatorKind::FusedStep, OperatorKind::ThreePassStep, OperatorKind::LaplacianOnly, OperatorKind::RealStep];
    /// [`Self::ALL`], the f16 steps, the variable density's and the default boundary's (asked for
    /// by name: `--operators fused,fused-f16,step-density,step-default`).
    pub const KNOWN: [OperatorKind; 8] = [
        OperatorKind::FusedStep,
        OperatorKind::ThreePassStep,
        OperatorKind::LaplacianOnly,
        OperatorKind::RealStep,
        OperatorKind::FusedStepF16,
        OperatorKind::RealStepF16,
        OperatorKind::RealStepDensity,
        OperatorKind::RealStepDefaultBoundary,
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
            OperatorKind::RealStepDensity => "real step, variable density",
            OperatorKind::RealStepDefaultBoundary => "real step, default boundary",
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
            OperatorKind::RealStepDensity => "step-density",
            OperatorKind::RealStepDefaultBoundary => "step-default",
        }
    }

    pub fn parse(s: &str) -> Result<OperatorKind> {
        OperatorKind::KNOWN.into_iter().find(|o| o.key() == s.trim()).with_context(|| {
            format!(
                "--operators: unknown operator {s:?} (expected fused, three-pass, laplacian, step, fused-f16, step-f16, \
                 step-density or step-default)"
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

    /// Whether it is timed on a 2D grid ([`is_2d`]): the f32 real steps, which a 2D run does;
    /// the interior-only operators and the f16 storage are 3D kernels' and have no 2D form.
    pub fn has_2d_form(&self) -> bool {
        matches!(self, OperatorKind::RealStep | OperatorKind::RealStepDensity | OperatorKind::RealStepDefaultBoundary)
    }

    /// Theoretical bytes of one application on `shape` (the effective-bandwidth numerator); on a
    /// 2D grid, of the real steps' 2D form ([`real_step_bytes_2d`]).
    pub fn bytes(&self, shape: [usize; 3], radius: usize) -> u64 {
        use crate::problem::{step_bytes, step_bytes_f16, step_bytes_with};
        if is_2d(shape) && self.has_2d_form() {
            let width = if *self == OperatorKind::RealStepDefaultBoundary {
                crate::boundary::default_width(radius)
            } else {
                REAL_STEP_CPML
            };
            return real_step_bytes_2d(shape, radius, width, *self == OperatorKind::RealStepDensity);
        }
        // The real step's CPML memory variables: the boundary's own bytes (Boundary::step_bytes).
        let cpml = crate::boundary::cpml_step_bytes(shape, REAL_STEP_CPML, false);
        match self {
            OperatorKind::RealStep => step_bytes(shape, radius, true) + cpml,
            OperatorKind::FusedStepF16 => step_bytes_f16(shape, radius),
            OperatorKind::RealStepF16 => step_bytes_f16(shape, radius) + cpml,
            OperatorKind::RealStepDensity => step_bytes_with(shape, radius, true, true) + cpml,
            OperatorKind::RealStepDefaultBoundary => {
                step_bytes(shape, radius, true)
                    + crate::boundary::cpml_step_bytes(shape, crate::boundary::default_width(radius), false)
            }
            _ => step_bytes(shape, radius, self.leapfrog()),
        }
    }
}

/// Whether `shape` is a 2D grid: one point along y, as `grid.shape = [nx, nz]` makes it (the
/// command line's `NXxNZ`).
pub fn is_2d(shape: [usize; 3]) -> bool {
    shape[1] == 1
}

/// The bytes of the 2D real step on `[nx, 1, nz]`: the 2D leapfrog's
/// ([`step_bytes_2d`](crate::problem::step_bytes_2d): p^n with its halos, p^{n-1}, c^2 dt^2 read
/// and p^{n+1} written, 16 B a point; the buoyancy too with `variable_density`) plus the CPML
/// memory variables of the x and z layers of `cpml_width` points, 16 B a layer point per axis, as
/// [`cpml_step_bytes`](crate::boundary::cpml_step_bytes) counts them in 3D (a 2D grid has no y
/// layers).
pub fn real_step_bytes_2d(shape: [usize; 3], radius: usize, cpml_width: usize, variable_density: bool) -> u64 {
    let [nx, _, nz] = shape;
    let layer_points = 2 * cpml_width as u64 * (nz as u64 + nx as u64);
    crate::problem::step_bytes_2d([nx, nz], radius, variable_density) + 16 * layer_points
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
                shape.iter().all(|&n| n > 2 * r || (is_2d(shape) && n == 1)),
                "grid {} is too small for radius {r}: every axis needs more than 2R points",
                shape_label(shape)
            );
            ensure!(
                !is_2d(shape) || self.operators.iter().any(OperatorKind::has_2d_form),
                "grid {} is 2D, and only the real steps (step, step-density, step-default) run on a 2D grid: \
                 add one to --operators",
                shape_label(shape)
            );
        }
        Ok(())
    }
}

/// "N" (a cube), "NXxNZ" (a 2D grid: [nx, 1, nz], [`is_2d`]) or "NXxNYxNZ".
pub fn parse_shape(s: &str) -> Result<[usize; 3]> {
    let parts: Vec<&str> = s.trim().split(['x', 'X']).collect();
    let nums: Vec<usize> = parts
        .iter()
        .map(|p| p.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .with_context(|| format!("grid size {s:?}: expected N, NXxNZ or NXxNYxNZ with positive integers"))?;
    let shape = match nums[..] {
        [n] => [n, n, n],
        [x, z] => [x, 1, z],
        [x, y, z] => [x, y, z],
        _ => bail!("grid size {s:?}: expected N, NXxNZ (2D) or NXxNYxNZ"),
    };
    ensure!(shape.iter().all(|&n| n > 0), "grid size {s:?}: every axis must be positive");
    Ok(shape)
}

/// "512x512x512", or for a 2D grid "8192x8192 2D" (nx x nz).
pub fn shape_label(s: [usize; 3]) -> String {
    if is_2d(s) { format!("{}x{} 2D", s[0], s[2]) } else { format!("{}x{}x{}", s[0], s[1], s[2]) }
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

#[cfg(test)]
mod tests;
