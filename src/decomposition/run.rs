//! The time loop of a decomposed run: every step, each subdomain computes its planes, the
//! [`Exchange`] overwrites the ghost planes, then the receivers are recorded; snapshots and traces
//! are gathered at rank 0 into the single-domain layout. With an exchange that overlaps the step
//! (and backends that compute a step in parts), each subdomain computes the owned planes next to
//! its cuts first ([`edge_planes`]), the exchange starts sending them, the rest of the step is
//! computed while they travel, and the ghost planes are written once both are done.

use super::exchange::{edge_planes, ghost_planes};
use super::{Decomposition, Exchange, SubDomain};
use crate::backend::Backend;
use crate::grid::Section;
use crate::output::plan::OutputPlan;
use crate::problem::Problem;
use crate::solver::{BlowUp, Interrupted, PROGRESS_INTERVAL, RunRecord, SnapshotSink, stop_requested};
use anyhow::{Context, Result, ensure};
use std::time::Instant;

/// Steps between two votes on stopping (a signal reaches the ranks at different steps; they stop
/// together, at the first vote after it, or the others would wait for their halos for ever).
const STOP_VOTE_EVERY: usize = 16;

/// One subdomain and the backend running it.
pub struct Domain {
    pub sub: SubDomain,
    pub backend: Box<dyn Backend>,
}

/// What a decomposed run hands to the outputs at rank 0.
#[derive(Clone, Debug)]
pub struct DecomposedRecord {
    /// Traces in the single-domain order; step seconds the slowest rank's compute plus exchange.
    pub record: RunRecord,
    /// Seconds of the halo exchange in each step (the slowest rank's).
    pub exchange_seconds: Vec<f64>,
}

/// Runs all steps of `problem` (the single-domain run) over `domains`, this process's subdomains
/// of `decomposition`. Rank 0 gets the record (and hands snapshots to `sink`, which it must have
/// when `plan` takes any); other ranks get None.
pub fn run(
    problem: &Problem,
    decomposition: &Decomposition,
    domains: &mut [Domain],
    exchange: &mut dyn Exchange,
    plan: &OutputPlan,
    mut sink: Option<&mut dyn SnapshotSink>,
    progress: &mut dyn FnMut(usize),
) -> Result<Option<DecomposedRecord>> {
    let steps = problem.steps;
    let grid = problem.shape();
    let start = Instant::now();
    let mut last_report = start;
    let sections: Vec<Section> = plan.snapshots.iter().map(|s| s.section).collect();
    let mut next_snapshot = plan.snapshot_steps.iter().copied().enumerate().peekable();
    let mut exchange_seconds = Vec::with_capacity(steps);
    exchange.begin(steps)?;
    let exchange_in_step = exchange.timed_on_device();
    // Overlap where the exchange can and every backend computes a step in parts.
    let overlap = exchange.overlaps() && !decomposition.blocks() && domains.iter().all(|d| d.backend.splits_steps());
    let edges: Vec<_> = domains.iter().map(|d| edge_planes(decomposition, d)).collect();
    let leave: Vec<_> = domains
        .iter()
        .map(|d| if exchange.writes_ghosts_during_step() { ghost_planes(d) } else { Vec::new() })
        .collect();
    // With a host exchange, a step is timed on the host: its compute up to the device's end, then
    // the exchange (device events would count the device's idle wait for the exchange as well).
    let mut compute_seconds = Vec::with_capacity(if exchange_in_step { 0 } else { steps });
    for n in 0..steps {
        if n % STOP_VOTE_EVERY == 0 && n > 0 && !exchange.all(!stop_requested())? {
            return Err(Interrupted { steps_done: n, steps }.into());
        }
        let t = Instant::now();
        // With an overlapping exchange, the part of the exchange the step does not hide: copying
        // the edge planes out and starting them, then whatever is left to wait for after the step.
        let mut exposed = 0.0;
        if overlap {
            for ((dom, first), leave) in domains.iter_mut().zip(&edges).zip(&leave) {
                dom.backend
                    .begin_field(n, first, leave)
                    .with_context(|| format!("time step {n} on rank {}", dom.sub.rank))?;
            }
            let t = Instant::now();
            exchange.start_halos(decomposition, domains).with_context(|| format!("halo exchange in step {n}"))?;
            exposed += t.elapsed().as_secs_f64();
            for dom in domains.iter_mut() {
                dom.backend.finish_field(n).with_context(|| format!("time step {n} on rank {}", dom.sub.rank))?;
            }
        } else {
            for dom in domains.iter_mut() {
                dom.backend.step_field(n).with_context(|| format!("time step {n} on rank {}", dom.sub.rank))?;
            }
        }
        if !exchange_in_step {
            // The host exchange waits for the step anyway (its planes come down after it): the
            // wait is the step's, not the exchange's.
            for dom in domains.iter_mut() {
                dom.backend.wait()?;
            }
            compute_seconds.push(t.elapsed().as_secs_f64() - exposed);
        }
        let t = Instant::now();
        exchange.finish_halos(decomposition, domains).with_context(|| format!("halo exchange after step {n}"))?;
        exchange_seconds.push(exposed + t.elapsed().as_secs_f64());
        for dom in domains.iter_mut() {
            dom.backend.record_receivers()?;
        }
        let done = n + 1;
        if let Some(&(index, at)) = next_snapshot.peek()
            && at == done
        {
            let is_root = exchange.local_ranks(decomposition).start == 0;
            let mut sink = if is_root {
                Some(sink.as_deref_mut().context("rank 0 of a run with snapshots needs a snapshot sink")?)
            } else {
                None
            };
            // Volumes come to rank 0 one rank's slab at a time: into the sink as slabs where it
            // takes them (no process holds the whole volume), else into the snapshot's buffer.
            let slabs = sink.as_ref().is_some_and(|s| s.takes_volume_slabs());
            let mut field = match &mut sink {
                Some(s) => s.buffer()?,
                None => Vec::new(),
            };
            let plane = grid[0] * grid[1];
            let mut offset = 0;
            for (k, section) in sections.iter().enumerate() {
                if *section == Section::Volume {
                    let parts = domains.iter_mut().map(owned_block).collect::<Result<Vec<_>>>()?;
                    let mut join = SlabJoin::new(decomposition, grid[0]);
                    exchange.stream_to_root(parts, &mut |rank, values| {
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
            let parts = domains.iter_mut().map(|d| snapshot_part(d, &sections)).collect::<Result<Vec<_>>>()?;
            if let (Some(all), Some(sink)) = (exchange.gather(parts)?, sink) {
                assemble(decomposition, &sections, grid, &all, &mut field, !slabs)?;
                sink.submit(index, done, field)?;
            }
            next_snapshot.next();
        }
        let now = Instant::now();
        if now.duration_since(last_report) >= PROGRESS_INTERVAL {
            progress(done);
            last_report = now;
        }
    }
    let mut finite = true;
    for dom in domains.iter_mut() {
        finite &= dom.backend.field_is_finite()?;
    }
    if !exchange.all(finite)? {
        let cfl_fraction = problem.dt / problem.dt_limit();
        return Err(BlowUp { last_finite: 0, found: steps, dt: problem.dt, cfl_fraction }.into());
    }
    // An exchange on the solvers' streams is timed there, and their step times include it.
    if exchange_in_step {
        exchange_seconds = exchange.device_seconds()?;
    }
    let mut seconds = Vec::new();
    let mut traces = Vec::new();
    for dom in domains.iter_mut() {
        let compute = if exchange_in_step { dom.backend.step_seconds()? } else { compute_seconds.clone() };
        seconds.push(compute.into_iter().map(|s| s as f32).collect());
        traces.push(dom.backend.traces(steps)?);
    }
    seconds.push(exchange_seconds.iter().map(|&s| s as f32).collect());
    let wall_seconds = exchange.max(start.elapsed().as_secs_f64())?;
    progress(steps);
    let (Some(seconds), Some(traces)) = (exchange.gather(seconds)?, exchange.gather(traces)?) else {
        return Ok(None);
    };
    // Per rank: its compute seconds, then its exchange seconds (one pair per process, in order).
    let mut compute = vec![0.0f64; steps];
    let mut exchange_max = vec![0.0f64; steps];
    let per_process = domains.len() + 1;
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
            (0..problem.receivers.len()).filter(|&i| decomposition.receiver_rank[i] == rank).collect();
        ensure!(part.len() == mine.len() * steps, "rank {rank} returned {} trace samples", part.len());
        for (k, &i) in mine.iter().enumerate() {
            out[i * steps..(i + 1) * steps].copy_from_slice(&part[k * steps..(k + 1) * steps]);
        }
    }
    let step_seconds =
        compute.iter().zip(&exchange_max).map(|(c, e)| if exchange_in_step { *c } else { c + e }).collect();
    Ok(Some(DecomposedRecord {
        record: RunRecord { step_seconds, traces: out, wall_seconds },
        exchange_seconds: exchange_max,
    }))
}

/// Joins the owned blocks of y-z blocks into whole planes: the ranks of a z-slab come one after
/// the other (rank order), and once the slab's last one has, its planes go on whole. With z-slabs
/// alone each block is its slab's planes.
pub struct SlabJoin<'a> {
    d: &'a Decomposition,
    nx: usize,
    planes: Vec<f32>,
}

impl<'a> SlabJoin<'a> {
    pub fn new(d: &'a Decomposition, nx: usize) -> SlabJoin<'a> {
        SlabJoin { d, nx, planes: Vec::new() }
    }

    /// Rank `rank`'s owned block (planes, rows, nx); the slab's first plane and its planes once
    /// the slab is complete.
    pub fn push(&mut self, rank: usize, block: Vec<f32>) -> Result<Option<(usize, Vec<f32>)>> {
        let d = self.d;
        let ((z0, z1), (y0, y1)) = (d.planes_of(rank), d.rows_of(rank));
        let (planes, rows) = (z1 - z0, y1 - y0);
        ensure!(block.len() == planes * rows * self.nx, "rank {rank} sent {} values for its block", block.len());
        if !d.blocks() {
            return Ok(Some((z0, block)));
        }
        let line = d.ny * self.nx;
        self.planes.resize(planes * line, 0.0);
        for (k, part) in block.chunks_exact(rows * self.nx).enumerate() {
            self.planes[k * line + y0 * self.nx..k * line + y1 * self.nx].copy_from_slice(part);
        }
        if d.y_neighbours(rank).1.is_some() {
            return Ok(None);
        }
        Ok(Some((z0, std::mem::take(&mut self.planes))))
    }
}

/// The owned planes and rows of `section` a rank contributes to the gathered parts ((z range, y
/// range) of the section's points, whose x extent is the section's own): the plane sections it
/// crosses, none of a volume (which comes by itself).
fn part_extent(section: &Section, d: &Decomposition, rank: usize) -> Option<((usize, usize), (usize, usize))> {
    let ((z0, z1), (y0, y1)) = (d.planes_of(rank), d.rows_of(rank));
    match *section {
        Section::Volume => None,
        Section::Xz { iy } => (y0..y1).contains(&iy).then_some(((z0, z1), (iy, iy + 1))),
        Section::Yz { .. } => Some(((z0, z1), (y0, y1))),
        Section::Xy { iz } => (z0..z1).contains(&iz).then_some(((iz, iz + 1), (y0, y1))),
    }
}

/// This subdomain's owned block of p^n, dense (planes, rows, nx).
fn owned_block(dom: &mut Domain) -> Result<Vec<f32>> {
    let l = dom.sub.problem.layout;
    let planes = dom.sub.owned.1 - dom.sub.owned.0;
    let mut out = vec![0.0; planes * l.nx * l.ny];
    dom.backend.planes_out(dom.sub.owned_local(), planes, &mut out)?;
    let (y0, rows) = (dom.sub.owned_rows_local(), dom.sub.owned_rows.1 - dom.sub.owned_rows.0);
    if rows == l.ny {
        return Ok(out);
    }
    let mut block = Vec::with_capacity(planes * rows * l.nx);
    for plane in out.chunks_exact(l.ny * l.nx) {
        block.extend_from_slice(&plane[y0 * l.nx..(y0 + rows) * l.nx]);
    }
    Ok(block)
}

/// This subdomain's owned points of every plane section (volumes go by [`owned_block`]), one
/// section after the other, each (planes, rows, points along x or 1).
fn snapshot_part(dom: &mut Domain, sections: &[Section]) -> Result<Vec<f32>> {
    let sub = &dom.sub;
    let l = sub.problem.layout;
    let grid = [l.nx, l.ny, l.nz];
    let (own, planes) = (sub.owned_local(), sub.owned.1 - sub.owned.0);
    let (own_y, rows) = (sub.owned_rows_local(), sub.owned_rows.1 - sub.owned_rows.0);
    let mut out = Vec::new();
    let mut local = Vec::new();
    for s in sections {
        // The local section (None where this rank has none of it) and its rows per plane.
        let (local_section, per_row) = match *s {
            Section::Volume => continue,
            Section::Xz { iy } if (sub.owned_rows.0..sub.owned_rows.1).contains(&iy) => {
                (Section::Xz { iy: iy - sub.first_row }, l.nx)
            }
            Section::Yz { ix } => (Section::Yz { ix }, 1),
            Section::Xy { iz } if (sub.owned.0..sub.owned.1).contains(&iz) => {
                (Section::Xy { iz: iz - sub.first }, l.nx)
            }
            _ => continue,
        };
        local.resize(local_section.len(grid), 0.0);
        dom.backend.snapshot_sections(std::slice::from_ref(&local_section), &mut local)?;
        match local_section {
            Section::Xz { .. } => out.extend_from_slice(&local[own * l.nx..(own + planes) * l.nx]),
            Section::Yz { .. } => {
                for z in own..own + planes {
                    out.extend_from_slice(&local[z * l.ny + own_y..z * l.ny + own_y + rows]);
                }
            }
            _ => out.extend_from_slice(&local[own_y * per_row..(own_y + rows) * per_row]),
        }
    }
    Ok(out)
}

/// Every rank's parts (from [`snapshot_part`], rank order) laid out as one single-domain snapshot,
/// stepping over the volumes' places in `out` where it has them (`volumes_in_out`).
fn assemble(
    d: &Decomposition,
    sections: &[Section],
    grid: [usize; 3],
    parts: &[Vec<f32>],
    out: &mut [f32],
    volumes_in_out: bool,
) -> Result<()> {
    ensure!(parts.len() == d.ranks(), "{} snapshot parts for {} ranks", parts.len(), d.ranks());
    let mut offsets = vec![0usize; parts.len()];
    let mut at = 0;
    for s in sections {
        if *s == Section::Volume {
            at += if volumes_in_out { s.len(grid) } else { 0 };
            continue;
        }
        // The section's layout: (z or y, then y or x), `line` points along its second axis.
        let line = if matches!(s, Section::Yz { .. }) { grid[1] } else { grid[0] };
        for (rank, part) in parts.iter().enumerate() {
            let Some(((z0, z1), (y0, y1))) = part_extent(s, d, rank) else { continue };
            let (planes, rows) = (z1 - z0, y1 - y0);
            let n = planes * rows * if matches!(s, Section::Yz { .. }) { 1 } else { grid[0] };
            ensure!(offsets[rank] + n <= part.len(), "snapshot part of rank {rank} too short");
            let part = &part[offsets[rank]..offsets[rank] + n];
            offsets[rank] += n;
            match *s {
                Section::Xz { .. } => out[at + z0 * line..at + z1 * line].copy_from_slice(part),
                Section::Yz { .. } => {
                    for (k, p) in part.chunks_exact(rows).enumerate() {
                        let o = at + (z0 + k) * line + y0;
                        out[o..o + rows].copy_from_slice(p);
                    }
                }
                _ => out[at + y0 * line..at + y1 * line].copy_from_slice(part),
            }
        }
        at += s.len(grid);
    }
    ensure!(at == out.len(), "snapshot of {} values assembled from {at}", out.len());
    Ok(())
}
