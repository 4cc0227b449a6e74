//! Velocity models: built-in kinds, files and named data sets, sampled onto the run grid.
