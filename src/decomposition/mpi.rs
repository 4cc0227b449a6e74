//! The host-staged MPI exchange: one subdomain per rank, halo planes copied out of the backend,
//! sent to and received from the neighbouring ranks (non-blocking, both cuts at once), copied in.
//!
//! With [`MpiExchange::overlap`], a thread of its own (the mover) moves the planes while the
//! backend computes the rest of the step: MPI progresses only inside MPI calls, so requests
//! started before the interior and waited for after it would move little in between. The mover
//! has a duplicate of the communicator (its messages never match the main thread's), and the
//! main thread makes no MPI call while the mover works (it waits for it first), which MPI's
//! `MPI_THREAD_SERIALIZED` level allows.

use super::Domain;
use super::{Decomposition, Exchange};
use anyhow::{Context, Result, ensure};
use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, Process, SimpleCommunicator};
use mpi::traits::*;
use std::sync::mpsc;

/// Tag of planes sent to the rank above (lower z), and of those sent to the rank below.
const UP: i32 = 21;
const DOWN: i32 = 22;
/// Tag of parts streamed to rank 0.
const TO_ROOT: i32 = 23;
/// Tags of rows sent to the rank before (lower y) and after, in y-z blocks.
const ROW_UP: i32 = 24;
const ROW_DOWN: i32 = 25;

/// The exchange between the ranks of `world`, rank k holding subdomain k.
pub struct MpiExchange {
    world: SimpleCommunicator,
    /// Planes to the rank above and below, and from them (moved to the mover and back).
    planes: Planes,
    mover: Option<Mover>,
    /// Whether the mover holds the planes of the step under way.
    in_flight: bool,
}

/// The halo planes of one exchange and the neighbours they go to and come from.
#[derive(Default)]
struct Planes {
    send: [Vec<f32>; 2],
    recv: [Vec<f32>; 2],
    up: Option<i32>,
    down: Option<i32>,
}

/// The thread that moves the planes of an overlapping exchange.
struct Mover {
    work: Option<mpsc::SyncSender<Planes>>,
    done: mpsc::Receiver<Planes>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The mover's communicator. MPI handles may be used by any thread of a process initialised with
/// `MPI_THREAD_SERIALIZED` or more, one call at a time ([`MpiExchange::overlap`] checks
/// the level; the main thread waits for the mover before its own calls).
struct MoverComm(SimpleCommunicator);
// SAFETY: see the type's docs.
unsafe impl Send for MoverComm {}

impl Drop for Mover {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        self.work.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl MpiExchange {
    pub fn new(world: SimpleCommunicator) -> MpiExchange {
        MpiExchange { world, planes: Planes::default(), mover: None, in_flight: false }
    }

    /// From now on the planes are moved by a thread of its own while the step is computed
    /// (collective: every rank calls it). Where MPI was initialised below
    /// `MPI_THREAD_SERIALIZED`, the exchange stays as it was and the error says why.
    pub fn overlap(&mut self) -> std::result::Result<(), String> {
        // Every rank decides alike, or ranks with a mover would wait for planes on a
        // communicator their neighbours do not use.
        let level = mpi::environment::threading_support();
        match self.all(level >= mpi::Threading::Serialized) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!("MPI gives threading level {level:?} on some rank, the overlap needs Serialized"));
            }
            Err(e) => return Err(format!("{e:#}")),
        }
        let comm = MoverComm(self.world.duplicate());
        // One exchange in flight at a time: channels of one slot, allocated here, not per step.
        let (work, jobs) = mpsc::sync_channel::<Planes>(1);
        let (give, done) = mpsc::sync_channel::<Planes>(1);
        let thread = std::thread::Builder::new().name("halo mover".into()).spawn(move || {
            let comm = comm;
            for mut planes in jobs {
                planes.exchange(&comm.0, true, 2);
                if give.send(planes).is_err() {
                    break;
                }
            }
        });
        let started = thread.is_ok();
        let mover = thread.ok().map(|t| Mover { work: Some(work), done, thread: Some(t) });
        match self.all(started) {
            Ok(true) => {
                self.mover = mover;
                Ok(())
            }
            Ok(false) => Err("the halo mover thread could not start on some rank".into()),
            Err(e) => Err(format!("{e:#}")),
        }
    }

    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    pub fn size(&self) -> usize {
        self.world.size() as usize
    }

    /// Rank 0's `bytes` on every rank.
    pub fn broadcast_from_root(&self, bytes: &mut [u8]) {
        self.world.process_at_rank(0).broadcast_into(bytes);
    }
}

impl Planes {
    /// Sizes the buffers for `dom` and copies its edge planes (`axis` 2) or rows (`axis` 1, over
    /// every held plane) out of the backend: planes of p^{n+1} of the step under way with `next`,
    /// else of p^n.
    fn fill(&mut self, d: &Decomposition, dom: &mut Domain, next: bool, axis: usize) -> Result<()> {
        let (rank, h) = (dom.sub.rank, d.halo);
        let l = dom.sub.problem.layout;
        let (n, (lo, hi), own0, own1) = if axis == 2 {
            (h * l.nx * l.ny, d.z_neighbours(rank), dom.sub.owned_local(), dom.sub.owned.1 - dom.sub.first)
        } else {
            (
                h * l.nx * l.nz,
                d.y_neighbours(rank),
                dom.sub.owned_rows_local(),
                dom.sub.owned_rows.1 - dom.sub.first_row,
            )
        };
        (self.up, self.down) = (lo.map(|r| r as i32), hi.map(|r| r as i32));
        for b in self.send.iter_mut().chain(self.recv.iter_mut()) {
            b.resize(n, 0.0);
        }
        let b = &mut dom.backend;
        let [s_up, s_down] = &mut self.send;
        for (at, buf, to) in [(own0, s_up, self.up), (own1 - h, s_down, self.down)] {
            if to.is_some() {
                match (axis, next) {
                    (1, _) => b.rows_out(at, h, buf)?,
                    (_, true) => b.next_planes_out(at, h, buf)?,
                    _ => b.planes_out(at, h, buf)?,
                }
            }
        }
        Ok(())
    }

    /// Sends to both neighbours and receives from both, all at once, with the tags of `axis`;
    /// `polite` waits by testing and yielding the core between tests (the mover shares the cores
    /// with the step).
    fn exchange(&mut self, comm: &SimpleCommunicator, polite: bool, axis: usize) {
        let (up, down) = (self.up, self.down);
        let (tag_up, tag_down) = if axis == 2 { (UP, DOWN) } else { (ROW_UP, ROW_DOWN) };
        let ([s_up, s_down], [r_up, r_down]) = (&self.send, &mut self.recv);
        mpi::request::scope(|scope| {
            let recv_up =
                up.map(|r| comm.process_at_rank(r).immediate_receive_into_with_tag(scope, &mut r_up[..], tag_down));
            let recv_down =
                down.map(|r| comm.process_at_rank(r).immediate_receive_into_with_tag(scope, &mut r_down[..], tag_up));
            let send_up = up.map(|r| comm.process_at_rank(r).immediate_send_with_tag(scope, &s_up[..], tag_up));
            let send_down = down.map(|r| comm.process_at_rank(r).immediate_send_with_tag(scope, &s_down[..], tag_down));
            let mut pending = [recv_up, recv_down, send_up, send_down];
            if !polite {
                for r in pending.into_iter().flatten() {
                    r.wait();
                }
                return;
            }
            while pending.iter().any(Option::is_some) {
                for slot in pending.iter_mut() {
                    if let Some(r) = slot.take() {
                        *slot = r.test().err();
                    }
                }
                if pending.iter().any(Option::is_some) {
                    std::thread::yield_now();
                }
            }
        });
    }

    /// Overwrites the ghost planes (`axis` 2) or rows (`axis` 1) of `dom` with those received.
    fn empty(&self, d: &Decomposition, dom: &mut Domain, axis: usize) -> Result<()> {
        let h = d.halo;
        let (own0, own1) = if axis == 2 {
            (dom.sub.owned_local(), dom.sub.owned.1 - dom.sub.first)
        } else {
            (dom.sub.owned_rows_local(), dom.sub.owned_rows.1 - dom.sub.first_row)
        };
        let b = &mut dom.backend;
        if self.up.is_some() {
            if axis == 2 { b.planes_in(own0 - h, h, &self.recv[0])? } else { b.rows_in(own0 - h, h, &self.recv[0])? }
        }
        if self.down.is_some() {
            if axis == 2 { b.planes_in(own1, h, &self.recv[1])? } else { b.rows_in(own1, h, &self.recv[1])? }
        }
        Ok(())
    }
}

impl Exchange for MpiExchange {
    fn local_ranks(&self, _: &Decomposition) -> std::ops::Range<usize> {
        self.rank()..self.rank() + 1
    }

    fn halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        ensure!(domains.len() == 1, "an MPI rank holds one subdomain, not {}", domains.len());
        let dom = &mut domains[0];
        // Rows first, over every held plane, so that the planes after them carry the corners.
        let axes: &[usize] = if d.blocks() { &[1, 2] } else { &[2] };
        for &axis in axes {
            self.planes.fill(d, dom, false, axis)?;
            self.planes.exchange(&self.world, false, axis);
            self.planes.empty(d, dom, axis)?;
        }
        Ok(())
    }

    fn overlaps(&self) -> bool {
        self.mover.is_some()
    }

    fn start_halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        ensure!(domains.len() == 1, "an MPI rank holds one subdomain, not {}", domains.len());
        let Some(mover) = &self.mover else { return Ok(()) };
        ensure!(!self.in_flight, "a halo exchange is already under way");
        ensure!(!d.blocks(), "the overlapping exchange takes z-slabs only");
        self.planes.fill(d, &mut domains[0], true, 2)?;
        let work = mover.work.as_ref().context("the halo mover has stopped")?;
        work.send(std::mem::take(&mut self.planes)).ok().context("the halo mover thread has ended")?;
        self.in_flight = true;
        Ok(())
    }

    fn finish_halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        if !self.in_flight {
            return self.halos(d, domains);
        }
        let mover = self.mover.as_ref().context("a halo exchange under way without its mover")?;
        self.planes = mover.done.recv().ok().context("the halo mover thread ended during an exchange")?;
        self.in_flight = false;
        self.planes.empty(d, &mut domains[0], 2)
    }

    fn gather(&mut self, parts: Vec<Vec<f32>>) -> Result<Option<Vec<Vec<f32>>>> {
        if self.rank() != 0 {
            let root = self.world.process_at_rank(0);
            for p in &parts {
                send_long(&root, p, TO_ROOT);
            }
            return Ok(None);
        }
        let per_rank = parts.len();
        let mut all = parts;
        for r in 1..self.size() {
            for _ in 0..per_rank {
                all.push(receive_long(&self.world.process_at_rank(r as i32), TO_ROOT));
            }
        }
        Ok(Some(all))
    }

    fn stream_to_root(
        &mut self,
        parts: Vec<Vec<f32>>,
        each: &mut dyn FnMut(usize, Vec<f32>) -> Result<()>,
    ) -> Result<()> {
        ensure!(parts.len() == 1, "an MPI rank holds one subdomain, not {}", parts.len());
        if self.rank() != 0 {
            send_long(&self.world.process_at_rank(0), &parts[0], TO_ROOT);
            return Ok(());
        }
        let mut parts = parts;
        each(0, parts.pop().expect("one part"))?;
        for r in 1..self.size() {
            let v = receive_long(&self.world.process_at_rank(r as i32), TO_ROOT);
            each(r, v)?;
        }
        Ok(())
    }

    fn all(&mut self, value: bool) -> Result<bool> {
        let mut out = 0u8;
        self.world.all_reduce_into(&u8::from(value), &mut out, SystemOperation::min());
        Ok(out == 1)
    }

    fn max(&mut self, value: f64) -> Result<f64> {
        let mut out = 0.0f64;
        self.world.all_reduce_into(&value, &mut out, SystemOperation::max());
        Ok(out)
    }
}

/// Values one message carries at most: MPI counts are 32-bit, and a rank's part of a model larger
/// than one GPU holds billions.
const MESSAGE_VALUES: usize = 1 << 28;

/// `values` to `to` as their length and then messages of at most [`MESSAGE_VALUES`] (one pair
/// of ranks and one tag keep their order).
fn send_long(to: &Process<'_>, values: &[f32], tag: i32) {
    to.send_with_tag(&(values.len() as u64), tag);
    for chunk in values.chunks(MESSAGE_VALUES) {
        to.send_with_tag(chunk, tag);
    }
}

/// What [`send_long`] sent from `from`.
fn receive_long(from: &Process<'_>, tag: i32) -> Vec<f32> {
    let (len, _) = from.receive_with_tag::<u64>(tag);
    let mut values = vec![0.0f32; len as usize];
    for chunk in values.chunks_mut(MESSAGE_VALUES) {
        from.receive_into_with_tag(chunk, tag);
    }
    values
}
