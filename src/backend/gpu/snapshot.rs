//! Host and device staging ([`Staging`]) for what comes down from the device or goes up outside
//! the step: snapshots of the volume and of planes (gathered on the device first), and the
//! blow-up check's flag. A decomposed run's halo planes and rows pass through the same buffers
//! ([`halo`](super::halo)).

use super::fields::{Fields, ptr_or_null};
use super::kernels::{ExtractSection, FiniteCheck, IoKernels, Launch};
use super::runtime::{DeviceBuffer, DevicePtr, GpuRuntime, as_bytes_mut};
use crate::grid::Section;
use anyhow::{Result, ensure};
use std::rc::Rc;

/// Buffers kept between snapshots and halo exchanges, so that a run allocates them once.
pub(super) struct Staging<Rt: GpuRuntime> {
    /// Host copy of interior z-planes or gathered rows (sized at the first use, then reused).
    pub host: Vec<f32>,
    /// Device buffer planes and rows are gathered into (allocated at the first, grown as needed).
    pub device: Option<DeviceBuffer<Rt>>,
    /// The blow-up check's flag, one u32 (allocated at the first check).
    finite_flag: Option<DeviceBuffer<Rt>>,
}

impl<Rt: GpuRuntime> Staging<Rt> {
    pub fn new() -> Self {
        Staging { host: Vec::new(), device: None, finite_flag: None }
    }

    /// The device buffer a block's halo rows pass through, at least `values` f32 (grown as needed).
    pub fn device_buffer(&mut self, rt: &Rc<Rt>, values: usize) -> Result<DevicePtr> {
        if self.device.as_ref().is_none_or(|b| b.bytes() < values * 4) {
            self.device = Some(DeviceBuffer::zeroed(rt, values * 4)?);
        }
        Ok(ptr_or_null(&self.device))
    }

    pub fn snapshot(&mut self, rt: &Rt, d: &mut Fields<Rt>, out: &mut [f32]) -> Result<()> {
        ensure!(out.len() == d.layout.points(), "snapshot buffer has {} values, grid {}", out.len(), d.layout.points());
        // Only the interior's z-planes come down, into a host buffer kept between snapshots.
        let l = d.layout;
        if let Some(h) = &mut d.half {
            let staging = &mut h.staging;
            staging.resize(l.nz * l.plane, 0);
            rt.download(d.cur.ptr() + (l.halo * l.plane * 2) as DevicePtr, as_bytes_mut(staging))?;
            for iz in 0..l.nz {
                for iy in 0..l.ny {
                    let src = iz * l.plane + (iy + l.y_halo) * l.pitch + l.x_offset;
                    let dst = (iz * l.ny + iy) * l.nx;
                    for (o, &b) in out[dst..dst + l.nx].iter_mut().zip(&staging[src..src + l.nx]) {
                        *o = (half::f16::from_bits(b).to_f32() as f64 / h.scale) as f32;
                    }
                }
            }
            return Ok(());
        }
        let staging = &mut self.host;
        staging.resize(l.nz * l.plane, 0.0);
        rt.download(d.cur.ptr() + (l.halo * l.plane * 4) as DevicePtr, as_bytes_mut(staging))?;
        for iz in 0..l.nz {
            for iy in 0..l.ny {
                let src = iz * l.plane + (iy + l.y_halo) * l.pitch + l.x_offset;
                let dst = (iz * l.ny + iy) * l.nx;
                out[dst..dst + l.nx].copy_from_slice(&staging[src..src + l.nx]);
            }
        }
        Ok(())
    }

    /// One snapshot section into `out`: a plane is gathered on the device and only its points come
    /// down; the volume comes down whole.
    pub fn section(
        &mut self,
        rt: &Rc<Rt>,
        d: &mut Fields<Rt>,
        f: &IoKernels<Rt::Function>,
        section: &Section,
        out: &mut [f32],
    ) -> Result<()> {
        let Some((n0, n1, first, s0, s1)) = section.plane_lines(&d.layout) else {
            return self.snapshot(rt, d, out);
        };
        if self.device.as_ref().is_none_or(|b| b.bytes() < n0 * n1 * 4) {
            self.device = Some(DeviceBuffer::zeroed(rt, n0 * n1 * 4)?);
        }
        let dense = ptr_or_null(&self.device);
        let args = ExtractSection {
            field: d.cur.ptr() + first as DevicePtr * d.value_bytes(),
            out: dense,
            n0: n0 as i32,
            n1: n1 as i32,
            s0: s0 as i64,
            s1: s1 as i64,
        };
        let l = Launch { grid: [n0.div_ceil(256) as u32, n1.min(65535) as u32, 1], block: [256, 1, 1], shared: 0 };
        args.launch(&**rt, d.half.as_ref().map_or(f.section, |h| h.f.section), l)?;
        rt.download(dense, as_bytes_mut(out))?;
        d.unscale(out);
        Ok(())
    }

    /// One launch of finite_check over the whole current field (halo and padding hold zeros or
    /// mirrored interior values) and a 4-byte download, which waits for the queued steps. Cost,
    /// estimated: one field read at memory bandwidth (288 M points, 1.2 GB: about 0.4 ms on an
    /// H100) plus the stream drain and launch latency (tens of microseconds); the solver calls it
    /// about once a second, so well under 0.1% of a run.
    pub fn field_is_finite(&mut self, rt: &Rc<Rt>, d: &Fields<Rt>, f: &IoKernels<Rt::Function>) -> Result<bool> {
        match &self.finite_flag {
            Some(flag) => flag.zero()?,
            None => self.finite_flag = Some(DeviceBuffer::zeroed(rt, 4)?),
        }
        let flag = ptr_or_null(&self.finite_flag);
        let blocks = rt.multiprocessors() * 4;
        let args = FiniteCheck { field: d.cur.ptr(), n: d.len as u64, flag };
        let f = d.half.as_ref().map_or(f.finite_check, |h| h.f.finite_check);
        args.launch(&**rt, f, Launch::linear(blocks, 256))?;
        let mut bad = [0u8; 4];
        rt.download(flag, &mut bad)?;
        Ok(u32::from_ne_bytes(bad) == 0)
    }
}
