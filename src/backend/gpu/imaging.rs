//! [`DeviceSums`]: reverse-time migration's imaging condition on the device, the GPU side of
//! [`DeviceImaging`]. The source wavefield is kept in one device buffer of `slots` fields (each
//! the interior z-planes of the padded layout, as the step leaves them), and the image,
//! illumination and gradient sums are f64 fields of the same shape beside it; kernels/imaging.cu
//! fills them with the host reference's arithmetic. Nothing comes to the host until
//! [`DeviceSums::take`], once a shot, or, where the shots' images are stacked on the device
//! ([`DeviceSums::stack`]), until [`DeviceSums::take_stack`], once a run.
//!
//! [`DeviceImaging`]: crate::backend::imaging::DeviceImaging

use super::fields::{Fields, MEMORY_MARGIN};
use super::kernels::{
    CorrelateGradient, CorrelateImage, IlluminationMax, IoKernels, KeepSource, Launch, StackNormalised,
};
use super::runtime::{DeviceBuffer, DevicePtr, GpuRuntime, TypedPtr, as_bytes_mut};
use crate::backend::imaging::ImagingSums;
use crate::grid::Layout;
use anyhow::{Context, Result, ensure};
use std::cell::Cell;
use std::rc::Rc;

const GIB: f64 = (1u64 << 30) as f64;

/// The kept source fields and the sums of one shot on the device.
pub(super) struct DeviceSums<Rt: GpuRuntime> {
    layout: Layout,
    /// f32 values of one kept field: the interior z-planes, halo rows and row padding included.
    values: usize,
    slots: usize,
    kept: DeviceBuffer<Rt>,
    image: DeviceBuffer<Rt>,
    illumination: DeviceBuffer<Rt>,
    /// The gradient's sum and the sponge factor g (f64, the padding's 1).
    gradient: Option<(DeviceBuffer<Rt>, DeviceBuffer<Rt>)>,
    /// The shots' normalised images summed (f64, the sums' shape), whether any shot is in it, and
    /// the highest illumination of the shot being stacked (the bits of an f64).
    stack: DeviceBuffer<Rt>,
    stacked: Cell<bool>,
    highest: DeviceBuffer<Rt>,
    /// Blocks of the grid-stride launches.
    blocks: u32,
}

/// The interior z-planes of the field at `field` (the start of its allocation).
fn interior(layout: &Layout, field: DevicePtr) -> DevicePtr {
    field + (layout.halo * layout.plane * 4) as DevicePtr
}

impl<Rt: GpuRuntime> DeviceSums<Rt> {
    /// Device bytes of `slots` kept fields, the sums (the gradient's with `gradient`) and the
    /// stack on `layout`.
    pub fn bytes(layout: &Layout, slots: usize, gradient: bool) -> u64 {
        let values = (layout.nz * layout.plane) as u64;
        values * (4 * slots as u64 + 24 + if gradient { 16 } else { 0 })
    }

    /// Allocates the buffers for `slots` kept fields and zeroed sums, after checking them against
    /// the device's free memory (less [`MEMORY_MARGIN`]); `sponge`, dense (nz, ny, nx), asks for
    /// the gradient.
    pub fn open(rt: &Rc<Rt>, d: &Fields<Rt>, slots: usize, sponge: Option<&[f64]>) -> Result<Self> {
        ensure!(d.half.is_none(), "migration on the GPU keeps f32 fields: run.precision = \"f16\" is not supported");
        let layout = d.layout;
        let values = layout.nz * layout.plane;
        let need = Self::bytes(&layout, slots, sponge.is_some());
        let (free, _) = rt.mem_info()?;
        ensure!(
            need + MEMORY_MARGIN <= free as u64,
            "the source wavefield kept on {} takes {:.2} GiB ({slots} fields of {values} values, f32, with the \
             image's f64 sums) and {:.2} GiB is free: a longer imaging.interval, fewer steps or a smaller grid",
            rt.device_name(),
            need as f64 / GIB,
            free as f64 / GIB
        );
        let gradient = match sponge {
            Some(g) => {
                ensure!(g.len() == layout.points(), "{} sponge factors for {} points", g.len(), layout.points());
                let mut padded = vec![1.0f64; values];
                for z in 0..layout.nz {
                    for y in 0..layout.ny {
                        let at = z * layout.plane + (y + layout.y_halo) * layout.pitch + layout.x_offset;
                        let from = (z * layout.ny + y) * layout.nx;
                        padded[at..at + layout.nx].copy_from_slice(&g[from..from + layout.nx]);
                    }
                }
                Some((DeviceBuffer::zeroed(rt, values * 8)?, DeviceBuffer::from_slice(rt, &padded)?))
            }
            None => None,
        };
        Ok(DeviceSums {
            layout,
            values,
            slots,
            kept: DeviceBuffer::zeroed(rt, (values * slots.max(1) * 4).max(4))?,
            image: DeviceBuffer::zeroed(rt, values * 8)?,
            illumination: DeviceBuffer::zeroed(rt, values * 8)?,
            gradient,
            stack: DeviceBuffer::zeroed(rt, values * 8)?,
            stacked: Cell::new(false),
            highest: DeviceBuffer::zeroed(rt, 8)?,
            blocks: rt.multiprocessors() * 8,
        })
    }

    /// Whether these buffers serve `slots` kept fields, with a gradient where `gradient`.
    pub fn serves(&self, slots: usize, gradient: bool) -> bool {
        self.slots == slots && self.gradient.is_some() == gradient
    }

    /// Zeroes the sums for another shot.
    pub fn zero(&self) -> Result<()> {
        self.image.zero()?;
        self.illumination.zero()?;
        if let Some((sum, _)) = &self.gradient {
            sum.zero()?;
        }
        Ok(())
    }

    fn slot(&self, slot: usize) -> Result<TypedPtr<f32>> {
        ensure!(slot < self.slots, "kept field {slot} of {}", self.slots);
        Ok(TypedPtr::new(self.kept.ptr() + (slot * self.values * 4) as DevicePtr))
    }

    fn launch(&self) -> Launch {
        Launch::linear(self.blocks, 256)
    }

    /// Enqueues slot = the field at `field`, and its square into the illumination.
    pub fn keep(&self, rt: &Rt, f: &IoKernels<Rt::Function>, field: DevicePtr, slot: usize) -> Result<()> {
        let args = KeepSource {
            field: TypedPtr::new(interior(&self.layout, field)),
            kept: self.slot(slot)?,
            illumination: self.illumination.ptr(),
            n: self.values as u64,
        };
        args.launch(rt, f.keep_source, self.launch())
    }

    /// Enqueues image += slot x the field at `field`.
    pub fn correlate_image(&self, rt: &Rt, f: &IoKernels<Rt::Function>, field: DevicePtr, slot: usize) -> Result<()> {
        let args = CorrelateImage {
            source: self.slot(slot)?,
            adjoint: TypedPtr::new(interior(&self.layout, field)),
            image: self.image.ptr(),
            n: self.values as u64,
        };
        args.launch(rt, f.correlate_image, self.launch())
    }

    /// Enqueues gradient += the field at `field` x (u^{n+1} - 2 g u^n + g^2 u^{n-1}), those in
    /// `slots` (None: zeros).
    pub fn correlate_gradient(
        &self,
        rt: &Rt,
        f: &IoKernels<Rt::Function>,
        field: DevicePtr,
        [next, cur, prev]: [Option<usize>; 3],
    ) -> Result<()> {
        let (sum, sponge) = self.gradient.as_ref().context("the imaging buffers were opened without a gradient")?;
        let kept = |s: Option<usize>| s.map_or(Ok(TypedPtr::new(0)), |s| self.slot(s));
        let args = CorrelateGradient {
            next: self.slot(next.context("the gradient needs u^{n+1}")?)?,
            cur: kept(cur)?,
            prev: kept(prev)?,
            sponge: sponge.ptr(),
            adjoint: TypedPtr::new(interior(&self.layout, field)),
            gradient: sum.ptr(),
            n: self.values as u64,
        };
        args.launch(rt, f.correlate_gradient, self.launch())
    }

    /// `buffer` (one of the f64 sums) downloaded dense (nz, ny, nx) after the queued work.
    fn dense(&self, rt: &Rt, buffer: &DeviceBuffer<Rt>) -> Result<Vec<f64>> {
        let mut padded = vec![0.0f64; self.values];
        rt.download(buffer.ptr(), as_bytes_mut(&mut padded))?;
        let l = &self.layout;
        let mut out = Vec::with_capacity(l.points());
        for z in 0..l.nz {
            for y in 0..l.ny {
                let at = z * l.plane + (y + l.y_halo) * l.pitch + l.x_offset;
                out.extend_from_slice(&padded[at..at + l.nx]);
            }
        }
        Ok(out)
    }

    /// The sums downloaded dense (nz, ny, nx) after the queued work, then zeroed.
    pub fn take(&self, rt: &Rt) -> Result<ImagingSums> {
        let sums = ImagingSums {
            image: self.dense(rt, &self.image)?,
            illumination: self.dense(rt, &self.illumination)?,
            gradient: self.take_gradient(rt)?,
        };
        self.zero()?;
        Ok(sums)
    }

    /// The gradient's sum downloaded dense (empty without one); every sum zeroed.
    pub fn take_gradient(&self, rt: &Rt) -> Result<Vec<f64>> {
        let gradient = match &self.gradient {
            Some((sum, _)) => self.dense(rt, sum)?,
            None => Vec::new(),
        };
        self.zero()?;
        Ok(gradient)
    }

    /// Enqueues stack += image / (illumination + floor) at the grid's points from z-plane
    /// `first_plane` on, floor = `fraction` x the highest illumination there (nothing where that
    /// is 0), then zeroes the image and the illumination: the host's `add_normalised`, the same
    /// bits, without a download.
    pub fn stack(&self, rt: &Rt, f: &IoKernels<Rt::Function>, fraction: f64, first_plane: usize) -> Result<()> {
        let l = &self.layout;
        ensure!(first_plane < l.nz.max(1), "the stack starts at plane {first_plane} of {}", l.nz);
        let [nx, ny, nz, z0] = [l.nx, l.ny, l.nz, first_plane].map(|n| n as i32);
        let [pitch, plane, origin] = [l.pitch, l.plane, l.y_halo * l.pitch + l.x_offset].map(|n| n as i64);
        let highest = TypedPtr::new(self.highest.ptr());
        self.highest.zero()?;
        let args =
            IlluminationMax { illumination: self.illumination.ptr(), highest, nx, ny, nz, z0, pitch, plane, origin };
        args.launch(rt, f.illumination_max, self.launch())?;
        let args = StackNormalised {
            image: self.image.ptr(),
            illumination: self.illumination.ptr(),
            highest,
            fraction,
            stack: self.stack.ptr(),
            nx,
            ny,
            nz,
            z0,
            pitch,
            plane,
            origin,
        };
        args.launch(rt, f.stack_normalised, self.launch())?;
        self.image.zero()?;
        self.illumination.zero()?;
        self.stacked.set(true);
        Ok(())
    }

    /// The stack downloaded dense after the queued work, then zeroed; None where no shot is in it.
    pub fn take_stack(&self, rt: &Rt) -> Result<Option<Vec<f64>>> {
        if !self.stacked.get() {
            return Ok(None);
        }
        let stack = self.dense(rt, &self.stack)?;
        self.stack.zero()?;
        self.stacked.set(false);
        Ok(Some(stack))
    }
}

/// Opens `held` for `slots` kept fields (and the gradient where `sponge` is Some), reusing its
/// buffers where they serve (the sums zeroed); the solver's `open_imaging`.
pub(super) fn reopen<Rt: GpuRuntime>(
    held: &mut Option<DeviceSums<Rt>>,
    rt: &Rc<Rt>,
    d: &Fields<Rt>,
    slots: usize,
    sponge: Option<&[f64]>,
) -> Result<()> {
    // A backend runs one problem's shots: the sponge kept is theirs.
    if let Some(sums) = held.as_ref().filter(|s| s.serves(slots, sponge.is_some())) {
        return sums.zero();
    }
    // The old buffers go first, so that the new ones can take their memory; a stack is not lost.
    ensure!(
        !held.as_ref().is_some_and(|s| s.stacked.get()),
        "the imaging buffers were reopened before the stacked image was taken"
    );
    *held = None;
    *held = Some(DeviceSums::open(rt, d, slots, sponge)?);
    Ok(())
}

/// The opened sums, or why there are none.
pub(super) fn opened<Rt: GpuRuntime>(held: &Option<DeviceSums<Rt>>) -> Result<&DeviceSums<Rt>> {
    held.as_ref().context("the imaging condition was not opened (open_imaging) on this backend")
}
