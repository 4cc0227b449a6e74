//! Outputs of a run: the HDF5 result file ([`hdf5`], the only module that uses rust-hdf5), the
//! progress bar ([`progress`]) and the quick-look pictures ([`plot`]).

pub mod hdf5;
pub mod plot;
pub mod progress;
