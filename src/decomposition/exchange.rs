//! The halo exchange behind one interface: [`InProcess`] runs every subdomain in this process and
//! copies planes between them (deterministic and cheap, for tests and for several subdomains on
//! one device); the MPI path (feature `mpi`) holds one subdomain per rank and moves the planes
//! through host memory; the NCCL path (feature `nccl`) moves them device to device.

use super::{Decomposition, Domain};
use anyhow::{Result, ensure};

/// Moves halo planes between the subdomains and brings results to rank 0.
pub trait Exchange {
    /// Ranks whose subdomains this process holds, in order.
    fn local_ranks(&self, decomposition: &Decomposition) -> std::ops::Range<usize>;

    /// After a step, overwrites every ghost plane of p^n (the step's p^{n+1}) in `domains` (this
    /// process's subdomains, in rank order) with the neighbour's owned plane.
    fn halos(&mut self, decomposition: &Decomposition, domains: &mut [Domain]) -> Result<()>;

    /// Whether the exchange overlaps the step: [`start_halos`](Self::start_halos) starts moving
    /// the planes a neighbour needs as soon as they are computed, and the rest of the step is
    /// computed while they travel; [`finish_halos`](Self::finish_halos) completes it.
    fn overlaps(&self) -> bool {
        false
    }

    /// Whether an exchange that [`overlaps`](Self::overlaps) writes the ghost planes while the rest
    /// of the step runs (on the device), so that the step must leave them alone.
    fn writes_ghosts_during_step(&self) -> bool {
        false
    }

    /// For an exchange that [`overlaps`](Self::overlaps): after every subdomain's
    /// [`begin_field`](crate::backend::Backend::begin_field) with [`edge_planes`], copies out
    /// the new owned planes next to each cut and starts sending them.
    fn start_halos(&mut self, decomposition: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        let _ = (decomposition, domains);
        Ok(())
    }

    /// After the step: the ghost planes of p^n overwritten, as [`halos`](Self::halos) does (for
    /// an exchange that overlaps, with the planes [`start_halos`](Self::start_halos) sent).
    fn finish_halos(&mut self, decomposition: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        self.halos(decomposition, domains)
    }

    /// Called once before a run of `steps` steps (what the loop needs is made here).
    fn begin(&mut self, steps: usize) -> Result<()> {
        let _ = steps;
        Ok(())
    }

    /// Whether the exchange is queued on the solvers' streams and timed there (the step's device
    /// time then includes it); else it is timed on the host, once the step's work is done.
    fn timed_on_device(&self) -> bool {
        false
    }

    /// Seconds of each step's exchange, for an exchange [`timed_on_device`](Self::timed_on_device).
    fn device_seconds(&mut self) -> Result<Vec<f64>> {
        anyhow::bail!("this exchange is timed on the host")
    }

    /// Every rank's `parts` (one per local subdomain) at rank 0, in rank order; None elsewhere.
    fn gather(&mut self, parts: Vec<Vec<f32>>) -> Result<Option<Vec<Vec<f32>>>>;

    /// Every rank's `parts` (one per local subdomain) handed to `each` at rank 0 with the rank
    /// they come from, in rank order and one at a time, so that rank 0 need not hold them all at
    /// once (an exchange across processes streams them; the default gathers them first).
    fn stream_to_root(
        &mut self,
        parts: Vec<Vec<f32>>,
        each: &mut dyn FnMut(usize, Vec<f32>) -> Result<()>,
    ) -> Result<()> {
        if let Some(all) = self.gather(parts)? {
            for (rank, part) in all.into_iter().enumerate() {
                each(rank, part)?;
            }
        }
        Ok(())
    }

    /// Whether `value` holds on every rank (every rank gets the answer).
    fn all(&mut self, value: bool) -> Result<bool>;

    /// The largest of every rank's `value` (every rank gets the answer).
    fn max(&mut self, value: f64) -> Result<f64>;
}

/// The owned planes of `dom` (local indices) that its neighbours take as ghost planes: the first
/// `halo` under a cut above it, the last `halo` over a cut below it.
pub fn edge_planes(d: &Decomposition, dom: &Domain) -> Vec<std::ops::Range<usize>> {
    let h = d.halo;
    let (up, down) = d.z_neighbours(dom.sub.rank);
    let (own0, own1) = (dom.sub.owned_local(), dom.sub.owned.1 - dom.sub.first);
    let mut out = Vec::with_capacity(2);
    if up.is_some() {
        out.push(own0..own0 + h);
    }
    if down.is_some() {
        // Thin slabs: the two edges may meet or overlap (a slab is at least `halo` planes).
        let lo = (own1 - h).max(out.last().map_or(0, |r| r.end));
        out.push(lo..own1);
    }
    out
}

/// Exchanges the halo rows between the y-neighbours of `domains` (this process's subdomains of
/// y-z blocks, in rank order, all of them): every held plane's rows, ghost planes included, so
/// that the z exchange after it carries the corner points too.
fn exchange_rows(d: &Decomposition, domains: &mut [Domain], buf: &mut Vec<f32>) -> Result<()> {
    let h = d.halo;
    for k in 0..domains.len() {
        let Some(next) = d.y_neighbours(domains[k].sub.rank).1 else { continue };
        let j = next - domains[0].sub.rank;
        let (upper, lower) = domains.split_at_mut(j);
        let (a, b) = (&mut upper[k], &mut lower[0]);
        let l = a.sub.problem.layout;
        buf.resize(l.nz * h * l.nx, 0.0);
        let a_end = a.sub.owned_rows.1 - a.sub.first_row;
        let b_own = b.sub.owned_rows_local();
        a.backend.rows_out(a_end - h, h, buf)?;
        b.backend.rows_in(b_own - h, h, buf)?;
        b.backend.rows_out(b_own, h, buf)?;
        a.backend.rows_in(a_end, h, buf)?;
    }
    Ok(())
}

/// The ghost planes of `dom` (local indices): above its first owned plane and below its last.
pub fn ghost_planes(dom: &Domain) -> Vec<std::ops::Range<usize>> {
    let (own0, own1) = (dom.sub.owned_local(), dom.sub.owned.1 - dom.sub.first);
    [0..own0, own1..dom.sub.planes()].into_iter().filter(|r| !r.is_empty()).collect()
}

/// All subdomains in this process: the exchange is a copy of planes.
#[derive(Default)]
pub struct InProcess {
    buf: Vec<f32>,
    /// With [`overlapping`](Self::overlapping): per cut, the planes going up and down, copied
    /// out in the middle of the step.
    cuts: Option<Vec<[Vec<f32>; 2]>>,
    /// Whether the planes of the step under way were copied out.
    started: bool,
}

impl InProcess {
    /// The exchange that copies each cut's planes out as soon as they are computed
    /// ([`Exchange::start_halos`]) and into the ghost planes after the step: the order of an
    /// overlapping exchange, for backends that compute a step in parts.
    pub fn overlapping() -> InProcess {
        InProcess { buf: Vec::new(), cuts: Some(Vec::new()), started: false }
    }
}

impl Exchange for InProcess {
    fn local_ranks(&self, decomposition: &Decomposition) -> std::ops::Range<usize> {
        0..decomposition.ranks()
    }

    fn halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        if d.blocks() {
            exchange_rows(d, domains, &mut self.buf)?;
        }
        for k in 0..domains.len() {
            let Some(below) = d.z_neighbours(domains[k].sub.rank).1 else { continue };
            let j = below - domains[0].sub.rank;
            let (upper, lower) = domains.split_at_mut(j);
            let (a, b) = (&mut upper[k], &mut lower[0]);
            let plane = a.sub.problem.layout.nx * a.sub.problem.layout.ny;
            self.buf.resize(d.halo * plane, 0.0);
            let h = d.halo;
            // a's last h owned planes become b's first h planes, and b's first h owned planes
            // a's last h.
            let a_end = a.sub.owned.1 - a.sub.first;
            a.backend.planes_out(a_end - h, h, &mut self.buf)?;
            b.backend.planes_in(0, h, &self.buf)?;
            b.backend.planes_out(h, h, &mut self.buf)?;
            a.backend.planes_in(a_end, h, &self.buf)?;
        }
        Ok(())
    }

    fn overlaps(&self) -> bool {
        self.cuts.is_some()
    }

    fn start_halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        ensure!(!d.blocks(), "the overlapping exchange takes z-slabs only");
        let Some(cuts) = &mut self.cuts else { return Ok(()) };
        self.started = true;
        let h = d.halo;
        cuts.resize_with(domains.len().saturating_sub(1), Default::default);
        for (k, [down, up]) in cuts.iter_mut().enumerate() {
            let plane = domains[k].sub.problem.layout.nx * domains[k].sub.problem.layout.ny;
            down.resize(h * plane, 0.0);
            up.resize(h * plane, 0.0);
            let a_end = domains[k].sub.owned.1 - domains[k].sub.first;
            domains[k].backend.next_planes_out(a_end - h, h, down)?;
            domains[k + 1].backend.next_planes_out(h, h, up)?;
        }
        Ok(())
    }

    fn finish_halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        let Some(cuts) = self.cuts.as_ref().filter(|_| self.started) else { return self.halos(d, domains) };
        self.started = false;
        let h = d.halo;
        for (k, [down, up]) in cuts.iter().enumerate() {
            let a_end = domains[k].sub.owned.1 - domains[k].sub.first;
            domains[k + 1].backend.planes_in(0, h, down)?;
            domains[k].backend.planes_in(a_end, h, up)?;
        }
        Ok(())
    }

    fn gather(&mut self, parts: Vec<Vec<f32>>) -> Result<Option<Vec<Vec<f32>>>> {
        Ok(Some(parts))
    }

    fn all(&mut self, value: bool) -> Result<bool> {
        Ok(value)
    }

    fn max(&mut self, value: f64) -> Result<f64> {
        Ok(value)
    }
}
