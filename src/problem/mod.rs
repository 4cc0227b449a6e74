//! A run, discretised: everything a backend needs, computed once on the host.
//!
//! Backends never look at the configuration. They get the padded layout, the stencil, dt, the
//! velocity, the boundary profiles, the source taps and wavelet samples, and the receiver taps, and
//! each applies them in the same order every step (see `backend::Backend::step`).
//!
//! The problem's grid is the run grid ([`Config::run_grid`]): the grid of `[grid]`, and the
//! absorbing layers where they lie outside the model; positions keep the model's coordinates.
//!
//! This module owns the [`Problem`] and what it holds per step; `build` makes one from the
//! configuration (every check of its values), `density` holds a variable density and the factors
//! made from it, `positioning` puts points between grid nodes on the grid (nearest, trilinear,
//! windowed sinc) and `shot` places the source and receivers.

mod build;
mod density;
mod positioning;
mod shot;

pub use density::Density;
pub use positioning::{DEFAULT_SINC_HALF_WIDTH, MAX_SINC_HALF_WIDTH, Positioning, Tap, sinc, trilinear};
pub use shot::{PointSource, Receiver, SourceInjection, shot_geometry};

use crate::boundary::{Boundary, cpml_step_bytes};
use crate::config::{Config, Precision};
use crate::grid::Layout;
use crate::numerics::{Ricker, Stencil};
use anyhow::{Result, ensure};
use rayon::prelude::*;

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
    /// The shot's sources (at least one; [`Problem::source`] is the first).
    pub sources: Vec<PointSource>,
    pub receivers: Vec<Receiver>,
    /// Things the user should know (dispersion, ...); the CLI prints them.
    pub warnings: Vec<String>,
    /// Storage of the wavefields and c^2 dt^2 (`run.precision`).
    pub precision: Precision,
    /// The density where it varies; None for a constant density (the constant-density equation).
    pub density: Option<Density>,
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
            sources: vec![PointSource {
                position: [0.0; 3],
                wavelet: Ricker::new(10.0, 1.0, None).into(),
                injection: Positioning::Nearest,
                taps: vec![],
                samples: vec![],
            }],
            receivers: vec![],
            warnings: vec![],
            precision: Precision::F32,
            density: None,
        }
    }

    pub fn shape(&self) -> [usize; 3] {
        [self.layout.nx, self.layout.ny, self.layout.nz]
    }

    /// Whether this is a 2D problem (x and z; [`Layout::planar`]).
    pub fn is_2d(&self) -> bool {
        self.layout.is_planar()
    }

    /// The spacing of the axes the operator differentiates along: x, y and z, or x and z in 2D.
    pub fn operator_spacing(&self) -> Vec<f64> {
        operator_spacing(self.spacing, self.is_2d())
    }

    pub fn vmax(&self) -> f64 {
        self.vp_range[1] as f64
    }

    pub fn vmin(&self) -> f64 {
        self.vp_range[0] as f64
    }

    /// Whether `position` (m, in the grid's coordinates) lies in an absorbing layer, where a
    /// source or receiver is damped with the wavefield ([`Boundary::absorbs_at`]).
    pub fn in_absorbing_layer(&self, position: [f64; 3]) -> bool {
        self.boundary.absorbs_at(std::array::from_fn(|a| (position[a] - self.origin[a]) / self.spacing[a]))
    }

    /// Warnings naming the source and the receivers that lie in an absorbing layer (none when
    /// all are outside the layers): what they record or emit there is damped.
    pub fn absorbing_layer_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let width = self.boundary.width;
        let thick = |a: usize| width as f64 * self.spacing[a];
        let layer = format!("{width} points ({} m along x)", thick(0));
        for (k, source) in self.sources.iter().enumerate() {
            if self.in_absorbing_layer(source.position) {
                let which = if self.sources.len() > 1 { format!("source {k}") } else { "the source".into() };
                out.push(format!(
                    "{which} at {:?} m lies in the absorbing layer of {layer}: its wavefield is damped at once \
                     (move it inward, or narrow boundary.width)",
                    source.position
                ));
            }
        }
        let inside: Vec<usize> =
            (0..self.receivers.len()).filter(|&i| self.in_absorbing_layer(self.receivers[i].position)).collect();
        if !inside.is_empty() {
            const LISTED: usize = 10;
            let list: Vec<String> =
                inside.iter().take(LISTED).map(|&i| format!("{i} at {:?} m", self.receivers[i].position)).collect();
            let more =
                if inside.len() > LISTED { format!(" and {} more", inside.len() - LISTED) } else { String::new() };
            out.push(format!(
                "{} of {} receivers lie in the absorbing layer of {layer}, where the wavefield is damped: \
                 receiver {}{more} (counted from 0 in input order)",
                inside.len(),
                self.receivers.len(),
                list.join(", receiver ")
            ));
        }
        out
    }

    /// The exact CFL limit of this discretisation.
    pub fn dt_limit(&self) -> f64 {
        let density = self.density.as_ref().map_or(1.0, |d| d.cfl_factor().sqrt());
        self.stencil.cfl_limit_over(&self.operator_spacing(), self.vmax() * density)
    }

    /// Theoretical bytes one time step must move (the seeds' effective-bandwidth numerator): p^n
    /// read once with the stencil's face halos, p^{n-1} and c^2 dt^2 read once, p^{n+1} written
    /// once; f32; with a variable density, the buoyancy read once too. In f16 (2 bytes a value)
    /// the second time level is the increment d^n, read and written, besides p^{n+1}: five fields
    /// instead of four. Boundary-layer work is not counted, so GB/s computed from it is a lower
    /// bound.
    /// A 2D grid's step ([`step_bytes_2d`]) has no y halo.
    pub fn step_bytes(&self) -> u64 {
        if self.is_2d() {
            return step_bytes_2d([self.layout.nx, self.layout.nz], self.stencil.radius, self.variable_density());
        }
        let f32_bytes = step_bytes_with(self.shape(), self.stencil.radius, true, self.variable_density());
        match self.precision {
            Precision::F32 => f32_bytes,
            Precision::F16 => step_bytes_f16(self.shape(), self.stencil.radius),
        }
    }

    /// The bytes a full step must move at the least: [`step_bytes`](Self::step_bytes) plus what
    /// the boundary adds ([`Boundary::step_bytes`]: for CPML, each layer point's two memory
    /// variables per axis, psi and zeta, f32 in either precision). Sources, receivers and the free
    /// surface are not counted.
    pub fn full_step_bytes(&self) -> u64 {
        self.step_bytes() + self.boundary.step_bytes(self.shape())
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
        let peak = self.source_injection().peak(|p| self.stiffness_at(p));
        if peak > 0.0 && peak.is_finite() { (-peak.log2().round()).exp2() } else { 1.0 }
    }

    /// c^2 dt^2 per point of `vp`, dense: the factor of the Laplacian in the update for a constant
    /// density (the stiffness, [`Problem::stiffness`], for any).
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
}

/// The spacing of the axes a grid's operator differentiates along: all three, or x and z only on
/// a 2D grid (whose dy is no derivative's).
pub fn operator_spacing(spacing: [f64; 3], two_d: bool) -> Vec<f64> {
    if two_d { vec![spacing[0], spacing[2]] } else { spacing.to_vec() }
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
        let grid = cfg.run_grid();
        ensure!(
            grid.shape == self.shape() && grid.spacing == self.spacing && grid.origin == self.origin,
            "a shot must use the survey's grid"
        );
        let (sources, receivers, warnings) = shot_geometry(cfg, self.dt, self.steps)?;
        (self.sources, self.receivers) = (sources, receivers);
        Ok(warnings)
    }
}

/// Theoretical bytes of one stencil application on an f32 grid: the input with its face halos
/// (2R planes on each face, no edges or corners: a star stencil reads none) and the output; with
/// `leapfrog`, also p^{n-1} and c^2 dt^2 read once.
pub fn step_bytes(shape: [usize; 3], radius: usize, leapfrog: bool) -> u64 {
    step_bytes_with(shape, radius, leapfrog, false)
}

/// [`step_bytes`], with `variable_density` the buoyancy field read once too (its face halos come
/// from the same cache lines as the interior's neighbours and are not counted).
pub fn step_bytes_with(shape: [usize; 3], radius: usize, leapfrog: bool, variable_density: bool) -> u64 {
    let [nx, ny, nz] = shape.map(|n| n as u64);
    let r = radius as u64;
    let points = nx * ny * nz;
    let halo = 2 * r * (nx * ny + ny * nz + nx * nz);
    let fields = if leapfrog { 4 } else { 2 } + variable_density as u64;
    4 * (fields * points + halo)
}

/// The bytes of one f32 leapfrog step on a 2D grid of `[nx, nz]` points: p^n read with its x and z
/// face halos (R columns and R rows each side), p^{n-1} and the stiffness read, p^{n+1} written
/// (16 bytes a point), the buoyancy read too with a variable density.
pub fn step_bytes_2d([nx, nz]: [usize; 2], radius: usize, variable_density: bool) -> u64 {
    let (nx, nz, r) = (nx as u64, nz as u64, radius as u64);
    let fields = 4 + variable_density as u64;
    4 * (fields * nx * nz + 2 * r * (nx + nz))
}

/// The f16 step's bytes (2 a value): p^n with its face halos, d^n and c^2 dt^2 read, d^{n+1} and
/// p^{n+1} written: five fields where the f32 leapfrog has four.
pub fn step_bytes_f16(shape: [usize; 3], radius: usize) -> u64 {
    (step_bytes(shape, radius, true) + 4 * shape.iter().map(|&n| n as u64).product::<u64>()) / 2
}

/// [`step_bytes`] of the leapfrog plus the CPML memory variables' bytes of layers of
/// `cpml_width` points ([`cpml_step_bytes`]).
pub fn full_step_bytes(shape: [usize; 3], radius: usize, cpml_width: usize, free_surface: bool) -> u64 {
    full_step_bytes_with(shape, radius, cpml_width, free_surface, false)
}

/// [`full_step_bytes`], with `variable_density` the buoyancy read too ([`step_bytes_with`]).
pub fn full_step_bytes_with(
    shape: [usize; 3],
    radius: usize,
    cpml_width: usize,
    free_surface: bool,
    variable_density: bool,
) -> u64 {
    step_bytes_with(shape, radius, true, variable_density) + cpml_step_bytes(shape, cpml_width, free_surface)
}

#[cfg(test)]
mod density_tests;
#[cfg(test)]
mod tests;
