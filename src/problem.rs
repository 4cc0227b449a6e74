//! A run, discretised: everything a backend needs, computed once on the host.
//!
//! Backends never look at the configuration. They get the padded layout, the stencil, dt, the
//! velocity, the boundary profiles, the source taps and wavelet samples, and the receiver taps, and
//! each applies them in the same order every step (see `backend::Backend::step`).

use crate::boundary::{Boundary, BoundaryKind};
use crate::config::{self, Config, Injection, Precision};
use crate::grid::Layout;
use crate::numerics::{Ricker, Stencil, stencil::MAX_RADIUS};
use anyhow::{Result, bail, ensure};
use rayon::prelude::*;

/// One grid point and its weight in an interpolation or a spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tap {
    pub point: [usize; 3],
    pub weight: f64,
}

/// How a position between grid points is tied to them: a source's spread of the delta function,
/// a receiver's interpolation. The same taps serve both, which keeps source-receiver reciprocity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positioning {
    /// The nearest grid point, weight 1.
    Nearest,
    /// The 8 surrounding points.
    Trilinear,
    /// Kaiser-windowed sinc over 2 `half_width` points per axis (Hicks 2002).
    Sinc { half_width: usize },
}

/// Sinc half-width when the input gives none: Hicks (2002) recommends r = 4.
pub const DEFAULT_SINC_HALF_WIDTH: usize = 4;

/// Hicks (2002, Geophysics 67(1), Table 2): the Kaiser window parameter b that minimises the
/// interpolation error up to kmax = pi/2 (4 points per wavelength), for half-widths r = 1..10.
/// The kmax = 2 pi / 3 column (b = 4.14 at r = 4) spreads its error over a wider band: at r = 4 its
/// error at 8 points per wavelength is about 0.4% against 0.07% here, and the run warns below 5
/// points per wavelength anyway, so the band this column covers is the one that matters.
const KAISER_B: [f64; 10] = [1.24, 2.94, 4.53, 6.31, 7.91, 9.42, 10.95, 12.53, 14.09, 14.18];

/// Largest sinc half-width (the end of Hicks' table).
pub const MAX_SINC_HALF_WIDTH: usize = KAISER_B.len();

impl Positioning {
    /// From a configuration's method and half-width; `key` (`source`, `receivers[2]`) names the
    /// table in errors.
    pub fn from_config(method: Injection, half_width: Option<usize>, key: &str, method_key: &str) -> Result<Self> {
        Ok(match (method, half_width) {
            (Injection::Sinc, r) => {
                let half_width = r.unwrap_or(DEFAULT_SINC_HALF_WIDTH);
                ensure!(
                    (1..=MAX_SINC_HALF_WIDTH).contains(&half_width),
                    "{key}.sinc_half_width must be in 1..={MAX_SINC_HALF_WIDTH}, got {half_width}"
                );
                Positioning::Sinc { half_width }
            }
            (m, Some(_)) => {
                bail!("{key}.sinc_half_width applies only to {method_key} = \"sinc\" (this one is {m:?})")
            }
            (Injection::Trilinear, None) => Positioning::Trilinear,
            (Injection::Nearest, None) => Positioning::Nearest,
        })
    }

    /// The name the output file and the README use.
    pub fn name(&self) -> &'static str {
        match self {
            Positioning::Nearest => "nearest",
            Positioning::Trilinear => "trilinear",
            Positioning::Sinc { .. } => "sinc",
        }
    }

    /// The taps of position `p` (m), distinct points with x fastest. With `free_surface`, sinc
    /// weights above z = 0 are mirrored there with opposite sign (the pressure is odd about the
    /// surface) and the weight on z = 0 itself is dropped (the pressure is zero there). Sinc
    /// weights that fall outside the grid anywhere else are dropped (truncation).
    pub fn taps(
        &self,
        p: [f64; 3],
        origin: [f64; 3],
        spacing: [f64; 3],
        shape: [usize; 3],
        free_surface: bool,
    ) -> Vec<Tap> {
        match *self {
            Positioning::Nearest => vec![Tap { point: nearest(p, origin, spacing, shape), weight: 1.0 }],
            Positioning::Trilinear => trilinear(p, origin, spacing, shape),
            Positioning::Sinc { half_width } => sinc(p, origin, spacing, shape, half_width, free_surface),
        }
    }

    /// Whether the taps of `p` lose weights past a grid face other than a free surface.
    pub fn truncated(
        &self,
        p: [f64; 3],
        origin: [f64; 3],
        spacing: [f64; 3],
        shape: [usize; 3],
        free_surface: bool,
    ) -> bool {
        let Positioning::Sinc { half_width: r } = *self else { return false };
        (0..3).any(|a| {
            let u = (p[a] - origin[a]) / spacing[a];
            if on_node(u).is_some() {
                return false;
            }
            let lo = u.floor() - r as f64 + 1.0;
            let hi = u.floor() + r as f64;
            (lo < 0.0 && !(a == 2 && free_surface)) || hi > (shape[a] - 1) as f64
        })
    }
}

/// A point source: where it injects and what it injects each step.
#[derive(Clone, Debug, PartialEq)]
pub struct PointSource {
    pub position: [f64; 3],
    pub wavelet: Ricker,
    /// How the delta function is spread over grid points.
    pub injection: Positioning,
    /// The spread (weights sum to about 1: exactly for nearest and trilinear).
    pub taps: Vec<Tap>,
    /// Sample n is s(n dt) / (dx dy dz): the discrete delta is folded in.
    pub samples: Vec<f64>,
}

/// A pressure receiver: the weighted sum of the pressure at its taps.
#[derive(Clone, Debug, PartialEq)]
pub struct Receiver {
    pub position: [f64; 3],
    pub interpolation: Positioning,
    pub taps: Vec<Tap>,
}

#[derive(Clone, Debug)]
pub struct Problem {
    pub layout: Layout,
    pub spacing: [f64; 3],
    pub origin: [f64; 3],
    pub stencil: Stencil,
    pub dt: f64,
    pub steps: usize,
    /// Velocity, dense (planes, ny, nx), m/s: every z-plane of the grid, or from `vp_first` on
    /// (a problem built from one rank's part of the model, [`Problem::build_part`]).
    pub vp: Vec<f32>,
    /// The grid z-plane `vp` starts at.
    pub vp_first: usize,
    /// The lowest and highest velocity of the whole model, m/s.
    pub vp_range: [f32; 2],
    pub boundary: Boundary,
    pub source: PointSource,
    pub receivers: Vec<Receiver>,
    /// Things the user should know (dispersion, ...); the CLI prints them.
    pub warnings: Vec<String>,
    /// Storage of the wavefields and c^2 dt^2 (`run.precision`).
    pub precision: Precision,
}

/// Points per minimum wavelength under which numerical dispersion shows.
pub const MIN_POINTS_PER_WAVELENGTH: f64 = 5.0;

/// Most time steps a run may take (about a day at a million points per step on a CPU, a week of
/// the largest GPU grids): beyond it the input is almost certainly wrong.
pub const MAX_STEPS: usize = 100_000_000;
/// Step counts above this are said in a warning.
pub const MANY_STEPS: usize = 100_000;

impl Problem {
    /// A homogeneous problem with no boundary, source or receivers, for benchmarks of the interior:
    /// 10 m spacing, 2000 m/s, dt at half the CFL limit.
    pub fn homogeneous_interior(shape: [usize; 3], radius: usize) -> Problem {
        let stencil = Stencil::new(radius);
        let spacing = [10.0; 3];
        let v = 2000.0f32;
        let dt = 0.5 * stencil.cfl_limit(spacing, v as f64);
        let points: usize = shape.iter().product();
        Problem {
            layout: Layout::new(shape, radius),
            spacing,
            origin: [0.0; 3],
            stencil,
            dt,
            steps: 1,
            vp: vec![v; points],
            vp_first: 0,
            vp_range: [v, v],
            boundary: Boundary::none(shape),
            source: PointSource {
                position: [0.0; 3],
                wavelet: Ricker::new(10.0, 1.0, None),
                injection: Positioning::Nearest,
                taps: vec![],
                samples: vec![],
            },
            receivers: vec![],
            warnings: vec![],
            precision: Precision::F32,
        }
    }

    pub fn shape(&self) -> [usize; 3] {
        [self.layout.nx, self.layout.ny, self.layout.nz]
    }

    pub fn vmax(&self) -> f64 {
        self.vp_range[1] as f64
    }

    pub fn vmin(&self) -> f64 {
        self.vp_range[0] as f64
    }

    /// The exact CFL limit of this discretisation.
    pub fn dt_limit(&self) -> f64 {
        self.stencil.cfl_limit(self.spacing, self.vmax())
    }

    /// Theoretical bytes one time step must move (the seeds' effective-bandwidth numerator): p^n
    /// read once with the stencil's face halos, p^{n-1} and c^2 dt^2 read once, p^{n+1} written
    /// once; f32. In f16 (2 bytes a value) the second time level is the increment d^n, read and
    /// written, besides p^{n+1}: five fields instead of four. Boundary-layer work is not counted,
    /// so GB/s computed from it is a lower bound.
    pub fn step_bytes(&self) -> u64 {
        let f32_bytes = step_bytes(self.shape(), self.stencil.radius, true);
        match self.precision {
            Precision::F32 => f32_bytes,
            Precision::F16 => step_bytes_f16(self.shape(), self.stencil.radius),
        }
    }

    /// The bytes a full step must move at the least: [`step_bytes`](Self::step_bytes) plus, for each
    /// CPML layer point of each axis, its two memory variables (psi and zeta) read and written
    /// once ([`full_step_bytes`]). Sources, receivers and the free surface are not counted.
    pub fn full_step_bytes(&self) -> u64 {
        let cpml_width = if self.boundary.kind == BoundaryKind::Cpml { self.boundary.width } else { 0 };
        let f32_bytes = full_step_bytes(self.shape(), self.stencil.radius, cpml_width, self.boundary.free_surface);
        // psi and zeta stay f32 in either precision.
        f32_bytes - step_bytes(self.shape(), self.stencil.radius, true) + self.step_bytes()
    }

    /// The factor the wavefield is stored multiplied by: 1 in f32; in f16 the power of two that
    /// brings the largest value the source adds to one point in one step to about 1, so that the
    /// field near the source (tens to thousands of such steps accumulated) stays below f16's
    /// largest value (65504) and the far field stays above its smallest normal value (6.1e-5).
    /// A power of two, so scaling is exact and divides back out of traces and snapshots exactly.
    pub fn field_scale(&self) -> f64 {
        if self.precision == Precision::F32 {
            return 1.0;
        }
        let smax = self.source.samples.iter().fold(0.0f64, |m, s| m.max(s.abs()));
        let peak =
            self.source.taps.iter().map(|t| (t.weight * self.vel2dt2_at(t.point) * smax).abs()).fold(0.0f64, f64::max);
        if peak > 0.0 && peak.is_finite() { (-peak.log2().round()).exp2() } else { 1.0 }
    }

    /// c^2 dt^2 per point of `vp`, dense: the factor of the Laplacian in the update.
    pub fn vel2dt2(&self) -> Vec<f64> {
        self.vp.iter().map(|&v| self.c2dt2(v)).collect()
    }

    /// [`Self::vel2dt2`] converted by `of` into the interior rows of `field`, a field of `layout`
    /// (halo and padding left as they are), in parallel over the planes: no dense copy.
    pub fn vel2dt2_into<T: Send>(&self, layout: &Layout, field: &mut [T], of: impl Fn(f64) -> T + Sync) {
        assert_eq!(layout.points(), self.vp.len(), "a field of the planes the problem holds");
        assert!(field.len() >= layout.len() - layout.slack(), "a field of {} elements for {layout:?}", field.len());
        let start = layout.halo * layout.plane;
        self.vel2dt2_planes_into(layout, 0, &mut field[start..start + layout.nz * layout.plane], of);
    }

    /// [`Self::vel2dt2_into`] for the planes `first..` of the problem's planes that `planes` holds
    /// (whole planes of `layout`, from each one's first halo row), in parallel over them.
    pub fn vel2dt2_planes_into<T: Send>(
        &self,
        layout: &Layout,
        first: usize,
        planes: &mut [T],
        of: impl Fn(f64) -> T + Sync,
    ) {
        let (nx, ny) = (layout.nx, layout.ny);
        assert!(
            planes.len().is_multiple_of(layout.plane)
                && (first + planes.len() / layout.plane) * nx * ny <= self.vp.len()
        );
        // Row iy's offset within its plane, the plane starting at its first halo row.
        let plane_start = layout.halo * layout.plane;
        planes.par_chunks_mut(layout.plane).enumerate().for_each(|(k, plane)| {
            let vp = &self.vp[(first + k) * nx * ny..][..nx * ny];
            for (iy, v) in vp.chunks_exact(nx).enumerate() {
                let row = layout.row(iy, 0) - plane_start;
                for (d, &v) in plane[row..row + nx].iter_mut().zip(v) {
                    *d = of(self.c2dt2(v));
                }
            }
        });
    }

    /// c^2 dt^2 at one grid point, as [`Self::vel2dt2`] computes it.
    pub fn vel2dt2_at(&self, [x, y, z]: [usize; 3]) -> f64 {
        let [nx, ny, _] = self.shape();
        self.c2dt2(self.vp[((z - self.vp_first) * ny + y) * nx + x])
    }

    /// c^2 dt^2 of one velocity: the one expression every copy of it is made with (same bits).
    fn c2dt2(&self, v: f32) -> f64 {
        (v as f64) * (v as f64) * (self.dt * self.dt)
    }

    /// Position (m) of grid point (ix, iy, iz).
    pub fn coordinate(&self, p: [usize; 3]) -> [f64; 3] {
        std::array::from_fn(|a| self.origin[a] + p[a] as f64 * self.spacing[a])
    }

    /// Builds the discrete problem from a parsed configuration and the velocity already sampled on
    /// the grid (dense, (nz, ny, nx), m/s). Every error names the configuration key at fault.
    pub fn build(cfg: &Config, vp: Vec<f32>) -> Result<Problem> {
        let range = velocity_range(&vp);
        Self::build_planes(cfg, vp, None, range)
    }

    /// [`Problem::build`] from z-planes `first_plane..` of the model only (`vp`, dense (planes,
    /// ny, nx)), `range` the lowest and highest velocity of the whole model (the time step and
    /// the boundary come from it): one rank's part of a decomposed run, which never holds the
    /// whole model. The same problem as the whole model's, restricted to those planes.
    pub fn build_part(cfg: &Config, vp: Vec<f32>, first_plane: usize, range: [f32; 2]) -> Result<Problem> {
        Self::build_planes(cfg, vp, Some(first_plane), range)
    }

    /// `part`: the first z-plane of `vp`, or None for the whole model.
    fn build_planes(cfg: &Config, vp: Vec<f32>, part: Option<usize>, range: [f32; 2]) -> Result<Problem> {
        cfg.check_values()?;
        let shape = cfg.grid.shape;
        let spacing = cfg.grid.spacing;
        let origin = cfg.grid.origin;
        for a in 0..3 {
            ensure!(shape[a] > 0, "grid.shape[{a}] must be positive, got {}", shape[a]);
            ensure!(
                spacing[a] > 0.0 && spacing[a].is_finite(),
                "grid.spacing[{a}] must be positive, got {}",
                spacing[a]
            );
        }
        let radius = cfg.stencil.radius;
        ensure!((1..=MAX_RADIUS).contains(&radius), "stencil.radius must be in 1..={MAX_RADIUS}, got {radius}");
        let plane = shape[0] * shape[1];
        let fits = match part {
            None => vp.len() == plane * shape[2],
            Some(first) => vp.len().is_multiple_of(plane) && first + vp.len() / plane.max(1) <= shape[2],
        };
        ensure!(
            fits,
            "model: {} velocities for {} of a grid of {} points",
            vp.len(),
            part.map_or("all z-planes".to_string(), |first| format!("z-planes from {first} on")),
            shape.iter().product::<usize>()
        );
        let first_plane = part.unwrap_or(0);
        let max_v = crate::config::MAX_VELOCITY;
        // NaN fails both comparisons; a chunk is searched only where its branch-free scan found one.
        let bad = |v: f32| !(v > 0.0 && v as f64 <= max_v);
        let first_bad = vp.par_chunks(1 << 16).find_map_first(|c| {
            let any = c.iter().fold(false, |any, &v| any | bad(v));
            any.then(|| c.iter().find(|&&v| bad(v))).flatten()
        });
        if let Some(bad) = first_bad {
            bail!("model: velocities must be finite, positive and at most {max_v:e} m/s, found {bad:e}");
        }
        let stencil = Stencil::new(radius);
        let layout = Layout::new(shape, radius);
        let [vmin, vmax] = range.map(|v| v as f64);

        let limit = stencil.cfl_limit(spacing, vmax);
        let t = &cfg.time;
        ensure!(t.cfl_safety > 0.0 && t.cfl_safety <= 1.0, "time.cfl_safety must be in (0, 1], got {}", t.cfl_safety);
        let dt = match t.dt {
            Some(dt) => {
                ensure!(dt > 0.0, "time.dt must be positive, got {dt}");
                ensure!(
                    dt <= limit,
                    "time.dt = {dt:e} s is above the stability (CFL) limit {limit:e} s for radius {radius}, \
                     spacing {spacing:?} m and maximum velocity {vmax} m/s"
                );
                dt
            }
            None => limit * t.cfl_safety,
        };
        let mut warnings = Vec::new();
        let steps = match (t.steps, t.duration) {
            (Some(_), Some(_)) => bail!("time: give either `steps` or `duration`, not both"),
            (Some(n), None) => n,
            (None, Some(d)) => {
                ensure!(d > 0.0, "time.duration must be positive, got {d}");
                let n = (d / dt).ceil();
                ensure!(
                    n <= MAX_STEPS as f64,
                    "time.duration = {d:e} s at dt = {dt:e} s is {n:.3e} steps, more than the {MAX_STEPS:e} a run \
                     may take: shorten the duration or coarsen the grid (a larger spacing or a lower maximum \
                     velocity allows a larger dt)"
                );
                n as usize
            }
            (None, None) => bail!("time: give `steps` or `duration`"),
        };
        ensure!(steps > 0, "time.steps must be positive");
        ensure!(
            steps <= MAX_STEPS,
            "time.steps (or --steps) = {steps} is more than the {MAX_STEPS:e} steps a run may take"
        );
        let nrec = cfg.receiver_count()?;
        crate::resources::check_run_host_bytes(cfg, steps, nrec)?;
        if steps > MANY_STEPS {
            warnings.push(format!(
                "{steps} time steps (dt = {dt:.3e} s, limited by the CFL condition for vmax {vmax} m/s and spacing \
                 {spacing:?} m): this run will take long"
            ));
        }

        let src = &cfg.source;
        ensure!(src.frequency > 0.0, "source.frequency must be positive, got {}", src.frequency);
        let wavelet = Ricker::new(src.frequency, src.amplitude, src.delay);
        let (source, receivers, shot_warnings) = shot_geometry(cfg, dt, steps)?;
        warnings.extend(shot_warnings);

        let b = &cfg.boundary;
        let kind = match b.kind {
            config::BoundaryKind::Cpml => BoundaryKind::Cpml,
            config::BoundaryKind::Sponge => BoundaryKind::Sponge,
            config::BoundaryKind::None => BoundaryKind::None,
        };
        if kind != BoundaryKind::None {
            for a in 0..3 {
                ensure!(
                    b.width.saturating_mul(2) < shape[a],
                    "boundary.width = {} needs more than {} points along {} (grid.shape[{a}] = {})",
                    b.width,
                    b.width.saturating_mul(2),
                    ["x", "y", "z"][a],
                    shape[a]
                );
            }
        }
        let boundary = Boundary::new(kind, b.width, b.free_surface, shape, spacing, vmax, src.frequency, dt);

        let hmax = spacing.iter().cloned().fold(0.0, f64::max);
        let ppw = vmin / wavelet.max_frequency() / hmax;
        if ppw < MIN_POINTS_PER_WAVELENGTH {
            warnings.push(format!(
                "only {ppw:.1} grid points per minimum wavelength (vmin {vmin} m/s at {:.1} Hz, spacing {hmax} m): \
                 expect numerical dispersion below about {MIN_POINTS_PER_WAVELENGTH}",
                wavelet.max_frequency()
            ));
        }
        let precision = cfg.run.precision;
        Ok(Problem {
            layout,
            spacing,
            origin,
            stencil,
            dt,
            steps,
            vp,
            vp_first: first_plane,
            vp_range: range,
            boundary,
            source,
            receivers,
            warnings,
            precision,
        })
    }
}

/// The lowest and highest of the velocities `vp` (m/s; NaNs skipped): one parallel pass, as a
/// model of 288 M points takes seconds in one thread.
pub fn velocity_range(vp: &[f32]) -> [f32; 2] {
    // Sixteen running minima and maxima a chunk, so that the loop vectorises (one pair of them is a
    // chain of dependent comparisons); like f32::min and max, a NaN never wins.
    const LANES: usize = 16;
    let chunk_range = |c: &[f32]| {
        let (mut lo, mut hi) = ([f32::INFINITY; LANES], [0.0f32; LANES]);
        let mut lanes = c.chunks_exact(LANES);
        for v in &mut lanes {
            for k in 0..LANES {
                lo[k] = if v[k] < lo[k] { v[k] } else { lo[k] };
                hi[k] = if v[k] > hi[k] { v[k] } else { hi[k] };
            }
        }
        let fold = |[lo, hi]: [f32; 2], &v: &f32| [lo.min(v), hi.max(v)];
        let lanes_range = lo.iter().zip(&hi).fold([f32::INFINITY, 0.0f32], |[a, b], (&l, &h)| [a.min(l), b.max(h)]);
        lanes.remainder().iter().fold(lanes_range, fold)
    };
    vp.par_chunks(1 << 16).map(chunk_range).reduce(|| [f32::INFINITY, 0.0f32], |[a, b], [c, d]| [a.min(c), b.max(d)])
}

impl Problem {
    /// This problem for another shot of a survey: the source and receivers of `cfg` (same grid,
    /// model, time and boundary), everything else kept (the model is not copied). Returns the
    /// warnings the new positions raise.
    pub fn set_shot(&mut self, cfg: &Config) -> Result<Vec<String>> {
        ensure!(
            cfg.grid.shape == self.shape() && cfg.grid.spacing == self.spacing && cfg.grid.origin == self.origin,
            "a shot must use the survey's grid"
        );
        let (source, receivers, warnings) = shot_geometry(cfg, self.dt, self.steps)?;
        (self.source, self.receivers) = (source, receivers);
        Ok(warnings)
    }
}

/// Theoretical bytes of one stencil application on an f32 grid: the input with its face halos
/// (2R planes on each face, no edges or corners: a star stencil reads none) and the output; with
/// `leapfrog`, also p^{n-1} and c^2 dt^2 read once.
pub fn step_bytes(shape: [usize; 3], radius: usize, leapfrog: bool) -> u64 {
    let [nx, ny, nz] = shape.map(|n| n as u64);
    let r = radius as u64;
    let points = nx * ny * nz;
    let halo = 2 * r * (nx * ny + ny * nz + nx * nz);
    let fields = if leapfrog { 4 } else { 2 };
    4 * (fields * points + halo)
}

/// The f16 step's bytes (2 a value): p^n with its face halos, d^n and c^2 dt^2 read, d^{n+1} and
/// p^{n+1} written: five fields where the f32 leapfrog has four.
pub fn step_bytes_f16(shape: [usize; 3], radius: usize) -> u64 {
    (step_bytes(shape, radius, true) + 4 * shape.iter().map(|&n| n as u64).product::<u64>()) / 2
}

/// [`step_bytes`] of the leapfrog plus 16 bytes (psi and zeta, f32, each read and written once) for
/// every point of every axis's CPML layers of `cpml_width` points: two per axis, one along z under
/// a free surface. A point in a corner counts once per axis whose layer it lies in.
pub fn full_step_bytes(shape: [usize; 3], radius: usize, cpml_width: usize, free_surface: bool) -> u64 {
    let [nx, ny, nz] = shape.map(|n| n as u64);
    let w = cpml_width as u64;
    let faces = |axis: usize| if axis == 2 && free_surface { 1 } else { 2 };
    let layer_points: u64 = (0..3).map(|a| faces(a) * w * nx * ny * nz / [nx, ny, nz][a].max(1)).sum();
    step_bytes(shape, radius, true) + 16 * layer_points
}

fn receiver_positions(r: &config::ReceiverConfig, i: usize) -> Result<Vec<[f64; 3]>> {
    let given = r.position.is_some() as u8 + r.line.is_some() as u8 + r.grid.is_some() as u8;
    ensure!(given == 1, "receivers[{i}]: give exactly one of `position`, `line` or `grid`");
    if let Some(p) = r.position {
        return Ok(vec![p]);
    }
    if let Some(l) = &r.line {
        ensure!(l.count >= 1, "receivers[{i}].line.count must be at least 1");
        let n = l.count;
        return Ok((0..n)
            .map(|k| {
                let f = if n == 1 { 0.0 } else { k as f64 / (n - 1) as f64 };
                std::array::from_fn(|a| l.start[a] + f * (l.end[a] - l.start[a]))
            })
            .collect());
    }
    let g = r.grid.as_ref().expect("one of three");
    ensure!(g.count_a >= 1 && g.count_b >= 1 && g.count_c >= 1, "receivers[{i}].grid counts must be at least 1");
    let mut out = Vec::with_capacity(r.count()?);
    for k in 0..g.count_c {
        for j in 0..g.count_b {
            for a in 0..g.count_a {
                out.push(std::array::from_fn(|d| {
                    g.origin[d] + a as f64 * g.step_a[d] + j as f64 * g.step_b[d] + k as f64 * g.step_c[d]
                }));
            }
        }
    }
    Ok(out)
}

fn nearest(p: [f64; 3], origin: [f64; 3], spacing: [f64; 3], shape: [usize; 3]) -> [usize; 3] {
    std::array::from_fn(|a| (((p[a] - origin[a]) / spacing[a]).round().max(0.0) as usize).min(shape[a] - 1))
}

/// Trilinear weights of the (up to) 8 grid points around p; points of zero weight are dropped.
pub fn trilinear(p: [f64; 3], origin: [f64; 3], spacing: [f64; 3], shape: [usize; 3]) -> Vec<Tap> {
    let mut lo = [0usize; 3];
    let mut frac = [0.0f64; 3];
    for a in 0..3 {
        let u = ((p[a] - origin[a]) / spacing[a]).clamp(0.0, (shape[a] - 1) as f64);
        let i = (u.floor() as usize).min(shape[a].saturating_sub(2));
        lo[a] = i;
        frac[a] = if shape[a] == 1 { 0.0 } else { u - i as f64 };
    }
    let mut taps = Vec::with_capacity(8);
    for c in 0..8 {
        let mut point = lo;
        let mut weight = 1.0;
        for a in 0..3 {
            let up = (c >> a) & 1 == 1;
            if up {
                point[a] += 1;
            }
            weight *= if up { frac[a] } else { 1.0 - frac[a] };
        }
        if weight > 1e-12 {
            taps.push(Tap { point, weight });
        }
    }
    taps
}

/// The node index when `u` (grid units) sits on one, to within rounding of a position given in
/// metres.
fn on_node(u: f64) -> Option<f64> {
    let k = u.round();
    ((u - k).abs() < 1e-9).then_some(k)
}

/// Kaiser-windowed sinc weights (Hicks 2002) of the 2r points around p per axis, multiplied out
/// with x fastest. An axis on which p sits on a node contributes that node alone: the sinc is 1
/// there and 0 at every other node, so on-grid positions keep a single tap of weight 1.
pub fn sinc(
    p: [f64; 3],
    origin: [f64; 3],
    spacing: [f64; 3],
    shape: [usize; 3],
    r: usize,
    free_surface: bool,
) -> Vec<Tap> {
    let axes: [Vec<(usize, f64)>; 3] = std::array::from_fn(|a| {
        let u = ((p[a] - origin[a]) / spacing[a]).clamp(0.0, (shape[a] - 1) as f64);
        sinc_axis(u, r, shape[a], a == 2 && free_surface)
    });
    let mut taps = Vec::with_capacity(axes.iter().map(Vec::len).product());
    for &(iz, wz) in &axes[2] {
        for &(iy, wy) in &axes[1] {
            for &(ix, wx) in &axes[0] {
                taps.push(Tap { point: [ix, iy, iz], weight: wx * wy * wz });
            }
        }
    }
    taps
}

/// One axis of [`sinc`]: (index, weight) in increasing index order, within 0..n. With `mirror`,
/// index -k folds onto k with its sign flipped and index 0 is dropped (an odd field about 0).
fn sinc_axis(u: f64, r: usize, n: usize, mirror: bool) -> Vec<(usize, f64)> {
    let b = KAISER_B[r - 1];
    let r = r as i64;
    let raw: Vec<(i64, f64)> = match on_node(u) {
        Some(k) => vec![(k as i64, 1.0)],
        None => {
            let base = u.floor() as i64;
            (base - r + 1..=base + r)
                .map(|k| {
                    let x = k as f64 - u;
                    let s = (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x);
                    let arg = 1.0 - (x / r as f64).powi(2);
                    (k, s * bessel_i0(b * arg.max(0.0).sqrt()) / bessel_i0(b))
                })
                .collect()
        }
    };
    let mut folded = vec![0.0; (u.floor() as i64 + r + 1).clamp(1, n as i64) as usize];
    let mut used = vec![false; folded.len()];
    for (k, w) in raw {
        let (k, w) = if mirror && k < 0 { (-k, -w) } else { (k, w) };
        if (mirror && k == 0) || k < 0 || k as usize >= folded.len() {
            continue;
        }
        folded[k as usize] += w;
        used[k as usize] = true;
    }
    folded.into_iter().zip(used).enumerate().filter(|(_, (_, u))| *u).map(|(k, (w, _))| (k, w)).collect()
}

/// The modified Bessel function of the first kind, order 0, by its power series
/// sum ((x/2)^k / k!)^2; converges fast for the arguments here (x <= 15).
fn bessel_i0(x: f64) -> f64 {
    let q = 0.25 * x * x;
    let (mut term, mut sum, mut k) = (1.0, 1.0, 1.0);
    while term > 1e-17 * sum {
        term *= q / (k * k);
        sum += term;
        k += 1.0;
    }
    sum
}

/// The source and receivers of `cfg` (their taps on the grid, the source's samples at `dt` for
/// `steps` steps) and the warnings they raise: the part of a [`Problem`] that differs between the
/// shots of a survey.
pub fn shot_geometry(cfg: &Config, dt: f64, steps: usize) -> Result<(PointSource, Vec<Receiver>, Vec<String>)> {
    let (shape, spacing, origin) = (cfg.grid.shape, cfg.grid.spacing, cfg.grid.origin);
    let src = &cfg.source;
    ensure!(src.frequency > 0.0, "source.frequency must be positive, got {}", src.frequency);
    let wavelet = Ricker::new(src.frequency, src.amplitude, src.delay);
    let inside = |p: [f64; 3], key: &str| -> Result<()> {
        for a in 0..3 {
            let lo = origin[a];
            let hi = origin[a] + (shape[a] - 1) as f64 * spacing[a];
            ensure!(
                p[a] >= lo - 1e-9 * spacing[a] && p[a] <= hi + 1e-9 * spacing[a],
                "{key} = {p:?} m lies outside the grid ({} from {lo} to {hi} m)",
                ["x", "y", "z"][a]
            );
        }
        Ok(())
    };
    inside(src.position, "source.position")?;
    let free_surface = cfg.boundary.free_surface;
    let mut warnings = Vec::new();
    let injection = Positioning::from_config(src.injection, src.sinc_half_width, "source", "injection")?;
    let src_taps = injection.taps(src.position, origin, spacing, shape, free_surface);
    ensure!(
        !src_taps.is_empty(),
        "source.position = {:?} m lies on the free surface (z = {} m), where the pressure is held at zero: \
         move it below the surface",
        src.position,
        origin[2]
    );
    if injection.truncated(src.position, origin, spacing, shape, free_surface) {
        warnings.push(format!(
            "source.position = {:?} m is closer than sinc_half_width points to a grid face: its sinc weights \
             past the face are dropped",
            src.position
        ));
    }
    let cell = spacing[0] * spacing[1] * spacing[2];
    let samples = (0..steps).map(|n| wavelet.at(n as f64 * dt) / cell).collect();
    let source = PointSource { position: src.position, wavelet, injection, taps: src_taps, samples };

    let mut receivers = Vec::new();
    let mut truncated = 0;
    for (i, r) in cfg.receivers.iter().enumerate() {
        let key = format!("receivers[{i}]");
        let interpolation = Positioning::from_config(r.interpolation, r.sinc_half_width, &key, "interpolation")?;
        for p in receiver_positions(r, i)? {
            inside(p, &key)?;
            truncated += interpolation.truncated(p, origin, spacing, shape, free_surface) as usize;
            let taps = interpolation.taps(p, origin, spacing, shape, free_surface);
            receivers.push(Receiver { position: p, interpolation, taps });
        }
    }
    if truncated > 0 {
        warnings.push(format!(
            "{truncated} receiver(s) closer than sinc_half_width points to a grid face: their sinc weights past \
             the face are dropped"
        ));
    }
    Ok((source, receivers, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full step's bound counts each axis's layer points once per axis: 10 x 8 x 6 with layers
    /// of 2 has 192 x, 240 y and 320 z layer points (160 z under a free surface).
    #[test]
    fn full_step_bytes_add_the_memory_variables_of_each_layer() {
        let interior = step_bytes([10, 8, 6], 1, true);
        assert_eq!(full_step_bytes([10, 8, 6], 1, 0, false), interior);
        assert_eq!(full_step_bytes([10, 8, 6], 1, 2, false), interior + 16 * (192 + 240 + 320));
        assert_eq!(full_step_bytes([10, 8, 6], 1, 2, true), interior + 16 * (192 + 240 + 160));
    }

    #[test]
    fn trilinear_weights_sum_to_one_and_interpolate_linear_fields() {
        let shape = [10, 8, 6];
        let taps = trilinear([12.5, 7.0, 31.0], [0.0; 3], [5.0, 2.0, 10.0], shape);
        let s: f64 = taps.iter().map(|t| t.weight).sum();
        assert!((s - 1.0).abs() < 1e-12);
        let f = |p: [usize; 3]| 3.0 * p[0] as f64 * 5.0 - 2.0 * p[1] as f64 * 2.0 + p[2] as f64 * 10.0;
        let v: f64 = taps.iter().map(|t| t.weight * f(t.point)).sum();
        assert!((v - (3.0 * 12.5 - 2.0 * 7.0 + 31.0)).abs() < 1e-9);
        // On a grid point: one tap.
        assert_eq!(trilinear([10.0, 4.0, 20.0], [0.0; 3], [5.0, 2.0, 10.0], shape).len(), 1);
    }

    /// The vectorised chunks give what one fold of f32::min and max gives, NaNs skipped alike, on
    /// lengths that are not whole lanes or chunks.
    #[test]
    fn velocity_range_is_the_fold_of_min_and_max() {
        for n in [1, 15, 16, 17, 1000, (1 << 16) + 33, 3 * (1 << 16) - 1] {
            let mut vp: Vec<f32> = (0..n).map(|i| 1500.0 + ((i * 7919) % 4001) as f32 * 0.75).collect();
            vp[n / 2] = f32::NAN;
            vp[n - 1] = if n > 2 { 1234.5 } else { vp[n - 1] };
            let fold = vp.iter().fold([f32::INFINITY, 0.0f32], |[lo, hi], &v| [lo.min(v), hi.max(v)]);
            assert_eq!(velocity_range(&vp), fold, "n = {n}");
        }
    }

    /// c^2 dt^2 written into a padded field, whole or a few planes at a time, is the dense
    /// `vel2dt2` scattered, bit for bit, and nothing outside the interior is written.
    #[test]
    fn vel2dt2_into_a_field_is_the_dense_copy_scattered() {
        let text = "[grid]\nshape = [13, 7, 9]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                    vp = 1500.0\n[time]\nsteps = 5\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n\
                    [[receivers]]\nposition = [30.0, 30.0, 30.0]\n[stencil]\nradius = 3\n[boundary]\nkind = \"none\"";
        let vp: Vec<f32> = (0..13 * 7 * 9).map(|i| 1500.0 + ((i * 104_729) % 3001) as f32 * 0.37).collect();
        let problem = Problem::build(&Config::from_toml(text).unwrap(), vp).unwrap();
        let layout = Layout::new([13, 7, 9], 3).with_plane_padding(32);
        let mut want = vec![-1.0f32; layout.len()];
        let dense: Vec<f32> = problem.vel2dt2().into_iter().map(|v| v as f32).collect();
        layout.scatter(&dense, &mut want);
        let mut whole = vec![-1.0f32; layout.len()];
        problem.vel2dt2_into(&layout, &mut whole, |v| v as f32);
        assert_eq!(whole, want);
        let mut chunked = vec![-1.0f32; layout.len()];
        for first in (0..9).step_by(4) {
            let planes = 4.min(9 - first);
            let at = (layout.halo + first) * layout.plane;
            problem.vel2dt2_planes_into(&layout, first, &mut chunked[at..at + planes * layout.plane], |v| v as f32);
        }
        assert_eq!(chunked, want);
    }

    const SHAPE: [usize; 3] = [40, 40, 40];

    fn sinc4(p: [f64; 3], free_surface: bool) -> Vec<Tap> {
        Positioning::Sinc { half_width: 4 }.taps(p, [0.0; 3], [10.0; 3], SHAPE, free_surface)
    }

    #[test]
    fn sinc_on_a_grid_point_is_one_tap_of_weight_one() {
        assert_eq!(sinc4([200.0, 130.0, 70.0], false), vec![Tap { point: [20, 13, 7], weight: 1.0 }]);
        // On a node along x and z only: the 8 y weights alone.
        let taps = sinc4([200.0, 133.0, 70.0], false);
        assert_eq!(taps.len(), 8);
        assert!(taps.iter().all(|t| t.point[0] == 20 && t.point[2] == 7));
    }

    #[test]
    fn sinc_taps_are_distinct_x_fastest_and_interpolate_band_limited_fields() {
        let p = [203.7, 131.2, 75.5];
        let taps = sinc4(p, false);
        assert_eq!(taps.len(), 512);
        let order = |t: &Tap| (t.point[2], t.point[1], t.point[0]);
        assert!(taps.windows(2).all(|w| order(&w[0]) < order(&w[1])), "sorted, x fastest, distinct");
        // A plane wave at 8 points per wavelength, oblique: Hicks' kmax = pi/2 weights reproduce
        // it to about 1e-3 (trilinear: cos(k h / 2) per axis, a few per cent).
        let k = [0.6, 0.4, 0.5].map(|c: f64| c * 2.0 * std::f64::consts::PI / 80.0 / (0.77f64).sqrt());
        let field = |x: [f64; 3]| (k[0] * x[0] + k[1] * x[1] + k[2] * x[2] + 0.3).cos();
        let at = |taps: &[Tap]| taps.iter().map(|t| t.weight * field(t.point.map(|i| i as f64 * 10.0))).sum::<f64>();
        let exact = field(p);
        let err = (at(&taps) - exact).abs();
        let tri = (at(&trilinear(p, [0.0; 3], [10.0; 3], SHAPE)) - exact).abs();
        assert!(err < 1e-3 && err < tri / 10.0, "sinc error {err:e}, trilinear {tri:e}");
        let sum: f64 = taps.iter().map(|t| t.weight).sum();
        assert!((sum - 1.0).abs() < 2e-3, "weights sum to {sum}");
    }

    #[test]
    fn sinc_near_the_free_surface_mirrors_with_opposite_sign() {
        // 1.3 points below the surface: 4 of the 8 z weights fall at or above z = 0.
        let p = [203.7, 131.2, 13.0];
        let taps = sinc4(p, true);
        assert!(taps.iter().all(|t| t.point[2] >= 1), "nothing on or above the surface");
        let zs: std::collections::BTreeSet<usize> = taps.iter().map(|t| t.point[2]).collect();
        assert_eq!(zs.into_iter().collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
        // A field odd about z = 0, as the free surface makes it, is interpolated as in open space.
        let k = 2.0 * std::f64::consts::PI / 80.0;
        let field = |x: [f64; 3]| (k * x[2]).sin() * (0.5 * k * x[0]).cos();
        let v: f64 = taps.iter().map(|t| t.weight * field(t.point.map(|i| i as f64 * 10.0))).sum();
        assert!((v - field(p)).abs() < 1e-3, "{v} vs {}", field(p));
        // On the surface itself the pressure is zero: no taps.
        assert!(sinc4([203.7, 131.2, 0.0], true).is_empty());
    }

    #[test]
    fn sinc_is_truncated_at_other_faces_and_reports_it() {
        let s = Positioning::Sinc { half_width: 4 };
        let p = [15.0, 200.0, 200.0];
        let taps = s.taps(p, [0.0; 3], [10.0; 3], SHAPE, false);
        assert_eq!(taps.len(), 6, "x nodes -2..=5, the two below 0 dropped");
        assert!(s.truncated(p, [0.0; 3], [10.0; 3], SHAPE, false));
        assert!(!s.truncated([200.5, 200.0, 13.0], [0.0; 3], [10.0; 3], SHAPE, true));
        assert!(s.truncated([200.5, 200.0, 13.0], [0.0; 3], [10.0; 3], SHAPE, false));
    }

    #[test]
    fn sinc_half_width_is_checked_and_only_for_sinc() {
        let e = Positioning::from_config(Injection::Sinc, Some(11), "source", "injection").unwrap_err();
        assert!(e.to_string().contains("source.sinc_half_width must be in 1..=10"), "{e}");
        let e = Positioning::from_config(Injection::Trilinear, Some(4), "receivers[1]", "interpolation").unwrap_err();
        assert!(e.to_string().contains("receivers[1].sinc_half_width applies only to interpolation"), "{e}");
        assert_eq!(
            Positioning::from_config(Injection::Sinc, None, "source", "injection").unwrap(),
            Positioning::Sinc { half_width: 4 }
        );
    }

    #[test]
    fn bessel_i0_matches_tabulated_values() {
        // Abramowitz and Stegun, Table 9.8: I0(1) = 1.266065878, I0(5) = 27.23987182.
        assert!((bessel_i0(1.0) - 1.266065878).abs() < 1e-9);
        assert!((bessel_i0(5.0) - 27.23987182).abs() < 1e-7);
        assert_eq!(bessel_i0(0.0), 1.0);
    }
}
