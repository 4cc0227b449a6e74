//! How a run ends early, as types: a stop request ([`Interrupted`]), a wavefield gone non-finite
//! ([`BlowUp`]), or any other failure; [`RunError`] carries one of them from the time loop through
//! the drivers to the command line, which picks the exit status by variant.

/// The error of a run stopped by [`request_stop`](super::request_stop) (`steps` 0: stopped
/// outside a time loop, e.g. between a survey's shots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Interrupted {
    /// Steps completed before the stop.
    pub steps_done: usize,
    pub steps: usize,
}

impl Interrupted {
    fn describe(&self) -> String {
        match self.steps {
            0 => "stopped".into(),
            n => format!("interrupted after {} of {n} steps: no output file written", self.steps_done),
        }
    }
}

/// The error of a run whose wavefield became NaN or infinite.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the wavefield became non-finite (NaN or infinite) between step {last_finite} and step {found} (t = {:.4e} to \
     {:.4e} s); no output file written: {}",
    *last_finite as f64 * dt,
    *found as f64 * dt,
    likely_cause(*dt, *cfl_fraction)
)]
pub struct BlowUp {
    /// Steps done at the last check that found the field finite (0: the start).
    pub last_finite: usize,
    /// Steps done at the check that found it non-finite.
    pub found: usize,
    pub dt: f64,
    /// dt over the CFL limit.
    pub cfl_fraction: f64,
}

fn likely_cause(dt: f64, cfl_fraction: f64) -> String {
    if cfl_fraction > 1.0 {
        format!(
            "dt = {dt:.4e} s is {:.0}% of the stability (CFL) limit, which makes the scheme blow up; lower time.dt",
            100.0 * cfl_fraction
        )
    } else {
        format!(
            "dt is {:.0}% of the stability (CFL) limit, so the likely cause is a source or model value so large that \
             the pressure overflows single precision (check source.amplitude and the velocities)",
            100.0 * cfl_fraction
        )
    }
}

/// Why a run (a single run, a survey, a decomposed run) did not finish. `context` is what the
/// drivers add in front of a stop or a blow-up (e.g. "survey shot 3: "); other failures keep
/// theirs in the [`anyhow::Error`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Stopped by a signal, here or on another rank, or by another rank's failure: the command
    /// exits by the stop's cause ([`StopCause::exit_status`](super::StopCause::exit_status)).
    #[error("{context}{stop}")]
    Interrupted { stop: Interrupted, context: String },
    /// The wavefield became non-finite.
    #[error("{context}{blow_up}")]
    BlowUp { blow_up: BlowUp, context: String },
    /// Anything else.
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

impl RunError {
    /// The error with `context` in front of its message.
    pub fn context(self, context: impl std::fmt::Display) -> RunError {
        match self {
            RunError::Interrupted { stop, context: c } => {
                RunError::Interrupted { stop, context: format!("{context}: {c}") }
            }
            RunError::BlowUp { blow_up, context: c } => {
                RunError::BlowUp { blow_up, context: format!("{context}: {c}") }
            }
            RunError::Failed(e) => RunError::Failed(e.context(context.to_string())),
        }
    }

    /// Whether a stop request ended the run (also where a phase outside the time loop, e.g. the
    /// pictures, stopped with an [`Interrupted`] error under its context).
    pub fn is_interrupted(&self) -> bool {
        match self {
            RunError::Interrupted { .. } => true,
            RunError::Failed(e) => e.chain().any(|c| c.is::<Interrupted>()),
            RunError::BlowUp { .. } => false,
        }
    }

    /// The blow-up that ended the run, if that is what did.
    pub fn blow_up(&self) -> Option<&BlowUp> {
        match self {
            RunError::BlowUp { blow_up, .. } => Some(blow_up),
            _ => None,
        }
    }
}

impl From<Interrupted> for RunError {
    fn from(stop: Interrupted) -> RunError {
        RunError::Interrupted { stop, context: String::new() }
    }
}

impl From<BlowUp> for RunError {
    fn from(blow_up: BlowUp) -> RunError {
        RunError::BlowUp { blow_up, context: String::new() }
    }
}

/// `Result` of a run.
pub type RunResult<T> = std::result::Result<T, RunError>;

/// [`anyhow::Context`] for results whose error is a [`RunError`], keeping its variant.
pub trait RunContext<T> {
    fn run_context<C: std::fmt::Display>(self, context: impl FnOnce() -> C) -> RunResult<T>;
}

impl<T, E: Into<RunError>> RunContext<T> for std::result::Result<T, E> {
    fn run_context<C: std::fmt::Display>(self, context: impl FnOnce() -> C) -> RunResult<T> {
        self.map_err(|e| e.into().context(context()))
    }
}
