//! What a backend offers reverse-time migration beyond the step: the imaging condition computed
//! where the fields live ([`DeviceImaging`]), so that a GPU's migration moves no field to the host
//! inside its passes. The sums and why they are these are in [`crate::imaging::rtm`]; a backend
//! without it (the CPU) is served by the host from snapshots.

use anyhow::Result;

/// The sums of one shot, dense (nz, ny, nx), f64.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImagingSums {
    /// sum over the imaging steps of u^{n+1} nu^n.
    pub image: Vec<f64>,
    /// sum over the imaging steps of (u^{n+1})^2.
    pub illumination: Vec<f64>,
    /// sum over every step of nu^n (u^{n+1} - 2 g u^n + g^2 u^{n-1}) (empty without a gradient).
    pub gradient: Vec<f64>,
}

/// The source wavefield kept on the device and the imaging condition's sums beside it. Each call
/// only enqueues work after the backend's queued steps; the current field is p after the last step.
pub trait DeviceImaging {
    /// Allocates room for `slots` kept fields and zeroed sums (the gradient's where `sponge` is
    /// Some: the sponge factor g at every point, dense (nz, ny, nx)). Errors naming the bytes
    /// where they do not fit in the device's free memory.
    fn open_imaging(&mut self, slots: usize, sponge: Option<&[f64]>) -> Result<()>;
    /// Keeps the current field in `slot` and adds its square to the illumination.
    fn keep_source(&mut self, slot: usize) -> Result<()>;
    /// Adds the field kept in `slot` times the current field to the image.
    fn correlate_image(&mut self, slot: usize) -> Result<()>;
    /// Adds the current field times (u^{n+1} - 2 g u^n + g^2 u^{n-1}) to the gradient, the three
    /// fields kept in `slots` (None: a field of zeros).
    fn correlate_gradient(&mut self, slots: [Option<usize>; 3]) -> Result<()>;
    /// The sums, downloaded dense, and zeroed for the next shot.
    fn take_sums(&mut self) -> Result<ImagingSums>;
    /// Adds the shot's image over its illumination plus a floor (`floor_fraction` of the highest
    /// illumination; nothing where that is 0) to the image stack kept on the device, at the grid's
    /// points from z-plane `first_plane` on (1 under a free surface, whose top plane sums
    /// nothing), and zeroes the shot's image and illumination: `imaging::rtm::add_normalised` with
    /// the same bits and no download.
    fn stack_image(&mut self, floor_fraction: f64, first_plane: usize) -> Result<()>;
    /// The gradient's sum, downloaded dense (empty without one), and every sum zeroed.
    fn take_gradient(&mut self) -> Result<Vec<f64>>;
    /// The image stack, downloaded dense, and zeroed; None where no shot was stacked (or the
    /// imaging condition was never opened).
    fn take_stack(&mut self) -> Result<Option<Vec<f64>>>;
}
