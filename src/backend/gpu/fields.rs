//! A problem's fields on the device ([`Fields`]): p^n and p^{n-1} (p^{n+1} once a step has
//! written it), c^2 dt^2, the three-pass Laplacian, the sponge factors, the CPML memory
//! variables and profiles, the f16 step's increment; and the device memory a problem needs,
//! checked before anything is allocated.

use super::geometry::field_extra;
use super::kernels::{AxisWeights, HalfKernels, Layers};
use super::plan::LayerPass;
use super::runtime::{DeviceBuffer, DevicePtr, GpuRuntime};
use crate::backend::DeviceField;
use crate::boundary::{BoundaryKind, CPML_AXIS_ORDER};
use crate::config::{KernelChoice, Precision};
use crate::grid::Layout;
use crate::problem::Problem;
use anyhow::{Result, bail};
use std::rc::Rc;

/// Device bytes a problem needs with this kernel (estimated before anything is allocated): f32,
/// p^n, p^{n-1} and c^2 dt^2 (and the three-pass Laplacian, or the buoyancy where the density
/// varies); f16, p^n, p^{n+1}, d^n and c^2 dt^2 at 2 bytes a value.
pub fn estimate_bytes(problem: &Problem, kernel: KernelChoice) -> u64 {
    let l = &problem.layout;
    let half = problem.precision == Precision::F16;
    let field = (l.len() + field_extra(l)) as u64 * problem.precision.bytes();
    let fields = if kernel == KernelChoice::ThreePass || half || problem.variable_density() { 4 } else { 3 };
    let shape = problem.shape();
    let slabs: u64 = if problem.boundary.kind == BoundaryKind::Cpml {
        problem.boundary.slabs(shape).iter().map(|s| s.len() as u64 * 12).sum()
    } else {
        0
    };
    let traces = (problem.receivers.len() * problem.steps) as u64 * 4;
    fields * field + slabs + traces + (1 << 20)
}

/// Memory kept free beside a run's buffers (the runtime's own, the kernels' modules).
pub const MEMORY_MARGIN: u64 = 128 << 20;

/// Errors, before anything is allocated, when `problem` with `kernel` needs more than `free` bytes
/// of `device` (of `total`) less [`MEMORY_MARGIN`], naming the grid, the need and the memory.
pub fn check_fits(problem: &Problem, kernel: KernelChoice, device: &str, free: u64, total: u64) -> Result<()> {
    let need = estimate_bytes(problem, kernel);
    if need + MEMORY_MARGIN > free {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let [nx, ny, nz] = problem.shape();
        bail!(
            "the run grid [{nx}, {ny}, {nz}] (grid.shape and any absorbing layers outside it; radius {}, {} kernel, \
             {} receivers x {} steps) needs {:.2} GiB of GPU memory, but {device} has only {:.2} GiB free of {:.2} GiB: use a smaller grid, fewer receivers or steps, \
             or the CPU backend",
            problem.stencil.radius,
            kernel_name(kernel),
            problem.receivers.len(),
            problem.steps,
            gib(need),
            gib(free),
            gib(total)
        );
    }
    Ok(())
}

pub(crate) fn kernel_name(k: KernelChoice) -> &'static str {
    match k {
        KernelChoice::Fused => "fused",
        KernelChoice::ThreePass => "three-pass",
    }
}

/// Every field of a problem on the device, allocated when the solver opens.
pub(super) struct Fields<Rt: GpuRuntime> {
    pub layout: Layout,
    /// Elements of each field buffer (the padded layout plus [`field_extra`]).
    pub len: usize,
    /// p^n, p^{n-1} (overwritten by p^{n+1}; in f16 p^{n+1} only), c^2 dt^2 (the stiffness K where
    /// the density varies): f32, or f16 with `half`.
    pub cur: DeviceBuffer<Rt>,
    pub prev: DeviceBuffer<Rt>,
    pub vel: DeviceBuffer<Rt>,
    /// The buoyancy where the density varies, every element written (halo and padding with the
    /// values the operator reads there, [`Problem::buoyancy_into`]).
    pub bh: Option<DeviceBuffer<Rt>>,
    /// The three-pass Laplacian, or the Laplacian-only operator's output.
    pub lap: Option<DeviceBuffer<Rt>>,
    /// Sponge factors per axis (sponge runs only).
    pub damp: [Option<DeviceBuffer<Rt>>; 3],
    pub cpml: Option<CpmlDev<Rt>>,
    /// The f16 step's state (None in f32).
    pub half: Option<HalfStep<Rt>>,
}

impl<Rt: GpuRuntime> Fields<Rt> {
    /// Allocates and uploads the fields of `problem` (its CPML layers computed where `layer_pass`
    /// says; `half_f`, the f16 step's kernels, in f16).
    pub fn new(
        rt: &Rc<Rt>,
        problem: &Problem,
        kernel: KernelChoice,
        layer_pass: LayerPass,
        half_f: Option<HalfKernels<Rt::Function>>,
    ) -> Result<Self> {
        let (layout, shape, b) = (problem.layout, problem.shape(), &problem.boundary);
        let field_len = layout.len() + field_extra(&layout);
        let field = || DeviceBuffer::zeroed(rt, field_len * problem.precision.bytes() as usize);
        let (cur, prev, vel) = (field()?, field()?, field()?);
        let lap = if kernel == KernelChoice::ThreePass { Some(field()?) } else { None };
        let bh = match problem.variable_density() {
            true => {
                let mut host = vec![0.0f32; field_len];
                problem.buoyancy_into(&layout, &mut host, |v| v as f32);
                Some(DeviceBuffer::from_slice(rt, &host)?)
            }
            false => None,
        };
        let half = match half_f {
            Some(f) => {
                // c^2 dt^2 rounded to f16 as the CPU reference stores it (cpu_half.rs, VEL_F16).
                const _: () = assert!(crate::backend::cpu_half::VEL_F16, "the f16 kernels read c^2 dt^2 as f16");
                upload_stiffness(&vel, problem, &layout, |v| half::f16::from_f32(v as f32).to_bits())?;
                Some(HalfStep { f, inc: field()?, scale: problem.field_scale(), staging: Vec::new() })
            }
            None => {
                upload_stiffness(&vel, problem, &layout, |v| v as f32)?;
                None
            }
        };
        let mut damp = [None, None, None];
        if b.kind == BoundaryKind::Sponge {
            // Padded with ones so that lanes and rows past the grid read defined values.
            for (a, profile) in b.profiles.iter().enumerate() {
                let mut g: Vec<f32> = profile.damp.iter().map(|&v| v as f32).collect();
                g.resize(shape[a] + 256, 1.0);
                damp[a] = Some(DeviceBuffer::from_slice(rt, &g)?);
            }
        }
        let cpml = if b.kind == BoundaryKind::Cpml {
            let mut axes = Vec::new();
            let slabs = b.slabs(shape);
            for slab in CPML_AXIS_ORDER.map(|a| slabs[a]) {
                // A subdomain's axis cut at both ends holds no layer: nothing to allocate.
                if slab.is_empty() || b.layer_faces[slab.axis] == [false; 2] {
                    continue;
                }
                let table = |v: &[f64]| DeviceBuffer::from_slice(rt, &v.iter().map(|&x| x as f32).collect::<Vec<_>>());
                let p = &b.profiles[slab.axis];
                let slab_bytes = slab.len() * 4;
                axes.push(CpmlAxisDev {
                    axis: slab.axis,
                    phi: [DeviceBuffer::zeroed(rt, slab_bytes)?, DeviceBuffer::zeroed(rt, slab_bytes)?],
                    zeta: DeviceBuffer::zeroed(rt, slab_bytes)?,
                    a: table(&p.a)?,
                    b: table(&p.b)?,
                });
            }
            Some(CpmlDev {
                axes,
                width: b.width as i32,
                // No layer under a free surface (a = 0 there) nor at a subdomain's cut faces.
                low: b.layer_faces.map(|f| f[0] as i32),
                high: b.layer_faces.map(|f| f[1] as i32),
                nz: layout.nz as i32,
                pass: layer_pass,
            })
        } else {
            None
        };
        Ok(Fields { layout, len: field_len, cur, prev, vel, bh, lap, damp, cpml, half })
    }

    /// Bytes of one stored field value: 4, or 2 in f16.
    pub fn value_bytes(&self) -> u64 {
        if self.half.is_some() { 2 } else { 4 }
    }

    /// The device address of the grid's first interior point in the field at `p`.
    pub fn origin(&self, p: DevicePtr) -> DevicePtr {
        p + self.layout.origin() as u64 * self.value_bytes()
    }

    /// Where the CPML layers are computed; [`LayerPass::After`] also for runs without CPML.
    pub fn layer_pass(&self) -> LayerPass {
        self.cpml.as_ref().map_or(LayerPass::After, |c| c.pass)
    }

    /// Step 7: the memory variables and the fields swap.
    pub fn close_step(&mut self) {
        if let Some(c) = &mut self.cpml {
            c.swap();
        }
        std::mem::swap(&mut self.cur, &mut self.prev);
    }

    /// Sets p^n and p^{n-1} from dense (nz, ny, nx) arrays; in f16, p^n and d^n = p^n - p^{n-1},
    /// rounded, unscaled.
    pub fn set_state(&self, current: &[f32], previous: &[f32]) -> Result<()> {
        let mut field = vec![0.0f32; self.layout.len()];
        self.layout.scatter(current, &mut field);
        let bits = |f: &[f32]| f.iter().map(|&v| half::f16::from_f32(v).to_bits()).collect::<Vec<u16>>();
        match &self.half {
            Some(h) => {
                self.cur.upload(&bits(&field))?;
                let inc: Vec<f32> = current.iter().zip(previous).map(|(c, p)| c - p).collect();
                self.layout.scatter(&inc, &mut field);
                h.inc.upload(&bits(&field))
            }
            None => {
                self.cur.upload(&field)?;
                self.layout.scatter(previous, &mut field);
                self.prev.upload(&field)
            }
        }
    }

    /// Zeros p^n, p^{n-1}, d^n and the CPML memory variables (queued on the stream) for a new
    /// shot, whose source sets the f16 field's scale.
    pub fn zero_for_shot(&mut self, problem: &Problem) -> Result<()> {
        for b in [&self.cur, &self.prev] {
            b.zero()?;
        }
        if let Some(h) = &mut self.half {
            h.inc.zero()?;
            h.scale = problem.field_scale();
        }
        for c in self.cpml.iter().flat_map(|c| &c.axes) {
            for b in [&c.phi[0], &c.phi[1], &c.zeta] {
                b.zero()?;
            }
        }
        Ok(())
    }

    /// The f32 field at `field` as a [`DeviceField`] (None in f16).
    pub fn device_field(&self, rt: &Rt, field: DevicePtr) -> Option<DeviceField> {
        let l = self.layout;
        self.half.is_none().then(|| DeviceField {
            device: rt.ordinal(),
            plane0: field + (l.halo * l.plane * 4) as DevicePtr,
            plane_values: l.plane,
            stream: rt.stream_handle(),
        })
    }

    /// Divides the f16 field's scale out of values read from it (as the CPU reference does: in
    /// f64, exact for a power of two); nothing in f32.
    pub fn unscale(&self, values: &mut [f32]) {
        if let Some(h) = &self.half {
            for v in values {
                *v = (*v as f64 / h.scale) as f32;
            }
        }
    }
}

/// One axis's CPML state on the device: phi = b psi (boundary.rs), double-buffered (a step reads
/// `phi[0]` and writes `phi[1]`, then the two swap), zeta and the profile tables a and b.
pub(super) struct CpmlAxisDev<Rt: GpuRuntime> {
    pub axis: usize,
    pub phi: [DeviceBuffer<Rt>; 2],
    pub zeta: DeviceBuffer<Rt>,
    pub a: DeviceBuffer<Rt>,
    pub b: DeviceBuffer<Rt>,
}

/// The CPML layers on the device and where a step computes them.
pub(super) struct CpmlDev<Rt: GpuRuntime> {
    /// In [`CPML_AXIS_ORDER`], the order their corrections are added.
    pub axes: Vec<CpmlAxisDev<Rt>>,
    pub width: i32,
    /// Per axis, 1 where the low (high) face holds a layer ([`Boundary::layer_faces`](crate::boundary::Boundary::layer_faces)).
    pub low: [i32; 3],
    pub high: [i32; 3],
    /// The grid's planes.
    pub nz: i32,
    /// Where a step computes them (never [`LayerPass::YLayers`] for a run whose y-layer kernel
    /// was not compiled).
    pub pass: LayerPass,
}

impl<Rt: GpuRuntime> CpmlDev<Rt> {
    /// The kernels' view of the current buffers; `select` picks a fused launch's blocks, `z` the
    /// planes a cpml.cu launch updates or a fused launch covers.
    pub fn layers(&self, w: &[AxisWeights; 3], select: i32, z: std::ops::Range<usize>) -> Layers {
        let (z_begin, z_end) = (z.start as i32, z.end as i32);
        let mut l = Layers {
            w: *w,
            width: self.width,
            low: self.low,
            high: self.high,
            select,
            z_begin,
            z_end,
            z_offset: z_begin,
            nz: self.nz,
            ..Default::default()
        };
        for c in &self.axes {
            let a = c.axis;
            l.phi_in[a] = c.phi[0].ptr();
            l.phi_out[a] = c.phi[1].ptr();
            l.zeta[a] = c.zeta.ptr();
            l.a[a] = c.a.ptr();
            l.b[a] = c.b.ptr();
        }
        l
    }

    /// Whether the low and high z faces hold a layer.
    pub fn z_faces(&self) -> [bool; 2] {
        [self.low[2] != 0, self.high[2] != 0]
    }

    pub fn swap(&mut self) {
        for c in &mut self.axes {
            c.phi.swap(0, 1);
        }
    }
}

/// c^2 dt^2 (the stiffness K where the density varies) converted by `of` into `vel`, a zeroed
/// field of `layout`, a few planes at a time: no host copy of the whole field (1.2 GB at 288 M
/// points), each chunk computed in parallel.
pub(super) fn upload_stiffness<Rt: GpuRuntime, T: Copy + Default + Send>(
    vel: &DeviceBuffer<Rt>,
    problem: &Problem,
    layout: &Layout,
    of: impl Fn(f64) -> T + Sync,
) -> Result<()> {
    const CHUNK_BYTES: usize = 64 << 20;
    let per = (CHUNK_BYTES / (layout.plane * std::mem::size_of::<T>())).clamp(1, layout.nz.max(1));
    // Whatever is not an interior point stays zero: no chunk writes it.
    let mut chunk = vec![T::default(); per * layout.plane];
    for first in (0..layout.nz).step_by(per) {
        let planes = &mut chunk[..per.min(layout.nz - first) * layout.plane];
        problem.stiffness_planes_into(layout, first, planes, &of);
        vel.upload_at((layout.halo + first) * layout.plane, planes)?;
    }
    Ok(())
}

/// The device address of a buffer that may be absent (kernels test such pointers for null).
pub(super) fn ptr_or_null<Rt: GpuRuntime>(b: &Option<DeviceBuffer<Rt>>) -> DevicePtr {
    b.as_ref().map_or(0, DeviceBuffer::ptr)
}

/// What the f16 step (`run.precision = "f16"`, kernels/fused_half.cu) adds: its kernels, the
/// increment d^n = p^n - p^{n-1} (`prev` then holds p^{n+1}), and the factor the field carries.
pub(super) struct HalfStep<Rt: GpuRuntime> {
    pub f: HalfKernels<Rt::Function>,
    pub inc: DeviceBuffer<Rt>,
    pub scale: f64,
    /// Host copy of the interior z-planes for snapshots.
    pub staging: Vec<u16>,
}
