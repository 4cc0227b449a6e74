//! The processes of one job: which one this is, how many there are, which GPU of its node it
//! takes, and the few collective acts a survey needs (wait for all, stop all). With the `mpi`
//! feature and under an MPI launcher (`mpirun`, `srun`) this is MPI (rsmpi); otherwise a single
//! process, and a build without MPI started by a launcher refuses to run rather than have every
//! process act as the only one.
//!
//! The stop protocol: a rank that stops on its own (a signal, an error) tells every other rank
//! with a message of its own communicator ([`Ranks::finish`]); each rank keeps a receive for it
//! open and checks it, without waiting, between shots, at the time loop's progress reports and
//! while it waits at a [`Ranks::barrier`], so that no rank waits for one that has stopped. The
//! stopping ranks then meet at a barrier of that communicator (given up after [`AGREEMENT`]) and
//! end without `MPI_Finalize`, each with its own line and the stop's exit status.

use crate::solver::RunResult;
use anyhow::{Result, bail};

/// This process's rank in the job, once [`Ranks::init`] has found it.
static JOB_RANK: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// This process's rank among all of the job's (a decomposed shot's stop vote names the rank that
/// was signalled by it, not by its rank in the shot's group); None before [`Ranks::init`].
pub fn job_rank() -> Option<usize> {
    JOB_RANK.get().copied()
}

/// How long the stopping ranks wait for each other before each ends alone.
pub const AGREEMENT: std::time::Duration = std::time::Duration::from_secs(5);

/// This process among the job's.
pub struct Ranks {
    pub rank: usize,
    pub size: usize,
    /// Rank among the processes on this node (chooses the GPU: several ranks may share one).
    pub local_rank: usize,
    /// Processes on this node.
    pub local_size: usize,
    #[cfg(feature = "mpi")]
    mpi: Option<mpi_stop::Mpi>,
}

/// Process counts that MPI launchers put in the environment of each process they start.
const LAUNCHER_SIZE: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"];

/// Ends every process of the MPI job when this one panics: unwinding would reach MPI_Finalize,
/// which waits for the others, while they wait for this one's messages. The panic's own message
/// is printed first, then the rank's line.
#[cfg(feature = "mpi")]
pub fn abort_all_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        use mpi::traits::Communicator;
        let world = mpi::topology::SimpleCommunicator::world();
        eprintln!("error: rank {} of {} panicked: ending every rank", world.rank(), world.size());
        world.abort(101)
    }));
}

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
            abort_all_on_panic();
            let local = world.split_shared(world.rank());
            let _ = JOB_RANK.set(world.rank() as usize);
            return Ok(Ranks {
                rank: world.rank() as usize,
                size: world.size() as usize,
                local_rank: local.rank() as usize,
                local_size: local.size() as usize,
                mpi: Some(mpi_stop::Mpi::new(universe, world)),
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
        self.mpi.as_ref().map(|m| &m.world)
    }

    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// Whether this process is to stop: a signal, or another rank's stop (checked now, without
    /// waiting).
    pub fn stop_requested(&self) -> bool {
        crate::solver::check_other_processes();
        crate::solver::stop_requested()
    }

    /// Waits until every process has come here, or until a stop (this process's, or another
    /// rank's), which ends the wait with [`Interrupted`](crate::solver::Interrupted).
    pub fn barrier(&self) -> RunResult<()> {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m.barrier();
        }
        Ok(())
    }

    /// Ends the job's part in this process: where `result` is an error, the other ranks are told
    /// (a signal here, or a failure here; a stop that came from another rank is theirs to tell)
    /// and the stopping ranks wait for each other, at most [`AGREEMENT`]; the process then ends
    /// without `MPI_Finalize` (see the module docs).
    pub fn finish(&self, result: &RunResult<()>) {
        #[cfg(feature = "mpi")]
        if let (Some(m), Err(e)) = (&self.mpi, result) {
            use crate::solver::{StopCause, stop_cause};
            let tell = match (e.is_interrupted(), stop_cause()) {
                (false, _) => Some(StopCause::RankFailed { rank: self.rank }),
                (true, Some(StopCause::Signal(s))) => Some(StopCause::Signal(s).from_rank(self.rank)),
                (true, _) => None,
            };
            m.stop_all(tell, self.rank, self.size);
        }
        let _ = result;
    }

    /// Ends every process of the job with exit status `code` (one process's error must not leave
    /// the others waiting in a collective they cannot leave); a single process just exits.
    pub fn abort(&self, code: i32) -> ! {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            use mpi::traits::*;
            m.world.abort(code);
        }
        std::process::exit(code)
    }

    /// "rank 1 of 4 on host" (who ran a shot, for the index and the per-shot lines).
    pub fn label(&self) -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("rank {} of {} on {}", self.rank, self.size, host.trim())
    }
}

/// The MPI side of [`Ranks`]: the stop messages and the waits that give way to them.
#[cfg(feature = "mpi")]
mod mpi_stop {
    use crate::solver::{self, Interrupted, RunResult, StopCause};
    use mpi::request::{Request, StaticScope};
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use std::cell::{Cell, RefCell};
    use std::time::{Duration, Instant};

    /// Tag of a stop message: (the signal, 0 for a failure; the rank that stopped).
    const STOP: i32 = 71;
    /// Pause between two checks of a wait (MPI progresses in the checks; the pause frees the core).
    const POLL: Duration = Duration::from_millis(1);

    thread_local! {
        /// The open receive of a stop message (the main thread's: MPI runs serialized, and the
        /// time loop checks it from the thread that runs it).
        static INBOX: RefCell<Option<Request<'static, [i32; 2]>>> = const { RefCell::new(None) };
    }

    /// (Fields drop in order: the communicators are freed before the universe finalizes MPI.)
    pub struct Mpi {
        pub world: SimpleCommunicator,
        /// The stop messages and the stopping ranks' barrier (never matching a survey's others).
        stops: Option<SimpleCommunicator>,
        stopped: Cell<bool>,
        /// None once the process ends without MPI_Finalize.
        universe: Option<mpi::environment::Universe>,
    }

    impl Mpi {
        pub fn new(universe: mpi::environment::Universe, world: SimpleCommunicator) -> Mpi {
            let stops = world.duplicate();
            // The buffer lives as long as the receive may: the process.
            let inbox: &'static mut [i32; 2] = Box::leak(Box::new([0; 2]));
            let request = stops.any_process().immediate_receive_into_with_tag(StaticScope, inbox, STOP);
            INBOX.with(|i| *i.borrow_mut() = Some(request));
            solver::watch_other_processes(check_inbox);
            Mpi { world, stops: Some(stops), stopped: Cell::new(false), universe: Some(universe) }
        }

        /// A barrier of the world that gives way to a stop.
        pub fn barrier(&self) -> RunResult<()> {
            let mut request = self.world.immediate_barrier();
            loop {
                match request.test() {
                    Ok(_) => return Ok(()),
                    Err(r) => request = r,
                }
                solver::check_other_processes();
                if solver::stop_requested() {
                    // Never completed: the process ends without meeting the others again.
                    std::mem::forget(request);
                    return Err(Interrupted { steps_done: 0, steps: 0 }.into());
                }
                std::thread::sleep(POLL);
            }
        }

        /// Tells every other rank `tell` (where given), then waits for the stopping ranks at the
        /// stop barrier, at most [`AGREEMENT`](super::AGREEMENT).
        pub fn stop_all(&self, tell: Option<StopCause>, rank: usize, size: usize) {
            let Some(stops) = &self.stops else { return };
            self.stopped.set(true);
            crate::driver::signals::ending();
            let mut sends = Vec::new();
            if let Some(cause) = tell {
                let signal = match cause {
                    StopCause::Signal(s) | StopCause::RankSignal { signal: s, .. } => s,
                    StopCause::RankFailed { .. } => 0,
                };
                let message: &'static [i32; 2] = Box::leak(Box::new([signal, rank as i32]));
                for r in (0..size).filter(|&r| r != rank) {
                    sends.push(stops.process_at_rank(r as i32).immediate_send_with_tag(StaticScope, message, STOP));
                }
            }
            let mut barrier = Some(stops.immediate_barrier());
            let until = Instant::now() + super::AGREEMENT;
            while Instant::now() < until && (barrier.is_some() || !sends.is_empty()) {
                sends = sends.into_iter().filter_map(|s| s.test().err()).collect();
                barrier = barrier.and_then(|b| b.test().err());
                std::thread::sleep(POLL);
            }
            // What did not complete is left to the end of the process.
            sends.into_iter().for_each(std::mem::forget);
            barrier.into_iter().for_each(std::mem::forget);
        }
    }

    /// The stop another rank sent, if one has come (the receive stays completed: one is enough).
    fn check_inbox() -> Option<StopCause> {
        INBOX.with(|i| {
            let mut slot = i.borrow_mut();
            let request = slot.take()?;
            match request.test_with_data() {
                Ok((_, &[signal, rank])) => {
                    let rank = rank.max(0) as usize;
                    let cause = match signal {
                        0 => StopCause::RankFailed { rank },
                        s => StopCause::RankSignal { rank, signal: s },
                    };
                    crate::driver::signals::stop_deadline(cause);
                    Some(cause)
                }
                Err(r) => {
                    *slot = Some(r);
                    None
                }
            }
        })
    }

    impl Drop for Mpi {
        fn drop(&mut self) {
            if self.stopped.get() {
                // A stopped rank may have left a barrier and a receive behind, and the ranks do
                // not meet again: no MPI_Finalize (it would wait for them).
                std::mem::forget(self.universe.take());
                std::mem::forget(self.stops.take());
                INBOX.with(|i| i.borrow_mut().take().into_iter().for_each(std::mem::forget));
                return;
            }
            if let Some(request) = INBOX.with(|i| i.borrow_mut().take()) {
                request.cancel();
                let _ = request.wait();
            }
        }
    }
}
