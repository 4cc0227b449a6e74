// fused.cu: one pass over the grid per time step. Each block owns an xy tile (32 threads x VEC
// points in x, BLOCK_Y rows in y) and marches in z over `window` planes (2.5D blocking):
// - z neighbours: each thread keeps its column of 2R+1 planes in a register queue; the plane z+R+1
//   is fetched DEPTH iterations ahead, so its latency hides behind whole planes of work;
// - y and x neighbours: the current plane's tile, with R halo rows and ceil(R/VEC) halo vectors on
//   each side, sits in shared memory (double-buffered: one barrier per plane);
// - the leapfrog update (and the sponge factor) is applied in registers and p^{n+1} is written over
//   p^{n-1} with streaming stores. Reads may overhang the grid (the allocation has slack); writes
//   never do.
// With LAPLACIAN_ONLY the kernel writes out = L p instead (the operator benchmark).

#ifndef PREFETCH_PV
#define PREFETCH_PV 1  // load p^{n-1} and c^2 dt^2 one plane ahead
#endif
#ifndef LOAD_ONCE_CS
#define LOAD_ONCE_CS 1  // evict-first loads for p^{n-1} and c^2 dt^2
#endif
#if LOAD_ONCE_CS
#define LOAD_ONCE(p) vload_once(p)
#else
#define LOAD_ONCE(p) vload(p)
#endif

#ifndef DEPTH
#define DEPTH 1  // planes of p^n fetched ahead of their first use in the z queue (registers)
#endif
#ifndef STAGES
#define STAGES 0  // > 0: the leading plane of p^n, p^{n-1} and c^2 dt^2 come STAGES planes ahead
                  // through cp.async into a shared-memory ring (dynamic shared memory)
#endif
#if STAGES > 0
#undef DEPTH
#define DEPTH 0
#undef PREFETCH_PV
#define PREFETCH_PV 0
#endif

#ifndef UNROLL_Z
#define UNROLL_Z 1  // z iterations unrolled (QN lets the compiler rename the queue instead of moving it)
#endif
#define SEISMIC_PRAGMA(x) _Pragma(#x)
#define SEISMIC_UNROLL(n) SEISMIC_PRAGMA(unroll n)

namespace fused {
constexpr int R = RADIUS;
constexpr int FX = 32;
constexpr int FY = BLOCK_Y;
constexpr int HV = (R + VEC - 1) / VEC;  // halo vectors on each side in x
constexpr int TWV = FX + 2 * HV;         // tile row, in vectors
constexpr int TH = FY + 2 * R;           // tile rows
constexpr int QN = 2 * R + 1;            // z stencil planes
constexpr int QS = QN + DEPTH;           // z queue length, planes in flight included
static_assert(FY >= R, "BLOCK_Y must be at least RADIUS (threads ty < R load the y halo rows)");
static_assert(TH * 2 * HV <= FX * FY, "too few threads to load the x halo");
}  // namespace fused

extern "C" __global__ LAUNCH_BOUNDS(32 * BLOCK_Y) void fused_step(const float* RESTRICT cur, float* RESTRICT out,
                                                                  const float* RESTRICT vel,
                                                                  const float* RESTRICT gx,
                                                                  const float* RESTRICT gy,
                                                                  const float* RESTRICT gz, StencilWeights w,
                                                                  int nx, int ny, int nz, i64 pitch, i64 plane,
                                                                  int window) {
    using namespace fused;
    __shared__ Vf tile[2][TH][TWV];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int lt = ty * FX + tx;
    const int ix = (blockIdx.x * FX + tx) * VEC;
    const int iy = blockIdx.y * FY + ty;
    const int z0 = blockIdx.z * window;
    const int z1 = imin(z0 + window, nz);
    const i64 col = (i64)iy * pitch + ix;
    // Threads ty < R also fetch tile rows ty (grid row iy - R) and ty + FY + R (grid row iy + FY).
    const bool yhalo = ty < R;
    const i64 col_ylo = col - (i64)R * pitch;
    const i64 col_yhi = col + (i64)FY * pitch;
    // The first TH * 2 * HV threads fetch one halo vector each: left side tile columns 0..HV-1,
    // right side FX+HV..FX+2HV-1.
    const bool xhalo = lt < TH * 2 * HV;
    const int xrow = lt / (2 * HV);
    const int xside = lt % (2 * HV);
    const int xcolv = xside < HV ? xside : FX + xside;
    const i64 col_x = (i64)((int)blockIdx.y * FY + xrow - R) * pitch + ((int)blockIdx.x * FX - HV + xcolv) * VEC;

#if STAGES > 0
    static_assert(VEC == 4, "the asynchronous path copies 16-byte vectors");
    // ring[slot][field][thread], field 0: plane z+R of p^n, 1: p^{n-1}, 2: c^2 dt^2 of plane z.
    extern __shared__ Vf ring[];
    constexpr int SLOTS = STAGES + 1;
    auto slot = [&](int zz, int field) -> Vf* { return ring + (((zz - z0) % SLOTS) * 3 + field) * (FX * FY) + lt; };
    auto issue = [&](int zz) {
        if (zz < z1) {
            cp_async16(slot(zz, 0), cur + (i64)(zz + R) * plane + col);
#if !LAPLACIAN_ONLY
            cp_async16(slot(zz, 1), out + (i64)zz * plane + col);
            cp_async16(slot(zz, 2), vel + (i64)zz * plane + col);
#endif
        }
        cp_async_commit();  // one group per plane, empty past the window, so the count stays right
    };
#pragma unroll
    for (int i = 0; i < STAGES; i++) issue(z0 + i);
#endif
    // q[0..QN-1]: planes z-R..z+R of the current iteration; q[QN..QS-1]: the next DEPTH planes,
    // already in flight. Planes past the last halo plane are never needed and not loaded.
    Vf q[QS];
#pragma unroll
    for (int i = 1; i < QS; i++) {
        const int zp = z0 - R + i - 1;
        if (zp < nz + R) q[i] = vload(cur + (i64)zp * plane + col);
    }
    Vf nylo, nyhi, nxh;
    if (yhalo) {
        nylo = vload(cur + (i64)z0 * plane + col_ylo);
        nyhi = vload(cur + (i64)z0 * plane + col_yhi);
    }
    if (xhalo) nxh = vload(cur + (i64)z0 * plane + col_x);
#if PREFETCH_PV && !LAPLACIAN_ONLY
    Vf npm = LOAD_ONCE(out + (i64)z0 * plane + col);
    Vf nvv = LOAD_ONCE(vel + (i64)z0 * plane + col);
#endif

    SEISMIC_UNROLL(UNROLL_Z)
    for (int z = z0; z < z1; z++) {
#pragma unroll
        for (int i = 0; i < QS - 1; i++) q[i] = q[i + 1];
#if STAGES > 0
        issue(z + STAGES);
        CP_ASYNC_WAIT(STAGES);  // this plane's group has landed
        q[QS - 1] = *slot(z, 0);
#if !LAPLACIAN_ONLY
        const Vf pm = *slot(z, 1);
        const Vf vv = *slot(z, 2);
#endif
#else
        {
            const int zp = z + R + DEPTH;
            if (zp < nz + R) q[QS - 1] = vload(cur + (i64)zp * plane + col);
        }
#endif
        const int b = (z - z0) & 1;
        tile[b][ty + R][tx + HV] = q[R];
        if (yhalo) {
            tile[b][ty][tx + HV] = nylo;
            tile[b][ty + FY + R][tx + HV] = nyhi;
        }
        if (xhalo) tile[b][xrow][xcolv] = nxh;
#if PREFETCH_PV && !LAPLACIAN_ONLY
        const Vf pm = npm;
        const Vf vv = nvv;
#endif
        // Fetch the next plane's data now; it is not needed before the next barrier.
        if (z + 1 < z1) {
            const i64 pn = (i64)(z + 1) * plane;
            if (yhalo) {
                nylo = vload(cur + pn + col_ylo);
                nyhi = vload(cur + pn + col_yhi);
            }
            if (xhalo) nxh = vload(cur + pn + col_x);
#if PREFETCH_PV && !LAPLACIAN_ONLY
            npm = LOAD_ONCE(out + pn + col);
            nvv = LOAD_ONCE(vel + pn + col);
#endif
        }
        const i64 o = (i64)z * plane + col;
#if !PREFETCH_PV && !LAPLACIAN_ONLY && STAGES == 0
        const Vf pm = LOAD_ONCE(out + o);
        const Vf vv = LOAD_ONCE(vel + o);
#endif
        BLOCK_SYNC();

        float lap[VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) lap[j] = w.centre * q[R].v[j];
        {
            float xr[(2 * HV + 1) * VEC];
#pragma unroll
            for (int s = 0; s < 2 * HV + 1; s++) {
                const Vf t = tile[b][ty + R][tx + s];
#pragma unroll
                for (int j = 0; j < VEC; j++) xr[s * VEC + j] = t.v[j];
            }
#pragma unroll
            for (int k = 1; k <= R; k++)
#pragma unroll
                for (int j = 0; j < VEC; j++) lap[j] += w.cx[k] * (xr[HV * VEC + j - k] + xr[HV * VEC + j + k]);
        }
#pragma unroll
        for (int k = 1; k <= R; k++) {
            const Vf lo = tile[b][ty + R - k][tx + HV];
            const Vf hi = tile[b][ty + R + k][tx + HV];
#pragma unroll
            for (int j = 0; j < VEC; j++) lap[j] += w.cy[k] * (lo.v[j] + hi.v[j]);
        }
#pragma unroll
        for (int k = 1; k <= R; k++)
#pragma unroll
            for (int j = 0; j < VEC; j++) lap[j] += w.cz[k] * (q[R - k].v[j] + q[R + k].v[j]);

        Vf res;
#if LAPLACIAN_ONLY
#pragma unroll
        for (int j = 0; j < VEC; j++) res.v[j] = lap[j];
#else
#if SPONGE
        // The sponge damps p^{n-1} too (friction, not a restoring force): same expression as cpu.rs.
        const float gyz = gy[iy] * gz[z];
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            const float g = gx[ix + j] * gyz;
            res.v[j] = g * (2.0f * q[R].v[j] - g * pm.v[j] + vv.v[j] * lap[j]);
        }
#else
#pragma unroll
        for (int j = 0; j < VEC; j++) res.v[j] = 2.0f * q[R].v[j] - pm.v[j] + vv.v[j] * lap[j];
#endif
#endif
        if (iy < ny && ix < nx) vstore_guarded(out + o, res, nx - ix);
    }
}
