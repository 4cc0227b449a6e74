// plane.cu: the step of a 2D grid (x and z; src/backend/cpu/plane.rs is its CPU reference, computed
// in the same order value for value). plane_step computes the interior update (and the sponge) of
// every point; plane_layers then adds the CPML corrections of the layer points, z's then x's.
// In 2D the layers are a few rows and columns of the grid: a pass of their own reads about 1% of
// it again, and keeps their registers out of the interior's kernel.
//
// plane_step: a block owns PLANE_X x VEC points of a row and marches down `window` rows. The rows
// of p^n around the current one sit in a shared-memory ring of 2R + 1 + AHEAD rows (with HV halo
// vectors on each side), filled by asynchronous copies AHEAD rows in advance: queued rows cost no
// registers, so a multiprocessor holds many blocks and many rows in flight. A thread reads its
// x taps from the current row and its z taps from its column of the others. p^{n-1} and the
// stiffness are loaded into registers a row ahead. With a varying density the buoyancy has a ring
// of its own (plane_step_density), filled through registers.

#ifndef PLANE_AHEAD
#define PLANE_AHEAD 3
#endif
namespace plane {
constexpr int R = RADIUS;
constexpr int HV = (R + VEC - 1) / VEC;  // halo vectors on each side of a ring row
constexpr int AHEAD = PLANE_AHEAD;       // rows in flight beyond the 2R + 1 the stencil reads
constexpr int SLOTS = 2 * R + 1 + AHEAD;
}  // namespace plane

#ifndef PLANE_X
#define PLANE_X 128
#endif
static_assert(PLANE_X >= 2 * plane::HV, "too few threads to copy the rows' halo vectors");

#define PLANE_STEP_PARAMS                                                                                 \
    const float *RESTRICT cur, float *RESTRICT out, const float *RESTRICT vel, const float *RESTRICT bh, \
        const float *RESTRICT gx, const float *RESTRICT gz, StencilWeights w, int nx, int nz, i64 pitch,  \
        int window

// The ring's slot s (0 <= s < 2 SLOTS) taken modulo SLOTS.
DEVICE int ring_slot(int s) { return s >= plane::SLOTS ? s - plane::SLOTS : s; }

// The march. `cur`, `out`, `vel` and `bh` point at the grid's first point (x = 0, z = 0); a row is
// `pitch` values. Outside the grid p is zero and not read (the halo is held at zero; the rows above
// z = 0, which free_surface.cu mirrors, are read); bh is read over the grid and its halo.
template <bool DENSITY>
DEVICE void plane_march(PLANE_STEP_PARAMS) {
    using namespace plane;
    constexpr int TWV = PLANE_X + 2 * HV;
    extern __shared__ Vf plane_ring[];  // SLOTS rows of p, then (density) SLOTS rows of bh
    const int tx = threadIdx.x;
    const int x0 = blockIdx.x * PLANE_X * VEC;
    const int ix = x0 + tx * VEC;
    const int z0 = blockIdx.y * window;
    const int z1 = imin(z0 + window, nz);
    if (z0 >= nz) return;  // the whole block, before any barrier
    const bool in = ix < nx;
    const bool in_b = ix < nx + R;
    // Threads tx < 2 HV also copy one halo vector a row: left 0..HV-1, right after the tile.
    const bool halo = tx < 2 * HV;
    const int hcol = tx < HV ? tx : PLANE_X + tx;
    const int hx = x0 + (hcol - HV) * VEC;
    const bool h_in = halo && vec_in_x(hx, nx);
    const bool h_b = halo && hx < nx + R && hx + VEC > -R;
    const SharedVf ring_p = shared_vf(plane_ring);
    Vf* const ring_b = plane_ring + SLOTS * TWV;
    // Row z of p into its slot (z - z0 + R modulo SLOTS), asynchronously.
    auto copy_row = [&](int z, int slot) {
        const i64 row = (i64)z * pitch;
        cp_async16_cur(shared_at(ring_p, slot * TWV + HV + tx), cur + row + ix, in);
        if (halo) cp_async16_cur(shared_at(ring_p, slot * TWV + hcol), cur + row + hx, h_in);
    };
    // The buoyancy's rows go through registers: loaded an iteration before they are stored into
    // their slot (static data, so no asynchronous copy of its own beside p's).
    auto load_b = [&](int z, Vf& b, Vf& bh_halo) {
        const i64 row = (i64)z * pitch;
        b = in_b ? vload(bh + row + ix) : vzero();
        bh_halo = h_b ? vload(bh + row + hx) : vzero();
    };
    auto store_b = [&](int slot, const Vf& b, const Vf& bh_halo) {
        ring_b[slot * TWV + HV + tx] = b;
        if (halo) ring_b[slot * TWV + hcol] = bh_halo;
    };
    // Rows z0 - R .. z0 + R as one group, then AHEAD - 1 groups of one row each.
    for (int i = 0; i <= 2 * R; i++) copy_row(z0 - R + i, i);
    cp_async_commit();
#pragma unroll
    for (int a = 1; a < AHEAD; a++) {
        if (z0 + R + a < z1 + R) copy_row(z0 + R + a, 2 * R + a);
        cp_async_commit();
    }
    Vf b_next = vzero(), b_next_halo = vzero();
    if (DENSITY) {
        for (int i = 0; i < 2 * R + AHEAD && z0 - R + i < z1 + R; i++) {
            load_b(z0 - R + i, b_next, b_next_halo);
            store_b(i, b_next, b_next_halo);
        }
    }
    bool b_pending = false;
    Vf prev = in ? vload_once(out + (i64)z0 * pitch + ix) : vzero();
    Vf k = in ? vload_once(vel + (i64)z0 * pitch + ix) : vzero();
    int base = 0;  // the slot of row z - R
    for (int z = z0; z < z1; z++) {
        CP_ASYNC_WAIT(AHEAD - 1);  // this thread's copies of rows up to z + R are done
        BLOCK_SYNC();              // and everyone's; every thread is past row z - 1's reads
        // Row z + R + AHEAD into the slot row z - R - 1 held; one group an iteration, empty at the end.
        if (z + R + AHEAD < z1 + R) copy_row(z + R + AHEAD, ring_slot(base + 2 * R + AHEAD));
        cp_async_commit();
        if (DENSITY) {
            // The buoyancy's row z - 1 + R + AHEAD, loaded last iteration, into the slot of row
            // z - R - 2 (read by no thread since the barrier); seen after two more barriers.
            if (b_pending) store_b(ring_slot(base + SLOTS - 2), b_next, b_next_halo);
            b_pending = z + AHEAD < z1;
            if (b_pending) load_b(z + R + AHEAD, b_next, b_next_halo);
        }
        const bool next = in && z + 1 < z1;
        const Vf prev2 = next ? vload_once(out + (i64)(z + 1) * pitch + ix) : vzero();
        const Vf k2 = next ? vload_once(vel + (i64)(z + 1) * pitch + ix) : vzero();

        const Vf* rp = plane_ring;
        const Vf* rb = ring_b;
        const int c = ring_slot(base + R);
        float xp[(2 * HV + 1) * VEC], xb[(2 * HV + 1) * VEC];
#pragma unroll
        for (int s = 0; s < 2 * HV + 1; s++) {
            const Vf t = rp[c * TWV + tx + s];
#pragma unroll
            for (int j = 0; j < VEC; j++) xp[s * VEC + j] = t.v[j];
            if (DENSITY) {
                const Vf u = rb[c * TWV + tx + s];
#pragma unroll
                for (int j = 0; j < VEC; j++) xb[s * VEC + j] = u.v[j];
            }
        }
        constexpr int C = HV * VEC;  // the thread's first point in xp / xb
        float lap[VEC];
        if (DENSITY) {
            // The variable-density operator (problem/density.rs): x then z, the + side first.
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                lap[j] = 0.0f;
#pragma unroll
                for (int m = 1; m <= R; m++) {
                    const float h = 0.5f * w.cx[m], b0 = xb[C + j];
                    lap[j] = fmaf(h * (b0 + xb[C + j + m]), xp[C + j + m] - xp[C + j], lap[j]);
                    lap[j] = fmaf(h * (b0 + xb[C + j - m]), xp[C + j - m] - xp[C + j], lap[j]);
                }
            }
#pragma unroll
            for (int m = 1; m <= R; m++) {
                const int hi = ring_slot(base + R + m) * TWV + HV + tx, lo = ring_slot(base + R - m) * TWV + HV + tx;
                const Vf ph = rp[hi], pl = rp[lo], bhi = rb[hi], blo = rb[lo];
                const float h = 0.5f * w.cz[m];
#pragma unroll
                for (int j = 0; j < VEC; j++) {
                    const float p0 = xp[C + j], b0 = xb[C + j];
                    lap[j] = fmaf(h * (b0 + bhi.v[j]), ph.v[j] - p0, lap[j]);
                    lap[j] = fmaf(h * (b0 + blo.v[j]), pl.v[j] - p0, lap[j]);
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                lap[j] = w.centre * xp[C + j];
#pragma unroll
                for (int m = 1; m <= R; m++) lap[j] = tap(lap[j], w.cx[m], xp[C + j - m], xp[C + j + m]);
            }
#pragma unroll
            for (int m = 1; m <= R; m++) {
                const Vf ph = rp[ring_slot(base + R + m) * TWV + HV + tx];
                const Vf pl = rp[ring_slot(base + R - m) * TWV + HV + tx];
#pragma unroll
                for (int j = 0; j < VEC; j++) lap[j] = tap(lap[j], w.cz[m], pl.v[j], ph.v[j]);
            }
        }
        Vf res;
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            const float p0 = xp[C + j];
#if SPONGE
            // Sponge: p^{n-1} damped too (friction, not a restoring force).
            const float g = gx[ix + j] * gz[z];
            res.v[j] = g * (2.0f * p0 - g * prev.v[j] + k.v[j] * lap[j]);
#else
            res.v[j] = 2.0f * p0 - prev.v[j] + k.v[j] * lap[j];
#endif
        }
        if (in) vstore_guarded(out + (i64)z * pitch + ix, res, nx - ix);
        prev = prev2;
        k = k2;
        base = ring_slot(base + 1);
    }
}

extern "C" __global__ LAUNCH_BOUNDS(PLANE_X) void plane_step(PLANE_STEP_PARAMS) {
    plane_march<false>(cur, out, vel, bh, gx, gz, w, nx, nz, pitch, window);
}

extern "C" __global__ LAUNCH_BOUNDS(PLANE_X) void plane_step_density(PLANE_STEP_PARAMS) {
    plane_march<true>(cur, out, vel, bh, gx, gz, w, nx, nz, pitch, window);
}

// plane_layers: the CPML corrections of p^{n+1} (`out`, the interior's update done) at every layer
// point, one thread a point: first the rows of the z layers (every point of the row: z's
// correction, then x's where the point is also in an x layer), then the x layers' columns of the
// other rows. `bh` (null for a constant density) scales the stiffness: c^2 dt^2 = K bh.
extern "C" __global__ void plane_layers(const float* RESTRICT cur, float* RESTRICT out, const float* RESTRICT vel,
                                        const float* RESTRICT bh, int nx, int nz, i64 pitch, Layers L) {
    constexpr int R = RADIUS;
    const int w = L.width;
    const bool low = L.low[2], high = L.high[2];
    const int zrows = w * ((int)low + (int)high);
    const i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 in_rows = (i64)zrows * nx;
    int x, z;
    if (idx < in_rows) {
        const int r = (int)(idx / nx);
        x = (int)(idx % nx);
        z = low && r < w ? r : nz - zrows + r;
    } else {
        const i64 j = idx - in_rows;
        const int r = (int)(j / (2 * w)), t = (int)(j % (2 * w));
        z = (low ? w : 0) + r;
        if (z >= (high ? nz - w : nz)) return;
        x = t < w ? t : nx - 2 * w + t;
    }
    const i64 o = (i64)z * pitch + x;
    const float kl = bh ? vel[o] * bh[o] : vel[o];
    const float p0 = cur[o];
    float res = out[o];
    float lo[R + 1], hi[R + 1];
    int t = 0;
    const int zside = layer_of(z, nz, w, low, high, t);
    if (zside >= 0) {
#pragma unroll
        for (int m = 1; m <= R; m++) {
            lo[m] = cur[o - (i64)m * pitch];
            hi[m] = cur[o + (i64)m * pitch];
        }
        const i64 s = (i64)(zside * w + t) * nx + x;
        res = layer_point<R>(res, p0, lo, hi, kl, L, 2, s, nx, t, z, nz);
    }
    const int xside = layer_of(x, nx, w, L.low[0], L.high[0], t);
    if (xside >= 0) {
#pragma unroll
        for (int m = 1; m <= R; m++) {
            lo[m] = cur[o - m];
            hi[m] = cur[o + m];
        }
        const i64 s = (i64)z * 2 * w + xside * w + t;
        res = layer_point<R>(res, p0, lo, hi, kl, L, 0, s, 1, t, x, nx);
    }
    out[o] = res;
}
