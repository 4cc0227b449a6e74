//! The CPML layers' update of the f16 reference, one axis and one z-plane at a time: the
//! operations and their order are the f32 reference's (boundary.rs has the formulation), each
//! stored value rounded to f16 a row segment at a time.

use super::{CHUNK, round_f16_slice};
use crate::grid::Layout;

/// (w+_k at k - 1, w-_k at k - 1, their sum) of one grid index: the weights of the compact
/// D(a D p), which depend on the index alone.
pub(super) type LayerWeights = ([f32; 8], [f32; 8], f32);

/// What one axis's CPML update reads: the layout, the axis's profiles and weights, the stencil's
/// weights along it, p^n, c^2 dt^2 and the old phi (dense, (nz, ny, nx)).
pub(super) struct AxisPass<'a> {
    pub(super) layout: Layout,
    pub(super) axis: usize,
    pub(super) radius: usize,
    pub(super) width: usize,
    pub(super) a: &'a [f32],
    pub(super) b: &'a [f32],
    pub(super) weights: &'a [LayerWeights],
    pub(super) c1: &'a [f32],
    pub(super) c2: &'a [f32],
    pub(super) cur: &'a [f32],
    pub(super) vel: &'a [f32],
    pub(super) phi: &'a [f32],
}

impl AxisPass<'_> {
    /// [`Self::plane`] with hardware fused multiply-adds (the same bits: FMA is exactly rounded
    /// either way, this only avoids the software fallback).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "fma")]
    pub(super) unsafe fn plane_fma(&self, iz: usize, out_plane: &mut [f32], phi_next: &mut [f32], zeta: &mut [f32]) {
        self.plane(iz, out_plane, phi_next, zeta)
    }

    /// The layer points of z-plane iz: phi = b psi of the point's neighbours in its own layer
    /// gives dpsi/dx_i, then phi, zeta and p^{n+1} are updated; each row's layer segments are
    /// rounded together. `out_plane` is the plane of p^{n+1} from its row 0, `phi_next` and
    /// `zeta` the dense planes.
    #[inline(always)]
    pub(super) fn plane(&self, iz: usize, out_plane: &mut [f32], phi_next: &mut [f32], zeta: &mut [f32]) {
        let (l, axis, r, w) = (self.layout, self.axis, self.radius, self.width);
        let na = [l.nx, l.ny, l.nz][axis];
        let s = [1, l.pitch, l.plane][axis];
        let ds = [1, l.nx, l.nx * l.ny][axis];
        let (a, b, c1, c2, cur, vel, phi) = (self.a, self.b, self.c1, self.c2, self.cur, self.vel, self.phi);
        let in_layer = |q: usize| q < w || q + w >= na;
        let same_layer = |q: usize, t: usize| (q < w) == (t < w);
        if axis == 2 && !in_layer(iz) {
            return;
        }
        // The layer points of a row: both x layers, or the one layer of a thin x axis; the whole
        // row for the other axes.
        let segments = if axis == 0 && 2 * w < l.nx { [0..w, l.nx - w..l.nx] } else { [0..l.nx, 0..0] };
        let plane_start = iz * l.nx * l.ny;
        for iy in (0..l.ny).filter(|&iy| axis != 1 || in_layer(iy)) {
            let row = l.row(iy, iz);
            if axis != 0 {
                let out = &mut out_plane[iy * l.pitch..][..l.nx];
                let (e, d) = (iy * l.nx, plane_start + iy * l.nx);
                self.row_across(row, [iy, iz][axis - 1], out, &mut phi_next[e..e + l.nx], &mut zeta[e..e + l.nx], d);
                continue;
            }
            for seg in segments.iter().filter(|seg| !seg.is_empty()) {
                for ix in seg.clone() {
                    let (i, q) = (row + ix, [ix, iy, iz][axis]);
                    let (e, d) = (iy * l.nx + ix, plane_start + iy * l.nx + ix);
                    let (wp, wm, ws) = &self.weights[q];
                    let (mut dp, mut dphi, mut d2, mut sa) = (0.0f32, 0.0f32, c2[0] * cur[i], 0.0f32);
                    for k in 1..=r {
                        let (lo, hi) = (cur[i - k * s], cur[i + k * s]);
                        dp = c1[k].mul_add(hi - lo, dp);
                        if q + k < na && in_layer(q + k) && same_layer(q + k, q) {
                            dphi = c1[k].mul_add(phi[d + k * ds], dphi);
                        }
                        if q >= k && in_layer(q - k) && same_layer(q - k, q) {
                            dphi = (-c1[k]).mul_add(phi[d - k * ds], dphi);
                        }
                        d2 = c2[k].mul_add(lo + hi, d2);
                        // The compact self-adjoint D(a D p) (boundary.rs) as cpu.rs evaluates it.
                        sa = wp[k - 1].mul_add(hi, sa);
                        sa = wm[k - 1].mul_add(lo, sa);
                    }
                    let sa = (-ws).mul_add(cur[i], sa);
                    let dpsi = dphi + sa;
                    phi_next[e] = b[q] * a[q].mul_add(dp, phi[d]);
                    let z = b[q].mul_add(zeta[e], a[q] * (d2 + dpsi));
                    zeta[e] = z;
                    let o = &mut out_plane[iy * l.pitch + ix];
                    *o = vel[i].mul_add(dpsi + z, *o);
                }
                round_f16_slice(&mut out_plane[iy * l.pitch..][seg.clone()]);
            }
        }
    }

    /// A whole row of a y or z layer, whose index along the axis, q, is the same for every point
    /// of the row: each operation of the point update (the order of [`Self::plane`]'s) over
    /// `CHUNK` points at a time, then the chunk rounded. `row` is the row's offset in p^n, `d`
    /// in the dense phi; `out`, `phi_next` and `zeta` are the row's own.
    #[inline(always)]
    fn row_across(&self, row: usize, q: usize, out: &mut [f32], phi_next: &mut [f32], zeta: &mut [f32], d: usize) {
        let (l, axis, r, w) = (self.layout, self.axis, self.radius, self.width);
        let na = [l.nx, l.ny, l.nz][axis];
        let s = [1, l.pitch, l.plane][axis];
        let ds = [1, l.nx, l.nx * l.ny][axis];
        let (c1, c2, cur, phi) = (self.c1, self.c2, self.cur, self.phi);
        let in_layer = |t: usize| t < w || t + w >= na;
        let same_layer = |t: usize| (q < w) == (t < w);
        let (wp, wm, ws) = &self.weights[q];
        let (aq, bq) = (self.a[q], self.b[q]);
        let mut buf = [[0.0f32; CHUNK]; 4];
        for (chunk, out) in out.chunks_mut(CHUNK).enumerate() {
            let (first, len) = (chunk * CHUNK, out.len());
            let (at, dd) = (row + first, d + first);
            let [dp, dphi, d2, sa] = &mut buf;
            let (dp, dphi, d2, sa) = (&mut dp[..len], &mut dphi[..len], &mut d2[..len], &mut sa[..len]);
            dp.fill(0.0);
            dphi.fill(0.0);
            sa.fill(0.0);
            for (v, &p) in d2.iter_mut().zip(&cur[at..at + len]) {
                *v = c2[0] * p;
            }
            for k in 1..=r {
                let (lo, hi) = (&cur[at - k * s..][..len], &cur[at + k * s..][..len]);
                for ((v, &m), &p) in dp.iter_mut().zip(lo).zip(hi) {
                    *v = c1[k].mul_add(p - m, *v);
                }
                if q + k < na && in_layer(q + k) && same_layer(q + k) {
                    for (v, &f) in dphi.iter_mut().zip(&phi[dd + k * ds..][..len]) {
                        *v = c1[k].mul_add(f, *v);
                    }
                }
                if q >= k && in_layer(q - k) && same_layer(q - k) {
                    for (v, &f) in dphi.iter_mut().zip(&phi[dd - k * ds..][..len]) {
                        *v = (-c1[k]).mul_add(f, *v);
                    }
                }
                for ((v, &m), &p) in d2.iter_mut().zip(lo).zip(hi) {
                    *v = c2[k].mul_add(m + p, *v);
                }
                for ((v, &m), &p) in sa.iter_mut().zip(lo).zip(hi) {
                    *v = wm[k - 1].mul_add(m, wp[k - 1].mul_add(p, *v));
                }
            }
            let (p, vel, old) = (&cur[at..at + len], &self.vel[at..at + len], &phi[dd..dd + len]);
            let (phi_next, zeta) = (&mut phi_next[first..first + len], &mut zeta[first..first + len]);
            for j in 0..len {
                let dpsi = dphi[j] + (-ws).mul_add(p[j], sa[j]);
                phi_next[j] = bq * aq.mul_add(dp[j], old[j]);
                let z = bq.mul_add(zeta[j], aq * (d2[j] + dpsi));
                zeta[j] = z;
                out[j] = vel[j].mul_add(dpsi + z, out[j]);
            }
            round_f16_slice(out);
        }
    }
}
