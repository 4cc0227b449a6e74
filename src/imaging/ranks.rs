//! A migration over the job's processes (MPI ranks with the `mpi` feature under a launcher, see
//! [`crate::parallel`]): which shots a rank migrates, and the sum of the ranks' stacks into rank
//! 0's, which writes the image.
//!
//! Shots go to ranks in turn (shot i to rank i mod size): a migration's shots cost the same (one
//! grid, one number of steps), and a fixed assignment keeps the stack's order of summation, so
//! its image, the same from run to run for a given number of ranks. The sum is an MPI reduce in
//! f64 (MPI_SUM), over the same f64 sums a single process adds shot after shot: it differs from
//! the single process's only in the order of those additions.

use crate::parallel::Ranks;

/// The shots of `count` that this rank migrates.
pub fn my_shots(ranks: &Ranks, count: usize) -> impl Iterator<Item = usize> {
    (ranks.rank..count).step_by(ranks.size.max(1))
}

/// Values summed per MPI call: the count fits MPI's int, and rank 0's receive buffer stays small.
#[cfg(feature = "mpi")]
const CHUNK: usize = 1 << 24;

/// Sums `values` over the job's ranks into rank 0's (f64, MPI_SUM, in chunks); the other ranks'
/// are left as they are, and a single process keeps its own. Every rank calls it, in the same
/// order with the same lengths.
pub fn sum_to_root(ranks: &Ranks, values: &mut [f64]) {
    #[cfg(feature = "mpi")]
    if let Some(world) = ranks.world() {
        use mpi::collective::SystemOperation;
        use mpi::traits::*;
        let root = world.process_at_rank(0);
        let mut sum = if ranks.is_root() { vec![0.0f64; values.len().min(CHUNK)] } else { Vec::new() };
        for part in values.chunks_mut(CHUNK) {
            if ranks.is_root() {
                let into = &mut sum[..part.len()];
                root.reduce_into_root(&part[..], into, SystemOperation::sum());
                part.copy_from_slice(into);
            } else {
                root.reduce_into(&part[..], SystemOperation::sum());
            }
        }
    }
    let _ = (ranks, values);
}
