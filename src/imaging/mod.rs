//! Imaging: the adjoint of the forward modelling operator and what is built on it (reverse-time
//! migration, the velocity gradient of the data misfit).
//!
//! `adjoint` owns the transpose of F (the sources' samples -> the receivers' traces): a problem
//! whose forward run, on any backend, is F^T (or, with CPML, which backward step runs);
//! `transposed` the CPU step's exact transpose, the backward pass under CPML. `rtm` owns one shot's migration and misfit
//! gradient through a backend (the source wavefield kept, the backward pass correlated with it)
//! and the image's stack; `filter` the data's phase filter and the image's Laplacian; `observed`
//! the observed data read from SEG-Y gathers; `migrate` the `migrate` command over an input's
//! shots; `ranks` the shots' share-out over MPI ranks and the sum of their stacks; `output` the
//! image file and its picture.

pub mod adjoint;
pub mod filter;
pub mod migrate;
pub mod observed;
pub mod output;
pub mod ranks;
pub mod rtm;
pub mod transposed;

pub use adjoint::{
    adjoint_problem, adjoint_samples, check_adjoint_supported, check_backward_supported, forward_traces,
    reversed_traces,
};
