//! Stopping on a signal: SIGINT, SIGTERM and SIGHUP (Ctrl-C, `timeout`, batch schedulers, a closed
//! terminal) ask the time loop to stop between steps ([`solver::request_stop`]), and the command
//! exits with 128 + the signal, the shell's convention.

use crate::solver;
use anyhow::{Context, Result};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that stopped the run, 0 while none has come.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Installs the handlers: the first signal stops the loop before its next step, and the temporary
/// output file is removed; a second signal removes the temporary files and exits at once with
/// 128 + the signal. With `at_once` (no time loop to stop) the first signal does so.
pub fn install_handlers(at_once: bool) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .context("cannot install the SIGINT, SIGTERM and SIGHUP handlers")?;
    std::thread::spawn(move || {
        for sig in signals.forever() {
            SIGNAL.store(sig, Ordering::Relaxed);
            if solver::request_stop() || at_once {
                crate::output::safe::remove_pending();
                std::process::exit(128 + sig);
            }
        }
    });
    Ok(())
}

/// The signal that stopped the run (SIGINT where none was recorded) and its name.
pub fn received() -> (i32, &'static str) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    match SIGNAL.load(Ordering::Relaxed) {
        SIGTERM => (SIGTERM, "SIGTERM"),
        SIGHUP => (SIGHUP, "SIGHUP"),
        0 => (SIGINT, "SIGINT"),
        s => (s, "SIGINT"),
    }
}
