//! Imaging: the adjoint of the forward modelling operator and what is built on it (reverse-time
//! migration, the velocity gradient of the data misfit).
//!
//! `adjoint` owns the transpose of F (the sources' samples -> the receivers' traces): a problem
//! whose forward run, on any backend, is F^T.

pub mod adjoint;

pub use adjoint::{adjoint_problem, adjoint_samples, check_adjoint_supported, forward_traces, reversed_traces};
