// layers.h: the CPML update of one layer point along one axis, shared by the fused kernel (which
// applies it inside its pass, fused.cu) and the separate per-axis pass (cpml.cu). The formulation is
// src/boundary.rs's: the slabs hold phi = b psi of the previous step, so a point reads only p^n
// along the axis, phi of its neighbours in its own layer, a of its neighbours and its own zeta:
//   dpsi = dphi/dx + D(a D p),                 phi' = b (phi + a dp/dx),
//   zeta <- b zeta + a (d2p/dx2 + dpsi),       p^{n+1} += c^2 dt^2 (dpsi + zeta)
// in the CPU reference's operation order (src/backend/cpu.rs, cpml_x_row), each product added to a
// sum one fused multiply-add on both sides (fmaf, mul_add; --fmad=false leaves explicit ones
// fused), so both give the same bits. D(a D p) is the compact self-adjoint form sum_k c2_k [abar_{+k} (p_{+k} - p) + abar_{-k}
// (p_{-k} - p)], abar_{+-k} = (a_q + a_{q+-k}) / 2 with a clamped at the grid's ends (a_pair),
// evaluated as sum_k (w+_k p_{+k} + w-_k p_{-k}) - S p with the point's weights w+-_k = c2_k abar_{+-k}
// and S = sum_k (w+_k + w-_k), each sum in k order, the last term one fused multiply-add: two
// fused multiply-adds a tap instead of five operations, the weights computed once a row where a
// row shares them (RowAB).
// phi is double-buffered (phi_in, phi_out; the host swaps them every step).
#pragma once

// Every CPML array of a run (the null pointers of an axis without layers are never read), passed
// by value to the fused kernels and to cpml.cu. Slabs are dense, fastest index first, with the
// grid's extent except 2 * width along their own axis (low layer, then high layer); a and b
// are indexed by the grid index along their axis.
struct Layers {
    const float* phi_in[3];
    float* phi_out[3];
    float* zeta[3];
    const float* a[3];
    const float* b[3];
    AxisWeights w[3];
    int width;    // points per layer; 0: no CPML
    int low[3];   // 1 where the axis's low face holds a layer (not under a free surface, nor at a cut)
    int high[3];  // 1 where the axis's high face holds a layer (not at a subdomain's cut)
    // fused kernels: 0 every block, 1 the blocks without layer points, 2 those with, 3 the blocks
    // without y-layer rows, 4 those with; cpml.cu's z layers: 0 every row, 5 the rows of select 4
    // (fused_step_zlayers took the others)
    int select;
    // cpml.cu: the planes [z_begin, z_end) a launch updates (a decomposed run's step in two parts)
    int z_begin, z_end;
    int z_offset;  // fused kernels: the grid plane of the launch's first plane (its x and y slabs')
    // select 3 and 4: the rows of the plain fused_step's tiles that hold y-layer rows are those
    // below band_lo and from band_hi on; fused_step_ylayers computes them (band_row)
    int band_lo, band_hi;
    int nz;  // the grid's planes (fused_step_zlayers: a launch's are part of them)
    // cpml.cu where the density varies: the buoyancy bh (a field like p's), so that a layer point's
    // c^2 dt^2 is K bh (layer_vel); null for a constant density
    const float* buoyancy;
};
static_assert(sizeof(Layers) == 400 && alignof(Layers) == 8, "Layers must match the host's struct");

// Grid index m clamped to the n points of an axis (the profile a beyond the grid's ends).
DEVICE int clamp_index(int m, int n) { return m < 0 ? 0 : (m >= n ? n - 1 : m); }

// The weight (a_q + a_m) / 2 of the pair (q, m) in D(a D p), a clamped at the ends of the n points.
DEVICE float a_pair(const float* RESTRICT a, float aq, int m, int n) { return 0.5f * (aq + a[clamp_index(m, n)]); }

// The update of one point along one axis, its slab values given and returned: `res` is p^{n+1} so
// far, p0 / lo[k] / hi[k] are p^n at the point and k points below / above it along the axis,
// `phi(k)` phi k points along the axis (read only inside the point's layer), `zeta` its zeta; `t` its
// index within its own layer (0 .. width - 1, inwards or outwards: only t +- k < width matters), `q`
// its grid index along the axis of `n` points. Returns p^{n+1} corrected; phi_new and zeta_new are
// the point's new memory variables.
template <int R, class Phi>
DEVICE float point_update(float res, float p0, const float (&lo)[R + 1], const float (&hi)[R + 1], float vel, Phi phi,
                          float zeta, const Layers& L, int axis, int t, int q, int n, float& phi_new,
                          float& zeta_new) {
    const AxisWeights& c = L.w[axis];
    const float* RESTRICT a = L.a[axis];
    const int w = L.width;
    const float aq = a[q];
    float dp = 0.0f, dphi = 0.0f, d2 = c.c2[0] * p0, sa = 0.0f, ws = 0.0f;
#pragma unroll
    for (int k = 1; k <= R; k++) {
        dp = fmaf(c.c1[k], hi[k] - lo[k], dp);
        if (t + k < w) dphi = fmaf(c.c1[k], phi(k), dphi);
        if (t >= k) dphi = fmaf(-c.c1[k], phi(-k), dphi);
        d2 = fmaf(c.c2[k], lo[k] + hi[k], d2);
        const float wp = c.c2[k] * a_pair(a, aq, q + k, n), wm = c.c2[k] * a_pair(a, aq, q - k, n);
        sa = fmaf(wp, hi[k], sa);
        sa = fmaf(wm, lo[k], sa);
        ws = ws + wp;
        ws = ws + wm;
    }
    sa = fmaf(-ws, p0, sa);
    const float bq = L.b[axis][q];
    const float dpsi = dphi + sa;
    phi_new = bq * fmaf(aq, dp, phi(0));
    zeta_new = fmaf(bq, zeta, aq * (d2 + dpsi));
    return fmaf(vel, dpsi + zeta_new, res);
}

// point_update with the slab values read from and written to the slabs: `s` the point's slab
// index and `ss` the slab stride along the axis.
template <int R>
DEVICE float layer_point(float res, float p0, const float (&lo)[R + 1], const float (&hi)[R + 1], float vel,
                         const Layers& L, int axis, i64 s, i64 ss, int t, int q, int n) {
    const float* RESTRICT phi_in = L.phi_in[axis];
    auto phi = [&](int k) { return phi_in[s + k * ss]; };
    float phi_new, zeta_new;
    res = point_update<R>(res, p0, lo, hi, vel, phi, L.zeta[axis][s], L, axis, t, q, n, phi_new, zeta_new);
    L.phi_out[axis][s] = phi_new;
    L.zeta[axis][s] = zeta_new;
    return res;
}

// A row's CPML coefficients for layer_row: a and b at the row's grid index q, and the weights
// wp(k) = c2_k (a_q + a_{q+k}) / 2 and wm(k) at q - k (a clamped at the grid's ends). AxisAB
// computes them from an axis's profiles; RowAB reads a shared copy (row_weights: field f of the
// row at w[f * stride]).
struct AxisAB {
    const float* RESTRICT a;
    const float* RESTRICT b;
    int q, n;
    DEVICE float aq() const { return a[q]; }
    DEVICE float bq() const { return b[q]; }
    DEVICE float wp(const float* c2, int k) const { return c2[k] * a_pair(a, a[q], q + k, n); }
    DEVICE float wm(const float* c2, int k) const { return c2[k] * a_pair(a, a[q], q - k, n); }
};
// The fields of a row's copy: a, b, wp(1..R), wm(1..R).
template <int R>
constexpr int ROW_WEIGHT_FIELDS = 2 * R + 2;
template <int R>
struct RowAB {
    const float* w;
    int stride;
    DEVICE float aq() const { return w[0]; }
    DEVICE float bq() const { return w[stride]; }
    DEVICE float wp(const float*, int k) const { return w[(1 + k) * stride]; }
    DEVICE float wm(const float*, int k) const { return w[(1 + R + k) * stride]; }
};
// Writes RowAB's copy for grid index q of an axis of n points at w (fields `stride` apart).
template <int R>
DEVICE void row_weights(float* w, int stride, const float* RESTRICT a, const float* RESTRICT b, const float* c2, int q,
                        int n) {
    const AxisAB ab{a, b, q, n};
    w[0] = ab.aq();
    w[stride] = ab.bq();
#pragma unroll
    for (int k = 1; k <= R; k++) {
        w[(1 + k) * stride] = ab.wp(c2, k);
        w[(1 + R + k) * stride] = ab.wm(c2, k);
    }
}

// layer_point for the VEC points of a row at once along y or z (slab index `s` a multiple of VEC):
// vector stores into the slabs, each point's sums in layer_point's order. `nb(k, lo, hi)` gives p^n
// k points below and above the row, `phi(k)` phi k points along the axis (k = -R .. R), `zn` zeta,
// `ab` the row's coefficients (AxisAB or RowAB).
template <int R, class Neighbours, class Phi, class AB>
DEVICE Vf layer_row(Vf res, const Vf& p0, Neighbours nb, Phi phi, Vf zn, const Vf& vel, const Layers& L, int axis,
                    i64 s, int t, const AB& ab) {
    const AxisWeights& c = L.w[axis];
    const int w = L.width;
    const float aq = ab.aq();
    Vf dp, dphi, d2, sa;
    float ws = 0.0f;
#pragma unroll
    for (int j = 0; j < VEC; j++) {
        dp.v[j] = 0.0f;
        dphi.v[j] = 0.0f;
        d2.v[j] = c.c2[0] * p0.v[j];
        sa.v[j] = 0.0f;
    }
#pragma unroll
    for (int k = 1; k <= R; k++) {
        Vf lo, hi;
        nb(k, lo, hi);
        const float wp = ab.wp(c.c2, k), wm = ab.wm(c.c2, k);
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            dp.v[j] = fmaf(c.c1[k], hi.v[j] - lo.v[j], dp.v[j]);
            d2.v[j] = fmaf(c.c2[k], lo.v[j] + hi.v[j], d2.v[j]);
            sa.v[j] = fmaf(wp, hi.v[j], sa.v[j]);
            sa.v[j] = fmaf(wm, lo.v[j], sa.v[j]);
        }
        ws = ws + wp;
        ws = ws + wm;
    }
#pragma unroll
    for (int j = 0; j < VEC; j++) sa.v[j] = fmaf(-ws, p0.v[j], sa.v[j]);
#pragma unroll
    for (int k = 1; k <= R; k++) {
        if (t + k < w) {
            const Vf f = phi(k);
#pragma unroll
            for (int j = 0; j < VEC; j++) dphi.v[j] = fmaf(c.c1[k], f.v[j], dphi.v[j]);
        }
        if (t >= k) {
            const Vf f = phi(-k);
#pragma unroll
            for (int j = 0; j < VEC; j++) dphi.v[j] = fmaf(-c.c1[k], f.v[j], dphi.v[j]);
        }
    }
    const float bq = ab.bq();
    const Vf ph = phi(0);
    Vf phn;
#pragma unroll
    for (int j = 0; j < VEC; j++) {
        const float dpsi = dphi.v[j] + sa.v[j];
        phn.v[j] = bq * fmaf(aq, dp.v[j], ph.v[j]);
        zn.v[j] = fmaf(bq, zn.v[j], aq * (d2.v[j] + dpsi));
        res.v[j] = fmaf(vel.v[j], dpsi + zn.v[j], res.v[j]);
    }
    vstore(L.phi_out[axis] + s, phn);
    vstore(L.zeta[axis] + s, zn);
    return res;
}

// Which layer of an axis of n points grid index i lies in: 0 low, 1 high, -1 none; `t` its index
// within that layer's half of the slab. A face without a layer (`low`, `high` false: a free
// surface, a subdomain's cut) has none. A whole grid is wider than its two layers; a subdomain
// may be thinner, holding one of them (the low one wins where both would claim a point).
DEVICE int layer_of(int i, int n, int w, bool low, bool high, int& t) {
    if (w == 0 || i < 0 || i >= n) return -1;
    if (low && i < w) {
        t = i;
        return 0;
    }
    if (high && i + w >= n) {
        t = i + w - n;
        return 1;
    }
    return -1;
}

// Whether row y belongs to a tile of the plain fused_step's launch that holds y-layer rows: the
// rows fused_step_ylayers computes (select 4) and fused_step leaves (select 3).
DEVICE bool band_row(int y, const Layers& L) { return y < L.band_lo || y >= L.band_hi; }

// Select 3 and 4 launch only their own tiles (solver.rs, launch_interior_planes, y_mode_band).
// Select 4 (fused_step_ylayers, whose tile height divides band_lo and band_hi): the launch's tile
// row index becomes the grid's, the rows below band_lo and from band_hi on. Select 3 (fused_step,
// tiles of its own height, which divides band_hi - band_lo): the launch's tiles follow each other
// from row band_lo up to band_hi. False for a launch tile past them (a banded grid's overhang).
DEVICE bool band_tile(Chunk& ch, int tile_rows, int ny, const Layers& L) {
    const int t = ch.tile_y;
    const int lo_row = L.band_lo, hi_row = L.band_hi < lo_row ? lo_row : L.band_hi;
    if (L.select == 3) {
        ch.row0 = lo_row + t * tile_rows;
        return ch.row0 < hi_row;
    }
    const int rows = (ny + tile_rows - 1) / tile_rows;
    const int lo = lo_row / tile_rows, hi = hi_row / tile_rows;
    ch.tile_y = t < lo ? t : t - lo + hi;
    ch.row0 = ch.tile_y * tile_rows;
    return t < rows - (hi - lo);
}

// Whether a fused block whose tile spans x0 .. x0 + tile_w - 1 and rows of the chunk's tile and
// whose march covers the chunk's planes holds a layer point (select 1, 2; conservatively: past the
// grid counts), and so whether a launch with L.select computes it. The two launches of a split
// step (select 1 and 2) take complementary blocks of the same grid; those of the y mode (select 3
// and 4) launch only their own tiles (band_tile).
DEVICE bool selected(const Chunk& ch, int tile_w, int tile_rows, int nx, int ny, int nz, const Layers& L) {
    if (L.select == 0 || L.select >= 3) return true;
    const int w = L.width;
    const int x0 = ch.tile_x * tile_w, y0 = ch.row0;
    const bool y_rows = w > 0 && ((L.low[1] && y0 < w) || (L.high[1] && y0 + tile_rows > ny - w));
    const int zlo = ch.dz > 0 ? ch.zfirst : ch.zfirst - ch.nsteps + 1;
    const bool z_planes = (L.low[2] && zlo < w) || (L.high[2] && zlo + ch.nsteps > nz - w);
    const bool layer = y_rows || (w > 0 && (x0 < w || x0 + tile_w > nx - w || z_planes));
    return layer == (L.select == 2);
}

// The CPML updates of a thread's row r (VEC points from x = ix, row y, plane z) in the fused
// kernel, y then z then x as the CPU reference adds them (boundary.rs, CPML_AXIS_ORDER), from the
// plane's tile (`tile` points R rows above the thread's first row, as in laplacian_rows) and the z
// queue q (q[r][R + k] is plane z + dz k). `vv` is c^2 dt^2 of the row. With YONLY only the y
// layers (cpml.cu adds x and z after the pass). The slabs' plane is z + L.z_offset (x and y).
// With `ytile` the y layers' phi comes from the shared tile `ptile` (rows as `tile`'s, PW vectors a
// row, fused.cu) and the row's zeta is `zeta_row`, both fetched ahead; with YONLY the row's
// coefficients from the shared copy at `yw` (RowAB, fields `ystride` apart; the thread's first row).
template <bool YONLY, int R, int RY, int HV, int TWV, int QS, int PW>
DEVICE void add_layers(Vf& res, int r, const Vf (&q)[RY][QS], const Vf (*tile)[TWV], int col, int dz, const Vf& vv,
                       int ix, int y, int z, int nx, int ny, int nz, const Layers& L, bool ytile, const Vf* ptile,
                       const Vf& zeta_row, const float* yw, int ystride) {
    const int w = L.width;
    if (y >= ny || ix >= nx) return;
    const int zs = z + L.z_offset;  // the slabs' plane
    float lo[R + 1], hi[R + 1];
    // With nx a multiple of VEC every row is VEC points inside the grid and its slab index aligned.
    const bool rows = nx % VEC == 0;
    int t;
    int half = layer_of(y, ny, w, L.low[1] != 0, L.high[1] != 0, t);
    auto nby = [&](int k, Vf& lo, Vf& hi) {
        lo = tile[r + R - k][col + HV];
        hi = tile[r + R + k][col + HV];
    };
    if constexpr (YONLY) {
        // fused_step_ylayers runs only where nx is a multiple of VEC and the two y layers do not
        // overlap (the host computes them after the interior otherwise), so every block with
        // layer rows has the phi tile (`ytile`) and no other path is compiled; a and b come from
        // shared memory, reread every plane rather than held in registers across the march.
        if (half >= 0) {
            const i64 s0 = ((i64)zs * (2 * w) + half * w + t) * nx + ix;
            auto phi = [&](int k) { return ptile[(r + R + k) * PW + col]; };
            res = layer_row<R>(res, tile[r + R][col + HV], nby, phi, zeta_row, vv, L, 1, s0, t,
                               RowAB<R>{yw + r, ystride});
        }
        return;
    }
    const AxisAB ay{L.a[1], L.b[1], y, ny};
    if (half >= 0 && ytile) {
        const i64 s0 = ((i64)zs * (2 * w) + half * w + t) * nx + ix;
        auto phi = [&](int k) { return ptile[(r + R + k) * PW + col]; };
        res = layer_row<R>(res, tile[r + R][col + HV], nby, phi, zeta_row, vv, L, 1, s0, t, ay);
    } else if (half >= 0 && rows) {
        const i64 s0 = ((i64)zs * (2 * w) + half * w + t) * nx + ix;
        auto phi = [&](int k) { return vload(L.phi_in[1] + s0 + (i64)k * nx); };
        res = layer_row<R>(res, tile[r + R][col + HV], nby, phi, vload(L.zeta[1] + s0), vv, L, 1, s0, t, ay);
    } else if (half >= 0) {
        const i64 s0 = ((i64)zs * (2 * w) + half * w + t) * nx + ix;
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            if (ix + j >= nx) continue;
#pragma unroll
            for (int k = 1; k <= R; k++) {
                lo[k] = tile[r + R - k][col + HV].v[j];
                hi[k] = tile[r + R + k][col + HV].v[j];
            }
            res.v[j] = layer_point<R>(res.v[j], tile[r + R][col + HV].v[j], lo, hi, vv.v[j], L, 1, s0 + j, nx, t, y, ny);
        }
    }
    half = layer_of(z, nz, w, L.low[2] != 0, L.high[2] != 0, t);
    if (half >= 0 && rows) {
        const i64 s0 = ((i64)(half * w + t) * ny + y) * nx + ix;
        // q[r][R + k] is plane z + k marching up, z - k marching down.
        auto nb = [&](int k, Vf& lo, Vf& hi) {
            lo = dz > 0 ? q[r][R - k] : q[r][R + k];
            hi = dz > 0 ? q[r][R + k] : q[r][R - k];
        };
        auto phi = [&](int k) { return vload(L.phi_in[2] + s0 + (i64)k * nx * ny); };
        res = layer_row<R>(res, q[r][R], nb, phi, vload(L.zeta[2] + s0), vv, L, 2, s0, t,
                           AxisAB{L.a[2], L.b[2], z, nz});
    } else if (half >= 0) {
        const i64 s0 = ((i64)(half * w + t) * ny + y) * nx + ix;
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            if (ix + j >= nx) continue;
#pragma unroll
            for (int k = 1; k <= R; k++) {
                // q[r][R + k] is plane z + k marching up, z - k marching down.
                lo[k] = dz > 0 ? q[r][R - k].v[j] : q[r][R + k].v[j];
                hi[k] = dz > 0 ? q[r][R + k].v[j] : q[r][R - k].v[j];
            }
            res.v[j] = layer_point<R>(res.v[j], q[r][R].v[j], lo, hi, vv.v[j], L, 2, s0 + j, (i64)nx * ny, t, z, nz);
        }
    }
    if (ix < w || ix + VEC > nx - w) {
        float xr[(2 * HV + 1) * VEC];
#pragma unroll
        for (int s = 0; s < 2 * HV + 1; s++) {
            const Vf t = tile[r + R][col + s];
#pragma unroll
            for (int j = 0; j < VEC; j++) xr[s * VEC + j] = t.v[j];
        }
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            int t;
            const int half = layer_of(ix + j, nx, w, L.low[0] != 0, L.high[0] != 0, t);
            if (half < 0) continue;
#pragma unroll
            for (int k = 1; k <= R; k++) {
                lo[k] = xr[HV * VEC + j - k];
                hi[k] = xr[HV * VEC + j + k];
            }
            const i64 s = ((i64)zs * ny + y) * (2 * w) + half * w + t;
            res.v[j] = layer_point<R>(res.v[j], xr[HV * VEC + j], lo, hi, vv.v[j], L, 0, s, 1, t, ix + j, nx);
        }
    }
}
