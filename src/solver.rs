//! The backend-agnostic time loop: steps, snapshots, receiver traces and per-step statistics.
//!
//! [`run`] drives any [`Backend`] through `problem.steps` steps. Snapshots are copied into a
//! buffer the [`SnapshotSink`] lends (allocated once, before the loop) and handed back to it, so
//! the sink (the HDF5 writer thread) writes while the next steps run. The loop never asks the
//! backend for its step times: that would synchronise a GPU every step. Progress is reported
//! from wall-clock time, at most [`PROGRESS_INTERVAL`] apart, and device seconds per step are
//! read once at the end. A stop request ([`request_stop`], the binary's Ctrl-C handler) ends the
//! loop before the next step with an [`Interrupted`] error, so that the output writer discards
//! its partial file.

use crate::backend::Backend;
use crate::grid::Section;
use crate::output::plan::OutputPlan;
use crate::problem::Problem;
use anyhow::{Context, Result, ensure};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

/// Asks a running [`run`] to stop before its next step; returns whether a stop was already asked.
/// Safe from a signal handler's thread.
pub fn request_stop() -> bool {
    STOP.swap(true, Ordering::Relaxed)
}

/// Whether [`request_stop`] has been called (a survey checks it between shots).
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The error of a run stopped by [`request_stop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted {
    /// Steps completed before the stop.
    pub steps_done: usize,
    pub steps: usize,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted after {} of {} steps: no output file written", self.steps_done, self.steps)
    }
}

impl std::error::Error for Interrupted {}

/// Shortest wall-clock time between two progress reports.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Shortest wall-clock time between two blow-up checks ([`Backend::field_is_finite`]), made at a
/// progress report and after the last step. Not every report: on the CPU a check reads the field
/// once (a few percent of a step), and a GPU check waits for the queued steps.
pub const FINITE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The error of a run whose wavefield became NaN or infinite.
#[derive(Debug, Clone, PartialEq)]
pub struct BlowUp {
    /// Steps done at the last check that found the field finite (0: the start).
    pub last_finite: usize,
    /// Steps done at the check that found it non-finite.
    pub found: usize,
    pub dt: f64,
    /// dt over the CFL limit.
    pub cfl_fraction: f64,
}

impl std::fmt::Display for BlowUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the wavefield became non-finite (NaN or infinite) between step {} and step {} (t = {:.4e} to {:.4e} s); \
             no output file written: ",
            self.last_finite,
            self.found,
            self.last_finite as f64 * self.dt,
            self.found as f64 * self.dt
        )?;
        if self.cfl_fraction > 1.0 {
            write!(
                f,
                "dt = {:.4e} s is {:.0}% of the stability (CFL) limit, which makes the scheme blow up; lower time.dt",
                self.dt,
                100.0 * self.cfl_fraction
            )
        } else {
            write!(
                f,
                "dt is {:.0}% of the stability (CFL) limit, so the likely cause is a source or model value so large \
                 that the pressure overflows single precision (check source.amplitude and the velocities)",
                100.0 * self.cfl_fraction
            )
        }
    }
}

impl std::error::Error for BlowUp {}

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
    /// Device seconds of each step.
    pub step_seconds: Vec<f64>,
    /// Receiver traces, (nreceivers, steps) row-major; sample n is p at time (n + 1) dt.
    pub traces: Vec<f32>,
    /// Wall-clock seconds of the whole loop, snapshots included.
    pub wall_seconds: f64,
}

/// Per-step rates and their summary, from the device seconds of each step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepStats {
    pub seconds: Vec<f64>,
    /// Theoretical bytes of a step ([`Problem::step_bytes`]) over its seconds, GB/s (1e9): the
    /// seeds' effective bandwidth, which counts the interior only.
    pub effective_gbps: Vec<f64>,
    /// The full step's bytes ([`Problem::full_step_bytes`]: the interior plus the CPML memory
    /// variables) over its seconds, GB/s.
    pub full_step_gbps: Vec<f64>,
    /// Interior points over seconds, 1e9 points per second.
    pub gpts_per_s: Vec<f64>,
    /// Over the run: total bytes (points) over total seconds.
    pub mean_gbps: f64,
    pub median_gbps: f64,
    pub mean_full_step_gbps: f64,
    pub median_full_step_gbps: f64,
    pub mean_gpts: f64,
    pub median_gpts: f64,
    /// A decomposed run's halo exchange seconds in each step (the slowest rank's; part of
    /// `seconds`), None for a run on one domain.
    pub exchange_seconds: Option<Vec<f64>>,
}

impl StepStats {
    pub fn new(seconds: &[f64], step_bytes: u64, full_step_bytes: u64, points: usize) -> StepStats {
        let rate = |amount: f64| -> Vec<f64> { seconds.iter().map(|&s| amount / s.max(1e-12) / 1e9).collect() };
        let effective_gbps = rate(step_bytes as f64);
        let full_step_gbps = rate(full_step_bytes as f64);
        let gpts_per_s = rate(points as f64);
        let total: f64 = seconds.iter().sum::<f64>().max(1e-12);
        let n = seconds.len() as f64;
        StepStats {
            mean_gbps: n * step_bytes as f64 / total / 1e9,
            median_gbps: median(&effective_gbps),
            mean_full_step_gbps: n * full_step_bytes as f64 / total / 1e9,
            median_full_step_gbps: median(&full_step_gbps),
            mean_gpts: n * points as f64 / total / 1e9,
            median_gpts: median(&gpts_per_s),
            seconds: seconds.to_vec(),
            effective_gbps,
            full_step_gbps,
            gpts_per_s,
            exchange_seconds: None,
        }
    }

    /// With a decomposed run's exchange seconds per step.
    pub fn with_exchange(self, exchange_seconds: &[f64]) -> StepStats {
        StepStats { exchange_seconds: Some(exchange_seconds.to_vec()), ..self }
    }
}

/// Median (mean of the two middle values for an even count); 0 for no values.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { 0.5 * (v[m - 1] + v[m]) }
}

/// Runs all steps of `problem` on `backend`. `progress(steps_done)` is called at most every
/// [`PROGRESS_INTERVAL`] and once at the end.
pub fn run(
    problem: &Problem,
    backend: &mut dyn Backend,
    plan: &OutputPlan,
    sink: &mut dyn SnapshotSink,
    progress: &mut dyn FnMut(usize),
) -> Result<RunRecord> {
    let steps = problem.steps;
    let start = Instant::now();
    let mut last_report = start;
    let mut last_check = (start, 0usize);
    let check = |backend: &mut dyn Backend, done: usize, last: &mut (Instant, usize)| -> Result<()> {
        if !backend.field_is_finite().with_context(|| format!("blow-up check after step {done}"))? {
            let cfl_fraction = problem.dt / problem.dt_limit();
            return Err(BlowUp { last_finite: last.1, found: done, dt: problem.dt, cfl_fraction }.into());
        }
        *last = (Instant::now(), done);
        Ok(())
    };
    let mut next_snapshot = plan.snapshot_steps.iter().copied().enumerate().peekable();
    let sections: Vec<Section> = plan.snapshots.iter().map(|s| s.section).collect();
    for n in 0..steps {
        if STOP.load(Ordering::Relaxed) {
            return Err(Interrupted { steps_done: n, steps }.into());
        }
        backend.step(n).with_context(|| format!("time step {n}"))?;
        let done = n + 1;
        if let Some(&(index, at)) = next_snapshot.peek()
            && at == done
        {
            let mut field = sink.buffer()?;
            backend.snapshot_sections(&sections, &mut field).with_context(|| format!("snapshot after step {done}"))?;
            sink.submit(index, done, field)?;
            next_snapshot.next();
        }
        let now = Instant::now();
        if now.duration_since(last_report) >= PROGRESS_INTERVAL {
            progress(done);
            last_report = now;
            if now.duration_since(last_check.0) >= FINITE_CHECK_INTERVAL {
                check(backend, done, &mut last_check)?;
            }
        }
    }
    check(backend, steps, &mut last_check)?;
    // Reading the step times waits for the device: the loop is over.
    let step_seconds = backend.step_seconds()?;
    let wall_seconds = start.elapsed().as_secs_f64();
    progress(steps);
    let traces = backend.traces(steps)?;
    ensure!(
        traces.len() == problem.receivers.len() * steps,
        "backend returned {} trace samples for {} receivers and {steps} steps",
        traces.len(),
        problem.receivers.len()
    );
    ensure!(step_seconds.len() == steps, "backend timed {} of {steps} steps", step_seconds.len());
    Ok(RunRecord { step_seconds, traces, wall_seconds })
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
        let b = e.downcast_ref::<BlowUp>().expect("a BlowUp error");
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
