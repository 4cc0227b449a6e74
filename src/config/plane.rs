//! 2D inputs: a grid of one point along y ([`GridConfig::is_2d`](super::GridConfig::is_2d)) takes
//! its positions as [x, z]; this resolves the two-element form once the whole input is read.
//!
//! Positions are parsed before the grid is known to be 2D, so a two-element position is read with
//! the marker [`PLANE_Y`] for y. On a 2D grid the marker becomes the grid's y (its origin's, the
//! only y it has) and a step's y becomes 0; a three-element position keeps its y (it must be the
//! grid's, as any position must lie in the grid). On a 3D grid a two-element position is an error
//! that names its key.

use super::values::PLANE_Y;
use super::{Config, DensityConfig, ModelConfig, Precision};
use anyhow::{Result, bail};

/// What a three-element vector of the input is: a point (y defaults to the grid's) or a step
/// between points (y defaults to 0).
#[derive(Clone, Copy)]
enum Kind {
    Point,
    Step,
}

impl Config {
    /// What a 2D grid does not run, refused by key: a decomposed run (its grid is small enough
    /// for one process) and f16 storage (a capacity mode for 3D grids).
    pub(super) fn check_plane_run(&self) -> Result<()> {
        if !self.grid.is_2d() {
            return Ok(());
        }
        if let Some(d) = &self.run.decomposition {
            bail!(
                "run.decomposition = \"{}\": a 2D grid (grid.shape = [nx, nz]) runs in one process; remove the key",
                format!("{d:?}").to_lowercase()
            );
        }
        if self.survey.as_ref().is_some_and(|s| s.ranks_per_shot > 1) {
            bail!("survey.ranks_per_shot > 1: a 2D grid (grid.shape = [nx, nz]) runs each shot in one process");
        }
        if self.run.precision == Precision::F16 {
            bail!("run.precision = \"f16\" runs 3D grids only: a 2D grid (grid.shape = [nx, nz]) runs in f32");
        }
        Ok(())
    }

    /// Replaces the two-element form's y marker in every position of the input (source,
    /// receivers, survey, the model's and the density's origins) by the grid's y on a 2D grid;
    /// on a 3D grid, errors naming the first key given as [x, z].
    pub fn resolve_plane(&mut self) -> Result<()> {
        let two_d = self.grid.is_2d();
        for (key, v, y) in [("grid.spacing", &mut self.grid.spacing, 1.0), ("grid.origin", &mut self.grid.origin, 0.0)]
        {
            if is_plane_marker(v[1]) {
                if !two_d {
                    bail!(
                        "{key} = [{}, {}] has two values, the 2D form, but grid.shape = {:?} is 3D: give three",
                        v[0],
                        v[2],
                        self.grid.shape
                    );
                }
                v[1] = y;
            }
        }
        let y0 = self.grid.origin[1];
        let resolve = |key: &str, v: &mut [f64; 3], kind: Kind| -> Result<()> {
            if !is_plane_marker(v[1]) {
                return Ok(());
            }
            if !two_d {
                bail!(
                    "{key} = [{}, {}] has two values, the 2D form, but grid.shape = {:?} is 3D: give [x, y, z]",
                    v[0],
                    v[2],
                    self.grid.shape
                );
            }
            v[1] = match kind {
                Kind::Point => y0,
                Kind::Step => 0.0,
            };
            Ok(())
        };
        let keys: Vec<String> = (0..self.source.len()).map(|i| self.source.key(i)).collect();
        for (key, s) in keys.iter().zip(self.source.iter_mut()) {
            resolve(&format!("{key}.position"), &mut s.position, Kind::Point)?;
        }
        for (i, r) in self.receivers.iter_mut().enumerate() {
            let key = format!("receivers[{i}]");
            if let Some(p) = &mut r.position {
                resolve(&format!("{key}.position"), p, Kind::Point)?;
            }
            if let Some(l) = &mut r.line {
                resolve(&format!("{key}.line.start"), &mut l.start, Kind::Point)?;
                resolve(&format!("{key}.line.end"), &mut l.end, Kind::Point)?;
            }
            if let Some(g) = &mut r.grid {
                resolve(&format!("{key}.grid.origin"), &mut g.origin, Kind::Point)?;
                for (name, v) in [("step_a", &mut g.step_a), ("step_b", &mut g.step_b), ("step_c", &mut g.step_c)] {
                    resolve(&format!("{key}.grid.{name}"), v, Kind::Step)?;
                }
            }
        }
        if let Some(s) = &mut self.survey {
            if let Some(l) = &mut s.line {
                resolve("survey.line.start", &mut l.start, Kind::Point)?;
                resolve("survey.line.end", &mut l.end, Kind::Point)?;
            }
            if let Some(g) = &mut s.grid {
                resolve("survey.grid.origin", &mut g.origin, Kind::Point)?;
                for (name, v) in [("step_a", &mut g.step_a), ("step_b", &mut g.step_b), ("step_c", &mut g.step_c)] {
                    resolve(&format!("survey.grid.{name}"), v, Kind::Step)?;
                }
            }
            if let Some(shots) = &mut s.shots {
                for p in shots.iter_mut().filter(|p| p.len() == 2) {
                    // survey.shots lists positions as plain arrays: [x, z] becomes [x, y, z] here
                    // on a 2D grid (on a 3D one the length check of `positions` names it).
                    if two_d {
                        p.insert(1, y0);
                    }
                }
            }
        }
        if let ModelConfig::File { origin, .. } = &mut self.model.velocity {
            resolve("model.origin", origin, Kind::Point)?;
        }
        if let Some(DensityConfig::File { origin, .. }) = &mut self.model.density {
            resolve("model.density.origin", origin, Kind::Point)?;
        }
        Ok(())
    }
}

/// Whether `y` is the two-element form's marker ([`PLANE_Y`], bit for bit).
fn is_plane_marker(y: f64) -> bool {
    y.to_bits() == PLANE_Y.to_bits()
}
