//! A decomposed run's halo planes and rows in and out of the device ([`Staging`]'s halo methods):
//! host-staged, the planes whole (row padding included), the rows gathered into a dense buffer
//! on the device first. Decomposed runs are f32.

use super::fields::Fields;
use super::kernels::{ExtractSection, InsertSection, IoKernels, Launch};
use super::runtime::{DevicePtr, GpuRuntime, as_bytes, as_bytes_mut};
use super::snapshot::Staging;
use anyhow::{Result, ensure};
use std::rc::Rc;

impl<Rt: GpuRuntime> Staging<Rt> {
    /// Interior z-planes `z0..z0 + planes` of the f32 field at `field`, packed into `buf` (the
    /// planes come down whole, row padding included, after the work queued so far).
    pub fn planes_out(
        &mut self,
        rt: &Rt,
        d: &Fields<Rt>,
        field: DevicePtr,
        z0: usize,
        planes: usize,
        buf: &mut [f32],
    ) -> Result<()> {
        ensure!(d.half.is_none(), "the f16 step has no halo exchange (decomposed runs are f32)");
        let l = d.layout;
        ensure!(
            z0 + planes <= l.nz && buf.len() == planes * l.nx * l.ny,
            "halo planes {z0}..{} of {}",
            z0 + planes,
            l.nz
        );
        let staging = &mut self.host;
        staging.resize(planes * l.plane, 0.0);
        rt.download(field + ((l.halo + z0) * l.plane * 4) as DevicePtr, as_bytes_mut(staging))?;
        for (k, chunk) in buf.chunks_exact_mut(l.nx * l.ny).enumerate() {
            for (iy, row) in chunk.chunks_exact_mut(l.nx).enumerate() {
                let src = k * l.plane + (iy + l.halo) * l.pitch + l.x_offset;
                row.copy_from_slice(&staging[src..src + l.nx]);
            }
        }
        Ok(())
    }

    /// Host-staged: the rows of every plane are `rows * pitch` contiguous values, gathered into a
    /// dense buffer on the device (one launch, one download), unpacked here.
    pub fn rows_out(
        &mut self,
        rt: &Rc<Rt>,
        d: &Fields<Rt>,
        f: &IoKernels<Rt::Function>,
        y0: usize,
        rows: usize,
        buf: &mut [f32],
    ) -> Result<()> {
        ensure!(d.half.is_none(), "the f16 step has no halo exchange (decomposed runs are f32)");
        let l = d.layout;
        ensure!(y0 + rows <= l.ny && buf.len() == l.nz * rows * l.nx, "halo rows {y0}..{} of {}", y0 + rows, l.ny);
        let n0 = rows * l.pitch;
        let dense = self.device_buffer(rt, n0 * l.nz)?;
        let first = l.index(-(l.x_offset as isize), y0 as isize, 0) as u64 * 4;
        let args = ExtractSection {
            field: d.cur.ptr() + first,
            out: dense,
            n0: n0 as i32,
            n1: l.nz as i32,
            s0: 1,
            s1: l.plane as i64,
        };
        let launch =
            Launch { grid: [n0.div_ceil(256) as u32, l.nz.min(65535) as u32, 1], block: [256, 1, 1], shared: 0 };
        args.launch(&**rt, f.section, launch)?;
        let staging = &mut self.host;
        staging.resize(n0 * l.nz, 0.0);
        rt.download(dense, as_bytes_mut(staging))?;
        for (k, row) in buf.chunks_exact_mut(l.nx).enumerate() {
            let src = k * l.pitch + l.x_offset;
            row.copy_from_slice(&staging[src..src + l.nx]);
        }
        Ok(())
    }

    /// Host-staged: whole padded rows go up (their padding zero, as it always is) and are written
    /// into every plane by one launch.
    pub fn rows_in(
        &mut self,
        rt: &Rc<Rt>,
        d: &Fields<Rt>,
        f: &IoKernels<Rt::Function>,
        y0: usize,
        rows: usize,
        buf: &[f32],
    ) -> Result<()> {
        ensure!(d.half.is_none(), "the f16 step has no halo exchange (decomposed runs are f32)");
        let l = d.layout;
        ensure!(y0 + rows <= l.ny && buf.len() == l.nz * rows * l.nx, "halo rows {y0}..{} of {}", y0 + rows, l.ny);
        let n0 = rows * l.pitch;
        let staging = &mut self.host;
        staging.clear();
        staging.resize(n0 * l.nz, 0.0);
        for (k, row) in buf.chunks_exact(l.nx).enumerate() {
            let dst = k * l.pitch + l.x_offset;
            staging[dst..dst + l.nx].copy_from_slice(row);
        }
        let dense = self.device_buffer(rt, n0 * l.nz)?;
        rt.upload(dense, as_bytes(&self.host))?;
        let first = l.index(-(l.x_offset as isize), y0 as isize, 0) as u64 * 4;
        let args = InsertSection {
            field: d.cur.ptr() + first,
            dense,
            n0: n0 as i32,
            n1: l.nz as i32,
            s0: 1,
            s1: l.plane as i64,
        };
        let launch =
            Launch { grid: [n0.div_ceil(256) as u32, l.nz.min(65535) as u32, 1], block: [256, 1, 1], shared: 0 };
        args.launch(&**rt, f.insert, launch)
    }

    /// Host-staged: whole planes go up, their halo rows and row padding zero as they always are.
    pub fn planes_in(&mut self, rt: &Rt, d: &Fields<Rt>, z0: usize, planes: usize, buf: &[f32]) -> Result<()> {
        ensure!(d.half.is_none(), "the f16 step has no halo exchange (decomposed runs are f32)");
        let l = d.layout;
        ensure!(
            z0 + planes <= l.nz && buf.len() == planes * l.nx * l.ny,
            "halo planes {z0}..{} of {}",
            z0 + planes,
            l.nz
        );
        let staging = &mut self.host;
        staging.clear();
        staging.resize(planes * l.plane, 0.0);
        for (k, chunk) in buf.chunks_exact(l.nx * l.ny).enumerate() {
            for (iy, row) in chunk.chunks_exact(l.nx).enumerate() {
                let dst = k * l.plane + (iy + l.halo) * l.pitch + l.x_offset;
                staging[dst..dst + l.nx].copy_from_slice(row);
            }
        }
        let bytes: &[u8] = as_bytes(staging);
        rt.upload(d.cur.ptr() + ((l.halo + z0) * l.plane * 4) as DevicePtr, bytes)
    }
}
