//! [`Problem::build`]: the discrete problem from a parsed configuration and the sampled velocity
//! (and density), every value checked and every error naming the key at fault.

use super::{Density, MANY_STEPS, MAX_STEPS, MIN_POINTS_PER_WAVELENGTH, Problem, shot_geometry, velocity_range};
use crate::boundary::{Boundary, BoundaryKind};
use crate::config::Config;
use crate::grid::Layout;
use crate::numerics::{Stencil, stencil::MAX_RADIUS};
use anyhow::{Result, bail, ensure};
use rayon::prelude::*;
use std::ops::Range;

impl Problem {
    /// Builds the discrete problem from a parsed configuration and the velocity already sampled on
    /// the grid of `[grid]` (dense, (nz, ny, nx), m/s; [`crate::model::sample`]), the density made
    /// from the configuration where it needs no file (constant, Gardner's relation, layers; a
    /// density file is read by [`crate::model::sample`], whose model [`Problem::build_with_density`]
    /// takes). With the absorbing layers outside the model the problem's grid is the run grid
    /// ([`Config::run_grid`]), the model's edge values extended into the layers. Every error
    /// names the configuration key at fault.
    pub fn build(cfg: &Config, vp: Vec<f32>) -> Result<Problem> {
        let planes = 0..cfg.grid.shape[2];
        let rho = crate::model::density::sample_density_planes(cfg, None, planes, &vp, &mut Vec::new())?;
        Self::build_with_density(cfg, vp, rho)
    }

    /// [`Problem::build`] with the density `rho` (kg/m^3, on the points of `vp`; None for a
    /// constant density) as [`crate::model::sample`] gives it. A density the same everywhere takes
    /// the constant-density path.
    pub fn build_with_density(cfg: &Config, vp: Vec<f32>, rho: Option<Vec<f32>>) -> Result<Problem> {
        let range = velocity_range(&vp);
        if let Some(rho) = &rho {
            ensure!(rho.len() == vp.len(), "model: {} densities for {} velocities", rho.len(), vp.len());
        }
        let region = cfg.model_region();
        let (vp, rho) = if region.is_whole() {
            (vp, rho)
        } else {
            cfg.check_values()?;
            let points = cfg.grid.points()?;
            ensure!(vp.len() == points, "model: {} velocities for a grid of {points} points", vp.len());
            let run_grid = cfg.run_grid();
            let planes = 0..run_grid.shape[2];
            let extend = |v: &[f32]| crate::model::extend::extend_edges(&region, &run_grid, v, 0, planes.clone());
            let rho = match rho {
                Some(rho) => Some(extend(&rho)?),
                None => None,
            };
            (extend(&vp)?, rho)
        };
        let density = rho.and_then(|rho| {
            let [lo, hi] = crate::model::density::density_range(&rho);
            // Uniform: the constant-density path (a NaN, never uniform, is refused in build_planes).
            (lo != hi || rho.iter().any(|r| r.is_nan())).then_some(Density { rho, first: 0, rho_ref: lo, rho_max: hi })
        });
        Self::build_planes(cfg, vp, None, range, density)
    }

    /// [`Problem::build`] from z-planes `first_plane..` of the run grid only (`vp`, dense
    /// (planes, ny, nx), as [`crate::model::sample_run_planes`] samples them), `range` the lowest
    /// and highest velocity of the whole model (the time step and the boundary come from it):
    /// one rank's part of a decomposed run, which never holds the whole model. The same problem
    /// as the whole model's, restricted to those planes. `density`: the part's density (its
    /// planes those of `vp` and up to R more each side, its `rho_ref` the whole model's lowest),
    /// None for a constant one.
    pub fn build_part(
        cfg: &Config,
        vp: Vec<f32>,
        first_plane: usize,
        range: [f32; 2],
        density: Option<Density>,
    ) -> Result<Problem> {
        Self::build_planes(cfg, vp, Some(first_plane), range, density)
    }

    /// `part`: the first z-plane of `vp`, or None for the whole model.
    fn build_planes(
        cfg: &Config,
        vp: Vec<f32>,
        part: Option<usize>,
        range: [f32; 2],
        density: Option<Density>,
    ) -> Result<Problem> {
        cfg.check_values()?;
        let run_grid = cfg.run_grid();
        let (shape, spacing, origin) = (run_grid.shape, run_grid.spacing, run_grid.origin);
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
        let (min_v, max_v) = (crate::config::MIN_VELOCITY, crate::config::MAX_VELOCITY);
        // NaN fails both comparisons; a chunk is searched only where its branch-free scan found one.
        let bad = |v: f32| !(v as f64 >= min_v && v as f64 <= max_v);
        let first_bad = vp.par_chunks(1 << 16).find_map_first(|c| {
            let any = c.iter().fold(false, |any, &v| any | bad(v));
            any.then(|| c.iter().find(|&&v| bad(v))).flatten()
        });
        if let Some(bad) = first_bad {
            bail!("model: velocities must be finite and from {min_v:e} to {max_v:e} m/s, found {bad:e}");
        }
        // The one velocity range of every model kind: a sampled model's lowest and highest values.
        cfg.check_velocity_units("model (its lowest velocity)", range[0] as f64)?;
        cfg.check_velocity_units("model (its highest velocity)", range[1] as f64)?;
        if let Some(d) = &density {
            check_density(cfg, d, first_plane..first_plane + vp.len() / plane.max(1), plane, shape[2], radius)?;
        }
        let stencil = Stencil::new(radius);
        let two_d = cfg.grid.is_2d();
        let layout = if two_d { Layout::planar(shape[0], shape[2], radius) } else { Layout::new(shape, radius) };
        let [vmin, vmax] = range.map(|v| v as f64);

        // A variable density raises the operator's spectral radius ([`Density::cfl_factor`]).
        let cfl_velocity = vmax * density.as_ref().map_or(1.0, |d| d.cfl_factor().sqrt());
        let limit = stencil.cfl_limit_over(&super::operator_spacing(spacing, two_d), cfl_velocity);
        let t = &cfg.time;
        ensure!(t.cfl_safety > 0.0 && t.cfl_safety <= 1.0, "time.cfl_safety must be in (0, 1], got {}", t.cfl_safety);
        let dt = match t.dt {
            Some(dt) => {
                ensure!(dt > 0.0, "time.dt must be positive, got {dt}");
                ensure!(
                    dt <= limit,
                    "time.dt = {dt:e} s is above the stability (CFL) limit {limit:e} s for radius {radius}, \
                     spacing {spacing:?} m and maximum velocity {vmax} m/s{}",
                    density.as_ref().map_or(String::new(), |d| format!(
                        " with densities from {} to {} kg/m3 (the limit of {:.4} times that velocity)",
                        d.rho_ref,
                        d.rho_max,
                        d.cfl_factor().sqrt()
                    ))
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

        let (sources, receivers, shot_warnings) = shot_geometry(cfg, dt, steps)?;
        warnings.extend(shot_warnings);

        let b = &cfg.boundary;
        let (kind, width) = (b.kind, cfg.boundary_width());
        if kind != BoundaryKind::None {
            // A 2D grid's one row along y has no layers.
            for a in (0..3).filter(|&a| !(two_d && a == 1)) {
                ensure!(
                    width.saturating_mul(2) < shape[a],
                    "boundary.width = {} needs more than {} points along {} (grid.shape[{a}] = {})",
                    width,
                    width.saturating_mul(2),
                    ["x", "y", "z"][a],
                    shape[a]
                );
            }
        }
        // The CPML's frequency shift from the first source's peak frequency; dispersion from the
        // highest frequency of any source.
        let peak_frequency = sources[0].wavelet.frequency();
        let boundary = Boundary::new(kind, width, b.free_surface, shape, spacing, vmax, peak_frequency, dt);
        let boundary = if two_d { boundary.without_y_layers() } else { boundary };

        let hmax = super::operator_spacing(spacing, two_d).into_iter().fold(0.0, f64::max);
        let max_frequency = sources.iter().map(|s| s.wavelet.max_frequency()).fold(0.0, f64::max);
        let ppw = vmin / max_frequency / hmax;
        if ppw < MIN_POINTS_PER_WAVELENGTH {
            warnings.push(format!(
                "only {ppw:.1} grid points per minimum wavelength (vmin {vmin} m/s at {:.1} Hz, spacing {hmax} m): \
                 expect numerical dispersion below about {MIN_POINTS_PER_WAVELENGTH}",
                max_frequency
            ));
        }
        let precision = cfg.run.precision;
        let mut problem = Problem {
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
            sources,
            receivers,
            warnings,
            precision,
            density,
        };
        let layer_warnings = problem.absorbing_layer_warnings();
        problem.warnings.extend(layer_warnings);
        Ok(problem)
    }
}

/// A variable density's checks: every value finite and in range (the lowest and highest also in
/// the usual range unless `[run] check_units = false`), `rho_ref` no higher than any, and its
/// planes covering the velocity's `held` and the R planes beyond each side that the grid has.
fn check_density(cfg: &Config, d: &Density, held: Range<usize>, plane: usize, nz: usize, radius: usize) -> Result<()> {
    let (lo, hi) = (crate::config::MIN_DENSITY, crate::config::MAX_DENSITY);
    let bad = |v: f32| !(v as f64 >= lo && v as f64 <= hi);
    let first_bad = d.rho.par_chunks(1 << 16).find_map_first(|c| {
        let any = c.iter().fold(false, |any, &v| any | bad(v));
        any.then(|| c.iter().find(|&&v| bad(v))).flatten()
    });
    if let Some(bad) = first_bad {
        bail!("model.density: densities must be finite and from {lo:e} to {hi:e} kg/m3, found {bad:e}");
    }
    let [min, max] = crate::model::density::density_range(&d.rho);
    ensure!(
        d.rho_ref > 0.0 && d.rho_ref <= min && d.rho_max >= max,
        "model.density: the whole model's densities {} to {} do not hold this part's {min} to {max}",
        d.rho_ref,
        d.rho_max
    );
    if cfg.run.check_units {
        crate::config::check_density("model.density (its lowest value)", min as f64, true)?;
        crate::config::check_density("model.density (its highest value)", max as f64, true)?;
    }
    let covered = d.planes(plane);
    let needed = held.start.saturating_sub(radius)..(held.end + radius).min(nz);
    ensure!(
        d.rho.len().is_multiple_of(plane.max(1)) && covered.start <= needed.start && needed.end <= covered.end,
        "model.density: z-planes {covered:?} for a part needing {needed:?}"
    );
    Ok(())
}
