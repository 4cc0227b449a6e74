//! A decomposed run as the time loop steps it ([`Decomposed`], a [`Stepper`]): every step, each
//! subdomain computes its planes, the [`Exchange`] overwrites the ghost planes, then the receivers
//! are recorded; snapshots and traces are gathered at rank 0 into the single-domain layout. With
//! an exchange that overlaps the step (and backends that compute a step in parts), each subdomain
//! computes the owned planes next to its cuts first ([`edge_planes`]), the exchange starts sending
//! them, the rest of the step is computed while they travel, and the ghost planes are written once
//! both are done.

use super::exchange::{edge_planes, ghost_planes};
use super::gather::{SlabJoin, assemble, owned_block, snapshot_part};
use super::{Decomposition, Domain, Exchange};
use crate::grid::Section;
use crate::output::plan::OutputPlan;
use crate::problem::Problem;
use crate::solver::{self, RunRecord, RunResult, SnapshotSink, Stepper};
use anyhow::{Context, Result, ensure};
use std::ops::Range;
use std::time::Instant;

/// Steps between two votes on stopping (a signal reaches the ranks at different steps; they stop
/// together, at the first vote after it, or the others would wait for their halos for ever).
const STOP_VOTE_EVERY: usize = 16;

/// This process's subdomains of a decomposition and the exchange between them and the other
/// ranks, stepped by [`solver::drive`].
pub struct Decomposed<'a> {
    problem: &'a Problem,
    decomposition: &'a Decomposition,
    domains: &'a mut [Domain],
    exchange: &'a mut dyn Exchange,
    /// Whether the exchange overlaps the step (set by `begin`).
    overlap: bool,
    /// Whether the exchange is timed on the device, within the step's time.
    exchange_in_step: bool,
    /// Per subdomain: the owned planes its neighbours take, and the ghost planes the exchange
    /// writes while the step runs.
    edges: Vec<Vec<Range<usize>>>,
    leave: Vec<Vec<Range<usize>>>,
    /// With a host exchange, each step's compute seconds, timed on the host.
    compute_seconds: Vec<f64>,
    exchange_seconds: Vec<f64>,
}

impl<'a> Decomposed<'a> {
    /// `domains`: this process's subdomains of `decomposition`, in rank order; `problem`: the
    /// single-domain run.
    pub fn new(
        problem: &'a Problem,
        decomposition: &'a Decomposition,
        domains: &'a mut [Domain],
        exchange: &'a mut dyn Exchange,
    ) -> Decomposed<'a> {
        Decomposed {
            problem,
            decomposition,
            domains,
            exchange,
            overlap: false,
            exchange_in_step: false,
            edges: Vec::new(),
            leave: Vec::new(),
            compute_seconds: Vec::new(),
            exchange_seconds: Vec::new(),
        }
    }
}

/// Runs all steps of `problem` (the single-domain run) over `domains`, this process's subdomains
/// of `decomposition`, through the one time loop. Rank 0 gets the record (and hands snapshots to
/// `sink`, which it must have when `plan` takes any); other ranks get None.
pub fn run(
    problem: &Problem,
    decomposition: &Decomposition,
    domains: &mut [Domain],
    exchange: &mut dyn Exchange,
    plan: &OutputPlan,
    sink: Option<&mut dyn SnapshotSink>,
    progress: &mut dyn FnMut(usize),
) -> RunResult<Option<RunRecord>> {
    let mut stepper = Decomposed::new(problem, decomposition, domains, exchange);
    solver::drive(problem, &mut stepper, plan, sink, progress)
}

impl Stepper for Decomposed<'_> {
    fn begin(&mut self, steps: usize) -> Result<()> {
        self.exchange.begin(steps)?;
        self.exchange_in_step = self.exchange.timed_on_device();
        // Overlap where the exchange can and every backend computes a step in parts.
        self.overlap = self.exchange.overlaps()
            && !self.decomposition.blocks()
            && self.domains.iter().all(|d| d.backend.splits_steps());
        self.edges = self.domains.iter().map(|d| edge_planes(self.decomposition, d)).collect();
        let ghosts = self.exchange.writes_ghosts_during_step();
        self.leave = self.domains.iter().map(|d| if ghosts { ghost_planes(d) } else { Vec::new() }).collect();
        self.exchange_seconds = Vec::with_capacity(steps);
        // With a host exchange, a step is timed on the host: its compute up to the device's end,
        // then the exchange (device events would count the device's idle wait for the exchange as
        // well).
        self.compute_seconds = Vec::with_capacity(if self.exchange_in_step { 0 } else { steps });
        Ok(())
    }

    fn stop_before(&mut self, n: usize, asked: bool) -> Result<bool> {
        if n == 0 || !n.is_multiple_of(STOP_VOTE_EVERY) {
            return Ok(false);
        }
        // Each rank votes its stop's cause (0: none); the largest wins, so that every rank stops
        // naming the same signal and rank.
        // The rank in the whole job (a survey group's shot runs over a part of it).
        let rank = crate::parallel::job_rank().unwrap_or(self.exchange.local_ranks(self.decomposition).start);
        let mine = match (asked, solver::stop_cause()) {
            (false, _) => 0,
            (true, Some(cause)) => cause.from_rank(rank).code(),
            (true, None) => solver::StopCause::RankSignal { rank, signal: libc::SIGINT }.code(),
        };
        let vote = self.exchange.max(mine as f64)? as i64;
        if vote > 0 && !asked {
            solver::stop_for(solver::StopCause::from_code(vote).expect("a positive vote"));
        }
        Ok(vote > 0)
    }

    fn step(&mut self, n: usize) -> Result<()> {
        let (d, domains) = (self.decomposition, &mut *self.domains);
        let t = Instant::now();
        // With an overlapping exchange, the part of the exchange the step does not hide: copying
        // the edge planes out and starting them, then whatever is left to wait for after the step.
        let mut exposed = 0.0;
        if self.overlap {
            for ((dom, first), leave) in domains.iter_mut().zip(&self.edges).zip(&self.leave) {
                dom.backend
                    .begin_field(n, first, leave)
                    .with_context(|| format!("time step {n} on rank {}", dom.sub.rank))?;
            }
            let t = Instant::now();
            self.exchange.start_halos(d, domains).with_context(|| format!("halo exchange in step {n}"))?;
            exposed += t.elapsed().as_secs_f64();
            for dom in domains.iter_mut() {
                dom.backend.finish_field(n).with_context(|| format!("time step {n} on rank {}", dom.sub.rank))?;
            }
        } else {
            for dom in domains.iter_mut() {
                dom.backend.step_field(n).with_context(|| format!("time step {n} on rank {}", dom.sub.rank))?;
            }
        }
        if !self.exchange_in_step {
            // The host exchange waits for the step anyway (its planes come down after it): the
            // wait is the step's, not the exchange's.
            for dom in domains.iter_mut() {
                dom.backend.wait()?;
            }
            self.compute_seconds.push(t.elapsed().as_secs_f64() - exposed);
        }
        let t = Instant::now();
        self.exchange.finish_halos(d, domains).with_context(|| format!("halo exchange after step {n}"))?;
        self.exchange_seconds.push(exposed + t.elapsed().as_secs_f64());
        for dom in domains.iter_mut() {
            dom.backend.record_receivers()?;
        }
        Ok(())
    }

    fn snapshot(
        &mut self,
        index: usize,
        done: usize,
        sections: &[Section],
        sink: Option<&mut dyn SnapshotSink>,
    ) -> Result<()> {
        let (d, grid) = (self.decomposition, self.problem.shape());
        let is_root = self.exchange.local_ranks(d).start == 0;
        let mut sink =
            if is_root { Some(sink.context("rank 0 of a run with snapshots needs a snapshot sink")?) } else { None };
        // Volumes come to rank 0 one rank's slab at a time: into the sink as slabs where it takes
        // them (no process holds the whole volume), else into the snapshot's buffer.
        let slabs = sink.as_ref().is_some_and(|s| s.takes_volume_slabs());
        let mut field = match &mut sink {
            Some(s) => s.buffer()?,
            None => Vec::new(),
        };
        let plane = grid[0] * grid[1];
        let mut offset = 0;
        for (k, section) in sections.iter().enumerate() {
            if *section == Section::Volume {
                let parts = self.domains.iter_mut().map(owned_block).collect::<Result<Vec<_>>>()?;
                let mut join = SlabJoin::new(d, grid[0]);
                self.exchange.stream_to_root(parts, &mut |rank, values| {
                    let Some((first, values)) = join.push(rank, values)? else { return Ok(()) };
                    match &mut sink {
                        Some(s) if slabs => s.volume_slab(index, done, k, first, values),
                        _ => {
                            let at = offset + first * plane;
                            field[at..at + values.len()].copy_from_slice(&values);
                            Ok(())
                        }
                    }
                })?;
            }
            if !(slabs && *section == Section::Volume) {
                offset += section.len(grid);
            }
        }
        let parts = self.domains.iter_mut().map(|dom| snapshot_part(dom, sections)).collect::<Result<Vec<_>>>()?;
        if let (Some(all), Some(sink)) = (self.exchange.gather(parts)?, sink) {
            assemble(d, sections, grid, &all, &mut field, !slabs)?;
            sink.submit(index, done, field)?;
        }
        Ok(())
    }

    fn checks_while_running(&self) -> bool {
        false
    }

    fn field_is_finite(&mut self) -> Result<bool> {
        let mut finite = true;
        for dom in self.domains.iter_mut() {
            finite &= dom.backend.field_is_finite()?;
        }
        self.exchange.all(finite)
    }

    fn finish(&mut self, steps: usize, start: Instant) -> Result<Option<RunRecord>> {
        let (problem, exchange) = (self.problem, &mut *self.exchange);
        // An exchange on the solvers' streams is timed there, and their step times include it.
        if self.exchange_in_step {
            self.exchange_seconds = exchange.device_seconds()?;
        }
        let mut seconds = Vec::new();
        let mut traces = Vec::new();
        for dom in self.domains.iter_mut() {
            let compute =
                if self.exchange_in_step { dom.backend.step_seconds()? } else { self.compute_seconds.clone() };
            seconds.push(compute.into_iter().map(|s| s as f32).collect());
            traces.push(dom.backend.traces(steps)?);
        }
        seconds.push(self.exchange_seconds.iter().map(|&s| s as f32).collect());
        let wall_seconds = exchange.max(start.elapsed().as_secs_f64())?;
        let (Some(seconds), Some(traces)) = (exchange.gather(seconds)?, exchange.gather(traces)?) else {
            return Ok(None);
        };
        // Per rank: its compute seconds, then its exchange seconds (one pair per process, in order).
        let mut compute = vec![0.0f64; steps];
        let mut exchange_max = vec![0.0f64; steps];
        let per_process = self.domains.len() + 1;
        for (i, s) in seconds.iter().enumerate() {
            ensure!(s.len() == steps, "a rank timed {} of {steps} steps", s.len());
            let target = if i % per_process == per_process - 1 { &mut exchange_max } else { &mut compute };
            for (t, &v) in target.iter_mut().zip(s) {
                *t = t.max(v as f64);
            }
        }
        let mut out = vec![0.0f32; problem.receivers.len() * steps];
        for (rank, part) in traces.iter().enumerate() {
            let mine: Vec<usize> =
                (0..problem.receivers.len()).filter(|&i| self.decomposition.receiver_rank[i] == rank).collect();
            ensure!(part.len() == mine.len() * steps, "rank {rank} returned {} trace samples", part.len());
            for (k, &i) in mine.iter().enumerate() {
                out[i * steps..(i + 1) * steps].copy_from_slice(&part[k * steps..(k + 1) * steps]);
            }
        }
        let step_seconds =
            compute.iter().zip(&exchange_max).map(|(c, e)| if self.exchange_in_step { *c } else { c + e }).collect();
        Ok(Some(RunRecord { step_seconds, traces: out, wall_seconds, exchange_seconds: Some(exchange_max) }))
    }
}
