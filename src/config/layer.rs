//! `[boundary] placement`: where the absorbing layers sit, and the run grid that follows from it.
//!
//! Outside (the default, as Devito's `nbl`): the run grid is the grid of `[grid]` (the model's
//! points) plus `boundary.width` points on each absorbing face (not the top face under a free
//! surface), the model's edge values extended into them; positions stay in the model's
//! coordinates, so the run grid's origin lies `width` spacings before `grid.origin` on those
//! faces. Inside: the layers take the grid's outer points, and the run grid is the grid of
//! `[grid]`. Without absorbing layers (`kind = "none"`) both are the grid of `[grid]`.

use super::{BoundaryKind, Config, GridConfig};
use anyhow::{Context, Result};
use serde::Deserialize;

/// Where the absorbing layers sit: `boundary.placement` in the input.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Around the model: the run grid grows by the layers.
    #[default]
    Outside,
    /// On the model's outer points: the run grid is the model's grid.
    Inside,
}

/// The run grid's points that hold the model (the grid of `[grid]`), and the run grid around them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelRegion {
    /// The run grid's index of the model's point (0, 0, 0), along x, y, z.
    pub first: [usize; 3],
    /// The model's points along x, y, z (`grid.shape`).
    pub shape: [usize; 3],
    /// The position of the model's point (0, 0, 0), m (`grid.origin`).
    pub origin: [f64; 3],
    /// The run grid's points along x, y, z.
    pub run_shape: [usize; 3],
}

impl ModelRegion {
    /// The whole of a run grid of `shape` points whose point (0, 0, 0) lies at `origin`.
    pub fn whole(shape: [usize; 3], origin: [f64; 3]) -> ModelRegion {
        ModelRegion { first: [0; 3], shape, origin, run_shape: shape }
    }

    /// Whether the model fills the run grid (no layer outside it).
    pub fn is_whole(&self) -> bool {
        self.shape == self.run_shape
    }

    /// The model's index nearest to run-grid index `i` along axis `a`: its own inside the
    /// model, the edge's in a layer outside it.
    pub fn model_index(&self, a: usize, i: usize) -> usize {
        i.saturating_sub(self.first[a]).min(self.shape[a] - 1)
    }

    /// The run-grid indices along axis `a` that hold the model.
    pub fn run_range(&self, a: usize) -> std::ops::Range<usize> {
        self.first[a]..self.first[a] + self.shape[a]
    }

    /// The model's z-planes that the run grid's z-planes `planes` take their values from.
    pub fn model_planes(&self, planes: std::ops::Range<usize>) -> std::ops::Range<usize> {
        if planes.is_empty() {
            return 0..0;
        }
        self.model_index(2, planes.start)..self.model_index(2, planes.end - 1) + 1
    }
}

impl Config {
    /// Points the absorbing layers add before and after the model along x, y, z: the layer width
    /// ([`Config::boundary_width`]) on each absorbing face when they sit outside it, none otherwise.
    pub fn layer_points(&self) -> [[usize; 2]; 3] {
        let b = &self.boundary;
        if b.placement == Placement::Inside || b.kind == BoundaryKind::None {
            return [[0; 2]; 3];
        }
        // A 2D grid has no y layers: its one row along y is the whole of y.
        let along = |a: usize| !(a == 1 && self.grid.is_2d());
        let w = self.boundary_width();
        std::array::from_fn(|a| if !along(a) { [0, 0] } else { [if a == 2 && b.free_surface { 0 } else { w }, w] })
    }

    /// The model's place in the run grid.
    pub fn model_region(&self) -> ModelRegion {
        let layers = self.layer_points();
        let shape = self.grid.shape;
        ModelRegion {
            first: layers.map(|l| l[0]),
            shape,
            origin: self.grid.origin,
            run_shape: std::array::from_fn(|a| shape[a].saturating_add(layers[a][0]).saturating_add(layers[a][1])),
        }
    }

    /// The grid the run computes on: `[grid]` plus the absorbing layers outside it, its origin
    /// moved out by the layers before the model.
    pub fn run_grid(&self) -> GridConfig {
        let region = self.model_region();
        let g = &self.grid;
        GridConfig {
            shape: region.run_shape,
            spacing: g.spacing,
            origin: std::array::from_fn(|a| g.origin[a] - region.first[a] as f64 * g.spacing[a]),
        }
    }

    /// The run grid's points, or an error naming `boundary.width` when the layers outside the
    /// model make more than can be addressed.
    pub(super) fn check_run_grid(&self) -> Result<()> {
        let run = self.run_grid();
        let overflows = (0..3).any(|a| run.shape[a] == usize::MAX);
        anyhow::ensure!(!overflows, "boundary.width = {} is too wide for any grid", self.boundary_width());
        run.points().with_context(|| {
            format!(
                "boundary.width = {}: the layers outside the model make a run grid of {:?} points",
                self.boundary_width(),
                run.shape
            )
        })?;
        Ok(())
    }
}
