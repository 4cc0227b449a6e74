//! The CPML layers' part of the sweep: per row the x, y and z layers' memory variables and
//! corrections (boundary.rs has the formulation), and the weights of the compact self-adjoint
//! D(a D p) they use.

use super::Real;
use super::isa::prefetch;
use super::sweep::{CpmlSweep, LAYER_CHUNK, PREFETCH_ROWS, Sweep, TAIL, XLANES};

impl<T: Real, const R: usize> Sweep<'_, T, R> {
    /// The x layers of row (iy, iz), point by point (boundary.rs has the formulation): with dp/dx
    /// and d2p/dx2 from p^n and dphi/dx from the current phi_x = b psi_x of the neighbours in the
    /// same layer (phi is zero outside its layers),
    ///   dpsi/dx = dphi/dx + D(a D p),  phi_x' = b (phi_x + a dp/dx),
    ///   zeta_x <- b zeta_x + a (d2p/dx2 + dpsi/dx),  p^{n+1} += c^2 dt^2 (dpsi/dx + zeta_x),
    /// c^2 dt^2 = K bh (one rounding) where the density varies.
    /// SAFETY: the new phi_x and zeta_x of the row are this task's.
    #[inline(always)]
    pub(super) unsafe fn cpml_x_row(&self, c: &CpmlSweep<'_, T>, out: &mut [T], iy: usize, iz: usize) {
        let (l, w) = (self.l, c.width);
        let at = (iz * l.ny + iy) * 2 * w;
        // psi and its next buffer: each half of the row between R zeros on each side.
        let half_stride = w + 2 * R;
        let pat = (iz * l.ny + iy) * 2 * half_stride;
        let psi = &c.psi[0][pat..pat + 2 * half_stride];
        // SAFETY: forwarded.
        let (psi_next, zeta) = unsafe { (c.psi_next[0].get(pat, 2 * half_stride), c.zeta[0].get(at, 2 * w)) };
        // The memory variables of the row PREFETCH_ROWS ahead in the slabs (the next rows of the
        // sweep but at a tile's end): a few lines a row at both ends of it, which the hardware
        // prefetchers did not bring in time (AMD EPYC, 200^3: the CPML step 0.91x the time).
        let line = 64 / std::mem::size_of::<T>();
        let ahead = pat + PREFETCH_ROWS * 2 * half_stride;
        for e in (0..2 * half_stride).step_by(line).chain([2 * half_stride - 1]) {
            prefetch(c.psi[0].as_ptr().wrapping_add(ahead + e));
            prefetch(c.psi_next[0].ptr.cast_const().wrapping_add(ahead + e));
        }
        let ahead = at + PREFETCH_ROWS * 2 * w;
        for e in (0..2 * w).step_by(line).chain([2 * w - 1]) {
            prefetch(c.zeta[0].ptr.cast_const().wrapping_add(ahead + e));
        }
        for half in 0..2 {
            let x0 = if half == 0 { 0 } else { l.nx - w };
            let half_row = XHalf {
                x0,
                o: l.row(iy, iz) + x0,
                own: pat + half * half_stride + R,
                seg: half * half_stride + R,
                slab: half * w,
            };
            // XLANES points at a time, every lane computed (whole vectors). A layer narrower than
            // XLANES takes one partial chunk (its n points kept); a wider one whole chunks only,
            // the last ending at the layer's end and overlapping the one before it, whose stores
            // wait until the last has read its inputs: the lanes computed twice get the same
            // values from the same inputs, so every chunk's loops have a fixed length.
            if w < XLANES {
                self.x_partial_chunk(c, &half_row, out, psi, psi_next, zeta);
                continue;
            }
            let last = w - XLANES;
            let mut held: Option<(usize, XValues<T>)> = None;
            for j in (0..last).step_by(XLANES).chain([last]) {
                let v = self.x_values(c, &half_row, out, psi, zeta, j);
                if let Some((k, u)) = held.replace((j, v)) {
                    x_store(&half_row, out, psi_next, zeta, k, &u);
                }
            }
            if let Some((k, u)) = held {
                x_store(&half_row, out, psi_next, zeta, k, &u);
            }
        }
    }

    /// The sums of [`Self::cpml_x_row`] at the XLANES points from j of one half's layer: dp/dx,
    /// d2p/dx2, D(a D p) and dphi/dx.
    #[inline(always)]
    fn x_sums(&self, c: &CpmlSweep<'_, T>, h: &XHalf, j: usize) -> [[T; XLANES]; 4] {
        let (cur, w) = (self.cur, c.width);
        let (c1, c2) = (c.c1[0], c.c2[0]);
        let c1k: [T; R] = std::array::from_fn(|k| c1[k + 1]);
        let c2k: [T; R] = std::array::from_fn(|k| c2[k + 1]);
        let pairs = x_pairs_stride(w);
        let q = h.o + j;
        assert!(q >= R && q + XLANES + R <= cur.len(), "x layer chunk at {q} outside the field");
        let u = h.slab + j;
        // SAFETY: [q - R, q + XLANES + R) is inside `cur` (checked above).
        let ld = |off: isize| -> [T; XLANES] {
            unsafe { std::ptr::read_unaligned(cur.as_ptr().offset(q as isize + off).cast()) }
        };
        let cc = ld(0);
        let fl: [[T; XLANES]; R] = std::array::from_fn(|k| ld(-(k as isize) - 1));
        let fh: [[T; XLANES]; R] = std::array::from_fn(|k| ld(k as isize + 1));
        // One bounds check a chunk for the weights and phi's taps below, not one a vector
        // (three instructions each, about fifty a chunk).
        let table = c.x_weights;
        assert!(2 * R * pairs + u + XLANES <= table.len(), "x layer weights at {u} outside their table");
        // SAFETY: rows 0..=2R of the table at lanes u..u + XLANES are inside it (checked above).
        let wl = |at: usize| -> [T; XLANES] { unsafe { std::ptr::read_unaligned(table.as_ptr().add(at).cast()) } };
        let wp: [[T; XLANES]; R] = std::array::from_fn(|k| wl(k * pairs + u));
        let wm: [[T; XLANES]; R] = std::array::from_fn(|k| wl((R + k) * pairs + u));
        let ws: [T; XLANES] = wl(2 * R * pairs + u);
        let (mut dp, mut d2, mut sa) = ([T::default(); XLANES], [T::default(); XLANES], [T::default(); XLANES]);
        for i in 0..XLANES {
            let c0 = cc[i];
            let (mut sdp, mut sd2, mut ssa) = (T::default(), c2[0] * c0, T::default());
            for k in 0..R {
                let (lv, hv) = (fl[k][i], fh[k][i]);
                sdp = c1k[k].mul_add(hv - lv, sdp);
                sd2 = c2k[k].mul_add(lv + hv, sd2);
                ssa = wp[k][i].mul_add(hv, ssa);
                ssa = wm[k][i].mul_add(lv, ssa);
            }
            (dp[i], d2[i], sa[i]) = (sdp, sd2, (-ws[i]).mul_add(c0, ssa));
        }
        // phi's taps as whole vectors straight from the padded slab: the zeros around each layer
        // are phi outside it, and lanes past the layer read the pad, the next half or the slack
        // (discarded). No copy into a window: its loads stalled on store forwarding.
        let own = h.own + j;
        let slab = c.psi[0];
        assert!(own >= R && own + R + XLANES <= slab.len(), "the x slab's slack holds the taps");
        // SAFETY: [own - R, own + R + XLANES) is inside the slab (checked above).
        let tap = |at: usize| -> [T; XLANES] { unsafe { std::ptr::read_unaligned(slab.as_ptr().add(at).cast()) } };
        let hi: [[T; XLANES]; R] = std::array::from_fn(|k| tap(own + k + 1));
        let lo: [[T; XLANES]; R] = std::array::from_fn(|k| tap(own - k - 1));
        // Both taps of each k in one pass over the lanes: a pass a tap left the sum on the stack
        // in pieces, reloaded whole (a store-forwarding stall).
        let mut dpsi = [T::default(); XLANES];
        for k in 0..R {
            for i in 0..XLANES {
                dpsi[i] = c1k[k].mul_add(hi[k][i], dpsi[i]);
                dpsi[i] = (-c1k[k]).mul_add(lo[k][i], dpsi[i]);
            }
        }
        [dp, d2, sa, dpsi]
    }

    /// The new phi, zeta and p^{n+1} of the XLANES points from j of one half's layer, all inside
    /// it, not yet stored ([`x_store`]).
    #[inline(always)]
    fn x_values(&self, c: &CpmlSweep<'_, T>, h: &XHalf, out: &[T], psi: &[T], zeta: &[T], j: usize) -> XValues<T> {
        let [dp, d2, sa, dpsi] = self.x_sums(c, h, j);
        let x = h.x0 + j;
        let lanes = |v: &[T], at: usize| -> [T; XLANES] { v[at..at + XLANES].try_into().expect("a whole chunk") };
        let (aq, bq, ps) = (lanes(c.a[0], x), lanes(c.b[0], x), lanes(psi, h.seg + j));
        let (z, mut v, o) = (lanes(zeta, h.slab + j), lanes(self.vel, h.o + j), lanes(out, x));
        if let Some(bh) = self.bh {
            // c^2 dt^2 = K bh where the density varies.
            let b = lanes(bh, h.o + j);
            for i in 0..XLANES {
                v[i] = v[i] * b[i];
            }
        }
        let mut r = XValues { psi: [T::default(); XLANES], zeta: z, out: o };
        for i in 0..XLANES {
            let ds = dpsi[i] + sa[i];
            r.psi[i] = bq[i] * aq[i].mul_add(dp[i], ps[i]);
            r.zeta[i] = bq[i].mul_add(z[i], aq[i] * (d2[i] + ds));
            r.out[i] = v[i].mul_add(ds + r.zeta[i], o[i]);
        }
        r
    }

    /// [`Self::cpml_x_row`] for a layer narrower than XLANES: one chunk, its w points kept.
    #[inline(always)]
    fn x_partial_chunk(
        &self,
        c: &CpmlSweep<'_, T>,
        h: &XHalf,
        out: &mut [T],
        psi: &[T],
        psi_next: &mut [T],
        zeta: &mut [T],
    ) {
        let n = c.width;
        let [dp, d2, sa, dpsi] = self.x_sums(c, h, 0);
        let x0 = h.x0;
        let (aq, bq) = (&c.a[0][x0..x0 + n], &c.b[0][x0..x0 + n]);
        let (ps, ns) = (&psi[h.seg..h.seg + n], &mut psi_next[h.seg..h.seg + n]);
        let (z, v) = (&mut zeta[h.slab..h.slab + n], &self.vel[h.o..h.o + n]);
        let out = &mut out[x0..x0 + n];
        let bh = self.bh.map(|b| &b[h.o..h.o + n]);
        for i in 0..n {
            let ds = dpsi[i] + sa[i];
            ns[i] = bq[i] * aq[i].mul_add(dp[i], ps[i]);
            z[i] = bq[i].mul_add(z[i], aq[i] * (d2[i] + ds));
            let v = bh.map_or(v[i], |b| v[i] * b[i]);
            out[i] = v.mul_add(ds + z[i], out[i]);
        }
    }

    /// The y (axis 1) or z (axis 2) layer update of row (iy, iz), slab coordinate t, as
    /// [`Self::cpml_x_row`] along that axis, with phi's neighbours t +- k taken only within t's
    /// half of the slab: whole LAYER_CHUNKs, then the row's tail TAIL points at a time.
    /// SAFETY: the new phi and zeta of the row are this task's.
    #[inline(always)]
    pub(super) unsafe fn cpml_yz_row(
        &self,
        c: &CpmlSweep<'_, T>,
        axis: usize,
        out: &mut [T],
        iy: usize,
        iz: usize,
        t: usize,
    ) {
        let l = self.l;
        let w = c.width;
        let (s, ps, q, prow) = if axis == 1 {
            (l.pitch, l.nx, iy, (iz * 2 * w + t) * l.nx)
        } else {
            (l.plane, l.nx * l.ny, iz, (t * l.ny + iy) * l.nx)
        };
        let (wp, wm, ws) = layer_weights::<T, R>(c.a[axis], c.c2[axis], q);
        // SAFETY: forwarded.
        let (nrow, zrow) = unsafe { (c.psi_next[axis].get(prow, l.nx), c.zeta[axis].get(prow, l.nx)) };
        let row = LayerRow {
            axis,
            s,
            ps,
            prow,
            row: l.row(iy, iz),
            lo: if t < w { 0 } else { w },
            t,
            ab: (c.a[axis][q], c.b[axis][q]),
            weights: (wp, wm, ws),
        };
        let whole = l.nx - l.nx % LAYER_CHUNK;
        for x0 in (0..whole).step_by(LAYER_CHUNK) {
            self.layer_chunk::<LAYER_CHUNK, true>(c, &row, out, nrow, zrow, x0);
        }
        for x0 in (whole..l.nx).step_by(TAIL) {
            self.layer_chunk::<TAIL, false>(c, &row, out, nrow, zrow, x0);
        }
    }

    /// [`Self::cpml_yz_row`] at the N points from x0 (those inside the row; all N where WHOLE). The
    /// sums live in arrays of N that no loop indexes by a runtime bound where WHOLE, so that they
    /// stay in vector registers: one function with a whole and a partial path kept them on the
    /// stack, every tap's accumulation a load and a store.
    #[inline(always)]
    fn layer_chunk<const N: usize, const WHOLE: bool>(
        &self,
        c: &CpmlSweep<'_, T>,
        r: &LayerRow<T, R>,
        out: &mut [T],
        nrow: &mut [T],
        zrow: &mut [T],
        x0: usize,
    ) {
        let (cur, vel, w) = (self.cur, self.vel, c.width);
        let (c1, c2) = (c.c1[r.axis], c.c2[r.axis]);
        let c1k: [T; R] = std::array::from_fn(|k| c1[k + 1]);
        let c2k: [T; R] = std::array::from_fn(|k| c2[k + 1]);
        let (wp, wm, ws) = r.weights;
        let (aq, bq) = r.ab;
        let psi = c.psi[r.axis];
        let (o, po) = (r.row + x0, r.prow + x0);
        let n = if WHOLE { N } else { N.min(self.l.nx - x0) };
        // The next row's memory variables and the leading phi tap it reads first: with p^n's
        // 2R + 1 rows and three more fields in flight the prefetchers lose these streams (y
        // layers: 0.94x the wall time on 519 steps of marmousi.toml, where they hold 62% of the
        // points; z layers: 0.98x at 200^3, CPML, five rounds in turns).
        let ahead = |v: *const T, at: usize| prefetch(v.wrapping_add(at));
        let next = po + self.l.nx;
        for line in (0..n).step_by(64 / std::mem::size_of::<T>()) {
            ahead(c.zeta[r.axis].ptr, next + line);
            ahead(c.psi_next[r.axis].ptr, next + line);
            ahead(psi.as_ptr(), next + R * r.ps + line);
        }
        let mut dp = [T::default(); N];
        let mut dpsi = [T::default(); N];
        let mut d2 = [T::default(); N];
        let mut sa = [T::default(); N];
        // The sums over p^n in one loop, all taps unrolled, so the three sums stay in vector
        // registers (points past the row are read from padding and discarded). One bounds check
        // for the chunk's 2R + 1 rows along the axis, not one a row.
        let s = r.s;
        assert!(o >= R * s && o + R * s + N <= cur.len(), "the layer chunk at {o} leaves the field");
        // SAFETY: every `off` below lies in [o - R s, o + R s], so off..off + N is inside cur.
        let at = |off: usize| -> &[T; N] { unsafe { &*cur.as_ptr().add(off).cast::<[T; N]>() } };
        let cc = at(o);
        let fl: [&[T; N]; R] = std::array::from_fn(|k| at(o - (k + 1) * s));
        let fh: [&[T; N]; R] = std::array::from_fn(|k| at(o + (k + 1) * s));
        for i in 0..N {
            let c0 = cc[i];
            let (mut sdp, mut sd2, mut ssa) = (T::default(), c2[0] * c0, T::default());
            for k in 0..R {
                let (lv, hv) = (fl[k][i], fh[k][i]);
                sdp = c1k[k].mul_add(hv - lv, sdp);
                sd2 = c2k[k].mul_add(lv + hv, sd2);
                ssa = wp[k].mul_add(hv, ssa);
                ssa = wm[k].mul_add(lv, ssa);
            }
            (dp[i], d2[i], sa[i]) = (sdp, sd2, (-ws).mul_add(c0, ssa));
        }
        let (t, lo, ps) = (r.t, r.lo, r.ps);
        for k in 1..=R {
            if t + k < lo + w {
                axpy(&mut dpsi, c1[k], &psi[po + k * ps..], n);
            }
            if t >= lo + k {
                axpy(&mut dpsi, -c1[k], &psi[po - k * ps..], n);
            }
        }
        let (p0, ns, z) = (&psi[po..po + n], &mut nrow[x0..x0 + n], &mut zrow[x0..x0 + n]);
        let (out, v) = (&mut out[x0..x0 + n], &vel[o..o + n]);
        if let Some(bh) = self.bh {
            // c^2 dt^2 = K bh where the density varies.
            let b = &bh[o..o + n];
            for i in 0..n {
                let ds = dpsi[i] + sa[i];
                ns[i] = bq * aq.mul_add(dp[i], p0[i]);
                z[i] = bq.mul_add(z[i], aq * (d2[i] + ds));
                out[i] = (v[i] * b[i]).mul_add(ds + z[i], out[i]);
            }
            return;
        }
        for i in 0..n {
            let ds = dpsi[i] + sa[i];
            ns[i] = bq * aq.mul_add(dp[i], p0[i]);
            z[i] = bq.mul_add(z[i], aq * (d2[i] + ds));
            out[i] = v[i].mul_add(ds + z[i], out[i]);
        }
    }
}

/// One half of a row's x layers ([`Sweep::cpml_x_row`]): its first x (`x0`) and that point's
/// offset in the field (`o`), in the padded psi slab (`own`; `seg` within the row's two halves)
/// and in the row's zeta and the weights' table (`slab`, half x width).
pub(super) struct XHalf {
    x0: usize,
    o: usize,
    own: usize,
    seg: usize,
    slab: usize,
}

/// [`Sweep::x_values`]'s results for one chunk: the new phi, zeta and p^{n+1} of its XLANES points.
pub(super) struct XValues<T> {
    psi: [T; XLANES],
    zeta: [T; XLANES],
    out: [T; XLANES],
}

/// Stores [`XValues`] of the chunk from j of one half's x layer.
#[inline(always)]
pub(super) fn x_store<T: Copy>(h: &XHalf, out: &mut [T], psi_next: &mut [T], zeta: &mut [T], j: usize, v: &XValues<T>) {
    psi_next[h.seg + j..h.seg + j + XLANES].copy_from_slice(&v.psi);
    zeta[h.slab + j..h.slab + j + XLANES].copy_from_slice(&v.zeta);
    out[h.x0 + j..h.x0 + j + XLANES].copy_from_slice(&v.out);
}

/// What every chunk of a y or z layer row shares ([`Sweep::cpml_yz_row`]): the axis, the field's
/// stride along it and the slab's, the row's offsets in the field and in the slab, the slab
/// coordinate t and its half's start, the row's a and b, and its D(a D p) weights.
pub(super) struct LayerRow<T, const R: usize> {
    axis: usize,
    s: usize,
    ps: usize,
    prow: usize,
    row: usize,
    lo: usize,
    t: usize,
    ab: (T, T),
    weights: ([T; R], [T; R], T),
}

/// acc[i] += w p[i] (one rounding) for the first n lanes; a whole chunk in a loop of known length
/// (vectorised without a remainder loop).
#[inline(always)]
pub(super) fn axpy<T: Real, const N: usize>(acc: &mut [T; N], w: T, p: &[T], n: usize) {
    if n == N {
        let p: &[T; N] = p[..N].try_into().expect("a whole chunk");
        for i in 0..N {
            acc[i] = w.mul_add(p[i], acc[i]);
        }
    } else {
        for i in 0..n {
            acc[i] = w.mul_add(p[i], acc[i]);
        }
    }
}

/// [`layer_weights`] of every x-slab point: w+_k at [(k - 1) * x_pairs_stride(width) + t], w-_k at
/// [(R + k - 1) * ...] and S at [2R * ...] for slab index t (low layer, then high), so that the x
/// layers' loop reads them as rows. Each row ends in XLANES zeros, read by the whole-vector lanes
/// past the layer.
pub(super) fn x_layer_weights<T: Real>(a: &[T], c2: &[T], radius: usize, width: usize) -> Vec<T> {
    let nx = a.len();
    let stride = x_pairs_stride(width);
    let mut out = vec![T::default(); (2 * radius + 1) * stride];
    for t in 0..2 * width {
        let q = if t < width { t } else { nx - 2 * width + t };
        let (mut wp, mut wm) = ([T::default(); 8], [T::default(); 8]);
        let ws = layer_weights_into(a, c2, q, &mut wp[..radius], &mut wm[..radius]);
        for k in 0..radius {
            out[k * stride + t] = wp[k];
            out[(radius + k) * stride + t] = wm[k];
        }
        out[2 * radius * stride + t] = ws;
    }
    out
}

/// The weights of the compact self-adjoint D(a D p) (boundary.rs) at grid index q, evaluated as
/// sum_k (w+_k p_{q+k} + w-_k p_{q-k}) - S p_q (each sum in k order, the last term one fused
/// multiply-add): w+_k, w-_k ([`layer_weight`]) for k = 1..R and S = w+_1 + w-_1 + w+_2 + ... in
/// that order. kernels/layers.h computes the same bits. Two fused multiply-adds a tap instead of
/// five operations.
pub(crate) fn layer_weights<T: Real, const R: usize>(a: &[T], c2: &[T], q: usize) -> ([T; R], [T; R], T) {
    let (mut wp, mut wm) = ([T::default(); R], [T::default(); R]);
    let ws = layer_weights_into(a, c2, q, &mut wp, &mut wm);
    (wp, wm, ws)
}

/// [`layer_weights`] for the radius `wp.len()`: w+_k into wp[k - 1], w-_k into wm[k - 1]; returns S.
#[inline(always)]
pub(crate) fn layer_weights_into<T: Real>(a: &[T], c2: &[T], q: usize, wp: &mut [T], wm: &mut [T]) -> T {
    let mut ws = T::default();
    for k in 0..wp.len() {
        (wp[k], wm[k]) = layer_weight(a, c2, q, k + 1);
        ws += wp[k];
        ws += wm[k];
    }
    ws
}

/// c2_k a_mean(a, q, q + k) and c2_k a_mean(a, q, q - k) (clamped at 0): tap k's weights in D(a D p).
#[inline(always)]
pub(super) fn layer_weight<T: Real>(a: &[T], c2: &[T], q: usize, k: usize) -> (T, T) {
    (c2[k] * a_mean(a, q, q + k), c2[k] * a_mean(a, q, q.saturating_sub(k)))
}

/// Length of the x slab's psi buffers for a slab of `len` values in layers of `width`: each
/// layer of a row between `radius` zeros on each side (phi outside its layer, read by the taps of
/// the layer's edge points), and XLANES of slack for the whole-vector taps past the last row.
pub(super) fn x_psi_len(len: usize, width: usize, radius: usize) -> usize {
    len / width.max(1) * (width + 2 * radius) + XLANES
}

/// Row length of [`x_layer_weights`]'s table.
pub(super) fn x_pairs_stride(width: usize) -> usize {
    2 * width + XLANES
}

/// (a_q + a_m) / 2, a clamped at the grid's end: the weight of the pair (q, m) in the compact
/// self-adjoint D(a D p) of the CPML update (boundary.rs).
#[inline(always)]
pub(crate) fn a_mean<T: Real>(a: &[T], q: usize, m: usize) -> T {
    T::of(0.5) * (a[q] + a[m.min(a.len() - 1)])
}
