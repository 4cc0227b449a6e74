//! GPU backends: one solver over a small runtime trait, implemented by CUDA (cudarc) and HIP.

use super::Backend;
use crate::config::KernelChoice;
use crate::problem::Problem;
use anyhow::{Result, bail};

#[cfg(feature = "hip")]
pub mod hip;

/// Opens the CUDA backend on device 0 for this problem (allocates everything once).
#[cfg(feature = "cuda")]
pub fn open_cuda(problem: &Problem, kernel: KernelChoice) -> Result<Box<dyn Backend>> {
    let _ = (problem, kernel);
    bail!("the CUDA backend is not implemented yet")
}

/// Opens the HIP backend on device 0 for this problem (allocates everything once).
#[cfg(feature = "hip")]
pub fn open_hip(problem: &Problem, kernel: KernelChoice) -> Result<Box<dyn Backend>> {
    let _ = (problem, kernel);
    bail!("the HIP backend is not implemented yet")
}
