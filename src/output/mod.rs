//! Outputs: the HDF5 writer, progress and plots.
