//! The y mode's launches ([`YPass`]): the shapes, modules and bands of the pass that computes
//! the y layers inside the fused kernel ([`LayerPass::YLayers`](super::plan::LayerPass)), set up by
//! [`StepLaunches::set_y_pass`](super::launch::StepLaunches::set_y_pass).

use super::geometry::LaunchGeometry;
use super::runtime::GpuRuntime;
use crate::backend::tuning::Tuning;

/// The y mode's two launches: fused_step on the gap between the y layers' tiles, in the
/// interior's launch shape where its tiles fill most of the gap (else the y-layer kernel's module's
/// fused_step, in that shape), and fused_step_ylayers on the others, in a module of its own shape.
pub(super) struct YPass<Rt: GpuRuntime> {
    /// fused_step_ylayers's shape and its dynamic shared memory.
    pub(super) geometry: LaunchGeometry,
    pub(super) shared: u32,
    /// The y-layer module's fused_step and its dynamic shared memory, where the gap takes it, and
    /// the gap launch's geometry (the interior's, or that kernel's).
    pub(super) gap_kernel: Option<(Rt::Function, u32)>,
    pub(super) gap_geometry: LaunchGeometry,
    /// The band (`y_mode_band`), tiles of each launch (gap, y layers), their z-windows.
    pub(super) band: (i32, i32),
    pub(super) tiles: (u32, u32),
    pub(super) windows: (u32, u32),
    /// fused_step_zlayers (the gap's tiles on the z layers' planes, in the y-layer kernel's shape)
    /// and its dynamic shared memory, where the grid has z layers (else cpml.cu takes every row's
    /// after the pass).
    pub(super) z_kernel: Option<(Rt::Function, u32)>,
    pub(super) _module: Rt::Module,
}

impl<Rt: GpuRuntime> YPass<Rt> {
    /// fused_step_zlayers's tiles: the gap's rows in the y-layer kernel's tile height (the band's
    /// ends are multiples of it, `y_mode_band`).
    pub(super) fn z_tiles(&self) -> u32 {
        let (lo, hi) = self.band;
        ((hi - lo).max(0) as u32).div_ceil(self.geometry.tuning.fused_tile_y().max(1))
    }

    /// The kernel that takes the gap's z layers in the pass, where it does.
    pub(super) fn z_layers(&self) -> Option<(Rt::Function, u32)> {
        self.z_kernel
    }
}

/// The y-layer module of a run whose y layers go in the pass, loaded before the fields are, set
/// up once they are ([`StepLaunches::set_y_pass`]).
pub(super) struct YModule<Rt: GpuRuntime> {
    pub(super) module: Rt::Module,
    pub(super) tuning: Tuning,
    /// fused_step_ylayers's and fused_step_zlayers's dynamic shared memory.
    pub(super) shared: u32,
    pub(super) z_shared: u32,
}
