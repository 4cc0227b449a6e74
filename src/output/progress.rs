//! The progress bar of a run: steps, ETA and the live rate in GPts/s, on stderr.
//!
//! Hidden when stderr is not a terminal or with `--quiet`; the solver updates it from wall-clock
//! time (at most ten times a second), never from device timers, so showing it costs no GPU sync.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;

pub struct Progress {
    bar: ProgressBar,
    points: f64,
    last: (usize, Instant),
}

impl Progress {
    /// A bar over `steps` steps of `points` grid points each; `quiet` hides it.
    pub fn new(steps: usize, points: usize, quiet: bool) -> Progress {
        let target = if quiet || !std::io::stderr().is_terminal() {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr_with_hz(10)
        };
        let bar = ProgressBar::with_draw_target(Some(steps as u64), target);
        let style = ProgressStyle::with_template("{wide_bar} {pos}/{len} steps  {elapsed} elapsed, ETA {eta}  {msg}")
            .expect("valid template")
            .progress_chars("=> ");
        bar.set_style(style);
        Progress { bar, points: points as f64, last: (0, Instant::now()) }
    }

    /// `done` steps finished; the rate shown is over the time since the previous update.
    pub fn update(&mut self, done: usize) {
        let now = Instant::now();
        let (before, then) = self.last;
        let seconds = now.duration_since(then).as_secs_f64();
        if done > before && seconds > 0.0 {
            let rate = (done - before) as f64 * self.points / seconds / 1e9;
            self.bar.set_message(format!("{rate:.4} GPts/s"));
        }
        self.bar.set_position(done as u64);
        self.last = (done, now);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
