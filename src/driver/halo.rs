//! Which halo exchange a decomposed run over MPI ranks uses: NCCL device to device where every
//! rank of the node has a CUDA GPU of its own, else host-staged MPI, overlapping the step where
//! the settings, the decomposition and the backend allow it. Every rank decides alike (or the
//! ranks would wait on each other for ever).

use crate::backend::{Backend, DeviceField};
use crate::config::{BackendChoice, Config, HaloExchange, HaloOverlap};
use crate::decomposition::Exchange;
use crate::decomposition::mpi::MpiExchange;
use anyhow::Result;

/// The halo exchange `run.halo_exchange` asks for, and a phrase naming it: NCCL device to
/// device where every rank of the node has a CUDA GPU of its own (`auto` falls back to the
/// host-staged MPI path otherwise, `nccl` is an error), the host path elsewhere.
pub fn halo_exchange(
    cfg: &Config,
    host: MpiExchange,
    ranks_on_node: usize,
    backend: &dyn Backend,
    blocks: bool,
) -> Result<(Box<dyn Exchange>, String)> {
    let field = backend.device_field();
    let asked = cfg.run.halo_exchange;
    if asked == HaloExchange::Host || host.size() == 1 || blocks {
        return host_exchange(cfg, host, backend, "", blocks, ranks_on_node);
    }
    let why_not: Option<String> = if cfg.run.backend != BackendChoice::Cuda {
        Some(format!("run.backend = {:?} (NCCL moves CUDA device memory)", cfg.run.backend))
    } else if !cfg!(feature = "nccl") {
        Some("this build has no NCCL (build with `--features mpi,nccl`)".into())
    } else if field.is_none() {
        Some("the backend stores no f32 wavefield on the device".into())
    } else {
        gpus_per_rank(ranks_on_node)
    };
    // Every rank takes the same path, or the ranks would wait on each other for ever.
    let mut host = host;
    let all_can = host.all(why_not.is_none())?;
    if !all_can {
        let why = why_not.unwrap_or_else(|| "another rank cannot use NCCL".into());
        anyhow::ensure!(asked == HaloExchange::Auto, "run.halo_exchange = \"nccl\": {why}; use \"host\" or \"auto\"");
        return host_exchange(cfg, host, backend, &format!("; not NCCL: {why}"), false, ranks_on_node);
    }
    let overlap = cfg.run.halo_overlap != HaloOverlap::Off && backend.splits_steps();
    nccl_exchange(host, field, overlap)
}

/// The host-staged exchange, overlapping the step where `run.halo_overlap` asks for it (under
/// "auto", unless GPU ranks share a GPU), the grid is cut along z alone, the backend computes a
/// step in parts and MPI allows a thread of its own (the phrase says which; `why` is appended
/// to it). Every rank calls it, and every rank decides alike.
fn host_exchange(
    cfg: &Config,
    host: MpiExchange,
    backend: &dyn Backend,
    why: &str,
    blocks: bool,
    ranks_on_node: usize,
) -> Result<(Box<dyn Exchange>, String)> {
    let path = "halo exchange through host memory (MPI)";
    let asked = cfg.run.halo_overlap;
    if asked == HaloOverlap::Off || host.size() == 1 {
        return Ok((Box::new(host), format!("{path}{why}")));
    }
    if blocks {
        return Ok((Box::new(host), format!("{path} after the step (y-z blocks: rows, then planes){why}")));
    }
    if !backend.splits_steps() {
        let name = backend.info().backend;
        return Ok((Box::new(host), format!("{path} after the step (the {name} backend computes it whole){why}")));
    }
    let mut host = host;
    if asked == HaloOverlap::Auto {
        // Ranks sharing a GPU: the rest of a rank's step is too short to hide the exchange
        // behind, and splitting it costs launches (README, "Overlap").
        // (CUDA only: the GPUs of a node are counted there.)
        let shared = backend.info().backend == "cuda" && gpus_per_rank(ranks_on_node).is_some();
        if !host.all(!shared)? {
            return Ok((Box::new(host), format!("{path} after the step (ranks share a GPU){why}")));
        }
    }
    Ok(match host.overlap() {
        Ok(()) => (Box::new(host), format!("{path}, overlapping the step{why}")),
        Err(not) => (Box::new(host), format!("{path} after the step ({not}){why}")),
    })
}

/// `Some(why)` when the node's ranks outnumber its CUDA GPUs (NCCL needs one GPU per rank).
fn gpus_per_rank(ranks_on_node: usize) -> Option<String> {
    #[cfg(feature = "cuda")]
    {
        let gpus = crate::backend::gpu::cuda::device_count().unwrap_or(0);
        (ranks_on_node > gpus)
            .then(|| format!("{ranks_on_node} ranks share {gpus} GPU(s) on this node (NCCL needs a GPU for each rank)"))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = ranks_on_node;
        Some("this build has no CUDA".into())
    }
}

#[cfg(feature = "nccl")]
fn nccl_exchange(host: MpiExchange, field: Option<DeviceField>, overlap: bool) -> Result<(Box<dyn Exchange>, String)> {
    use crate::decomposition::nccl;
    use anyhow::Context;
    let device = field.context("a device field")?.device;
    let version = nccl::version()?;
    let exchange = nccl::NcclExchange::over_mpi(device, host)?;
    if overlap {
        let path = format!("halo exchange device to device (NCCL {version}), overlapping the step");
        return Ok((Box::new(exchange.overlapping()), path));
    }
    Ok((Box::new(exchange), format!("halo exchange device to device (NCCL {version})")))
}

#[cfg(not(feature = "nccl"))]
fn nccl_exchange(_: MpiExchange, _: Option<DeviceField>, _: bool) -> Result<(Box<dyn Exchange>, String)> {
    unreachable!("the path is chosen only in builds with NCCL")
}
