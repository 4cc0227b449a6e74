//! The CPU reference: plain loops over the shared layout, rayon over z-planes (each task a plane,
//! looping over y), an inner x loop in fixed-size chunks the compiler vectorises (the stencil
//! radius is a const generic so the tap loop unrolls). CPML work runs in separate passes over the
//! layer slabs, also by plane. The step allocates nothing (tests/cpu_no_alloc.rs). Generic over
//! f32 and f64 so tests can take rounding out of play.

use super::{Backend, DeviceInfo};
use crate::boundary::{BoundaryKind, Slab};
use crate::grid::{Layout, Section, for_each_section};
use crate::problem::Problem;
use anyhow::{Result, ensure};
use rayon::prelude::*;
use std::time::Instant;

/// Floating-point type of a CPU run.
pub trait Real:
    Copy
    + Send
    + Sync
    + Default
    + PartialOrd
    + std::fmt::Debug
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::AddAssign
    + 'static
{
    fn of(v: f64) -> Self;
    fn f64(self) -> f64;
    /// self * a + b, rounded once (a stencil tap: the GPU kernels' `tap` computes the same).
    fn mul_add(self, a: Self, b: Self) -> Self;
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f64::mul_add(self, a, b)
    }
}

/// Width of the x chunks the inner loops work on (a stack buffer, so the step allocates nothing).
const CHUNK: usize = 64;

/// Per axis, the CPML coefficients (a, b) over that axis's grid index.
type CpmlProfiles<T> = [(Vec<T>, Vec<T>); 3];

struct CpmlAxis<T> {
    slab: Slab,
    psi: Vec<T>,
    zeta: Vec<T>,
}

pub struct CpuSolver<T: Real> {
    layout: Layout,
    radius: usize,
    /// Second-derivative weights scaled by 1/h^2 per axis (index 0: that axis's centre weight).
    c2: [Vec<T>; 3],
    centre: T,
    /// First-derivative weights scaled by 1/h per axis.
    c1: [Vec<T>; 3],
    vel2dt2: Vec<T>,
    damp: Option<[Vec<T>; 3]>,
    cpml: Option<([CpmlAxis<T>; 3], CpmlProfiles<T>)>,
    free_surface: bool,
    cur: Vec<T>,
    prev: Vec<T>,
    /// (offset in the padded field, weight * c^2 dt^2) per source tap.
    src_taps: Vec<(usize, T)>,
    src_samples: Vec<T>,
    rec_taps: Vec<Vec<(usize, T)>>,
    traces: Vec<Vec<T>>,
    seconds: Vec<f64>,
}

impl<T: Real> CpuSolver<T> {
    pub fn new(problem: &Problem) -> Result<Self> {
        let layout = problem.layout;
        let shape = problem.shape();
        let r = problem.stencil.radius;
        ensure!(layout.halo == r, "layout halo must equal the stencil radius");
        let c2: [Vec<T>; 3] =
            std::array::from_fn(|a| problem.stencil.second_scaled(problem.spacing[a]).into_iter().map(T::of).collect());
        let centre = T::of((0..3).map(|a| c2[a][0].f64()).sum());
        let c1 = std::array::from_fn(|a| problem.stencil.first.iter().map(|c| T::of(c / problem.spacing[a])).collect());
        let mut vel2dt2 = vec![T::default(); layout.len()];
        let dense: Vec<T> = problem.vel2dt2().into_iter().map(T::of).collect();
        layout.scatter(&dense, &mut vel2dt2);
        let b = &problem.boundary;
        let damp = (b.kind == BoundaryKind::Sponge)
            .then(|| std::array::from_fn(|a| b.profiles[a].damp.iter().map(|&g| T::of(g)).collect()));
        let cpml = (b.kind == BoundaryKind::Cpml).then(|| {
            let slabs = b.slabs(shape);
            let axes = slabs.map(|slab| CpmlAxis {
                slab,
                psi: vec![T::default(); slab.len()],
                zeta: vec![T::default(); slab.len()],
            });
            let coef = std::array::from_fn(|a| {
                let p = &b.profiles[a];
                (p.a.iter().map(|&v| T::of(v)).collect(), p.b.iter().map(|&v| T::of(v)).collect())
            });
            (axes, coef)
        });
        let taps = |t: &[crate::problem::Tap]| -> Vec<(usize, T)> {
            t.iter()
                .map(|t| {
                    let [x, y, z] = t.point;
                    (layout.index(x as isize, y as isize, z as isize), T::of(t.weight))
                })
                .collect()
        };
        let src_taps =
            taps(&problem.source.taps).into_iter().map(|(o, w)| (o, T::of(w.f64() * vel2dt2[o].f64()))).collect();
        Ok(CpuSolver {
            layout,
            radius: r,
            c2,
            centre,
            c1,
            vel2dt2,
            damp,
            cpml,
            free_surface: b.free_surface,
            cur: vec![T::default(); layout.len()],
            prev: vec![T::default(); layout.len()],
            src_taps,
            src_samples: problem.source.samples.iter().map(|&s| T::of(s)).collect(),
            rec_taps: problem.receivers.iter().map(|r| taps(&r.taps)).collect(),
            // One Vec per receiver, each with its own capacity (vec![v; n] clones drop capacity).
            traces: (0..problem.receivers.len()).map(|_| Vec::with_capacity(problem.steps)).collect(),
            seconds: Vec::with_capacity(problem.steps),
        })
    }

    /// The current wavefield p^n, padded layout.
    pub fn field(&self) -> &[T] {
        &self.cur
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Receiver traces in the solver's precision.
    pub fn traces_native(&self) -> &[Vec<T>] {
        &self.traces
    }

    /// Sets p^n and p^{n-1} from dense (nz, ny, nx) arrays (initial-value problems in tests).
    pub fn set_state(&mut self, current: &[T], previous: &[T]) {
        self.layout.scatter(current, &mut self.cur);
        self.layout.scatter(previous, &mut self.prev);
    }

    /// Advances one step (module docs of `backend` give the order).
    pub fn advance(&mut self, n: usize) {
        let start = Instant::now();
        if self.free_surface {
            self.mirror_top();
        }
        if self.cpml.is_some() {
            self.update_psi();
        }
        self.update_interior();
        if self.cpml.is_some() {
            self.apply_cpml();
        }
        if let Some(&s) = self.src_samples.get(n) {
            for &(o, w) in &self.src_taps {
                self.prev[o] += w * s;
            }
        }
        for (taps, trace) in self.rec_taps.iter().zip(self.traces.iter_mut()) {
            let mut v = T::default();
            for &(o, w) in taps {
                v += w * self.prev[o];
            }
            trace.push(v);
        }
        std::mem::swap(&mut self.cur, &mut self.prev);
        self.seconds.push(start.elapsed().as_secs_f64());
    }

    /// p(-k) = -p(k) above z = 0, and p(0) = 0: a pressure-free surface at z = 0.
    fn mirror_top(&mut self) {
        let l = self.layout;
        for iy in 0..l.ny {
            let row0 = l.row(iy, 0);
            for v in &mut self.cur[row0..row0 + l.nx] {
                *v = T::default();
            }
            for k in 1..=self.radius {
                let src = l.row(iy, k);
                let dst = l.index(0, iy as isize, -(k as isize));
                for ix in 0..l.nx {
                    self.cur[dst + ix] = T::default() - self.cur[src + ix];
                }
            }
        }
    }

    fn update_interior(&mut self) {
        match self.radius {
            1 => self.interior::<1>(),
            2 => self.interior::<2>(),
            3 => self.interior::<3>(),
            4 => self.interior::<4>(),
            5 => self.interior::<5>(),
            6 => self.interior::<6>(),
            7 => self.interior::<7>(),
            8 => self.interior::<8>(),
            r => unreachable!("stencil radius {r} outside 1..=8"),
        }
    }

    /// The interior update for radius R known at compile time: the tap loop unrolls and the loop
    /// over a chunk of x vectorises, with one store per point. Each plane runs in the build with
    /// hardware fused multiply-adds where the CPU has them (the taps are `mul_add`s, as on the
    /// GPU; without the instruction they are correct but slow library calls).
    fn interior<const R: usize>(&mut self) {
        let plane_len = self.layout.plane;
        let job = InteriorPlanes::<T, R> {
            layout: self.layout,
            cur: &self.cur,
            vel: &self.vel2dt2,
            damp: &self.damp,
            centre: self.centre,
            coef: std::array::from_fn(|a| std::array::from_fn(|k| self.c2[a][k + 1])),
        };
        self.prev.par_chunks_mut(plane_len).enumerate().for_each(|(pz, plane)| {
            #[cfg(target_arch = "x86_64")]
            if hardware_fma() {
                // SAFETY: hardware_fma checked that this CPU has AVX2 and FMA.
                unsafe { job.plane_avx2_fma(pz, plane) };
                return;
            }
            job.plane(pz, plane);
        });
    }

    fn update_psi(&mut self) {
        let (axes, coef) = self.cpml.as_mut().expect("cpml");
        let l = self.layout;
        let r = self.radius;
        let cur = &self.cur;
        for (axis, ax) in axes.iter_mut().enumerate() {
            let (a, b, c1, slab) = (&coef[axis].0, &coef[axis].1, &self.c1[axis], ax.slab);
            let w = slab.width;
            if w == 0 {
                continue;
            }
            let e = slab.extent();
            if axis == 0 {
                // x layers: slab (nz, ny, 2w); each row has a low and a high segment of w points.
                ax.psi.par_chunks_mut(e[0] * e[1]).enumerate().for_each(|(iz, psi)| {
                    for iy in 0..l.ny {
                        for half in 0..2 {
                            let x0 = if half == 0 { 0 } else { l.nx - w };
                            let seg = &mut psi[(2 * iy + half) * w..(2 * iy + half + 1) * w];
                            let o = l.row(iy, iz) + x0;
                            for (ci, pchunk) in seg.chunks_mut(CHUNK).enumerate() {
                                let (j, n) = (ci * CHUNK, pchunk.len());
                                let mut d = [T::default(); CHUNK];
                                for k in 1..=r {
                                    let (lo, hi) = (&cur[o + j - k..o + j - k + n], &cur[o + j + k..o + j + k + n]);
                                    for i in 0..n {
                                        d[i] += c1[k] * (hi[i] - lo[i]);
                                    }
                                }
                                let (aq, bq) = (&a[x0 + j..x0 + j + n], &b[x0 + j..x0 + j + n]);
                                for i in 0..n {
                                    pchunk[i] = bq[i] * pchunk[i] + aq[i] * d[i];
                                }
                            }
                        }
                    }
                });
            } else {
                // y and z layers: whole x-rows, in chunks the compiler vectorises.
                let s = if axis == 1 { l.pitch } else { l.plane };
                ax.psi.par_chunks_mut(e[0] * e[1]).enumerate().for_each(|(outer, psi)| {
                    for (inner, prow) in psi.chunks_mut(l.nx).enumerate() {
                        let (iy, iz, q) = Self::layer_row(&slab, axis, inner, outer);
                        let (aq, bq) = (a[q], b[q]);
                        let row = l.row(iy, iz);
                        for (ci, pchunk) in prow.chunks_mut(CHUNK).enumerate() {
                            let o = row + ci * CHUNK;
                            let n = pchunk.len();
                            let mut d = [T::default(); CHUNK];
                            for k in 1..=r {
                                let (lo, hi) = (&cur[o - k * s..o - k * s + n], &cur[o + k * s..o + k * s + n]);
                                for i in 0..n {
                                    d[i] += c1[k] * (hi[i] - lo[i]);
                                }
                            }
                            for (v, di) in pchunk.iter_mut().zip(&d[..n]) {
                                *v = bq * *v + aq * *di;
                            }
                        }
                    }
                });
            }
        }
    }

    /// Grid (iy, iz) of x-row `inner` of slab chunk `outer` for the y or z slab, and the grid index
    /// along the slab's axis (which selects the profile coefficient).
    fn layer_row(slab: &Slab, axis: usize, inner: usize, outer: usize) -> (usize, usize, usize) {
        if axis == 1 {
            let iy = slab.grid_coord(inner);
            (iy, outer, iy)
        } else {
            let iz = slab.grid_coord(outer);
            (inner, iz, iz)
        }
    }

    /// zeta_i <- b zeta_i + a (d2p/dx_i2 + dpsi_i/dx_i) and p^{n+1} += c^2 dt^2 (dpsi_i/dx_i + zeta_i)
    /// in each axis's layers. psi is zero outside its layers (and beyond the grid), so the
    /// derivative of psi only takes neighbours in the same layer. Parallel over z-planes of
    /// p^{n+1}; the axes run one after the other, so no point is written twice at once.
    fn apply_cpml(&mut self) {
        let (axes, coef) = self.cpml.as_mut().expect("cpml");
        let l = self.layout;
        let r = self.radius;
        let (cur, vel) = (&self.cur, &self.vel2dt2);
        for (axis, ax) in axes.iter_mut().enumerate() {
            let (a, b, slab) = (&coef[axis].0, &coef[axis].1, ax.slab);
            let (c1, c2) = (&self.c1[axis], &self.c2[axis]);
            let w = slab.width;
            if w == 0 {
                continue;
            }
            let e = slab.extent();
            let chunk_len = e[0] * e[1];
            let psi = &ax.psi;
            // Slicing, not `skip`: rayon's Skip spawns a heap-allocated job for the skipped part.
            let planes = self.prev[r * l.plane..(r + l.nz) * l.plane].par_chunks_mut(l.plane);
            if axis == 0 {
                planes.zip(ax.zeta.par_chunks_mut(chunk_len)).enumerate().for_each(|(iz, (plane, zeta))| {
                    let base = (iz + r) * l.plane;
                    let psi = &psi[iz * chunk_len..(iz + 1) * chunk_len];
                    for iy in 0..l.ny {
                        for half in 0..2 {
                            let x0 = if half == 0 { 0 } else { l.nx - w };
                            let so = (2 * iy + half) * w;
                            let seg = &psi[so..so + w];
                            let o = l.row(iy, iz) + x0;
                            for j in (0..w).step_by(CHUNK) {
                                let n = CHUNK.min(w - j);
                                // dpsi/dx from neighbours inside this segment only (psi is zero
                                // beyond it), d2p/dx2 from the field.
                                let mut dpsi = [T::default(); CHUNK];
                                let mut d2 = [T::default(); CHUNK];
                                let c = &cur[o + j..o + j + n];
                                for i in 0..n {
                                    d2[i] = c2[0] * c[i];
                                }
                                for k in 1..=r {
                                    // Plus neighbour seg[j + i + k] exists for j + i + k < w.
                                    let np = n.min(w.saturating_sub(j + k));
                                    let p = &seg[(j + k).min(w)..(j + k).min(w) + np];
                                    for i in 0..np {
                                        dpsi[i] += c1[k] * p[i];
                                    }
                                    // Minus neighbour seg[j + i - k] exists for j + i >= k.
                                    let i0 = k.saturating_sub(j).min(n);
                                    let m = &seg[j + i0 - k.min(j + i0)..j + n - k.min(j + n)];
                                    for i in i0..n {
                                        dpsi[i] = dpsi[i] - c1[k] * m[i - i0];
                                    }
                                    let (fl, fh) = (&cur[o + j - k..o + j - k + n], &cur[o + j + k..o + j + k + n]);
                                    for i in 0..n {
                                        d2[i] += c2[k] * (fl[i] + fh[i]);
                                    }
                                }
                                let (aq, bq) = (&a[x0 + j..x0 + j + n], &b[x0 + j..x0 + j + n]);
                                let (z, v) = (&mut zeta[so + j..so + j + n], &vel[o + j..o + j + n]);
                                let out = &mut plane[o + j - base..o + j - base + n];
                                for i in 0..n {
                                    z[i] = bq[i] * z[i] + aq[i] * (d2[i] + dpsi[i]);
                                    out[i] += v[i] * (dpsi[i] + z[i]);
                                }
                            }
                        }
                    }
                });
                continue;
            }
            // y and z: slab coordinate t along the axis; neighbours t +- k must stay in its half.
            let (s, ps) = if axis == 1 { (l.pitch, l.nx) } else { (l.plane, l.nx * l.ny) };
            let row_op = |plane: &mut [T], zeta: &mut [T], inner: usize, outer: usize| {
                let (iy, iz, q) = Self::layer_row(&slab, axis, inner, outer);
                let t = if axis == 1 { inner } else { outer };
                let lo = if t < w { 0 } else { w };
                let (aq, bq) = (a[q], b[q]);
                let row = l.row(iy, iz);
                let base = (iz + r) * l.plane;
                let prow = (outer * e[1] + inner) * l.nx;
                let zrow = &mut zeta[inner * l.nx..(inner + 1) * l.nx];
                for (ci, zchunk) in zrow.chunks_mut(CHUNK).enumerate() {
                    let x0 = ci * CHUNK;
                    let (o, n, po) = (row + x0, zchunk.len(), prow + x0);
                    let mut dpsi = [T::default(); CHUNK];
                    let mut d2 = [T::default(); CHUNK];
                    for i in 0..n {
                        d2[i] = c2[0] * cur[o + i];
                    }
                    for k in 1..=r {
                        if t + k < lo + w {
                            let p = &psi[po + k * ps..po + k * ps + n];
                            for i in 0..n {
                                dpsi[i] += c1[k] * p[i];
                            }
                        }
                        if t >= lo + k {
                            let p = &psi[po - k * ps..po - k * ps + n];
                            for i in 0..n {
                                dpsi[i] = dpsi[i] - c1[k] * p[i];
                            }
                        }
                        let (fl, fh) = (&cur[o - k * s..o - k * s + n], &cur[o + k * s..o + k * s + n]);
                        for i in 0..n {
                            d2[i] += c2[k] * (fl[i] + fh[i]);
                        }
                    }
                    let out = &mut plane[o - base..o - base + n];
                    let v = &vel[o..o + n];
                    for i in 0..n {
                        zchunk[i] = bq * zchunk[i] + aq * (d2[i] + dpsi[i]);
                        out[i] += v[i] * (dpsi[i] + zchunk[i]);
                    }
                }
            };
            if axis == 1 {
                planes.zip(ax.zeta.par_chunks_mut(chunk_len)).enumerate().for_each(|(iz, (plane, zeta))| {
                    for sy in 0..2 * w {
                        row_op(plane, zeta, sy, iz);
                    }
                });
            } else {
                // The z slab's chunk sz is grid plane grid_coord(sz): its low half, then its high half.
                let (zlow, zhigh) = ax.zeta.split_at_mut(w * chunk_len);
                let low = self.prev[r * l.plane..(r + w) * l.plane].par_chunks_mut(l.plane);
                low.zip(zlow.par_chunks_mut(chunk_len)).enumerate().for_each(|(sz, (plane, zeta))| {
                    for iy in 0..l.ny {
                        row_op(plane, zeta, iy, sz);
                    }
                });
                let high = self.prev[(r + l.nz - w) * l.plane..(r + l.nz) * l.plane].par_chunks_mut(l.plane);
                high.zip(zhigh.par_chunks_mut(chunk_len)).enumerate().for_each(|(j, (plane, zeta))| {
                    for iy in 0..l.ny {
                        row_op(plane, zeta, iy, w + j);
                    }
                });
            }
        }
    }
}

/// Whether the x86-64 build of the interior loop with AVX2 and FMA instructions may run here
/// (detected once; always false elsewhere, where `mul_add` is either native or a library call).
fn hardware_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static FMA: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *FMA.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// One interior update's read-only inputs; `plane` writes p^{n+1} of one padded z-plane.
struct InteriorPlanes<'a, T: Real, const R: usize> {
    layout: Layout,
    cur: &'a [T],
    vel: &'a [T],
    damp: &'a Option<[Vec<T>; 3]>,
    centre: T,
    coef: [[T; R]; 3],
}

impl<T: Real, const R: usize> InteriorPlanes<'_, T, R> {
    /// `plane` is padded plane `pz` of p^{n-1}, overwritten with p^{n+1} where it is interior.
    #[inline(always)]
    fn plane(&self, pz: usize, plane: &mut [T]) {
        let l = self.layout;
        if pz < R || pz >= R + l.nz {
            return;
        }
        let iz = pz - R;
        let base = pz * l.plane;
        let two = T::of(2.0);
        for iy in 0..l.ny {
            let row = l.row(iy, iz);
            let mut x0 = 0;
            while x0 < l.nx {
                let w = CHUNK.min(l.nx - x0);
                let o = row + x0;
                let mut lap = [T::default(); CHUNK];
                laplacian_chunk::<T, R>(self.cur, o, [l.pitch, l.plane], &self.coef, self.centre, &mut lap);
                let out = &mut plane[o - base..o - base + w];
                let (c, v) = (&self.cur[o..o + w], &self.vel[o..o + w]);
                if let Some(g) = self.damp {
                    // Sponge: p^{n-1} is damped too, so the factor acts as a friction term
                    // (~ -2 (1 - g) dp/dt) rather than a restoring force that would reflect.
                    let gyz = g[1][iy] * g[2][iz];
                    let gx = &g[0][x0..x0 + w];
                    for i in 0..w {
                        let gi = gx[i] * gyz;
                        out[i] = gi * (two * c[i] - gi * out[i] + v[i] * lap[i]);
                    }
                } else {
                    for i in 0..w {
                        out[i] = two * c[i] - out[i] + v[i] * lap[i];
                    }
                }
                x0 += w;
            }
        }
    }

    /// [`Self::plane`] compiled with AVX2 and FMA, so that the taps' `mul_add` vectorise.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn plane_avx2_fma(&self, pz: usize, plane: &mut [T]) {
        self.plane(pz, plane)
    }
}

/// The star-stencil Laplacian at the CHUNK points from offset `o` of field `f` (strides 1, pitch,
/// plane). Points past the row's end are computed from padding and discarded by the caller; the
/// layout's tail slack keeps every read inside the allocation.
#[inline(always)]
fn laplacian_chunk<T: Real, const R: usize>(
    f: &[T],
    o: usize,
    [py, pz]: [usize; 2],
    coef: &[[T; R]; 3],
    centre: T,
    lap: &mut [T; CHUNK],
) {
    let at = |off: usize| -> &[T; CHUNK] { f[off..off + CHUNK].try_into().expect("chunk in bounds") };
    let c = at(o);
    let xm: [&[T; CHUNK]; R] = std::array::from_fn(|k| at(o - k - 1));
    let xp: [&[T; CHUNK]; R] = std::array::from_fn(|k| at(o + k + 1));
    let ym: [&[T; CHUNK]; R] = std::array::from_fn(|k| at(o - (k + 1) * py));
    let yp: [&[T; CHUNK]; R] = std::array::from_fn(|k| at(o + (k + 1) * py));
    let zm: [&[T; CHUNK]; R] = std::array::from_fn(|k| at(o - (k + 1) * pz));
    let zp: [&[T; CHUNK]; R] = std::array::from_fn(|k| at(o + (k + 1) * pz));
    // One pass per axis keeps the live streams (2R + 1) within the vector registers for R = 8.
    for i in 0..CHUNK {
        let mut acc = centre * c[i];
        for k in 0..R {
            acc = coef[0][k].mul_add(xm[k][i] + xp[k][i], acc);
        }
        lap[i] = acc;
    }
    for (axis, (m, p)) in [(1, (&ym, &yp)), (2, (&zm, &zp))] {
        for i in 0..CHUNK {
            let mut acc = lap[i];
            for k in 0..R {
                acc = coef[axis][k].mul_add(m[k][i] + p[k][i], acc);
            }
            lap[i] = acc;
        }
    }
}

impl<T: Real> Backend for CpuSolver<T> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: "cpu",
            name: format!("CPU (rayon, {} threads)", rayon::current_num_threads()),
            kernel: "rayon".into(),
        }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        self.advance(n);
        Ok(())
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        let l = self.layout;
        for iz in 0..l.nz {
            for iy in 0..l.ny {
                let src = l.row(iy, iz);
                let dst = (iz * l.ny + iy) * l.nx;
                for ix in 0..l.nx {
                    out[dst + ix] = self.cur[src + ix].f64() as f32;
                }
            }
        }
        Ok(())
    }

    fn snapshot_sections(&mut self, sections: &[Section], out: &mut [f32]) -> Result<()> {
        let l = self.layout;
        for_each_section(sections, [l.nx, l.ny, l.nz], out, |s, part| {
            s.copy_from(&l, |i| self.cur[i].f64() as f32, part);
            Ok(())
        })
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        Ok(self.traces.iter().flat_map(|t| t[..steps.min(t.len())].iter().map(|v| v.f64() as f32)).collect())
    }

    /// Also false when a value is finite in f64 but beyond f32 (the output's type).
    fn field_is_finite(&mut self) -> Result<bool> {
        let max = f32::MAX as f64;
        Ok(self.cur.par_iter().all(|v| v.f64().abs() <= max))
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        Ok(self.seconds.clone())
    }
}
