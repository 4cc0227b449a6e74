//! Discretisation: stencil coefficients, the CFL limit and the source wavelet.

pub mod stencil;
pub mod wavelet;

pub use stencil::Stencil;
pub use wavelet::Ricker;
