//! HIP backend for AMD MI-series GPUs, layered like cudarc: [`sys`] (bindgen output), [`result`]
//! (checked calls returning `Result`), [`safe`] (owning types that free on drop), and the
//! runtime-trait implementation here. Kernels are compiled at run time by hipRTC for the device's
//! gcnArchName; [`aot`] compiles them ahead of time with hipcc for the static resource report.

pub mod aot;
pub mod result;
pub mod safe;
pub mod sys;
