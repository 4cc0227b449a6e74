//! The sources and the receivers on the device ([`Taps`]): their taps (offsets into the padded
//! field and weights), the sources' samples and the traces, and the launches that inject the
//! sources and record the receivers.

use super::fields::Fields;
use super::kernels::{InjectSource, InjectSourceHalf, IoKernels, Launch, RecordReceivers};
use super::runtime::{DeviceBuffer, DevicePtr, GpuRuntime, TypedPtr, as_bytes_mut};
use crate::grid::Layout;
use crate::problem::{Problem, Receiver, Tap};
use anyhow::Result;
use std::rc::Rc;

/// The sources' taps on the device: offsets into the padded field, weights (with c^2 dt^2 of the
/// tap folded in) and the samples, `row` a step ([`SourceInjection`](crate::problem::SourceInjection)).
struct SourceTable<Rt: GpuRuntime> {
    offsets: DeviceBuffer<Rt>,
    weights: DeviceBuffer<Rt>,
    samples: DeviceBuffer<Rt>,
    taps: usize,
    row: usize,
    /// Steps with samples.
    nsteps: usize,
}

impl<Rt: GpuRuntime> SourceTable<Rt> {
    /// None for sources without taps or samples. The samples carry the field's scale
    /// ([`Problem::field_scale`], 1 in f32; a power of two, so exact).
    fn new(rt: &Rc<Rt>, problem: &Problem) -> Result<Option<Self>> {
        let (layout, src) = (&problem.layout, &problem.source_injection());
        if src.taps.is_empty() || src.samples.is_empty() {
            return Ok(None);
        }
        let offs: Vec<u64> = src.taps.iter().map(|t| tap_offset(layout, t)).collect();
        // As the CPU reference rounds them: the tap weight and c^2 dt^2 (the stiffness K where the
        // density varies) to f32 first, then the product.
        let w: Vec<f32> = src
            .taps
            .iter()
            .map(|t| (t.weight as f32 as f64 * problem.stiffness_at(t.point) as f32 as f64) as f32)
            .collect();
        let scale = problem.field_scale();
        let samples: Vec<f32> = src.samples.iter().map(|&v| (v as f32 as f64 * scale) as f32).collect();
        Ok(Some(SourceTable {
            offsets: DeviceBuffer::from_slice(rt, &offs)?,
            weights: DeviceBuffer::from_slice(rt, &w)?,
            samples: DeviceBuffer::from_slice(rt, &samples)?,
            taps: offs.len(),
            row: src.row,
            nsteps: src.steps(),
        }))
    }
}

/// The receivers' taps on the device (receiver r owns taps first[r]..first[r + 1]) and their
/// traces, (receivers, steps) row-major.
struct ReceiverTable<Rt: GpuRuntime> {
    offsets: DeviceBuffer<Rt>,
    weights: DeviceBuffer<Rt>,
    first: DeviceBuffer<Rt>,
    traces: DeviceBuffer<Rt>,
    count: usize,
}

impl<Rt: GpuRuntime> ReceiverTable<Rt> {
    /// None without receivers; traces of `steps` samples each, zeroed.
    fn new(rt: &Rc<Rt>, layout: &Layout, receivers: &[Receiver], steps: usize) -> Result<Option<Self>> {
        if receivers.is_empty() {
            return Ok(None);
        }
        let mut offs = Vec::new();
        let mut w = Vec::new();
        let mut first = vec![0u32];
        for rcv in receivers {
            for t in &rcv.taps {
                offs.push(tap_offset(layout, t));
                w.push(t.weight as f32);
            }
            first.push(offs.len() as u32);
        }
        Ok(Some(ReceiverTable {
            offsets: DeviceBuffer::from_slice(rt, &offs)?,
            weights: DeviceBuffer::from_slice(rt, &w)?,
            first: DeviceBuffer::from_slice(rt, &first)?,
            traces: DeviceBuffer::zeroed(rt, receivers.len() * steps * 4)?,
            count: receivers.len(),
        }))
    }
}

fn tap_offset(layout: &Layout, t: &Tap) -> u64 {
    layout.index(t.point[0] as isize, t.point[1] as isize, t.point[2] as isize) as u64
}

/// The run's source and receivers on the device.
pub(super) struct Taps<Rt: GpuRuntime> {
    source: Option<SourceTable<Rt>>,
    receivers: Option<ReceiverTable<Rt>>,
    /// Samples each trace holds (the run's steps).
    pub trace_steps: usize,
}

impl<Rt: GpuRuntime> Taps<Rt> {
    /// The tables of `problem`'s source and receivers, uploaded.
    pub fn new(rt: &Rc<Rt>, problem: &Problem) -> Result<Self> {
        Ok(Taps {
            source: SourceTable::new(rt, problem)?,
            receivers: ReceiverTable::new(rt, &problem.layout, &problem.receivers, problem.steps)?,
            trace_steps: problem.steps,
        })
    }

    /// Step 5 of step `n` for the sources' taps on the z-planes `planes`.
    pub fn enqueue_source(
        &self,
        rt: &Rt,
        d: &Fields<Rt>,
        f: &IoKernels<Rt::Function>,
        n: usize,
        planes: std::ops::Range<usize>,
    ) -> Result<()> {
        let Some(s) = &self.source else { return Ok(()) };
        if n >= s.nsteps {
            return Ok(());
        }
        let step = n as i32;
        let (offsets, weights, samples) = (s.offsets.ptr(), s.weights.ptr(), s.samples.ptr());
        let (ntaps, row, nsteps) = (s.taps as i32, s.row as i32, s.nsteps as i32);
        let l = Launch::linear((s.taps as u32).div_ceil(32), 32);
        match &d.half {
            Some(h) => {
                let [cur, inc, next] = [d.cur.ptr(), h.inc.ptr(), d.prev.ptr()].map(TypedPtr::new);
                let (offsets, [weights, samples]) = (TypedPtr::new(offsets), [weights, samples].map(TypedPtr::new));
                let args = InjectSourceHalf { cur, inc, next, offsets, weights, ntaps, samples, row, nsteps, step };
                args.launch(rt, h.f.inject, l)
            }
            None => {
                // Tap offsets count from the allocation's start (plane z begins at (halo + z) planes).
                let at = |z: usize| ((d.layout.halo + z) * d.layout.plane) as u64;
                let (lo, hi) =
                    if planes == (0..d.layout.nz) { (0, u64::MAX) } else { (at(planes.start), at(planes.end)) };
                let args =
                    InjectSource { field: d.prev.ptr(), offsets, weights, ntaps, samples, row, nsteps, step, lo, hi };
                args.launch(rt, f.inject, l)
            }
        }
    }

    /// Step 6 of step `n`: one sample per receiver from `field` (p^{n+1}).
    pub fn enqueue_record(
        &self,
        rt: &Rt,
        d: &Fields<Rt>,
        f: &IoKernels<Rt::Function>,
        field: DevicePtr,
        n: usize,
    ) -> Result<()> {
        let step = n as i32;
        if let Some(r) = &self.receivers
            && n < self.trace_steps
        {
            let args = RecordReceivers {
                field,
                offsets: r.offsets.ptr(),
                weights: r.weights.ptr(),
                first: r.first.ptr(),
                nrec: r.count as i32,
                traces: r.traces.ptr(),
                steps: self.trace_steps as i32,
                step,
            };
            let f = d.half.as_ref().map_or(f.record, |h| h.f.record);
            args.launch(rt, f, Launch::linear((r.count as u32).div_ceil(128), 128))?;
        }
        Ok(())
    }

    /// The first `steps` samples of every trace (of `done` recorded), unscaled.
    pub fn traces(&self, rt: &Rt, d: &Fields<Rt>, steps: usize, done: usize) -> Result<Vec<f32>> {
        let Some(r) = &self.receivers else {
            return Ok(Vec::new());
        };
        let mut all = vec![0.0f32; r.count * self.trace_steps];
        rt.download(r.traces.ptr(), as_bytes_mut(&mut all))?;
        let n = steps.min(done).min(self.trace_steps);
        let mut out: Vec<f32> = all.chunks(self.trace_steps).flat_map(|t| t[..n].iter().copied()).collect();
        d.unscale(&mut out);
        Ok(out)
    }
}
