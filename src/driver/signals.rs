//! Stopping on a signal: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 (Ctrl-C, `timeout`,
//! batch schedulers and their warning signals, a closed terminal) ask the time loop to stop
//! between steps ([`solver::stop_for`]), and the command exits with 128 + the signal, the shell's
//! convention. Whatever phase the process is in (a time loop, the pictures, model sampling, file
//! writes), it ends within [`GRACE`] of the signal: past it, the temporary files are removed and
//! the process exits by itself. A stop another rank asks for ([`stop_deadline`]) ends the same way.

use crate::solver::{self, StopCause};
use anyhow::{Context, Result};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The signals that stop a run.
pub const STOPPING: [i32; 6] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2];

/// How long a stopping process may take to wind down (end its step, discard its partial file,
/// agree with the other ranks) before it ends itself.
pub const GRACE: Duration = Duration::from_secs(10);

/// Set once this process has wound down and is ending by itself: signals are then ignored (an
/// MPI launcher's SIGTERM to the ranks left, once one has ended, must not cut a rank's last line).
static ENDING: AtomicBool = AtomicBool::new(false);

/// Marks this process as ending by itself: the signals that come after are ignored (an MPI
/// launcher's SIGTERM to the ranks left, once one has ended, must not cut a rank's last line).
pub fn ending() {
    ENDING.store(true, Ordering::Relaxed);
}

/// Installs the handlers: the first signal stops the loop before its next step and starts the
/// [`GRACE`] deadline; a second signal removes the temporary files and exits at once with
/// 128 + the signal. With `at_once` (no time loop to stop) the first signal does so.
pub fn install_handlers(at_once: bool) -> Result<()> {
    static INSTALLED: Once = Once::new();
    let mut result = Ok(());
    INSTALLED.call_once(|| result = spawn_handler(at_once));
    result
}

fn spawn_handler(at_once: bool) -> Result<()> {
    let mut signals =
        signal_hook::iterator::Signals::new(STOPPING).context("cannot install the handlers of the stopping signals")?;
    std::thread::spawn(move || {
        for sig in signals.forever() {
            if ENDING.load(Ordering::Relaxed) {
                continue;
            }
            if solver::stop_for(StopCause::Signal(sig)) || at_once {
                crate::output::safe::remove_pending();
                eprintln!("stopped at once by {}", name(sig));
                std::process::exit(128 + sig);
            }
            stop_deadline(StopCause::Signal(sig));
        }
    });
    Ok(())
}

/// Starts the deadline of a stop for `cause` (once): a process still running [`GRACE`] later
/// removes its temporary files and exits with the cause's status.
pub fn stop_deadline(cause: StopCause) {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        std::thread::spawn(move || {
            std::thread::sleep(GRACE);
            crate::output::safe::remove_pending();
            eprintln!("{}: not wound down within {} s, ending now", describe(cause), GRACE.as_secs());
            std::process::exit(i32::from(cause.exit_status()));
        });
    });
}

/// The name of signal `sig` ("SIGTERM"; "signal N" for one not handled here).
pub fn name(sig: i32) -> String {
    match sig {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        SIGHUP => "SIGHUP".into(),
        SIGQUIT => "SIGQUIT".into(),
        SIGUSR1 => "SIGUSR1".into(),
        SIGUSR2 => "SIGUSR2".into(),
        s => format!("signal {s}"),
    }
}

/// Why the run stopped, in words: "SIGTERM", "stopping: rank 1 received SIGTERM", "stopping:
/// rank 1 failed".
pub fn describe(cause: StopCause) -> String {
    match cause {
        StopCause::Signal(s) => name(s),
        StopCause::RankSignal { rank, signal } => format!("stopping: rank {rank} received {}", name(signal)),
        StopCause::RankFailed { rank } => format!("stopping: rank {rank} failed"),
    }
}

/// Why the run stopped and the exit status that says so (SIGINT where no cause was recorded).
pub fn received() -> (StopCause, String) {
    let cause = solver::stop_cause().unwrap_or(StopCause::Signal(SIGINT));
    (cause, describe(cause))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_round_trip_and_give_the_shells_exit_status() {
        for cause in [
            StopCause::Signal(SIGTERM),
            StopCause::Signal(SIGUSR1),
            StopCause::RankSignal { rank: 0, signal: SIGHUP },
            StopCause::RankSignal { rank: 37, signal: SIGQUIT },
            StopCause::RankFailed { rank: 0 },
            StopCause::RankFailed { rank: 5 },
        ] {
            assert_eq!(StopCause::from_code(cause.code()), Some(cause));
        }
        assert_eq!(StopCause::from_code(0), None);
        assert_eq!(StopCause::Signal(SIGTERM).exit_status(), 143);
        assert_eq!(StopCause::Signal(SIGHUP).exit_status(), 129);
        assert_eq!(StopCause::Signal(SIGINT).exit_status(), 130);
        assert_eq!(StopCause::RankSignal { rank: 1, signal: SIGTERM }.exit_status(), 143);
        assert_eq!(StopCause::RankFailed { rank: 1 }.exit_status(), 1);
        assert_eq!(describe(StopCause::RankFailed { rank: 2 }), "stopping: rank 2 failed");
        assert_eq!(describe(StopCause::Signal(SIGQUIT).from_rank(1)), "stopping: rank 1 received SIGQUIT");
    }
}
