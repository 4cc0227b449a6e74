//! Outputs of a run: the HDF5 result file ([`hdf5`] writes it, [`result`] reads it back; the
//! only modules that use rust-hdf5), the files derived from it ([`segy`] traces, [`xdmf`] sidecar,
//! [`plot`] pictures and animation) and the progress bar ([`progress`]).

pub mod hdf5;
pub mod plot;
pub mod progress;
pub mod result;
pub mod segy;
pub mod xdmf;
