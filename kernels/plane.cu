// plane.cu: the step of a 2D grid (x and z; src/backend/cpu/plane.rs is its CPU reference, computed
// in the same order value for value). One pass does everything but the sources and receivers: the
// interior update, the sponge, and the CPML layers of both axes (z's correction, then x's), since
// in 2D the layers are a few rows and columns of the grid, cheaper to update inside the pass than
// to read p^n again for them.
// A block owns PLANE_TILE = PLANE_X x VEC points of a row and marches down `window` rows of z. A
// thread keeps p^n of its VEC points over the 2R + 1 rows around the current one in a register
// queue (each row of p^n is read once a window), and the current row goes through shared memory
// (double-buffered: one barrier a row) for the x taps. The next row's p^n (2R rows ahead), p^{n-1}
// and c^2 dt^2 are fetched a row ahead. With a varying density the buoyancy keeps a queue and a
// shared row of its own (plane_step_density).

namespace plane {
constexpr int R = RADIUS;
constexpr int HV = (R + VEC - 1) / VEC;  // halo vectors on each side of the shared row
constexpr int QS = 2 * R + 1;            // queue: rows z - R .. z + R
}  // namespace plane

#ifndef PLANE_X
#define PLANE_X 128
#endif
static_assert(PLANE_X >= 2 * plane::HV, "too few threads to load the row's halo");

#define PLANE_STEP_PARAMS                                                                                        \
    const float *RESTRICT cur, float *RESTRICT out, const float *RESTRICT vel, const float *RESTRICT bh,        \
        const float *RESTRICT gx, const float *RESTRICT gz, StencilWeights w, int nx, int nz, i64 pitch, int window, \
        Layers L

// The thread's row of one field: its VEC points and HV vectors on either side, from a shared row.
template <int HV>
DEVICE void row_window(float (&xr)[(2 * HV + 1) * VEC], const Vf* row, int col) {
#pragma unroll
    for (int s = 0; s < 2 * HV + 1; s++) {
        const Vf t = row[col + s];
#pragma unroll
        for (int j = 0; j < VEC; j++) xr[s * VEC + j] = t.v[j];
    }
}

// One row of the march: row z of the thread's VEC points from x = ix. qp (and qb with a density)
// hold rows z - R .. z + R; xp (xb) the current row around the thread's points; prev and k p^{n-1}
// and the stiffness at the points. Returns p^{n+1}.
template <int R, bool DENSITY>
DEVICE Vf plane_point(const Vf (&qp)[2 * R + 1], const Vf (&qb)[2 * R + 1], const float* xp, const float* xb,
                      const Vf& prev, const Vf& k, const float* RESTRICT gx, const float* RESTRICT gz,
                      const StencilWeights& w, int ix, int iz, int nx, int nz, const Layers& L) {
    constexpr int C = plane::HV * VEC;  // the thread's first point in xp / xb
    Vf res;
#pragma unroll
    for (int j = 0; j < VEC; j++) {
        const float p0 = qp[R].v[j];
        float lap;
        if (DENSITY) {
            // The variable-density operator (problem/density.rs): x then z, the + side first.
            const float b0 = qb[R].v[j];
            lap = 0.0f;
#pragma unroll
            for (int m = 1; m <= R; m++) {
                const float h = 0.5f * w.cx[m];
                lap = fmaf(h * (b0 + xb[C + j + m]), xp[C + j + m] - p0, lap);
                lap = fmaf(h * (b0 + xb[C + j - m]), xp[C + j - m] - p0, lap);
            }
#pragma unroll
            for (int m = 1; m <= R; m++) {
                const float h = 0.5f * w.cz[m];
                lap = fmaf(h * (b0 + qb[R + m].v[j]), qp[R + m].v[j] - p0, lap);
                lap = fmaf(h * (b0 + qb[R - m].v[j]), qp[R - m].v[j] - p0, lap);
            }
        } else {
            lap = w.centre * p0;
#pragma unroll
            for (int m = 1; m <= R; m++) lap = tap(lap, w.cx[m], xp[C + j - m], xp[C + j + m]);
#pragma unroll
            for (int m = 1; m <= R; m++) lap = tap(lap, w.cz[m], qp[R - m].v[j], qp[R + m].v[j]);
        }
#if SPONGE
        // Sponge: p^{n-1} damped too (friction, not a restoring force).
        const float g = gx[ix + j] * gz[iz];
        res.v[j] = g * (2.0f * p0 - g * prev.v[j] + k.v[j] * lap);
#else
        res.v[j] = 2.0f * p0 - prev.v[j] + k.v[j] * lap;
#endif
    }
    if (L.width == 0) return res;
    // CPML: z's correction, then x's (CPML_AXIS_ORDER without y), each lane inside the grid only.
    int tz = 0;
    const int zside = layer_of(iz, nz, L.width, L.low[2], L.high[2], tz);
#pragma unroll
    for (int j = 0; j < VEC; j++) {
        const int x = ix + j;
        if (x >= nx) continue;
        const float kl = DENSITY ? k.v[j] * qb[R].v[j] : k.v[j];
        if (zside >= 0) {
            float lo[R + 1], hi[R + 1];
#pragma unroll
            for (int m = 1; m <= R; m++) {
                lo[m] = qp[R - m].v[j];
                hi[m] = qp[R + m].v[j];
            }
            const i64 s = (i64)(zside * L.width + tz) * nx + x;
            res.v[j] = layer_point<R>(res.v[j], qp[R].v[j], lo, hi, kl, L, 2, s, nx, tz, iz, nz);
        }
        int tx = 0;
        const int xside = layer_of(x, nx, L.width, L.low[0], L.high[0], tx);
        if (xside >= 0) {
            float lo[R + 1], hi[R + 1];
#pragma unroll
            for (int m = 1; m <= R; m++) {
                lo[m] = xp[C + j - m];
                hi[m] = xp[C + j + m];
            }
            const i64 s = (i64)iz * 2 * L.width + xside * L.width + tx;
            res.v[j] = layer_point<R>(res.v[j], qp[R].v[j], lo, hi, kl, L, 0, s, 1, tx, x, nx);
        }
    }
    return res;
}

// The march. `cur`, `out`, `vel` and `bh` point at the grid's first point (x = 0, z = 0); a row is
// `pitch` values. Outside the grid p is zero and not read (the halo is held at zero, the rows above
// z = 0 mirrored by free_surface.cu, which is read); bh is read over the grid and its halo.
template <bool DENSITY>
DEVICE void plane_march(PLANE_STEP_PARAMS) {
    using namespace plane;
    constexpr int TWV = PLANE_X + 2 * HV;
    __shared__ Vf sp[2][TWV];
    __shared__ Vf sb[DENSITY ? 2 : 1][DENSITY ? TWV : 1];
    const int tx = threadIdx.x;
    const int x0 = blockIdx.x * PLANE_X * VEC;
    const int ix = x0 + tx * VEC;
    const int z0 = blockIdx.y * window;
    const int z1 = imin(z0 + window, nz);
    if (z0 >= nz) return;  // the whole block, before any barrier
    const bool in = ix < nx;
    const bool in_b = ix < nx + R;
    // Threads tx < 2 HV also fetch one halo vector of the shared row: left 0..HV-1, right after the tile.
    const bool halo = tx < 2 * HV;
    const int hcol = tx < HV ? tx : PLANE_X + tx;
    const int hx = x0 + (hcol - HV) * VEC;
    const bool h_in = halo && vec_in_x(hx, nx);
    const bool h_b = halo && hx < nx + R && hx + VEC > -R;

    Vf qp[QS], qb[QS];
#pragma unroll
    for (int i = 0; i < QS; i++) {
        qp[i] = vload_if(cur + (i64)(z0 - R + i) * pitch + ix, in);
        qb[i] = DENSITY ? vload_if(bh + (i64)(z0 - R + i) * pitch + ix, in_b) : vzero();
    }
    Vf prev = in ? vload_once(out + (i64)z0 * pitch + ix) : vzero();
    Vf k = in ? vload_once(vel + (i64)z0 * pitch + ix) : vzero();
    for (int z = z0, buf = 0; z < z1; z++, buf ^= 1) {
        // The shared row z: the queue's centre and the halo vectors.
        sp[buf][HV + tx] = qp[R];
        if (DENSITY) sb[buf][HV + tx] = qb[R];
        if (halo) {
            sp[buf][hcol] = vload_if(cur + (i64)z * pitch + hx, h_in);
            if (DENSITY) sb[buf][hcol] = vload_if(bh + (i64)z * pitch + hx, h_b);
        }
        // The next row's loads (p and bh R rows below it for the queue, p^{n-1} and K at it) go
        // out before the barrier and the arithmetic.
        const bool next = in && z + 1 < z1;
        const i64 o_next = (i64)(z + 1) * pitch + ix, o_queue = o_next + (i64)R * pitch;
        const Vf np = vload_if(cur + o_queue, next);
        const Vf nb = DENSITY ? vload_if(bh + o_queue, in_b && z + 1 < z1) : vzero();
        const Vf prev2 = next ? vload_once(out + o_next) : vzero();
        const Vf k2 = next ? vload_once(vel + o_next) : vzero();
        BLOCK_SYNC();
        float xp[(2 * HV + 1) * VEC], xb[(2 * HV + 1) * VEC];
        row_window<HV>(xp, sp[buf], tx);
        if (DENSITY) row_window<HV>(xb, sb[buf], tx);
        const Vf res = plane_point<R, DENSITY>(qp, qb, xp, xb, prev, k, gx, gz, w, ix, z, nx, nz, L);
        if (in) vstore_guarded(out + (i64)z * pitch + ix, res, nx - ix);
#pragma unroll
        for (int i = 0; i < QS - 1; i++) {
            qp[i] = qp[i + 1];
            if (DENSITY) qb[i] = qb[i + 1];
        }
        qp[QS - 1] = np;
        if (DENSITY) qb[QS - 1] = nb;
        prev = prev2;
        k = k2;
    }
}

extern "C" __global__ LAUNCH_BOUNDS(PLANE_X) void plane_step(PLANE_STEP_PARAMS) {
    plane_march<false>(cur, out, vel, bh, gx, gz, w, nx, nz, pitch, window, L);
}

extern "C" __global__ LAUNCH_BOUNDS(PLANE_X) void plane_step_density(PLANE_STEP_PARAMS) {
    plane_march<true>(cur, out, vel, bh, gx, gz, w, nx, nz, pitch, window, L);
}
