//! The host-staged MPI exchange: one subdomain per rank, halo planes copied out of the backend,
//! sent to and received from the neighbouring ranks (non-blocking, both cuts at once), copied in.

use super::run::Domain;
use super::{Decomposition, Exchange};
use anyhow::{Result, ensure};
use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

/// Tag of planes sent to the rank above (lower z), and of those sent to the rank below.
const UP: i32 = 21;
const DOWN: i32 = 22;
/// Tag of parts streamed to rank 0.
const TO_ROOT: i32 = 23;

/// The exchange between the ranks of `world`, rank k holding subdomain k.
pub struct MpiExchange {
    world: SimpleCommunicator,
    send: [Vec<f32>; 2],
    recv: [Vec<f32>; 2],
}

impl MpiExchange {
    pub fn new(world: SimpleCommunicator) -> MpiExchange {
        MpiExchange { world, send: [Vec::new(), Vec::new()], recv: [Vec::new(), Vec::new()] }
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

impl Exchange for MpiExchange {
    fn local_ranks(&self, _: &Decomposition) -> std::ops::Range<usize> {
        self.rank()..self.rank() + 1
    }

    fn halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        ensure!(domains.len() == 1, "an MPI rank holds one subdomain, not {}", domains.len());
        let dom = &mut domains[0];
        let (rank, h) = (dom.sub.rank, d.halo);
        let l = dom.sub.problem.layout;
        let n = h * l.nx * l.ny;
        let up = (rank > 0).then(|| rank as i32 - 1);
        let down = (rank + 1 < d.ranks()).then_some(rank as i32 + 1);
        let (own0, own1) = (dom.sub.owned_local(), dom.sub.owned.1 - dom.sub.first);
        for b in self.send.iter_mut().chain(self.recv.iter_mut()) {
            b.resize(n, 0.0);
        }
        if up.is_some() {
            dom.backend.planes_out(own0, h, &mut self.send[0])?;
        }
        if down.is_some() {
            dom.backend.planes_out(own1 - h, h, &mut self.send[1])?;
        }
        let world = &self.world;
        let ([s_up, s_down], [r_up, r_down]) = (&self.send, &mut self.recv);
        mpi::request::scope(|scope| {
            let recv_up =
                up.map(|r| world.process_at_rank(r).immediate_receive_into_with_tag(scope, &mut r_up[..], DOWN));
            let recv_down =
                down.map(|r| world.process_at_rank(r).immediate_receive_into_with_tag(scope, &mut r_down[..], UP));
            let send_up = up.map(|r| world.process_at_rank(r).immediate_send_with_tag(scope, &s_up[..], UP));
            let send_down = down.map(|r| world.process_at_rank(r).immediate_send_with_tag(scope, &s_down[..], DOWN));
            for r in [recv_up, recv_down].into_iter().flatten() {
                r.wait();
            }
            for s in [send_up, send_down].into_iter().flatten() {
                s.wait();
            }
        });
        if up.is_some() {
            dom.backend.planes_in(0, h, &self.recv[0])?;
        }
        if down.is_some() {
            dom.backend.planes_in(own1, h, &self.recv[1])?;
        }
        Ok(())
    }

    fn gather(&mut self, parts: Vec<Vec<f32>>) -> Result<Option<Vec<Vec<f32>>>> {
        if self.rank() != 0 {
            let root = self.world.process_at_rank(0);
            for p in &parts {
                root.send(&p[..]);
            }
            return Ok(None);
        }
        let per_rank = parts.len();
        let mut all = parts;
        for r in 1..self.size() {
            for _ in 0..per_rank {
                let (v, _) = self.world.process_at_rank(r as i32).receive_vec::<f32>();
                all.push(v);
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
            self.world.process_at_rank(0).send_with_tag(&parts[0][..], TO_ROOT);
            return Ok(());
        }
        let mut parts = parts;
        each(0, parts.pop().expect("one part"))?;
        for r in 1..self.size() {
            let (v, _) = self.world.process_at_rank(r as i32).receive_vec_with_tag::<f32>(TO_ROOT);
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
