//! The processes of one job: which one this is, how many there are, which GPU of its node it
//! takes, and the few collective acts a survey needs (wait for all, stop all). With the `mpi`
//! feature and under an MPI launcher (`mpirun`, `srun`) this is MPI (rsmpi); otherwise a single
//! process, and a build without MPI started by a launcher refuses to run rather than have every
//! process act as the only one.

use anyhow::{Result, bail};

/// This process among the job's.
pub struct Ranks {
    pub rank: usize,
    pub size: usize,
    /// Rank among the processes on this node (chooses the GPU: several ranks may share one).
    pub local_rank: usize,
    /// Processes on this node.
    pub local_size: usize,
    #[cfg(feature = "mpi")]
    mpi: Option<(mpi::environment::Universe, mpi::topology::SimpleCommunicator)>,
}

/// Process counts that MPI launchers put in the environment of each process they start.
const LAUNCHER_SIZE: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"];

fn launched_by_mpi() -> bool {
    LAUNCHER_SIZE.iter().any(|k| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok()).is_some_and(|n| n > 1))
}

impl Ranks {
    /// The job's processes: MPI when built with it and started by a launcher, else this one alone.
    pub fn init() -> Result<Ranks> {
        #[cfg(feature = "mpi")]
        if launched_by_mpi() {
            use mpi::traits::*;
            // Serialized: the overlapping halo exchange of a decomposed shot calls MPI from a
            // thread of its own.
            let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Serialized) else {
                bail!("MPI was already initialised in this process")
            };
            let world = universe.world();
            let local = world.split_shared(world.rank());
            return Ok(Ranks {
                rank: world.rank() as usize,
                size: world.size() as usize,
                local_rank: local.rank() as usize,
                local_size: local.size() as usize,
                mpi: Some((universe, world)),
            });
        }
        if launched_by_mpi() {
            bail!(
                "started by an MPI launcher, but this build has no MPI support: rebuild with `--features mpi` \
                 (or run one process)"
            );
        }
        Ok(Ranks {
            rank: 0,
            size: 1,
            local_rank: 0,
            local_size: 1,
            #[cfg(feature = "mpi")]
            mpi: None,
        })
    }

    /// All processes of the job (None for a single process started without a launcher).
    #[cfg(feature = "mpi")]
    pub fn world(&self) -> Option<&mpi::topology::SimpleCommunicator> {
        self.mpi.as_ref().map(|(_, w)| w)
    }

    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// Waits until every process has come here.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        if let Some((_, world)) = &self.mpi {
            use mpi::traits::*;
            world.barrier();
        }
    }

    /// Ends every process of the job with exit status `code` (one process's error must not leave
    /// the others waiting at a barrier); a single process just exits.
    pub fn abort(&self, code: i32) -> ! {
        #[cfg(feature = "mpi")]
        if let Some((_, world)) = &self.mpi {
            use mpi::traits::*;
            world.abort(code);
        }
        std::process::exit(code)
    }

    /// "rank 1 of 4 on host" (who ran a shot, for the index and the per-shot lines).
    pub fn label(&self) -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("rank {} of {} on {}", self.rank, self.size, host.trim())
    }
}
