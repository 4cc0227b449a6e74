//! Outputs of a run: the HDF5 result file ([`hdf5`], the only module that uses rust-hdf5), the
//! progress bar ([`progress`]), the quick-look pictures ([`plot`]) and the safe creation and
//! replacement of output files ([`safe`]).

pub mod hdf5;
pub mod plot;
pub mod progress;
pub mod safe;
