//! [`DeviceTransposed`]: the CPML layers' transposed terms of a backward step on the device
//! ([`crate::backend::cpml_transposed`] has them; kernels/cpml_transposed.cu computes them with
//! the CPU's bits): the adjoints of the memory variables per axis, the scratch slabs the axes
//! share, and the profiles and layer geometry, allocated once and zeroed each backward pass.

use super::fields::Fields;
use super::kernels::{AxisWeights, CpmlTransposedAxis, Launch};
use super::runtime::{DeviceBuffer, GpuRuntime};
use crate::backend::cpml_transposed::{self, TransposedLayers, TransposedState};
use crate::problem::Problem;
use anyhow::Result;
use std::rc::Rc;

/// Threads a block of both kernels.
const BLOCK: u32 = 128;

/// One axis's device arrays.
struct Axis<Rt: GpuRuntime> {
    lambda: DeviceBuffer<Rt>,
    eta: DeviceBuffer<Rt>,
    a: DeviceBuffer<Rt>,
    b: DeviceBuffer<Rt>,
    coord: DeviceBuffer<Rt>,
    band: DeviceBuffer<Rt>,
}

/// The transposed layers of a backward pass on the device.
pub(super) struct DeviceTransposed<Rt: GpuRuntime> {
    layers: TransposedLayers,
    axes: [Option<Axis<Rt>>; 3],
    /// beta, gamma, sigma: the largest slab each.
    scratch: [DeviceBuffer<Rt>; 3],
}

impl<Rt: GpuRuntime> TransposedState for DeviceTransposed<Rt> {
    fn layers(&self) -> &TransposedLayers {
        &self.layers
    }

    /// Queued on the stream.
    fn zero(&mut self) -> Result<()> {
        for a in self.axes.iter().flatten() {
            a.lambda.zero()?;
            a.eta.zero()?;
        }
        Ok(())
    }
}

impl<Rt: GpuRuntime> DeviceTransposed<Rt> {
    /// Allocates (zeroed) and uploads the layers of `problem` (a [`BoundaryKind::CpmlTransposed`] one).
    fn new(rt: &Rc<Rt>, problem: &Problem) -> Result<Self> {
        let layers = TransposedLayers::new(problem)?;
        let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let mut axes: [Option<Axis<Rt>>; 3] = [None, None, None];
        for a in layers.axes() {
            let slab = 4 * layers.slab_len(a);
            let p = &problem.boundary.profiles[a];
            axes[a] = Some(Axis {
                lambda: DeviceBuffer::zeroed(rt, slab)?,
                eta: DeviceBuffer::zeroed(rt, slab)?,
                a: DeviceBuffer::from_slice(rt, &f32s(&p.a))?,
                b: DeviceBuffer::from_slice(rt, &f32s(&p.b))?,
                coord: DeviceBuffer::from_slice(rt, &layers.coord[a])?,
                band: DeviceBuffer::from_slice(rt, &layers.band[a])?,
            });
        }
        let scratch_bytes = 4 * layers.largest_slab().max(1);
        let scratch = [(); 3].map(|_| DeviceBuffer::zeroed(rt, scratch_bytes));
        let [beta, gamma, sigma] = scratch;
        Ok(DeviceTransposed { layers, axes, scratch: [beta?, gamma?, sigma?] })
    }

    /// Readies a solver's `slot` for a shot of `problem` ([`cpml_transposed::for_shot`]).
    pub fn for_shot(slot: &mut Option<Self>, rt: &Rc<Rt>, problem: &Problem, forward_cpml: bool) -> Result<bool> {
        cpml_transposed::for_shot(slot, problem, forward_cpml, || Self::new(rt, problem))
    }

    /// Queues the layers' terms of one backward step after the interior's: nu^{n+1} in `d.cur`,
    /// nu^n in `d.prev`, per axis in the shared order.
    pub fn enqueue(
        &self,
        rt: &Rt,
        d: &Fields<Rt>,
        [prepare, gather]: [Rt::Function; 2],
        w: &[AxisWeights; 3],
    ) -> Result<()> {
        let l = &self.layers;
        let [nx, ny, nz] = l.shape.map(|n| n as i32);
        let bh = d.bh.as_ref().map_or(0, |b| d.origin(b.ptr()));
        let [beta, gamma, sigma] = self.scratch.each_ref().map(|b| b.ptr());
        for axis in l.axes() {
            let Some(x) = &self.axes[axis] else { continue };
            let args = CpmlTransposedAxis {
                cur: d.origin(d.cur.ptr()),
                next: d.origin(d.prev.ptr()),
                stiffness: d.origin(d.vel.ptr()),
                bh,
                lambda: x.lambda.ptr(),
                eta: x.eta.ptr(),
                beta,
                gamma,
                sigma,
                a: x.a.ptr(),
                b: x.b.ptr(),
                coord: x.coord.ptr(),
                band: x.band.ptr(),
                w: w[axis],
                axis: axis as i32,
                width: l.width as i32,
                bands: l.band[axis].len() as i32,
                nx,
                ny,
                nz,
                pitch: d.layout.pitch as i64,
                plane: d.layout.plane as i64,
            };
            let launch = |points: usize| Launch {
                grid: [(points as u64).div_ceil(BLOCK as u64) as u32, 1, 1],
                block: [BLOCK, 1, 1],
                shared: 0,
            };
            args.launch(rt, prepare, launch(l.slab_len(axis)))?;
            let mut span = l.shape;
            span[axis] = l.band[axis].len();
            args.launch(rt, gather, launch(span.iter().product()))?;
        }
        Ok(())
    }
}
