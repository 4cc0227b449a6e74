//! seismic-run: 3D acoustic wave propagation (constant density, second order in time, star stencil
//! of radius R in space) on GPUs, with a rayon CPU reference.
//!
//! The pipeline, one module each: [`config`] (the TOML input) -> [`model`] (velocity on the grid)
//! -> [`problem`] (the discretised run) -> [`solver`] (the backend-agnostic time loop) ->
//! [`backend`] (cpu, cuda, hip) -> `kernels/` (one GPU source for both vendors) -> [`output`].

pub mod backend;
pub mod bench;
pub mod boundary;
pub mod config;
pub mod decomposition;
pub mod grid;
pub mod model;
pub mod numerics;
pub mod output;
pub mod parallel;
pub mod problem;
pub mod resources;
pub mod solver;
pub mod survey;
