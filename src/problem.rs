//! A run, discretised: everything a backend needs, computed once on the host.
//!
//! Backends never look at the configuration. They get the padded layout, the stencil, dt, the
//! velocity, the boundary profiles, the source taps and wavelet samples, and the receiver taps, and
//! each applies them in the same order every step (see `backend::Backend::step`).

use crate::boundary::{Boundary, BoundaryKind};
use crate::config::{self, Config, Injection};
use crate::grid::Layout;
use crate::numerics::{Ricker, Stencil, stencil::MAX_RADIUS};
use anyhow::{Result, bail, ensure};

/// One grid point and its weight in an interpolation or a spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tap {
    pub point: [usize; 3],
    pub weight: f64,
}

/// A point source: where it injects and what it injects each step.
#[derive(Clone, Debug, PartialEq)]
pub struct PointSource {
    pub position: [f64; 3],
    pub wavelet: Ricker,
    /// Spread of the delta function over grid points (weights sum to 1).
    pub taps: Vec<Tap>,
    /// Sample n is s(n dt) / (dx dy dz): the discrete delta is folded in.
    pub samples: Vec<f64>,
}

/// A pressure receiver sampled by trilinear interpolation.
#[derive(Clone, Debug, PartialEq)]
pub struct Receiver {
    pub position: [f64; 3],
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
    /// Velocity, dense (nz, ny, nx), m/s.
    pub vp: Vec<f32>,
    pub boundary: Boundary,
    pub source: PointSource,
    pub receivers: Vec<Receiver>,
    /// Things the user should know (dispersion, ...); the CLI prints them.
    pub warnings: Vec<String>,
}

/// Points per minimum wavelength under which numerical dispersion shows.
pub const MIN_POINTS_PER_WAVELENGTH: f64 = 5.0;

/// Most time steps a run may take (about a day at a million points per step on a CPU, a week of
/// the largest GPU grids): beyond it the input is almost certainly wrong.
pub const MAX_STEPS: usize = 100_000_000;
/// Step counts above this are said in a warning.
pub const MANY_STEPS: usize = 100_000;

impl Problem {
    pub fn shape(&self) -> [usize; 3] {
        [self.layout.nx, self.layout.ny, self.layout.nz]
    }

    pub fn vmax(&self) -> f64 {
        self.vp.iter().fold(0.0f32, |a, &b| a.max(b)) as f64
    }

    pub fn vmin(&self) -> f64 {
        self.vp.iter().fold(f32::INFINITY, |a, &b| a.min(b)) as f64
    }

    /// The exact CFL limit of this discretisation.
    pub fn dt_limit(&self) -> f64 {
        self.stencil.cfl_limit(self.spacing, self.vmax())
    }

    /// Theoretical bytes one time step must move (the seeds' effective-bandwidth numerator): p^n
    /// read once with the stencil's face halos, p^{n-1} and c^2 dt^2 read once, p^{n+1} written
    /// once; f32. Boundary-layer work is not counted, so GB/s computed from it is a lower bound.
    pub fn step_bytes(&self) -> u64 {
        step_bytes(self.shape(), self.stencil.radius, true)
    }

    /// Estimated device memory (bytes) of a run, before anything is allocated there: three padded
    /// f32 fields (p^n, p^{n-1}, c^2 dt^2), the CPML memory variables (psi and zeta, one slab per
    /// axis), the boundary profiles, the receiver traces (nreceivers x steps f32), the source
    /// samples and the tap tables. Backends compare it with the memory free on the device.
    pub fn device_bytes(&self) -> u64 {
        let f32s = 4u64;
        let fields = 3 * self.layout.len() as u64 * f32s;
        let slabs: u64 = self.boundary.slabs(self.shape()).iter().map(|s| 2 * s.len() as u64 * f32s).sum();
        let profiles: u64 = self.shape().iter().map(|&n| 3 * n as u64 * f32s).sum();
        let traces = (self.receivers.len() * self.steps) as u64 * f32s;
        let source = self.steps as u64 * f32s;
        let taps: u64 =
            (self.source.taps.len() + self.receivers.iter().map(|r| r.taps.len()).sum::<usize>()) as u64 * 16;
        fields + slabs + profiles + traces + source + taps
    }

    /// Errors when [`device_bytes`](Self::device_bytes) exceeds `available` bytes on `device`,
    /// naming the grid, the need and the limit.
    pub fn check_fits(&self, available: u64, device: &str) -> Result<()> {
        let need = self.device_bytes();
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        ensure!(
            need <= available,
            "grid.shape = {:?} (stencil.radius {}, {} receivers x {} steps) needs about {:.2} GiB on {device}, \
             which has {:.2} GiB available: reduce grid.shape, the receivers or the duration",
            self.shape(),
            self.stencil.radius,
            self.receivers.len(),
            self.steps,
            gib(need),
            gib(available)
        );
        Ok(())
    }

    /// c^2 dt^2 per point, dense (nz, ny, nx): the factor of the Laplacian in the update.
    pub fn vel2dt2(&self) -> Vec<f64> {
        let dt2 = self.dt * self.dt;
        self.vp.iter().map(|&v| (v as f64) * (v as f64) * dt2).collect()
    }

    /// Position (m) of grid point (ix, iy, iz).
    pub fn coordinate(&self, p: [usize; 3]) -> [f64; 3] {
        std::array::from_fn(|a| self.origin[a] + p[a] as f64 * self.spacing[a])
    }

    /// Builds the discrete problem from a parsed configuration and the velocity already sampled on
    /// the grid (dense, (nz, ny, nx), m/s). Every error names the configuration key at fault.
    pub fn build(cfg: &Config, vp: Vec<f32>) -> Result<Problem> {
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
        ensure!(
            vp.len() == shape.iter().product::<usize>(),
            "model: {} velocities for a grid of {} points",
            vp.len(),
            shape.iter().product::<usize>()
        );
        let max_v = crate::config::MAX_VELOCITY;
        if let Some(bad) = vp.iter().find(|v| !v.is_finite() || **v <= 0.0 || **v as f64 > max_v) {
            bail!("model: velocities must be finite, positive and at most {max_v:e} m/s, found {bad:e}");
        }
        let stencil = Stencil::new(radius);
        let layout = Layout::new(shape, radius);
        let vmax = vp.iter().fold(0.0f32, |a, &b| a.max(b)) as f64;
        let vmin = vp.iter().fold(f32::INFINITY, |a, &b| a.min(b)) as f64;

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
        crate::solver::check_run_host_bytes(cfg, steps, nrec)?;
        if steps > MANY_STEPS {
            warnings.push(format!(
                "{steps} time steps (dt = {dt:.3e} s, limited by the CFL condition for vmax {vmax} m/s and spacing \
                 {spacing:?} m): this run will take long"
            ));
        }

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
        let src_taps = match src.injection {
            Injection::Trilinear => trilinear(src.position, origin, spacing, shape),
            Injection::Nearest => vec![Tap { point: nearest(src.position, origin, spacing, shape), weight: 1.0 }],
        };
        let cell = spacing[0] * spacing[1] * spacing[2];
        let samples = (0..steps).map(|n| wavelet.at(n as f64 * dt) / cell).collect();
        let source = PointSource { position: src.position, wavelet, taps: src_taps, samples };

        let mut receivers = Vec::new();
        for (i, r) in cfg.receivers.iter().enumerate() {
            for p in receiver_positions(r, i)? {
                inside(p, &format!("receivers[{i}]"))?;
                receivers.push(Receiver { position: p, taps: trilinear(p, origin, spacing, shape) });
            }
        }

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
        Ok(Problem { layout, spacing, origin, stencil, dt, steps, vp, boundary, source, receivers, warnings })
    }
}

/// Host memory available for a CPU run (Linux `MemAvailable`), in bytes; None where unknown.
pub fn host_memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
