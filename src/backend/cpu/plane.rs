//! The 2D CPU reference: the solver of a 2D grid ([`Layout::planar`]), the wave equation in x and
//! z only. The same step as the 3D solver's (backend/mod.rs has the order) without any y term: the
//! star stencil of radius R along x then z, CPML layers and the sponge on the x and z faces only
//! (z's correction added before x's, [`CPML_AXIS_ORDER`] without y), the free surface, the
//! variable-density operator, and the sources' and receivers' taps over x and z. Each point's
//! arithmetic is written once, in the order the GPU's 2D kernel computes it, so that the two can
//! be compared value for value. The rows of a step are rayon tasks; a row's update reads only p^n
//! and the current phi, and writes only its own row of p^{n+1}, phi and zeta.
//!
//! The CPML memory variables are stored per axis in slabs of the layers only: x as (nz, 2w), z as
//! (2w, nx) (`boundary.rs` has the formulation; phi is double-buffered, zeta updated in place).

use super::cpml::layer_weights_into;
use super::memory::Parts;
use super::shot::{SourceTaps, shot_taps};
use super::{Isa, Real};
use crate::backend::{Backend, DeviceInfo};
use crate::boundary::BoundaryKind;
use crate::grid::{Layout, Section, for_each_section};
use crate::problem::Problem;
use anyhow::{Result, ensure};
use rayon::prelude::*;
use std::time::Instant;

/// One axis's CPML layers on a 2D grid: the slab's phi (current and next) and zeta, the profile's
/// a and b over the axis, and per slab coordinate t the D(a D p) weights (w+_k, w-_k, S).
struct PlaneLayers<T> {
    phi: Vec<T>,
    phi_next: Vec<T>,
    zeta: Vec<T>,
    a: Vec<T>,
    b: Vec<T>,
    /// Per slab coordinate t: R weights w+_k, then R weights w-_k, then S (2R + 1 values).
    weights: Vec<T>,
}

impl<T> PlaneLayers<T> {
    /// The layers as a sweep with the axis's derivative weights `c1` and `c2` uses them.
    fn view<'a>(&'a mut self, c1: &'a [T], c2: &'a [T]) -> LayerView<'a, T> {
        LayerView {
            phi: &self.phi,
            phi_next: Parts::new(&mut self.phi_next),
            zeta: Parts::new(&mut self.zeta),
            a: &self.a,
            b: &self.b,
            weights: &self.weights,
            c1,
            c2,
        }
    }
}

/// The 2D solver's state: fields of a planar layout, the stencil's weights per axis, the boundary
/// and the shot.
pub struct PlaneSolver<T: Real> {
    layout: Layout,
    /// The instruction set the sweep is built for (every one computes the same bits).
    isa: Isa,
    radius: usize,
    /// Second-derivative weights scaled by 1/h^2 along x and z (index 0: the centre weight).
    c2: [Vec<T>; 2],
    /// c2x[0] + c2z[0].
    centre: T,
    /// First-derivative weights scaled by 1/h along x and z.
    c1: [Vec<T>; 2],
    /// The stiffness K (c^2 dt^2 for a constant density), every interior point.
    stiffness: Vec<T>,
    /// The buoyancy rho_ref / rho in every element, where the density varies.
    buoyancy: Option<Vec<T>>,
    /// The sponge's factors along x and z.
    damp: Option<[Vec<T>; 2]>,
    /// CPML layers of x and z, and their width.
    cpml: Option<([PlaneLayers<T>; 2], usize)>,
    free_surface: bool,
    cur: Vec<T>,
    prev: Vec<T>,
    source: SourceTaps<T>,
    rec_taps: Vec<Vec<(usize, T)>>,
    traces: Vec<Vec<T>>,
    seconds: Vec<f64>,
}

/// Points of a row the interior update computes together (a stack buffer: the step allocates
/// nothing).
const CHUNK: usize = 64;

/// Slab coordinate of index i on an axis of n points with layers of width w, if in a layer.
#[inline(always)]
fn layer(i: usize, n: usize, w: usize) -> Option<usize> {
    super::sweep::layer(i, n, w)
}

impl<T: Real> PlaneSolver<T> {
    /// The solver of `problem`, a 2D problem ([`Problem::is_2d`]), with the widest instruction
    /// set this CPU has.
    pub fn new(problem: &Problem) -> Result<Self> {
        Self::with_isa(problem, Isa::detect())
    }

    /// The solver whose sweep runs the build for `isa`.
    pub fn with_isa(problem: &Problem, isa: Isa) -> Result<Self> {
        ensure!(isa.available(), "this CPU cannot run the {} build of the CPU step", isa.name());
        let layout = problem.layout;
        ensure!(layout.is_planar(), "the 2D CPU solver runs 2D grids only (grid.shape = [nx, nz])");
        let r = problem.stencil.radius;
        ensure!(layout.halo == r, "layout halo must equal the stencil radius");
        ensure!((1..=8).contains(&r), "stencil radius {r} outside 1..=8");
        let (nx, nz) = (layout.nx, layout.nz);
        let axes = [0, 2];
        let c2: [Vec<T>; 2] =
            axes.map(|a| problem.stencil.second_scaled(problem.spacing[a]).into_iter().map(T::of).collect::<Vec<T>>());
        let centre = T::of(c2[0][0].f64() + c2[1][0].f64());
        let c1 = axes.map(|a| problem.stencil.first.iter().map(|c| T::of(c / problem.spacing[a])).collect());
        let mut stiffness = vec![T::default(); layout.len()];
        problem.stiffness_into(&layout, &mut stiffness, T::of);
        let buoyancy = problem.density.as_ref().map(|_| {
            let mut bh = vec![T::default(); layout.len()];
            problem.buoyancy_into(&layout, &mut bh, T::of);
            bh
        });
        let b = &problem.boundary;
        ensure!(
            b.kind != BoundaryKind::CpmlTransposed,
            "the backward pass with CPML runs on 3D grids (a 2D grid's transposed CPML step is not built)"
        );
        let damp = (b.kind == BoundaryKind::Sponge)
            .then(|| axes.map(|a| b.profiles[a].damp.iter().map(|&g| T::of(g)).collect()));
        let w = b.cpml_width();
        let cpml = (b.kind == BoundaryKind::Cpml && w > 0).then(|| {
            let layers = [(0, nz * 2 * w), (1, 2 * w * nx)].map(|(i, len)| {
                let p = &b.profiles[axes[i]];
                let a: Vec<T> = p.a.iter().map(|&v| T::of(v)).collect();
                let n = a.len();
                let mut weights = vec![T::default(); 2 * w * (2 * r + 1)];
                for (t, row) in weights.chunks_exact_mut(2 * r + 1).enumerate() {
                    let q = if t < w { t } else { n - 2 * w + t };
                    let (wp, rest) = row.split_at_mut(r);
                    let (wm, ws) = rest.split_at_mut(r);
                    ws[0] = layer_weights_into(&a, &c2[i], q, wp, wm);
                }
                PlaneLayers {
                    phi: vec![T::default(); len],
                    phi_next: vec![T::default(); len],
                    zeta: vec![T::default(); len],
                    b: p.b.iter().map(|&v| T::of(v)).collect(),
                    a,
                    weights,
                }
            });
            (layers, w)
        });
        let (source, rec_taps) = shot_taps(problem, &layout, &stiffness);
        Ok(PlaneSolver {
            layout,
            isa,
            radius: r,
            c2,
            centre,
            c1,
            stiffness,
            buoyancy,
            damp,
            cpml,
            free_surface: b.free_surface,
            cur: vec![T::default(); layout.len()],
            prev: vec![T::default(); layout.len()],
            source,
            rec_taps,
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

    /// Sets p^n and p^{n-1} from dense (nz, nx) arrays (initial-value problems in tests).
    pub fn set_state(&mut self, current: &[T], previous: &[T]) {
        self.layout.scatter(current, &mut self.cur);
        self.layout.scatter(previous, &mut self.prev);
    }

    /// Advances one step: free surface, sweep, sources, swap, receivers.
    pub fn advance(&mut self, n: usize) {
        let start = Instant::now();
        if self.free_surface {
            self.mirror_top();
        }
        match self.radius {
            1 => self.sweep::<1>(),
            2 => self.sweep::<2>(),
            3 => self.sweep::<3>(),
            4 => self.sweep::<4>(),
            5 => self.sweep::<5>(),
            6 => self.sweep::<6>(),
            7 => self.sweep::<7>(),
            8 => self.sweep::<8>(),
            r => unreachable!("stencil radius {r} outside 1..=8"),
        }
        self.inject(n);
        if let Some((layers, _)) = &mut self.cpml {
            for l in layers.iter_mut() {
                std::mem::swap(&mut l.phi, &mut l.phi_next);
            }
        }
        std::mem::swap(&mut self.cur, &mut self.prev);
        self.seconds.push(start.elapsed().as_secs_f64());
        self.record();
    }

    /// p(-k) = -p(k) above z = 0, and p(0) = 0: a pressure-free surface at z = 0.
    fn mirror_top(&mut self) {
        let l = self.layout;
        let row0 = l.row(0, 0);
        self.cur[row0..row0 + l.nx].fill(T::default());
        for k in 1..=self.radius {
            let (src, dst) = (l.row(0, k), l.index(0, 0, -(k as isize)));
            for ix in 0..l.nx {
                self.cur[dst + ix] = T::default() - self.cur[src + ix];
            }
        }
    }

    /// Step 5: the sources' taps into p^{n+1}.
    fn inject(&mut self, n: usize) {
        if n >= self.source.steps() {
            return;
        }
        let row = self.source.row;
        let samples = &self.source.samples[n * row..(n + 1) * row];
        for (t, &(o, w)) in self.source.taps.iter().enumerate() {
            self.prev[o] += w * samples[if row == 1 { 0 } else { t }];
        }
    }

    /// Step 6: one sample per receiver from p^{n+1} (the current field once the step is done).
    fn record(&mut self) {
        for (taps, trace) in self.rec_taps.iter().zip(self.traces.iter_mut()) {
            let mut v = T::default();
            for &(o, w) in taps {
                v += w * self.cur[o];
            }
            trace.push(v);
        }
    }

    /// Steps 2-4 over every row, a rayon task a row: the interior update, then the z layers' and
    /// the x layers' memory variables and corrections.
    fn sweep<const R: usize>(&mut self) {
        let coef = std::array::from_fn(|a| std::array::from_fn(|k| self.c2[a][k + 1]));
        let layers = self
            .cpml
            .as_mut()
            .map(|([x, z], w)| ([x.view(&self.c1[0], &self.c2[0]), z.view(&self.c1[1], &self.c2[1])], *w));
        let sweep = PlaneSweep::<T, R> {
            l: self.layout,
            cur: &self.cur,
            vel: &self.stiffness,
            bh: self.buoyancy.as_deref(),
            next: Parts::new(&mut self.prev),
            damp: self.damp.as_ref(),
            centre: self.centre,
            coef,
            layers,
            free_surface: self.free_surface,
        };
        let (isa, nz) = (self.isa, self.layout.nz);
        // Runs of rows a task: enough for the threads to share the rows evenly.
        let per = nz.div_ceil(4 * rayon::current_num_threads()).max(1);
        (0..nz.div_ceil(per)).into_par_iter().for_each(|k| {
            // SAFETY: rows k per.. of p^{n+1}, of the new phi and of zeta are this task's alone;
            // p^n and the current phi are read only; isa was checked in `new`.
            unsafe { sweep.dispatch(isa, k * per, ((k + 1) * per).min(nz)) }
        });
    }
}

/// One axis's CPML layers as a sweep reads (phi, the profile, the weights) and writes them (the
/// new phi and zeta, each row by the task of its grid row).
struct LayerView<'a, T> {
    phi: &'a [T],
    phi_next: Parts<T>,
    zeta: Parts<T>,
    a: &'a [T],
    b: &'a [T],
    weights: &'a [T],
    c1: &'a [T],
    c2: &'a [T],
}

/// One step's sweep of a 2D grid.
struct PlaneSweep<'a, T: Real, const R: usize> {
    l: Layout,
    cur: &'a [T],
    vel: &'a [T],
    bh: Option<&'a [T]>,
    next: Parts<T>,
    damp: Option<&'a [Vec<T>; 2]>,
    centre: T,
    /// The x and z second-derivative weights of taps 1..=R.
    coef: [[T; R]; 2],
    /// The x and z layers and their width.
    layers: Option<([LayerView<'a, T>; 2], usize)>,
    free_surface: bool,
}

impl<T: Real, const R: usize> PlaneSweep<'_, T, R> {
    /// Runs [`Self::rows`] in the build for `isa`.
    /// SAFETY: as [`Self::rows`]; `isa` is available on this CPU.
    unsafe fn dispatch(&self, isa: Isa, z0: usize, z1: usize) {
        // SAFETY: the caller checked isa (PlaneSolver::new) and keeps rows' contract.
        unsafe {
            match isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => self.rows_avx512(z0, z1),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2Fma => self.rows_avx2(z0, z1),
                _ => self.rows(z0, z1),
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
    unsafe fn rows_avx512(&self, z0: usize, z1: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.rows(z0, z1) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows_avx2(&self, z0: usize, z1: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.rows(z0, z1) }
    }

    /// Rows z0..z1.
    /// SAFETY: concurrent calls have disjoint row ranges.
    #[inline(always)]
    unsafe fn rows(&self, z0: usize, z1: usize) {
        for iz in z0..z1 {
            // SAFETY: forwarded.
            unsafe { self.row(iz) }
        }
    }

    /// p^{n+1} = g (2 p^n - g p^{n-1} + K L p^n) at the n <= CHUNK points of `out` from offset
    /// `o` (grid x0 of row iz); per point the x taps then the z taps, each tap one fused
    /// multiply-add (the constant-density operator) or two (the variable-density one).
    #[inline(always)]
    fn interior_chunk(&self, out: &mut [T], o: usize, x0: usize, iz: usize) {
        let n = out.len();
        let (cur, vel, pitch) = (self.cur, self.vel, self.l.pitch);
        let mut lap = [T::default(); CHUNK];
        let lap = &mut lap[..n];
        let c = &cur[o..o + n];
        match self.bh {
            None => {
                for (l, &c) in lap.iter_mut().zip(c) {
                    *l = self.centre * c;
                }
                for (coef, stride) in self.coef.iter().zip([1, pitch]) {
                    for (k, &w) in coef.iter().enumerate() {
                        let d = (k + 1) * stride;
                        let (m, p) = (&cur[o - d..o - d + n], &cur[o + d..o + d + n]);
                        for i in 0..n {
                            lap[i] = w.mul_add(m[i] + p[i], lap[i]);
                        }
                    }
                }
            }
            Some(bh) => {
                // The variable-density operator (problem/density.rs), x then z.
                let half = T::of(0.5);
                let b0 = &bh[o..o + n];
                for (coef, stride) in self.coef.iter().zip([1, pitch]) {
                    for (k, &w) in coef.iter().enumerate() {
                        let h = half * w;
                        let d = (k + 1) * stride;
                        let (pm, pp) = (&cur[o - d..o - d + n], &cur[o + d..o + d + n]);
                        let (bm, bp) = (&bh[o - d..o - d + n], &bh[o + d..o + d + n]);
                        for i in 0..n {
                            lap[i] = (h * (b0[i] + bp[i])).mul_add(pp[i] - c[i], lap[i]);
                            lap[i] = (h * (b0[i] + bm[i])).mul_add(pm[i] - c[i], lap[i]);
                        }
                    }
                }
            }
        }
        let v = &vel[o..o + n];
        let two = T::of(2.0);
        match self.damp {
            // Sponge: p^{n-1} damped too (friction, not a restoring force).
            Some(g) => {
                let (gx, gz) = (&g[0][x0..x0 + n], g[1][iz]);
                for i in 0..n {
                    let gi = gx[i] * gz;
                    out[i] = gi * (two * c[i] - gi * out[i] + v[i] * lap[i]);
                }
            }
            None => {
                for i in 0..n {
                    out[i] = two * c[i] - out[i] + v[i] * lap[i];
                }
            }
        }
    }

    /// Row iz of p^{n+1}: p^{n+1} = g (2 p^n - g p^{n-1} + K L p^n), then the z layers'
    /// correction, then the x layers'.
    /// SAFETY: row iz of p^{n+1}, of the new phi and of zeta is this call's alone.
    #[inline(always)]
    unsafe fn row(&self, iz: usize) {
        let l = self.l;
        let (nx, pitch) = (l.nx, l.pitch);
        let row = l.row(0, iz);
        // SAFETY: forwarded.
        let out = unsafe { self.next.get(row, nx) };
        for x0 in (0..nx).step_by(CHUNK) {
            let n = CHUNK.min(nx - x0);
            self.interior_chunk(&mut out[x0..x0 + n], row + x0, x0, iz);
        }
        let Some(([x, z], w)) = &self.layers else { return };
        let w = *w;
        // z first, then x (CPML_AXIS_ORDER without y). Under a free surface the top z layer is
        // no layer (a = 0) and is not computed.
        if let Some(t) = layer(iz, l.nz, w).filter(|&t| !self.free_surface || t >= w) {
            // SAFETY: slab row t of the z layers is grid row iz's alone.
            let (phi_next, zeta) = unsafe { (z.phi_next.get(t * nx, nx), z.zeta.get(t * nx, nx)) };
            for ix in 0..nx {
                let at = LayerPoint { o: row + ix, stride: pitch, q: iz, t, slab: t * nx + ix, slab_stride: nx };
                self.layer_point(z, w, &at, &mut out[ix], &mut phi_next[ix], &mut zeta[ix]);
            }
        }
        // SAFETY: slab row iz of the x layers is grid row iz's alone.
        let (phi_next, zeta) = unsafe { (x.phi_next.get(iz * 2 * w, 2 * w), x.zeta.get(iz * 2 * w, 2 * w)) };
        for t in 0..2 * w {
            let ix = if t < w { t } else { nx - 2 * w + t };
            let at = LayerPoint { o: row + ix, stride: 1, q: ix, t, slab: iz * 2 * w + t, slab_stride: 1 };
            self.layer_point(x, w, &at, &mut out[ix], &mut phi_next[t], &mut zeta[t]);
        }
    }

    /// One layer point's update along one axis (boundary.rs has the formulation): with dp, d2p
    /// and D(a D p) from p^n and dphi from the current phi of its neighbours in the same layer,
    ///   ds = dphi + D(a D p),  phi' = b (phi + a dp),  zeta <- b zeta + a (d2p + ds),
    ///   p^{n+1} += K bh (ds + zeta),
    /// in the 3D reference's operation order.
    #[inline(always)]
    fn layer_point(&self, v: &LayerView<'_, T>, w: usize, p: &LayerPoint, out: &mut T, phi_next: &mut T, zeta: &mut T) {
        let cur = self.cur;
        let wt = &v.weights[p.t * (2 * R + 1)..][..2 * R + 1];
        let c0 = cur[p.o];
        let (mut dp, mut d2, mut sa) = (T::default(), v.c2[0] * c0, T::default());
        for k in 0..R {
            let d = (k + 1) * p.stride;
            let (lv, hv) = (cur[p.o - d], cur[p.o + d]);
            dp = v.c1[k + 1].mul_add(hv - lv, dp);
            d2 = v.c2[k + 1].mul_add(lv + hv, d2);
            sa = wt[k].mul_add(hv, sa);
            sa = wt[R + k].mul_add(lv, sa);
        }
        let sa = (-wt[2 * R]).mul_add(c0, sa);
        let lo = if p.t < w { 0 } else { w };
        let mut dphi = T::default();
        for k in 1..=R {
            if p.t + k < lo + w {
                dphi = v.c1[k].mul_add(v.phi[p.slab + k * p.slab_stride], dphi);
            }
            if p.t >= lo + k {
                dphi = (-v.c1[k]).mul_add(v.phi[p.slab - k * p.slab_stride], dphi);
            }
        }
        let ds = dphi + sa;
        let (a, b) = (v.a[p.q], v.b[p.q]);
        *phi_next = b * a.mul_add(dp, v.phi[p.slab]);
        *zeta = b.mul_add(*zeta, a * (d2 + ds));
        let k = self.bh.map_or(self.vel[p.o], |bh| self.vel[p.o] * bh[p.o]);
        *out = k.mul_add(ds + *zeta, *out);
    }
}

/// Where a layer point is: its offset in the field and the field's stride along the axis, its
/// index q along the axis, its slab coordinate t, and its offset in the slab with the slab's
/// stride along the axis.
struct LayerPoint {
    o: usize,
    stride: usize,
    q: usize,
    t: usize,
    slab: usize,
    slab_stride: usize,
}

impl<T: Real> Backend for PlaneSolver<T> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: "cpu",
            name: format!("CPU (rayon, {} threads, 2D)", rayon::current_num_threads()),
            kernel: "rayon".into(),
        }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        self.advance(n);
        Ok(())
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        let l = self.layout;
        ensure!(out.len() == l.points(), "snapshot buffer has {} values, grid {}", out.len(), l.points());
        Section::Volume.copy_from(&l, |i| self.cur[i].f64() as f32, out);
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

    fn start_shot(&mut self, problem: &Problem) -> Result<()> {
        ensure!(problem.layout == self.layout, "a shot must use the grid the backend was opened with");
        ensure!(
            problem.boundary.kind != BoundaryKind::CpmlTransposed,
            "the backward pass with CPML runs on 3D grids (a 2D grid's transposed CPML step is not built)"
        );
        self.cur.fill(T::default());
        self.prev.fill(T::default());
        if let Some((layers, _)) = &mut self.cpml {
            for l in layers.iter_mut() {
                l.phi.fill(T::default());
                l.phi_next.fill(T::default());
                l.zeta.fill(T::default());
            }
        }
        (self.source, self.rec_taps) = shot_taps(problem, &self.layout, &self.stiffness);
        self.traces = (0..problem.receivers.len()).map(|_| Vec::with_capacity(problem.steps)).collect();
        self.seconds.clear();
        Ok(())
    }
}
