//! seismic-run: 3D acoustic wave propagation (constant density, second order in time, star stencil
//! of radius R in space) on GPUs, with a rayon CPU reference.
//!
//! The pipeline, one module each: [`config`] (the TOML input) -> [`model`] (velocity on the grid)
//! -> [`problem`] (the discretised run) -> [`solver`] (the one, backend-agnostic time loop) ->
//! [`backend`] (cpu, cuda, hip; [`backend::registry`] opens them) -> `kernels/` (one GPU source
//! for both vendors) -> [`output`] (the result file, then the files derived from it). [`driver`]
//! runs an input through it: a single run, a [`survey`] of shots over the processes of a job
//! ([`parallel`]), or a run split over MPI ranks ([`decomposition`]), each driving the same loop.

pub mod backend;
pub mod bench;
pub mod boundary;
pub mod config;
pub mod decomposition;
pub mod driver;
pub mod grid;
pub mod imaging;
pub mod model;
pub mod numerics;
pub mod output;
pub mod parallel;
pub mod problem;
pub mod resources;
pub mod solver;
pub mod survey;
