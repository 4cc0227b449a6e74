//! The NCCL exchange (feature `nccl`): halo planes go device to device, queued on the solvers' own
//! streams after each step, so that a step waits for no host round-trip and no copy through host
//! memory. The planes are sent as whole padded z-planes straight out of p^n into the neighbour's
//! ghost planes (their x and y padding is zero on both sides), with no packing.
//!
//! Two set-ups behind [`NcclExchange`]: [`over_mpi`](NcclExchange::over_mpi), one subdomain per
//! rank, each rank on its own GPU, the communicator's id broadcast over MPI; and
//! [`in_process`](NcclExchange::in_process), every subdomain in this process on one GPU, through
//! a one-rank communicator that sends to itself (the way to run the NCCL path on a single GPU;
//! NCCL refuses two ranks on one device). The host-side work (gathering results, the blow-up
//! vote) stays with the host exchange it wraps.

use super::Domain;
use super::{Decomposition, Exchange};
use crate::backend::DeviceField;
use crate::backend::gpu::cuda::guarded;
use anyhow::{Context, Result, anyhow, bail, ensure};
use cudarc::driver::safe::CudaContext;
use cudarc::driver::{result as cu, sys as cusys};
use cudarc::nccl::{result as nccl, sys};
use std::ffi::c_void;
use std::sync::Arc;

/// Halo planes through NCCL; results and votes through the wrapped host exchange.
pub struct NcclExchange {
    comm: sys::ncclComm_t,
    /// Every subdomain's communicator rank is 0: the one-rank communicator sends to itself.
    in_process: bool,
    host: Box<dyn Exchange>,
    ctx: Arc<CudaContext>,
    /// Events before and after each step's exchange, on the first local subdomain's stream (made
    /// by [`Exchange::begin`], so the loop creates none).
    events: Vec<[cusys::CUevent; 2]>,
    used: usize,
    /// Each step's device fields and messages, kept so that a step allocates nothing.
    fields: Vec<DeviceField>,
    transfers: Vec<Transfer>,
    /// Whether the planes move while the rest of the step runs ([`NcclExchange::overlapping`]).
    overlap: bool,
    /// Per local subdomain, the stream the overlapping exchange runs on and its events.
    sides: Vec<Side>,
}

/// A subdomain's side stream: `edges` marks its edge planes done on the solver's stream, `moved`
/// the transfers done on the side stream.
struct Side {
    stream: cusys::CUstream,
    edges: cusys::CUevent,
    moved: cusys::CUevent,
}

/// NCCL's version as "2.28.3", or why the library cannot be used.
pub fn version() -> Result<String> {
    // SAFETY: only tries to open the library.
    ensure!(
        guarded("loading libnccl", || unsafe { sys::is_culib_present() })?,
        "no NCCL library found (libnccl.so.2): install NCCL or add its directory to LD_LIBRARY_PATH"
    );
    let v = guarded("ncclGetVersion", nccl::get_nccl_version)?.map_err(|e| anyhow!("ncclGetVersion: {e:?}"))?;
    Ok(format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100))
}

impl NcclExchange {
    /// Every subdomain of this process on GPU `device`, through a one-rank communicator.
    pub fn in_process(device: usize, host: Box<dyn Exchange>) -> Result<NcclExchange> {
        version()?;
        let ctx = bound_context(device)?;
        let mut comm = std::ptr::null_mut();
        let devices = [device as i32];
        // SAFETY: one communicator for one device, written into `comm`.
        guarded("ncclCommInitAll", || unsafe { nccl::comm_init_all(&mut comm, 1, devices.as_ptr()) })?
            .map_err(|e| anyhow!("ncclCommInitAll on GPU {device}: {e:?}"))?;
        Ok(NcclExchange::with(comm, true, host, ctx))
    }

    /// One subdomain per MPI rank, this rank on GPU `device` (each rank its own GPU: NCCL refuses
    /// two ranks of a communicator on one device).
    #[cfg(feature = "mpi")]
    pub fn over_mpi(device: usize, host: super::mpi::MpiExchange) -> Result<NcclExchange> {
        version()?;
        let ctx = bound_context(device)?;
        let (rank, size) = (host.rank(), host.size());
        let mut id = sys::ncclUniqueId { internal: [0; 128] };
        if rank == 0 {
            id = guarded("ncclGetUniqueId", nccl::get_uniqueid)?.map_err(|e| anyhow!("ncclGetUniqueId: {e:?}"))?;
        }
        // SAFETY: 128 plain bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(id.internal.as_mut_ptr() as *mut u8, 128) };
        host.broadcast_from_root(bytes);
        let mut comm = std::ptr::null_mut();
        // SAFETY: every rank of the world joins with the same id; `comm` receives the handle.
        guarded("ncclCommInitRank", || unsafe { nccl::comm_init_rank(&mut comm, size as i32, id, rank as i32) })?
            .map_err(|e| anyhow!("ncclCommInitRank (rank {rank} of {size}, GPU {device}): {e:?}"))?;
        Ok(NcclExchange::with(comm, false, Box::new(host), ctx))
    }

    fn with(comm: sys::ncclComm_t, in_process: bool, host: Box<dyn Exchange>, ctx: Arc<CudaContext>) -> NcclExchange {
        let (events, fields, transfers) = (Vec::new(), Vec::new(), Vec::new());
        NcclExchange {
            comm,
            in_process,
            host,
            ctx,
            events,
            used: 0,
            fields,
            transfers,
            overlap: false,
            sides: Vec::new(),
        }
    }

    /// The exchange overlapping the step: once a subdomain's planes next to its cuts are computed,
    /// the transfers run on a side stream of its own while the solver's stream computes the rest of
    /// its owned planes (not the ghost planes, which the transfers write), and the solver's stream
    /// waits for them before the step ends.
    pub fn overlapping(mut self) -> NcclExchange {
        self.overlap = true;
        self
    }

    /// The transfers of one step between `fields` (this process's subdomains, p^{n+1} of the step
    /// under way or p^n after it), each subdomain's queued on `streams[k]`, timed on the first.
    fn post(&mut self, d: &Decomposition, fields: Vec<DeviceField>, streams: &[cusys::CUstream]) -> Result<()> {
        let local = self.local_ranks(d);
        let mut transfers = std::mem::take(&mut self.transfers);
        let field = |rank: usize| &fields[rank - local.start];
        let stream = |rank: usize| streams[rank - local.start];
        let h = d.halo;
        let at = |f: &DeviceField, z: usize| f.plane0 + (z * f.plane_values * 4) as u64;
        let first = |rank: usize| d.slabs[rank].0 - if rank > 0 { h } else { 0 };
        // Two messages per cut, in local plane indices: rank k's last h owned planes into k + 1's
        // upper ghost planes, and k + 1's first h owned planes into k's lower ghost planes.
        transfers.clear();
        for a in 0..d.ranks().saturating_sub(1) {
            let (b, cut) = (a + 1, d.slabs[a].1);
            transfers.push(Transfer { from: a, to: b, src: cut - h - first(a), dst: 0 });
            transfers.push(Transfer { from: b, to: a, src: cut - first(b), dst: cut - first(a) });
        }
        let count = h * fields[0].plane_values;
        for f in &fields {
            ensure!(f.plane_values == fields[0].plane_values, "subdomains with planes of different sizes");
        }
        let Some(timing) = self.events.get(self.used).copied() else {
            bail!("the NCCL exchange was not prepared for step {} (Exchange::begin)", self.used)
        };
        let first_stream = streams[0];
        self.ctx.bind_to_thread()?;
        // SAFETY: events made by `begin`, stream live while its backend (or this exchange) is.
        unsafe { cu::event::record(timing[0], first_stream) }?;
        let float = sys::ncclDataType_t::ncclFloat32;
        let comm = self.comm;
        guarded("ncclGroupStart", nccl::group_start)?.map_err(|e| anyhow!("ncclGroupStart: {e:?}"))?;
        // A peer's i-th send meets its i-th receive: every send, then every receive, in the same
        // order (what makes the one-rank communicator's sends to itself land where they should).
        let mut posted: Result<()> = Ok(());
        for t in transfers.iter().filter(|t| local.contains(&t.from)) {
            let (peer, stream) = (self.comm_rank(t.to), stream(t.from) as sys::cudaStream_t);
            // SAFETY: `count` f32 of the field's planes on the sending device, ordered on `stream`.
            let r = guarded("ncclSend", || unsafe {
                nccl::send(at(field(t.from), t.src) as *const c_void, count, float, peer, comm, stream)
            });
            posted = posted.and(r?.map(|_| ()).map_err(|e| anyhow!("ncclSend to rank {}: {e:?}", t.to)));
        }
        for t in transfers.iter().filter(|t| local.contains(&t.to)) {
            let (peer, stream) = (self.comm_rank(t.from), stream(t.to) as sys::cudaStream_t);
            // SAFETY: `count` f32 of ghost planes on the receiving device, ordered on `stream`.
            let r = guarded("ncclRecv", || unsafe {
                nccl::recv(at(field(t.to), t.dst) as *mut c_void, count, float, peer, comm, stream)
            });
            posted = posted.and(r?.map(|_| ()).map_err(|e| anyhow!("ncclRecv from rank {}: {e:?}", t.from)));
        }
        let ended = guarded("ncclGroupEnd", nccl::group_end)?.map_err(|e| anyhow!("ncclGroupEnd: {e:?}"));
        self.fields = fields;
        self.transfers = transfers;
        posted?;
        ended?;
        // The group orders every stream it used after the transfers: this event marks them done.
        // SAFETY: as above.
        unsafe { cu::event::record(timing[1], first_stream) }?;
        self.used += 1;
        Ok(())
    }

    /// This process's subdomains' fields: p^{n+1} of the step under way with `next`, else p^n.
    fn fields_of(&mut self, domains: &[Domain], next: bool) -> Result<Vec<DeviceField>> {
        let mut fields = std::mem::take(&mut self.fields);
        fields.clear();
        for dom in domains.iter() {
            let f = if next { dom.backend.next_device_field() } else { dom.backend.device_field() };
            fields.push(f.with_context(|| {
                format!("rank {}: the NCCL exchange needs a CUDA backend storing f32", dom.sub.rank)
            })?);
        }
        Ok(fields)
    }

    fn comm_rank(&self, rank: usize) -> i32 {
        if self.in_process { 0 } else { rank as i32 }
    }
}

/// Device `device`'s primary context, current on this thread (NCCL and the events need it).
fn bound_context(device: usize) -> Result<Arc<CudaContext>> {
    let ctx = guarded("opening the CUDA device", || CudaContext::new(device))?
        .with_context(|| format!("cannot open CUDA device {device} for NCCL"))?;
    ctx.bind_to_thread().context("cuCtxSetCurrent failed")?;
    Ok(ctx)
}

/// One message of a step's exchange: h planes of p^n from local plane `src` of rank `from` into
/// local plane `dst` of rank `to`.
struct Transfer {
    from: usize,
    to: usize,
    src: usize,
    dst: usize,
}

impl Exchange for NcclExchange {
    fn local_ranks(&self, decomposition: &Decomposition) -> std::ops::Range<usize> {
        self.host.local_ranks(decomposition)
    }

    fn begin(&mut self, steps: usize) -> Result<()> {
        self.ctx.bind_to_thread()?;
        while self.events.len() < steps {
            let make = || cu::event::create(cusys::CUevent_flags::CU_EVENT_DEFAULT);
            self.events.push([make()?, make()?]);
        }
        self.used = 0;
        Ok(())
    }

    fn halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        let local = self.local_ranks(d);
        ensure!(domains.len() == local.len(), "{} subdomains for local ranks {local:?}", domains.len());
        let fields = self.fields_of(domains, false)?;
        let mut streams = [std::ptr::null_mut(); 8];
        ensure!(fields.len() <= streams.len(), "{} subdomains in one process (at most 8)", fields.len());
        for (s, f) in streams.iter_mut().zip(&fields) {
            *s = f.stream as cusys::CUstream;
        }
        let n = fields.len();
        self.post(d, fields, &streams[..n])
    }

    fn overlaps(&self) -> bool {
        self.overlap
    }

    fn writes_ghosts_during_step(&self) -> bool {
        self.overlap
    }

    fn start_halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        if !self.overlap {
            return Ok(());
        }
        let local = self.local_ranks(d);
        ensure!(domains.len() == local.len(), "{} subdomains for local ranks {local:?}", domains.len());
        let fields = self.fields_of(domains, true)?;
        self.ctx.bind_to_thread()?;
        while self.sides.len() < fields.len() {
            let event = || cu::event::create(cusys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
            let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)?;
            self.sides.push(Side { stream, edges: event()?, moved: event()? });
        }
        let mut streams = [std::ptr::null_mut(); 8];
        ensure!(fields.len() <= streams.len(), "{} subdomains in one process (at most 8)", fields.len());
        for ((s, f), side) in streams.iter_mut().zip(&fields).zip(&self.sides) {
            // SAFETY: the events and streams are this exchange's; the solver's stream is live.
            unsafe {
                cu::event::record(side.edges, f.stream as cusys::CUstream)?;
                cu::stream::wait_event(side.stream, side.edges, cusys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)?;
            }
            *s = side.stream;
        }
        let n = fields.len();
        self.post(d, fields, &streams[..n])?;
        for side in &self.sides[..n] {
            // SAFETY: as above.
            unsafe { cu::event::record(side.moved, side.stream) }?;
        }
        Ok(())
    }

    fn finish_halos(&mut self, d: &Decomposition, domains: &mut [Domain]) -> Result<()> {
        if !self.overlap {
            return self.halos(d, domains);
        }
        self.ctx.bind_to_thread()?;
        for (dom, side) in domains.iter().zip(&self.sides) {
            let f = dom.backend.device_field().context("a CUDA backend storing f32")?;
            // SAFETY: as in start_halos.
            unsafe {
                cu::stream::wait_event(
                    f.stream as cusys::CUstream,
                    side.moved,
                    cusys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }?;
        }
        Ok(())
    }

    fn timed_on_device(&self) -> bool {
        true
    }

    fn device_seconds(&mut self) -> Result<Vec<f64>> {
        self.ctx.bind_to_thread()?;
        let mut out = Vec::with_capacity(self.used);
        for [start, end] in &self.events[..self.used] {
            // SAFETY: both recorded; elapsed waits for neither, so wait for the end first.
            unsafe {
                cu::event::synchronize(*end)?;
                out.push(cu::event::elapsed(*start, *end)? as f64 * 1e-3);
            }
        }
        Ok(out)
    }

    fn gather(&mut self, parts: Vec<Vec<f32>>) -> Result<Option<Vec<Vec<f32>>>> {
        self.host.gather(parts)
    }

    fn stream_to_root(
        &mut self,
        parts: Vec<Vec<f32>>,
        each: &mut dyn FnMut(usize, Vec<f32>) -> Result<()>,
    ) -> Result<()> {
        self.host.stream_to_root(parts, each)
    }

    fn all(&mut self, value: bool) -> Result<bool> {
        self.host.all(value)
    }

    fn max(&mut self, value: f64) -> Result<f64> {
        self.host.max(value)
    }
}

impl Drop for NcclExchange {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the communicator and events are this exchange's, released once; finalize waits
        // for the communicator's queued operations first.
        unsafe {
            let _ = nccl::comm_finalize(self.comm);
            let _ = nccl::comm_destroy(self.comm);
            for e in self.events.iter().flatten() {
                let _ = cu::event::destroy(*e);
            }
            for side in &self.sides {
                let _ = cu::stream::synchronize(side.stream);
                let _ = cu::stream::destroy(side.stream);
                let _ = cu::event::destroy(side.edges);
                let _ = cu::event::destroy(side.moved);
            }
        }
    }
}
