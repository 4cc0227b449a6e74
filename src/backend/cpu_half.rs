//! The CPU reference of `run.precision = "f16"`: the wavefields and c^2 dt^2 stored in half
//! precision, arithmetic in f32. The two time levels are p^n and the increment
//! d^n = p^n - p^{n-1} (not p^{n-1}): a step computes d^{n+1} = g (2 p^n - g (p^n - d^n) + c^2 dt^2
//! L p^n) - p^n (d^n + c^2 dt^2 L p^n without a sponge), adds the CPML corrections and the source
//! to it, and sets p^{n+1} = p^n + d^{n+1}. An f16 rounding of p^{n-1} acts like a velocity error
//! of 2^-12 p / dt, amplified by 1 / (w dt) over an oscillation; a rounding of d^n or p^{n+1} is
//! not amplified (docs/numerics.md, "f16 storage" has the measurements: 10 to 50 times less error).
//!
//! Every stored value is rounded to the nearest f16 (ties to even) where a kernel would store it:
//! d^{n+1} after the interior update, after each axis's CPML correction (y, then z, then x: [`CPML_AXIS_ORDER`]) and
//! after the source injection, then p^{n+1}. The f32 expressions and their order are the f32
//! reference's (cpu.rs). The field is held scaled by [`Problem::field_scale`] (a power of two, so
//! exact); traces and snapshots divide it back out. Values are kept as f32 numbers that f16
//! represents exactly (the results of 16-bit storage without a conversion on every read). This
//! path is simple and separate from the tuned f32 sweep: one task per z-plane for the interior
//! and for each axis's CPML layers, memory variables f32 over the whole grid. Values are rounded a
//! row at a time through the `half` crate's slice conversions ([`round_f16_slice`]: F16C where
//! the CPU has it, the same bits as one value at a time, both directions being exact or
//! correctly rounded).

mod cpml;

use super::cpu::layer_weights_into;
use super::{Backend, DeviceInfo};
use crate::boundary::{BoundaryKind, CPML_AXIS_ORDER};
use crate::grid::{Layout, Section, for_each_section};
use crate::problem::Problem;
use anyhow::{Result, ensure};
use cpml::{AxisPass, LayerWeights};
use half::f16;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;
use std::time::Instant;

/// x rounded to the nearest f16 (ties to even), back in f32: one 16-bit store and load.
#[inline(always)]
pub fn round_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// Values a row is computed and rounded in at a time (a stack buffer's length).
const CHUNK: usize = 64;

/// Every value of `xs` rounded to the nearest f16 (ties to even), in place: [`round_f16`] of each,
/// bit for bit, through the `half` crate's slice conversions, which use the CPU's F16C
/// instructions eight values at a time where it has them (detected at run time).
pub fn round_f16_slice(xs: &mut [f32]) {
    let mut h = [f16::ZERO; CHUNK];
    for part in xs.chunks_mut(CHUNK) {
        let h = &mut h[..part.len()];
        h.convert_from_f32_slice(part);
        h.convert_to_f32_slice(part);
    }
}

/// The storage variants of the f16 mode, for the measurements that chose the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HalfStorage {
    /// c^2 dt^2 rounded to f16 too (else f32).
    pub vel: bool,
    /// The second time level stored as the increment d^n = p^n - p^{n-1} instead of p^{n-1}.
    pub increment: bool,
}

impl Default for HalfStorage {
    fn default() -> Self {
        HalfStorage { vel: VEL_F16, increment: INCREMENT }
    }
}

/// Whether the f16 mode stores d^n (else p^{n-1}; docs/numerics.md, "f16 storage" has the measurements).
pub const INCREMENT: bool = true;

/// Whether c^2 dt^2 is stored in f16 in the f16 mode (docs/numerics.md, "f16 storage" has the measurements).
pub const VEL_F16: bool = true;

struct CpmlState {
    width: usize,
    /// (a, b) per axis over that axis's grid index.
    coef: [[Vec<f32>; 2]; 3],
    /// psi and zeta per axis, dense (nz, ny, nx); only layer points are used.
    psi: [Vec<f32>; 3],
    zeta: [Vec<f32>; 3],
    /// New psi of the current step (psi is double-buffered, as on the GPU).
    psi_new: Vec<f32>,
    /// Per axis and grid index q, the weights of the compact D(a D p): w+_k, w-_k and their sum
    /// ([`layer_weights_into`]), which depend on q alone.
    weights: [Vec<LayerWeights>; 3],
}

pub struct CpuHalfSolver {
    layout: Layout,
    radius: usize,
    scale: f64,
    /// Second-derivative weights per axis scaled by 1/h^2 (index 0: the centre weight).
    c2: [Vec<f32>; 3],
    centre: f32,
    c1: [Vec<f32>; 3],
    vel: Vec<f32>,
    damp: Option<[Vec<f32>; 3]>,
    cpml: Option<CpmlState>,
    free_surface: bool,
    cur: Vec<f32>,
    prev: Vec<f32>,
    /// With `increment`: d^n = p^n - p^{n-1} (then `prev` only receives p^{n+1}).
    inc: Option<Vec<f32>>,
    src_taps: Vec<(usize, f32)>,
    /// The sources' samples ([`SourceInjection`](crate::problem::SourceInjection)), `src_row` a
    /// step, scaled.
    src_samples: Vec<f32>,
    src_row: usize,
    rec_taps: Vec<Vec<(usize, f32)>>,
    /// Traces as recorded (scaled).
    traces: Vec<Vec<f32>>,
    seconds: Vec<f64>,
    storage: HalfStorage,
}

impl CpuHalfSolver {
    pub fn new(problem: &Problem) -> Result<Self> {
        Self::with_storage(problem, HalfStorage::default())
    }

    pub fn with_storage(problem: &Problem, storage: HalfStorage) -> Result<Self> {
        ensure!(
            problem.density.is_none(),
            "f16 storage does not take a variable density (model.density): drop run.precision = \"f16\""
        );
        let layout = problem.layout;
        let shape = problem.shape();
        let r = problem.stencil.radius;
        ensure!(layout.halo == r, "layout halo must equal the stencil radius");
        ensure!((1..=8).contains(&r), "stencil radius {r} outside 1..=8");
        let c2: [Vec<f32>; 3] = std::array::from_fn(|a| {
            problem.stencil.second_scaled(problem.spacing[a]).into_iter().map(|v| v as f32).collect()
        });
        let centre = (0..3).map(|a| c2[a][0] as f64).sum::<f64>() as f32;
        let c1 =
            std::array::from_fn(|a| problem.stencil.first.iter().map(|c| (c / problem.spacing[a]) as f32).collect());
        let mut vel = vec![0.0f32; layout.len()];
        let dense: Vec<f32> =
            problem.vel2dt2().into_iter().map(|v| if storage.vel { round_f16(v as f32) } else { v as f32 }).collect();
        layout.scatter(&dense, &mut vel);
        let b = &problem.boundary;
        ensure!(b.kind != BoundaryKind::CpmlTransposed, "the backward pass with CPML runs in f32 or f64, not f16");
        let damp = (b.kind == BoundaryKind::Sponge)
            .then(|| std::array::from_fn(|a| b.profiles[a].damp.iter().map(|&g| g as f32).collect()));
        let n = shape.iter().product::<usize>();
        let cpml = (b.kind == BoundaryKind::Cpml).then(|| {
            let coef: [[Vec<f32>; 2]; 3] = std::array::from_fn(|a| {
                let p = &b.profiles[a];
                [&p.a, &p.b].map(|v| v.iter().map(|&v| v as f32).collect())
            });
            let weights = std::array::from_fn(|axis| {
                (0..shape[axis])
                    .map(|q| {
                        let (mut wp, mut wm) = ([0.0f32; 8], [0.0f32; 8]);
                        let ws = layer_weights_into(&coef[axis][0], &c2[axis], q, &mut wp[..r], &mut wm[..r]);
                        (wp, wm, ws)
                    })
                    .collect()
            });
            CpmlState {
                width: b.width,
                coef,
                psi: std::array::from_fn(|_| vec![0.0; n]),
                zeta: std::array::from_fn(|_| vec![0.0; n]),
                psi_new: vec![0.0; n],
                weights,
            }
        });
        let taps = |t: &[crate::problem::Tap]| -> Vec<(usize, f32)> {
            t.iter()
                .map(|t| {
                    let [x, y, z] = t.point;
                    (layout.index(x as isize, y as isize, z as isize), t.weight as f32)
                })
                .collect()
        };
        // The source weight times c^2 dt^2 as the f32 reference forms it (from the f32 c^2 dt^2).
        let mut vel32 = vec![0.0f32; layout.len()];
        let dense32: Vec<f32> = problem.vel2dt2().into_iter().map(|v| v as f32).collect();
        layout.scatter(&dense32, &mut vel32);
        let injection = problem.source_injection();
        let src_taps =
            taps(&injection.taps).into_iter().map(|(o, w)| (o, (w as f64 * vel32[o] as f64) as f32)).collect();
        let scale = problem.field_scale();
        Ok(CpuHalfSolver {
            layout,
            radius: r,
            scale,
            c2,
            centre,
            c1,
            vel,
            damp,
            cpml,
            free_surface: b.free_surface,
            cur: vec![0.0; layout.len()],
            prev: vec![0.0; layout.len()],
            inc: storage.increment.then(|| vec![0.0; layout.len()]),
            storage,
            src_taps,
            // Scaling by a power of two is exact: the f32 samples times the scale.
            src_samples: injection.samples.iter().map(|&s| (s as f32 as f64 * scale) as f32).collect(),
            src_row: injection.row,
            rec_taps: problem.receivers.iter().map(|r| taps(&r.taps)).collect(),
            traces: (0..problem.receivers.len()).map(|_| Vec::with_capacity(problem.steps)).collect(),
            seconds: Vec::with_capacity(problem.steps),
        })
    }

    /// The factor the stored field carries ([`Problem::field_scale`]).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The current wavefield p^n, padded layout, scaled.
    pub fn field(&self) -> &[f32] {
        &self.cur
    }

    /// Receiver traces in physical units.
    pub fn traces_f64(&self) -> Vec<Vec<f64>> {
        self.traces.iter().map(|t| t.iter().map(|&v| v as f64 / self.scale).collect()).collect()
    }

    /// Advances one step (the order of `backend`'s module docs, with the f16 stores of the module docs).
    pub fn advance(&mut self, n: usize) {
        let start = Instant::now();
        let l = self.layout;
        if self.free_surface {
            // Negation is exact: the mirror needs no rounding.
            for iy in 0..l.ny {
                let row0 = l.row(iy, 0);
                self.cur[row0..row0 + l.nx].fill(0.0);
                for k in 1..=self.radius {
                    let (src, dst) = (l.row(iy, k), l.index(0, iy as isize, -(k as isize)));
                    for ix in 0..l.nx {
                        self.cur[dst + ix] = -self.cur[src + ix];
                    }
                }
            }
        }
        // What the step writes: p^{n+1} over p^{n-1}, or with the increment d^{n+1} over d^n.
        let mut target = self.inc.take().unwrap_or_else(|| std::mem::take(&mut self.prev));
        let increment = !self.prev.is_empty();
        if increment && self.free_surface {
            // d^n = p^n - p^{n-1} = 0 on the surface, as the mirror made p^n (and p^{n-1} before).
            for iy in 0..l.ny {
                let row0 = l.row(iy, 0);
                target[row0..row0 + l.nx].fill(0.0);
            }
        }
        self.interior(&mut target, increment);
        if self.cpml.is_some() {
            for axis in CPML_AXIS_ORDER {
                self.cpml_axis(axis, &mut target);
            }
        }
        let row = self.src_row;
        if let Some(samples) = self.src_samples.get(n * row..(n + 1) * row) {
            for (t, &(o, w)) in self.src_taps.iter().enumerate() {
                target[o] = round_f16(target[o] + w * samples[if row == 1 { 0 } else { t }]);
            }
        }
        if increment {
            // p^{n+1} = p^n + d^{n+1}, over p^{n-1}.
            let origin = l.index(0, 0, 0);
            let (cur, d) = (&self.cur, &target);
            self.prev[origin..origin + l.nz * l.plane].par_chunks_mut(l.plane).enumerate().for_each(|(iz, plane)| {
                for iy in 0..l.ny {
                    let row = l.row(iy, iz);
                    let out = &mut plane[iy * l.pitch..][..l.nx];
                    for (ix, o) in out.iter_mut().enumerate() {
                        *o = cur[row + ix] + d[row + ix];
                    }
                    round_f16_slice(out);
                }
            });
            self.inc = Some(target);
        } else {
            self.prev = target;
        }
        for (taps, trace) in self.rec_taps.iter().zip(self.traces.iter_mut()) {
            let mut v = 0.0f32;
            for &(o, w) in taps {
                v += w * self.prev[o];
            }
            trace.push(v);
        }
        std::mem::swap(&mut self.cur, &mut self.prev);
        self.seconds.push(start.elapsed().as_secs_f64());
    }

    /// p^{n+1} = g (2 p^n - g p^{n-1} + c^2 dt^2 L p^n), rounded to f16, over p^{n-1} in `target`;
    /// with `increment`, d^{n+1} = p^{n+1} - p^n over d^n (p^{n-1} = p^n - d^n). One task per z-plane.
    fn interior(&self, target: &mut [f32], increment: bool) {
        let l = self.layout;
        let origin = l.index(0, 0, 0);
        #[cfg(target_arch = "x86_64")]
        let fma = std::arch::is_x86_feature_detected!("fma");
        target[origin..origin + l.nz * l.plane].par_chunks_mut(l.plane).enumerate().for_each(|(iz, plane)| {
            #[cfg(target_arch = "x86_64")]
            if fma {
                // SAFETY: the CPU has FMA (checked above).
                unsafe { self.interior_plane_fma(plane, iz, increment) };
                return;
            }
            self.interior_plane(plane, iz, increment)
        });
    }

    /// [`Self::interior_plane`] with hardware fused multiply-adds (the same bits: FMA is exactly
    /// rounded either way, this only avoids the software fallback).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "fma")]
    unsafe fn interior_plane_fma(&self, plane: &mut [f32], iz: usize, increment: bool) {
        self.interior_plane(plane, iz, increment)
    }

    /// The interior update of z-plane iz; `plane` is that plane of the target, from its row 0.
    /// A row is computed `CHUNK` values at a time, each operation over the chunk's values before
    /// the next (the same operations in the same order for every value), then rounded together.
    #[inline(always)]
    fn interior_plane(&self, plane: &mut [f32], iz: usize, increment: bool) {
        let l = self.layout;
        let r = self.radius;
        let (cur, vel, damp) = (&self.cur, &self.vel, self.damp.as_ref());
        let (c2, centre) = (&self.c2, self.centre);
        let mut lap_buf = [0.0f32; CHUNK];
        for iy in 0..l.ny {
            let row = l.row(iy, iz);
            for (chunk, out) in plane[iy * l.pitch..][..l.nx].chunks_mut(CHUNK).enumerate() {
                let (first, len) = (chunk * CHUNK, out.len());
                let at = row + first;
                let lap = &mut lap_buf[..len];
                // The order of cpu.rs `laplacian_chunk`: centre, then x, y, z, k ascending.
                for (v, &p) in lap.iter_mut().zip(&cur[at..at + len]) {
                    *v = centre * p;
                }
                for (axis, s) in [1, l.pitch, l.plane].into_iter().enumerate() {
                    for k in 1..=r {
                        let (lo, hi) = (&cur[at - k * s..][..len], &cur[at + k * s..][..len]);
                        for ((v, &m), &p) in lap.iter_mut().zip(lo).zip(hi) {
                            *v = c2[axis][k].mul_add(m + p, *v);
                        }
                    }
                }
                let (p, vel) = (&cur[at..at + len], &vel[at..at + len]);
                match (damp, increment) {
                    (Some(g), false) => {
                        for (j, o) in out.iter_mut().enumerate() {
                            let gi = g[0][first + j] * (g[1][iy] * g[2][iz]);
                            *o = gi * (2.0 * p[j] - gi * *o + vel[j] * lap[j]);
                        }
                    }
                    (Some(g), true) => {
                        for (j, o) in out.iter_mut().enumerate() {
                            let gi = g[0][first + j] * (g[1][iy] * g[2][iz]);
                            *o = gi * (2.0 * p[j] - gi * (p[j] - *o) + vel[j] * lap[j]) - p[j];
                        }
                    }
                    (None, false) => {
                        for (j, o) in out.iter_mut().enumerate() {
                            *o = 2.0 * p[j] - *o + vel[j] * lap[j];
                        }
                    }
                    (None, true) => {
                        for (j, o) in out.iter_mut().enumerate() {
                            *o += vel[j] * lap[j];
                        }
                    }
                }
                round_f16_slice(out);
            }
        }
    }

    /// One axis's CPML update over both of its layers, rounded to f16 (boundary.rs has the
    /// formulation; the f32 reference's operation order). A point writes only its own phi, zeta
    /// and p^{n+1}, so the z-planes are computed in parallel.
    fn cpml_axis(&mut self, axis: usize, out: &mut [f32]) {
        let l = self.layout;
        let c = self.cpml.as_mut().expect("CPML state");
        let w = c.width;
        let [a, b] = &c.coef[axis];
        let pass = AxisPass {
            layout: l,
            axis,
            radius: self.radius,
            width: w,
            a,
            b,
            weights: &c.weights[axis],
            c1: &self.c1[axis],
            c2: &self.c2[axis],
            cur: &self.cur,
            vel: &self.vel,
            phi: &c.psi[axis],
        };
        let dense_plane = l.nx * l.ny;
        let origin = l.index(0, 0, 0);
        let planes = out[origin..origin + l.nz * l.plane]
            .par_chunks_mut(l.plane)
            .zip(c.psi_new.par_chunks_mut(dense_plane))
            .zip(c.zeta[axis].par_chunks_mut(dense_plane));
        #[cfg(target_arch = "x86_64")]
        let fma = std::arch::is_x86_feature_detected!("fma");
        planes.enumerate().for_each(|(iz, ((out_plane, phi_next), zeta))| {
            #[cfg(target_arch = "x86_64")]
            if fma {
                // SAFETY: the CPU has FMA (checked above).
                unsafe { pass.plane_fma(iz, out_plane, phi_next, zeta) };
                return;
            }
            pass.plane(iz, out_plane, phi_next, zeta)
        });
        std::mem::swap(&mut c.psi[axis], &mut c.psi_new);
    }
}

impl Backend for CpuHalfSolver {
    /// The reference path: built anew for the shot (its scale depends on the source).
    fn start_shot(&mut self, problem: &Problem) -> Result<()> {
        ensure!(problem.layout == self.layout, "a shot must use the grid the backend was opened with");
        *self = Self::with_storage(problem, self.storage)?;
        Ok(())
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: "cpu",
            name: format!("CPU (rayon, {} threads, f16 storage reference)", rayon::current_num_threads()),
            kernel: "rayon-f16".into(),
        }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        self.advance(n);
        Ok(())
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        ensure!(
            out.len() == self.layout.points(),
            "snapshot buffer has {} values, grid {}",
            out.len(),
            self.layout.points()
        );
        Section::Volume.copy_from(&self.layout, |i| (self.cur[i] as f64 / self.scale) as f32, out);
        Ok(())
    }

    fn snapshot_sections(&mut self, sections: &[Section], out: &mut [f32]) -> Result<()> {
        let l = self.layout;
        let scale = self.scale;
        for_each_section(sections, [l.nx, l.ny, l.nz], out, |s, part| {
            s.copy_from(&l, |i| (self.cur[i] as f64 / scale) as f32, part);
            Ok(())
        })
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        let scale = self.scale;
        Ok(self
            .traces
            .iter()
            .flat_map(|t| t[..steps.min(t.len())].iter().map(move |&v| (v as f64 / scale) as f32))
            .collect())
    }

    /// f16 overflows to infinity: a blown-up run shows here as in f32.
    fn field_is_finite(&mut self) -> Result<bool> {
        Ok(self.cur.par_iter().all(|v| v.is_finite()))
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        Ok(self.seconds.clone())
    }
}
