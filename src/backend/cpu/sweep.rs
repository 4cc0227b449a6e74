//! One step's sweep over z-planes: the task's planes tile by tile, per row the interior update
//! (the star-stencil Laplacian in fixed chunks) and, while the row is in cache, the CPML layers'
//! ([`super::cpml`]); the instruction-set dispatch of the whole.

use super::Real;
use super::isa::{Isa, prefetch};
use super::memory::Parts;
use crate::grid::Layout;

/// Width of the interior's x chunks (a stack buffer, so the step allocates nothing).
pub(super) const CHUNK: usize = 64;

/// Width of the y and z layer rows' chunks: their four sums then fit the vector registers with
/// the taps (AMD EPYC, 200^3, CPML: 0.93x the time of 64-point chunks, 32 in between).
pub(super) const LAYER_CHUNK: usize = 16;

/// Width of the chunks that finish a row whose length is not a multiple of CHUNK (or LAYER_CHUNK).
pub(super) const TAIL: usize = 8;

/// Rows ahead of the sweep that the interior's memory streams are prefetched, each chunk's lines
/// with the chunk. On an AVX-512 Xeon (2 threads): 200^3 with a sponge 0.86x the time (1 and 2
/// rows alike, 4 less). A whole row's prefetches at once, at the row's start, were 1.17x the time
/// with CPML on marmousi.toml; spread over the chunks they gain there too (docs/design/cpu.md).
pub(super) const PREFETCH_ROWS: usize = 2;

/// Points of an x layer computed together: one AVX2 vector of f32. With whole chunks only (the
/// last overlapping, [`Sweep::cpml_x_row`]) 8 ran 0.93x the time of 16 and 4 1.17x (AMD EPYC,
/// 200^3, 20-point layers, CPML).
pub(super) const XLANES: usize = 8;

/// The CPML side of a sweep: per axis the slab's current psi (read only), its new psi and zeta
/// (each point written by the task owning it), the profiles and the derivative weights. All three
/// slabs have the layer's width.
pub(super) struct CpmlSweep<'a, T> {
    pub(super) width: usize,
    pub(super) psi: [&'a [T]; 3],
    pub(super) psi_next: [Parts<T>; 3],
    pub(super) zeta: [Parts<T>; 3],
    pub(super) a: [&'a [T]; 3],
    pub(super) b: [&'a [T]; 3],
    pub(super) c1: [&'a [T]; 3],
    pub(super) c2: [&'a [T]; 3],
    /// [`x_layer_weights`](super::cpml::x_layer_weights) of the x profile.
    pub(super) x_weights: &'a [T],
    /// Slab plane of each interior z-plane in the z layers (CpuSolver::z_layer).
    pub(super) z_layer: &'a [Option<usize>],
    /// Slab row of each interior row in the y layers (CpuSolver::y_layer).
    pub(super) y_layer: &'a [Option<usize>],
}

/// One step's sweep. A task owns the interior planes [z0, z1) of p^{n+1} (written over p^{n-1})
/// and of every slab, and goes up its planes once: per row it computes the interior value and,
/// while the row is in cache, the y, z and x layers' memory variables and corrections in that
/// order ([`CPML_AXIS_ORDER`](crate::boundary::CPML_AXIS_ORDER)), so every point sees the
/// reference's operations in the reference's order. A layer point
/// reads only p^n and the current psi of its neighbours, which nobody writes during the sweep
/// (the new psi goes to the other buffer), so tasks need no ordering among themselves.
pub(super) struct Sweep<'a, T: Real, const R: usize> {
    pub(super) l: Layout,
    pub(super) cur: &'a [T],
    pub(super) vel: &'a [T],
    /// The buoyancy where the density varies (every element written): the variable-density
    /// operator, and the CPML corrections scaled by K bh = c^2 dt^2.
    pub(super) bh: Option<&'a [T]>,
    pub(super) next: Parts<T>,
    pub(super) damp: Option<&'a [Vec<T>; 3]>,
    pub(super) centre: T,
    pub(super) coef: [[T; R]; 3],
    pub(super) cpml: Option<CpmlSweep<'a, T>>,
    pub(super) tiles: &'a [(usize, usize)],
}

/// Slab coordinate of grid index i on an axis of n points with layers of width w, if in a layer.
#[inline(always)]
pub(super) fn layer(i: usize, n: usize, w: usize) -> Option<usize> {
    if i < w {
        Some(i)
    } else if i + w >= n {
        Some(i + 2 * w - n)
    } else {
        None
    }
}

impl<T: Real, const R: usize> Sweep<'_, T, R> {
    /// Runs [`Self::run`] in the build for `isa`.
    /// SAFETY: as [`Self::run`]; `isa` is available on this CPU.
    pub(super) unsafe fn dispatch(&self, isa: Isa, z0: usize, z1: usize) {
        // SAFETY: the caller checked isa (CpuSolver::with_isa) and keeps run's contract.
        unsafe {
            match isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => self.run_avx512(z0, z1),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2Fma => self.run_avx2(z0, z1),
                _ => self.run(z0, z1),
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
    unsafe fn run_avx512(&self, z0: usize, z1: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.run(z0, z1) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(&self, z0: usize, z1: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.run(z0, z1) }
    }

    /// Sweeps planes [z0, z1), tile by tile.
    /// SAFETY: concurrent calls have disjoint ranges of one partition of 0..nz.
    #[inline(always)]
    unsafe fn run(&self, z0: usize, z1: usize) {
        for &(y0, y1) in self.tiles {
            for iz in z0..z1 {
                // SAFETY: plane iz is this task's.
                unsafe { self.plane(iz, y0, y1) };
            }
        }
    }

    /// The whole update of rows y0..y1 of interior plane iz (a y tile, see [`y_tiles`](super::memory::y_tiles)).
    /// SAFETY: plane iz of p^{n+1}, of the new psi and of the zetas is this task's.
    #[inline(always)]
    unsafe fn plane(&self, iz: usize, y0: usize, y1: usize) {
        let l = self.l;
        for iy in y0..y1 {
            let row = l.row(iy, iz);
            // SAFETY: p^{n+1} of plane iz is this task's.
            let out = unsafe { self.next.get(row, l.nx) };
            self.interior_row(out, row, iy, iz);
            if let Some(c) = &self.cpml {
                // SAFETY: forwarded.
                // y, z, then x (CPML_AXIS_ORDER): the GPU's fused pass adds the y layers, and the
                // z layers of its other rows, itself.
                unsafe {
                    if let Some(t) = c.y_layer[iy] {
                        self.cpml_yz_row(c, 1, out, iy, iz, t);
                    }
                    if let Some(t) = c.z_layer[iz] {
                        self.cpml_yz_row(c, 2, out, iy, iz, t);
                    }
                    self.cpml_x_row(c, out, iy, iz);
                }
            }
        }
    }

    /// p^{n+1} = g (2 p^n - g p^{n-1} + c^2 dt^2 L p^n) on one row (g = 1 without a sponge), CHUNK
    /// points at a time, the tail TAIL at a time.
    #[inline(always)]
    fn interior_row(&self, out: &mut [T], row: usize, iy: usize, iz: usize) {
        let nx = self.l.nx;
        // The streams only this row's points read from memory (p^n's leading plane, c^2 dt^2,
        // p^{n-1}) are prefetched PREFETCH_ROWS rows ahead: the hardware prefetchers, following
        // 2R + 1 rows of p^n as well, bring them late. Each chunk's prefetches go out with it:
        // a row's all at once filled the fill buffers at the row's start.
        let ahead = row + PREFETCH_ROWS * self.l.pitch;
        let whole = nx - nx % CHUNK;
        for x0 in (0..whole).step_by(CHUNK) {
            self.prefetch_streams(ahead, x0, x0 + CHUNK);
            self.interior_chunk::<CHUNK, true>(out, row, iy, iz, x0);
        }
        self.prefetch_streams(ahead, whole, nx);
        // The row's tail in vectors of TAIL points, not a whole CHUNK of mostly padding.
        for x0 in (whole..nx).step_by(TAIL) {
            self.interior_chunk::<TAIL, false>(out, row, iy, iz, x0);
        }
    }

    /// Prefetches points x0..x1 of the row at offset `ahead` of the streams only the interior
    /// reads from memory.
    #[inline(always)]
    fn prefetch_streams(&self, ahead: usize, x0: usize, x1: usize) {
        for x in (x0..x1).step_by(64 / std::mem::size_of::<T>()) {
            prefetch(self.cur.as_ptr().wrapping_add(ahead + R * self.l.plane + x));
            prefetch(self.vel.as_ptr().wrapping_add(ahead + x));
            prefetch(self.next.ptr.cast_const().wrapping_add(ahead + x));
        }
    }

    /// [`Self::interior_row`] at the N points from x0 (those inside the row; all N where WHOLE,
    /// so that the update's loops have a fixed length and no remainder).
    #[inline(always)]
    fn interior_chunk<const N: usize, const WHOLE: bool>(
        &self,
        out: &mut [T],
        row: usize,
        iy: usize,
        iz: usize,
        x0: usize,
    ) {
        let l = self.l;
        let two = T::of(2.0);
        let w = if WHOLE { N } else { N.min(l.nx - x0) };
        let o = row + x0;
        let mut lap = [T::default(); N];
        match self.bh {
            None => laplacian_chunk::<T, R, N>(self.cur, o, [l.pitch, l.plane], &self.coef, self.centre, &mut lap),
            Some(bh) => density_laplacian_chunk::<T, R, N>(self.cur, bh, o, [l.pitch, l.plane], &self.coef, &mut lap),
        }
        let out = &mut out[x0..x0 + w];
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
    }
}

/// The variable-density operator at the N points from offset `o` of field `f` with buoyancy `bh`
/// (the same layout; strides 1, pitch, plane): per axis x, y, z in turn and k = 1..R,
///   acc = fma(h_k (bh_0 + bh_{+k}), p_{+k} - p_0, acc),  acc = fma(h_k (bh_0 + bh_{-k}), p_{-k} - p_0, acc),
/// from acc = 0, h_k half the axis's k-th second-derivative weight (each product, sum and
/// difference rounded once; [`crate::problem::Density`] has the scheme). Points past the row's
/// end are computed from padding and discarded by the caller.
#[inline(always)]
pub(super) fn density_laplacian_chunk<T: Real, const R: usize, const N: usize>(
    f: &[T],
    bh: &[T],
    o: usize,
    [py, pz]: [usize; 2],
    coef: &[[T; R]; 3],
    lap: &mut [T; N],
) {
    let reach = R * pz.max(py).max(1);
    assert!(o >= reach && o + reach + N <= f.len().min(bh.len()), "the stencil of chunk {o} leaves the field");
    // SAFETY: every `off` below lies in [o - reach, o + reach], so off..off + N is inside f and bh.
    let at = |v: &[T], off: usize| -> [T; N] { unsafe { *v.as_ptr().add(off).cast::<[T; N]>() } };
    let (p0, b0) = (at(f, o), at(bh, o));
    let half = T::of(0.5);
    *lap = [T::default(); N];
    for (weights, stride) in coef.iter().zip([1, py, pz]) {
        for (k, &c) in weights.iter().enumerate() {
            let h = half * c;
            let d = (k + 1) * stride;
            let (pp, bp, pm, bm) = (at(f, o + d), at(bh, o + d), at(f, o - d), at(bh, o - d));
            for i in 0..N {
                lap[i] = (h * (b0[i] + bp[i])).mul_add(pp[i] - p0[i], lap[i]);
                lap[i] = (h * (b0[i] + bm[i])).mul_add(pm[i] - p0[i], lap[i]);
            }
        }
    }
}

/// The star-stencil Laplacian at the N points from offset `o` of field `f` (strides 1, pitch,
/// plane). Points past the row's end are computed from padding and discarded by the caller; the
/// layout's tail slack keeps every read inside the allocation.
#[inline(always)]
pub(super) fn laplacian_chunk<T: Real, const R: usize, const N: usize>(
    f: &[T],
    o: usize,
    [py, pz]: [usize; 2],
    coef: &[[T; R]; 3],
    centre: T,
    lap: &mut [T; N],
) {
    // One bounds check for the chunk's whole star instead of one a tap row (2-3 instructions each,
    // 6R + 1 of them: about a sixth of the loop at R = 4).
    let reach = R * pz.max(py).max(1);
    assert!(o >= reach && o + reach + N <= f.len(), "the stencil of chunk {o} leaves the field");
    // SAFETY: every `off` below lies in [o - reach, o + reach], so off..off + N is inside f.
    let at = |off: usize| -> &[T; N] { unsafe { &*f.as_ptr().add(off).cast::<[T; N]>() } };
    let c = at(o);
    let xm: [&[T; N]; R] = std::array::from_fn(|k| at(o - k - 1));
    let xp: [&[T; N]; R] = std::array::from_fn(|k| at(o + k + 1));
    let ym: [&[T; N]; R] = std::array::from_fn(|k| at(o - (k + 1) * py));
    let yp: [&[T; N]; R] = std::array::from_fn(|k| at(o + (k + 1) * py));
    let zm: [&[T; N]; R] = std::array::from_fn(|k| at(o - (k + 1) * pz));
    let zp: [&[T; N]; R] = std::array::from_fn(|k| at(o + (k + 1) * pz));
    // One pass per axis keeps the live streams (2R + 1) within the vector registers for R = 8.
    for i in 0..N {
        let mut acc = centre * c[i];
        for k in 0..R {
            acc = coef[0][k].mul_add(xm[k][i] + xp[k][i], acc);
        }
        lap[i] = acc;
    }
    for (axis, (m, p)) in [(1, (&ym, &yp)), (2, (&zm, &zp))] {
        for i in 0..N {
            let mut acc = lap[i];
            for k in 0..R {
                acc = coef[axis][k].mul_add(m[k][i] + p[k][i], acc);
            }
            lap[i] = acc;
        }
    }
}
