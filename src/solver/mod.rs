//! The time loop, written once: [`drive`] steps any [`Stepper`] through `problem.steps` steps:
//! one backend on the whole grid ([`OneDomain`], what [`run`] drives, for single runs and survey
//! shots alike), or the subdomains of a decomposed run with their halo exchange
//! ([`Decomposed`](crate::decomposition::Decomposed)). The loop owns the order of things (stop
//! requests, steps, snapshots, progress, blow-up checks, the results); the stepper how each is done.
//!
//! Snapshots are copied into a buffer the [`SnapshotSink`] lends (allocated once, before the loop)
//! and handed back to it, so the sink (the HDF5 writer thread) writes while the next steps run.
//! The loop never asks for step times while it runs: that would synchronise a GPU every step.
//! Progress is reported from wall-clock time, at most [`PROGRESS_INTERVAL`] apart, and device
//! seconds per step are read once at the end. A stop request ([`request_stop`], the binary's
//! signal handler, or another rank's stop found by [`check_other_processes`] at a progress report)
//! ends the loop before the next step with [`RunError::Interrupted`], so that the output writer
//! discards its partial file; [`stop_cause`] says why.

mod errors;
mod stats;

pub use errors::{BlowUp, Interrupted, RunContext, RunError, RunResult};
pub use stats::{StepStats, median};

use crate::backend::Backend;
use crate::grid::Section;
use crate::output::plan::OutputPlan;
use crate::problem::Problem;
use anyhow::{Context, Result, anyhow};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);
/// Why the stop was asked ([`StopCause::code`]), 0 while no cause is recorded.
static CAUSE: AtomicI64 = AtomicI64::new(0);
/// The check for stops asked by the job's other processes, made at each progress report.
static OTHERS: OnceLock<fn() -> Option<StopCause>> = OnceLock::new();

/// Why a run stops early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    /// This process received the signal.
    Signal(i32),
    /// Rank `rank` of the job received the signal.
    RankSignal { rank: usize, signal: i32 },
    /// Rank `rank` of the job failed.
    RankFailed { rank: usize },
}

impl StopCause {
    /// The cause as one positive number (a vote between ranks takes the largest).
    pub fn code(self) -> i64 {
        match self {
            StopCause::Signal(s) => i64::from(s & 0xff),
            StopCause::RankSignal { rank, signal } => ((rank as i64 + 1) << 8) | i64::from(signal & 0xff),
            StopCause::RankFailed { rank } => (rank as i64 + 1) << 8,
        }
    }

    /// The cause of [`code`](Self::code) (None for 0).
    pub fn from_code(code: i64) -> Option<StopCause> {
        let (rank, signal) = ((code >> 8) - 1, (code & 0xff) as i32);
        match (code > 0, rank) {
            (false, _) => None,
            (true, r) if r < 0 => Some(StopCause::Signal(signal)),
            (true, r) if signal == 0 => Some(StopCause::RankFailed { rank: r as usize }),
            (true, r) => Some(StopCause::RankSignal { rank: r as usize, signal }),
        }
    }

    /// The cause as another process sees it: this process's signal becomes rank `rank`'s.
    pub fn from_rank(self, rank: usize) -> StopCause {
        match self {
            StopCause::Signal(signal) => StopCause::RankSignal { rank, signal },
            other => other,
        }
    }

    /// The exit status it gives: 128 + the signal (the shell's convention), 1 for a failed rank.
    pub fn exit_status(self) -> u8 {
        match self {
            StopCause::Signal(s) | StopCause::RankSignal { signal: s, .. } => (128 + s.clamp(1, 127)) as u8,
            StopCause::RankFailed { .. } => 1,
        }
    }
}

/// Asks a running loop to stop before its next step; returns whether a stop was already asked.
/// Safe from a signal handler's thread.
pub fn request_stop() -> bool {
    STOP.swap(true, Ordering::Relaxed)
}

/// [`request_stop`] for `cause`, which is recorded unless a cause already is (the first stays).
pub fn stop_for(cause: StopCause) -> bool {
    let _ = CAUSE.compare_exchange(0, cause.code(), Ordering::Relaxed, Ordering::Relaxed);
    request_stop()
}

/// Why the stop was asked, where [`stop_for`] recorded it.
pub fn stop_cause() -> Option<StopCause> {
    StopCause::from_code(CAUSE.load(Ordering::Relaxed))
}

/// Whether [`request_stop`] has been called (a survey checks it between shots).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Sets the check for stops asked by the job's other processes (a survey's ranks): the loop calls
/// it at each progress report, on the host, and stops for the cause it returns. The first set
/// stays.
pub fn watch_other_processes(check: fn() -> Option<StopCause>) {
    let _ = OTHERS.set(check);
}

/// Stops for what [`watch_other_processes`]'s check finds.
pub fn check_other_processes() {
    if let Some(check) = OTHERS.get()
        && let Some(cause) = check()
    {
        stop_for(cause);
    }
}

/// Shortest wall-clock time between two progress reports.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Shortest wall-clock time between two blow-up checks ([`Backend::field_is_finite`]), made at a
/// progress report and after the last step. Not every report: on the CPU a check reads the field
/// once (a few percent of a step), and a GPU check waits for the queued steps.
pub const FINITE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Receives snapshots while the loop goes on.
pub trait SnapshotSink {
    /// A buffer of [`OutputPlan::snapshot_len`] values to fill (waits while every buffer is still
    /// being written).
    fn buffer(&mut self) -> Result<Vec<f32>>;
    /// Hands over snapshot `index` (taken after `step` steps); the sink returns the buffer later.
    fn submit(&mut self, index: usize, step: usize, field: Vec<f32>) -> Result<()>;

    /// Whether volume sections come slab by slab through [`volume_slab`](Self::volume_slab) (a
    /// decomposed run's, so that no process holds a whole volume); `buffer` and `submit` then
    /// hold the other sections only.
    fn takes_volume_slabs(&self) -> bool {
        false
    }

    /// z-planes `first..` (dense) of volume section `section` (its place in the plan) of snapshot
    /// `index`, taken after `step` steps.
    fn volume_slab(&mut self, index: usize, step: usize, section: usize, first: usize, values: Vec<f32>) -> Result<()> {
        let _ = (index, step, section, first, values);
        anyhow::bail!("this snapshot sink takes whole volumes only")
    }
}

/// What a finished run hands to the outputs.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// Device seconds of each step (a decomposed run's: the slowest rank's, exchange included).
    pub step_seconds: Vec<f64>,
    /// Receiver traces, (nreceivers, steps) row-major; sample n is p at time (n + 1) dt.
    pub traces: Vec<f32>,
    /// Wall-clock seconds of the whole loop, snapshots included.
    pub wall_seconds: f64,
    /// A decomposed run's halo exchange seconds in each step (the slowest rank's), None for a run
    /// on one domain.
    pub exchange_seconds: Option<Vec<f64>>,
}

/// What the time loop steps. Every method but [`begin`](Self::begin) and
/// [`checks_while_running`](Self::checks_while_running) is called by every rank of a decomposed
/// run at the same step (some are collective).
pub trait Stepper {
    /// Called once before the first of `steps` steps.
    fn begin(&mut self, steps: usize) -> Result<()> {
        let _ = steps;
        Ok(())
    }

    /// Whether to stop before step `n`, `asked` telling whether this process was asked to (the
    /// ranks of a decomposed run decide together, or the others would wait for their halos).
    fn stop_before(&mut self, n: usize, asked: bool) -> Result<bool>;

    /// Time step `n`, receivers recorded.
    fn step(&mut self, n: usize) -> Result<()>;

    /// Snapshot `index` of `sections`, taken after `done` steps, into `sink` (None on the ranks
    /// that write no output).
    fn snapshot(
        &mut self,
        index: usize,
        done: usize,
        sections: &[Section],
        sink: Option<&mut dyn SnapshotSink>,
    ) -> Result<()>;

    /// Whether the loop may check for a blow-up while it runs (a check across ranks would make
    /// them wait for each other; they check after the last step only).
    fn checks_while_running(&self) -> bool {
        true
    }

    /// Whether the current wavefield is finite everywhere (see [`Backend::field_is_finite`]).
    fn field_is_finite(&mut self) -> Result<bool>;

    /// After the last of `steps` steps, begun at `start`: the record (None on the ranks that write
    /// no output), its step times read now.
    fn finish(&mut self, steps: usize, start: Instant) -> Result<Option<RunRecord>>;
}

/// One backend running the whole grid.
pub struct OneDomain<'a>(pub &'a mut dyn Backend);

impl Stepper for OneDomain<'_> {
    fn stop_before(&mut self, _: usize, asked: bool) -> Result<bool> {
        Ok(asked)
    }

    fn step(&mut self, n: usize) -> Result<()> {
        self.0.step(n).with_context(|| format!("time step {n}"))
    }

    fn snapshot(
        &mut self,
        index: usize,
        done: usize,
        sections: &[Section],
        sink: Option<&mut dyn SnapshotSink>,
    ) -> Result<()> {
        let sink = sink.context("a run with snapshots needs a snapshot sink")?;
        let mut field = sink.buffer()?;
        self.0.snapshot_sections(sections, &mut field).with_context(|| format!("snapshot after step {done}"))?;
        sink.submit(index, done, field)
    }

    fn field_is_finite(&mut self) -> Result<bool> {
        self.0.field_is_finite()
    }

    fn finish(&mut self, steps: usize, start: Instant) -> Result<Option<RunRecord>> {
        // Reading the step times waits for the device: the loop is over.
        let step_seconds = self.0.step_seconds()?;
        let wall_seconds = start.elapsed().as_secs_f64();
        let traces = self.0.traces(steps)?;
        Ok(Some(RunRecord { step_seconds, traces, wall_seconds, exchange_seconds: None }))
    }
}

/// Runs all steps of `problem` on `backend`, the whole grid. `progress(steps_done)` is called at
/// most every [`PROGRESS_INTERVAL`] and once at the end.
pub fn run(
    problem: &Problem,
    backend: &mut dyn Backend,
    plan: &OutputPlan,
    sink: &mut dyn SnapshotSink,
    progress: &mut dyn FnMut(usize),
) -> RunResult<RunRecord> {
    drive(problem, &mut OneDomain(backend), plan, Some(sink), progress)?
        .ok_or_else(|| anyhow!("one domain returned no record").into())
}

/// The time loop: all steps of `problem` on `stepper`, snapshots by `plan` into `sink`.
/// `progress(steps_done)` is called at most every [`PROGRESS_INTERVAL`] and once at the end.
/// The record comes back where the stepper gives one (rank 0 of a decomposed run).
pub fn drive(
    problem: &Problem,
    stepper: &mut dyn Stepper,
    plan: &OutputPlan,
    mut sink: Option<&mut dyn SnapshotSink>,
    progress: &mut dyn FnMut(usize),
) -> RunResult<Option<RunRecord>> {
    let steps = problem.steps;
    let start = Instant::now();
    let mut last_report = start;
    let mut last_check = (start, 0usize);
    let check = |stepper: &mut dyn Stepper, done: usize, last: &mut (Instant, usize)| -> RunResult<()> {
        if !stepper.field_is_finite().with_context(|| format!("blow-up check after step {done}"))? {
            let cfl_fraction = problem.dt / problem.dt_limit();
            return Err(BlowUp { last_finite: last.1, found: done, dt: problem.dt, cfl_fraction }.into());
        }
        *last = (Instant::now(), done);
        Ok(())
    };
    let mut next_snapshot = plan.snapshot_steps.iter().copied().enumerate().peekable();
    let sections: Vec<Section> = plan.snapshots.iter().map(|s| s.section).collect();
    let checks = stepper.checks_while_running();
    stepper.begin(steps)?;
    for n in 0..steps {
        if stepper.stop_before(n, stop_requested())? {
            return Err(Interrupted { steps_done: n, steps }.into());
        }
        stepper.step(n)?;
        let done = n + 1;
        if let Some(&(index, at)) = next_snapshot.peek()
            && at == done
        {
            // A reborrow for this snapshot (the sink's own lifetime may be longer than the call's).
            let sink = sink.as_mut().map(|s| &mut **s as &mut dyn SnapshotSink);
            stepper.snapshot(index, done, &sections, sink)?;
            next_snapshot.next();
        }
        let now = Instant::now();
        if now.duration_since(last_report) >= PROGRESS_INTERVAL {
            // Host-side only: the other processes' stops are read where progress is.
            check_other_processes();
            progress(done);
            last_report = now;
            if checks && now.duration_since(last_check.0) >= FINITE_CHECK_INTERVAL {
                check(stepper, done, &mut last_check)?;
            }
        }
    }
    check(stepper, steps, &mut last_check)?;
    let record = stepper.finish(steps, start)?;
    progress(steps);
    if let Some(r) = &record {
        let receivers = problem.receivers.len();
        if r.traces.len() != receivers * steps {
            let n = r.traces.len();
            return Err(
                anyhow!("backend returned {n} trace samples for {receivers} receivers and {steps} steps").into()
            );
        }
        if r.step_seconds.len() != steps {
            return Err(anyhow!("backend timed {} of {steps} steps", r.step_seconds.len()).into());
        }
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::output::plan::tests::plan_for;

    /// A backend whose field is the number of steps done, counting the calls the loop makes.
    struct Counter {
        done: usize,
        receivers: usize,
        timing_reads: usize,
        finite_checks: usize,
        /// The field reads non-finite from this many steps on.
        blow_up_at: usize,
    }

    impl Backend for Counter {
        fn info(&self) -> crate::backend::DeviceInfo {
            crate::backend::DeviceInfo { backend: "cpu", name: "counter".into(), kernel: "none".into() }
        }
        fn step(&mut self, n: usize) -> Result<()> {
            assert_eq!(n, self.done, "steps in order");
            self.done += 1;
            Ok(())
        }
        fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
            out.fill(self.done as f32);
            Ok(())
        }
        fn snapshot_sections(&mut self, _: &[Section], out: &mut [f32]) -> Result<()> {
            self.snapshot(out)
        }
        fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
            Ok(vec![0.0; steps * self.receivers])
        }
        fn field_is_finite(&mut self) -> Result<bool> {
            self.finite_checks += 1;
            Ok(self.done < self.blow_up_at)
        }
        fn step_seconds(&mut self) -> Result<Vec<f64>> {
            self.timing_reads += 1;
            Ok(vec![1e-3; self.done])
        }
        fn start_shot(&mut self, problem: &Problem) -> Result<()> {
            (self.done, self.receivers) = (0, problem.receivers.len());
            Ok(())
        }
    }

    #[derive(Default)]
    struct Collect(Vec<(usize, usize, f32, usize)>);

    impl SnapshotSink for Collect {
        fn buffer(&mut self) -> Result<Vec<f32>> {
            Ok(vec![-1.0; 480])
        }
        fn submit(&mut self, index: usize, step: usize, field: Vec<f32>) -> Result<()> {
            self.0.push((index, step, field[0], field.len()));
            Ok(())
        }
    }

    #[test]
    fn loop_snapshots_on_schedule_and_reads_timers_once() {
        let plan = plan_for("").unwrap();
        let text = "[grid]\nshape = [10, 8, 6]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                    vp = 1500.0\n[time]\nsteps = 25\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n\
                    [[receivers]]\nposition = [30.0, 30.0, 30.0]\n[boundary]\nkind = \"none\"";
        let problem = Problem::build(&Config::from_toml(text).unwrap(), vec![1500.0; 480]).unwrap();
        let mut backend = Counter { done: 0, receivers: 1, timing_reads: 0, finite_checks: 0, blow_up_at: usize::MAX };
        let mut sink = Collect::default();
        let mut reports = Vec::new();
        let record = run(&problem, &mut backend, &plan, &mut sink, &mut |d| reports.push(d)).unwrap();
        assert_eq!(sink.0, vec![(0, 10, 10.0, 480), (1, 20, 20.0, 480)]);
        assert_eq!(backend.timing_reads, 1);
        assert_eq!(record.step_seconds.len(), 25);
        assert_eq!(record.traces.len(), 25);
        assert_eq!(reports.last(), Some(&25));
        // A fast run is checked once, after its last step.
        assert_eq!(backend.finite_checks, 1);
    }

    #[test]
    fn a_non_finite_field_stops_the_run_with_the_steps_and_the_likely_cause() {
        let plan = OutputPlan::none();
        let text = "[grid]\nshape = [10, 8, 6]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                    vp = 1500.0\n[time]\nsteps = 25\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n\
                    [boundary]\nkind = \"none\"";
        let mut problem = Problem::build(&Config::from_toml(text).unwrap(), vec![1500.0; 480]).unwrap();
        let mut backend = Counter { done: 0, receivers: 0, timing_reads: 0, finite_checks: 0, blow_up_at: 20 };
        let e = run(&problem, &mut backend, &plan, &mut Collect::default(), &mut |_| {}).unwrap_err();
        let b = e.blow_up().expect("a BlowUp error");
        assert_eq!((b.last_finite, b.found), (0, 25));
        let msg = e.to_string();
        assert!(msg.contains("between step 0 and step 25") && msg.contains("overflows single precision"), "{msg}");
        assert_eq!(backend.timing_reads, 0, "no timings read from a blown-up run");
        problem.dt = 2.0 * problem.dt_limit();
        let mut backend = Counter { done: 0, receivers: 0, timing_reads: 0, finite_checks: 0, blow_up_at: 3 };
        let msg = run(&problem, &mut backend, &plan, &mut Collect::default(), &mut |_| {}).unwrap_err().to_string();
        assert!(msg.contains("200% of the stability (CFL) limit") && msg.contains("lower time.dt"), "{msg}");
    }

    #[test]
    fn stats_and_median() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let s = StepStats::new(&[1.0, 0.5], 2_000_000_000, 3_000_000_000, 1_000_000_000);
        assert_eq!(s.effective_gbps, vec![2.0, 4.0]);
        assert_eq!(s.full_step_gbps, vec![3.0, 6.0]);
        assert!((s.mean_full_step_gbps - 6.0 / 1.5).abs() < 1e-12);
        assert_eq!(s.gpts_per_s, vec![1.0, 2.0]);
        assert!((s.mean_gbps - 4.0 / 1.5).abs() < 1e-12);
        assert_eq!(s.median_gpts, 1.5);
    }
}
