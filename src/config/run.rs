//! `[stencil]`, `[time]`, `[boundary]` and `[run]`: the discretisation, the absorbing boundary
//! and how the run executes (backend, kernel, precision, decomposition, halo exchange).

use super::Placement;
use anyhow::Result;
use serde::Deserialize;

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
pub struct BoundaryConfig {
    #[serde(default)]
    pub kind: BoundaryKind,
    /// Absorbing layer width in grid points; absent, it follows the stencil radius
    /// ([`crate::boundary::default_width`], resolved by [`super::Config::boundary_width`]).
    #[serde(default)]
    pub width: Option<usize>,
    /// Pressure-free top face (z = 0) instead of an absorbing one.
    #[serde(default)]
    pub free_surface: bool,
    /// Where the absorbing layers sit: outside the model (the default) or inside it.
    #[serde(default)]
    pub placement: Placement,
}

impl Default for BoundaryConfig {
    fn default() -> Self {
        BoundaryConfig { kind: BoundaryKind::Cpml, width: None, free_surface: false, placement: Placement::default() }
    }
}

/// The boundary's kind is the domain's own type (the input deserialises into it).
pub use crate::boundary::BoundaryKind;

#[derive(Deserialize, Debug, Clone)]
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
    /// Velocities outside 100 to 20,000 m/s and spacings below 0.1 m are errors that suggest the
    /// unit mistake; false accepts them (a laboratory or nondimensional model).
    #[serde(default = "default_check_units")]
    pub check_units: bool,
}

fn default_check_units() -> bool {
    true
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            backend: BackendChoice::default(),
            kernel: KernelChoice::default(),
            decomposition: None,
            halo_exchange: HaloExchange::default(),
            halo_overlap: HaloOverlap::default(),
            precision: Precision::default(),
            check_units: default_check_units(),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::super::Config;

    const INPUT: &str = "[grid]\nshape = [80, 80, 80]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                         vp = 2000.0\n[time]\nsteps = 10\n[source]\nposition = [400.0, 400.0, 400.0]\nfrequency = 10.0\n";

    /// Without `boundary.width` the layers are the stencil radius's default width, outside the
    /// model on every face; a width given is kept whatever the radius.
    #[test]
    fn an_absent_width_follows_the_stencil_radius() {
        let cfg = |extra: &str| Config::from_toml(&format!("{INPUT}{extra}")).unwrap();
        assert_eq!(cfg("").boundary_width(), 12, "R = 4, the default radius");
        assert_eq!(cfg("[stencil]\nradius = 2\n").boundary_width(), 16);
        assert_eq!(cfg("[stencil]\nradius = 1\n").layer_points(), [[36, 36]; 3]);
        assert_eq!(cfg("[stencil]\nradius = 8\n").run_grid().shape, [104; 3]);
        assert_eq!(cfg("[stencil]\nradius = 1\n[boundary]\nwidth = 14\n").boundary_width(), 14);
    }
}
