// density.cu: the step where the density varies (src/problem/density.rs has the operator and why it
// is symmetric). Per axis and tap k, (c_k / 2)(bh_i + bh_{i+k})(p_{i+k} - p_i), then the same with
// i - k, summed in the CPU reference's order (x, y, z; k ascending; the + side first) from zero, then
// the leapfrog with the stiffness K where c^2 dt^2 stands (`vel`); the CPML corrections follow in
// cpml.cu, scaled by K bh.
// One pass over the grid in fused.cu's design without its ring: a block owns an xy tile (DX threads
// x VEC points, DY rows) and marches in z over `window` planes; p^n and bh each keep a register
// queue of 2R + 1 planes plus the plane in flight, and a shared tile of the current plane with R
// halo rows and HV halo vectors on each side (double-buffered: one barrier a plane). The halos of
// the next plane, p^{n-1} and K are fetched into registers a plane ahead.
// p is zero outside the grid in x and y and is not read there (prelude.h, vload_if); bh is read
// wherever a point of the grid reads it (the halo holds the edge, mirrored or neighbouring part's
// values, Problem::buoyancy_into), zero beyond.

namespace density {
constexpr int R = RADIUS;
// 16 threads in x from R = 5: the four tiles of 32 would pass the 48 KiB of static shared memory.
constexpr int DX = R > 4 ? 16 : 32;
constexpr int DY = 8;
constexpr int HV = (R + VEC - 1) / VEC;  // halo vectors on each side in x
constexpr int TWV = DX + 2 * HV;         // tile row, in vectors
constexpr int TH = DY + 2 * R;           // tile rows
constexpr int QS = 2 * R + 2;            // z queue: the 2R + 1 stencil planes and the one in flight
static_assert(DY >= R, "threads ty < R load the y halo rows");
static_assert(DY * 2 * HV <= DX * DY, "too few threads to load the x halo");
}  // namespace density

// One tap pair's term added to acc: (h (bh_0 + bh_k)) (p_k - p_0) + acc, one rounding for the
// product-sum as the CPU reference's mul_add.
#if SEISMIC_HIP
DEVICE float density_tap(float acc, float h, float b0, float bk, float p0, float pk) {
    return __builtin_fmaf(h * (b0 + bk), pk - p0, acc);
}
#else
DEVICE float density_tap(float acc, float h, float b0, float bk, float p0, float pk) {
    return __fmaf_rn(h * (b0 + bk), pk - p0, acc);
}
#endif

// Data read once (p^{n-1}, K): evict-first, zero and unread outside the grid.
DEVICE Vf density_load_once(const float* p, bool read) { return read ? vload_once(p) : vzero(); }

extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(density::DX * density::DY, 1) void density_step(
    const float* RESTRICT cur, float* RESTRICT out, const float* RESTRICT vel, const float* RESTRICT bh,
    const float* RESTRICT gx, const float* RESTRICT gy, const float* RESTRICT gz, StencilWeights w, int nx, int ny,
    int nz, i64 pitch, i64 plane, int window) {
    using namespace density;
    __shared__ Vf tp[2][TH][TWV];
    __shared__ Vf tb[2][TH][TWV];
    const int tx = threadIdx.x, ty = threadIdx.y, lt = ty * DX + tx;
    const int ix = (blockIdx.x * DX + tx) * VEC;
    const int row0 = blockIdx.y * DY;
    const int iy = row0 + ty;
    const int z0 = blockIdx.z * window;
    const int nsteps = imin(z0 + window, nz) - z0;
    if (row0 >= ny || nsteps <= 0) return;  // the whole block, before any barrier
    const i64 col = (i64)iy * pitch + ix;
    // Threads ty < R also fetch tile rows ty (grid row row0 + ty - R) and ty + DY + R (row0 + DY + ty).
    const bool yhalo = ty < R;
    const int ylo = row0 + ty - R, yhi = row0 + DY + ty;
    const i64 col_ylo = (i64)ylo * pitch + ix, col_yhi = (i64)yhi * pitch + ix;
    // The first DY * 2 HV threads fetch one x halo vector each of the interior rows: left tile
    // columns 0..HV-1, right DX+HV..DX+2HV-1.
    const bool xhalo = lt < DY * 2 * HV;
    const int xrow = lt / (2 * HV), xside = lt % (2 * HV);
    const int xcolv = xside < HV ? xside : DX + xside;
    const int xx = ((int)blockIdx.x * DX - HV + xcolv) * VEC;
    const int xy = row0 + xrow;
    const i64 col_x = (i64)xy * pitch + xx;
    // p: the points of the grid; bh: those of the grid and its halo.
    const bool col_in = ix < nx;
    const bool row_in = col_in && iy < ny;
    const bool ylo_in = col_in && ylo >= 0, yhi_in = col_in && yhi < ny;
    const bool xh_in = xy < ny && vec_in_x(xx, nx);
    const bool col_b = ix < nx + R;
    const bool row_b = col_b && iy < ny + R;
    const bool yhi_b = col_b && yhi < ny + R;  // ylo >= -R always
    const bool xh_b = xy < ny + R && xx < nx + R && xx + VEC > -R;

    // qp[0..2R], qb[0..2R]: planes z-R..z+R of the current iteration; [QS-1] the next, in flight.
    Vf qp[QS], qb[QS];
#pragma unroll
    for (int i = 1; i < QS; i++) {
        const int zp = z0 + i - 1 - R;
        if (zp >= -R && zp < nz + R) {
            qp[i] = vload_if(cur + (i64)zp * plane + col, row_in);
            qb[i] = vload_if(bh + (i64)zp * plane + col, row_b);
        }
    }
    Vf nplo, nphi, npx, nblo, nbhi, nbx;
    auto fetch_halos = [&](int zz) {
        const i64 pf = (i64)zz * plane;
        if (yhalo) {
            nplo = vload_if(cur + pf + col_ylo, ylo_in);
            nphi = vload_if(cur + pf + col_yhi, yhi_in);
            nblo = vload_if(bh + pf + col_ylo, col_b);
            nbhi = vload_if(bh + pf + col_yhi, yhi_b);
        }
        if (xhalo) {
            npx = vload_if(cur + pf + col_x, xh_in);
            nbx = vload_if(bh + pf + col_x, xh_b);
        }
    };
    fetch_halos(z0);
    Vf npm = density_load_once(out + (i64)z0 * plane + col, row_in);
    Vf nvv = density_load_once(vel + (i64)z0 * plane + col, row_in);

    // Two planes an iteration: the queues' shifts become renames in half the iterations (H200,
    // 512^3: 53 -> 59% of 4R1W at R = 4, 35 -> 37% at R = 8, faster at every R; the same bits).
    // HIP's compiler declines the request with a warning, so it is not made there.
#if !SEISMIC_HIP
#pragma unroll 2
#endif
    for (int s = 0; s < nsteps; s++) {
        const int z = z0 + s;
#pragma unroll
        for (int i = 0; i < QS - 1; i++) {
            qp[i] = qp[i + 1];
            qb[i] = qb[i + 1];
        }
        {
            const int zp = z + R + 1;
            if (zp < nz + R) {
                qp[QS - 1] = vload_if(cur + (i64)zp * plane + col, row_in);
                qb[QS - 1] = vload_if(bh + (i64)zp * plane + col, row_b);
            }
        }
        const int b = s & 1;
        tp[b][ty + R][tx + HV] = qp[R];
        tb[b][ty + R][tx + HV] = qb[R];
        if (yhalo) {
            tp[b][ty][tx + HV] = nplo;
            tp[b][ty + DY + R][tx + HV] = nphi;
            tb[b][ty][tx + HV] = nblo;
            tb[b][ty + DY + R][tx + HV] = nbhi;
        }
        if (xhalo) {
            tp[b][xrow + R][xcolv] = npx;
            tb[b][xrow + R][xcolv] = nbx;
        }
        const Vf pm = npm, vv = nvv;
        if (s + 1 < nsteps) {
            fetch_halos(z + 1);
            const i64 pn = (i64)(z + 1) * plane + col;
            npm = density_load_once(out + pn, row_in);
            nvv = density_load_once(vel + pn, row_in);
        }
        BLOCK_SYNC();

        float lap[VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) lap[j] = 0.0f;
        {
            float xp[(2 * HV + 1) * VEC], xb[(2 * HV + 1) * VEC];
#pragma unroll
            for (int c = 0; c < 2 * HV + 1; c++) {
                const Vf a = tp[b][ty + R][tx + c], e = tb[b][ty + R][tx + c];
#pragma unroll
                for (int j = 0; j < VEC; j++) {
                    xp[c * VEC + j] = a.v[j];
                    xb[c * VEC + j] = e.v[j];
                }
            }
#pragma unroll
            for (int k = 1; k <= R; k++) {
                const float h = 0.5f * w.cx[k];
#pragma unroll
                for (int j = 0; j < VEC; j++) {
                    const int m = HV * VEC + j;
                    lap[j] = density_tap(lap[j], h, xb[m], xb[m + k], xp[m], xp[m + k]);
                    lap[j] = density_tap(lap[j], h, xb[m], xb[m - k], xp[m], xp[m - k]);
                }
            }
        }
#pragma unroll
        for (int k = 1; k <= R; k++) {
            const float h = 0.5f * w.cy[k];
            const Vf php = tp[b][ty + R + k][tx + HV], bhp = tb[b][ty + R + k][tx + HV];
            const Vf phm = tp[b][ty + R - k][tx + HV], bhm = tb[b][ty + R - k][tx + HV];
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                lap[j] = density_tap(lap[j], h, qb[R].v[j], bhp.v[j], qp[R].v[j], php.v[j]);
                lap[j] = density_tap(lap[j], h, qb[R].v[j], bhm.v[j], qp[R].v[j], phm.v[j]);
            }
        }
#pragma unroll
        for (int k = 1; k <= R; k++) {
            const float h = 0.5f * w.cz[k];
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                lap[j] = density_tap(lap[j], h, qb[R].v[j], qb[R + k].v[j], qp[R].v[j], qp[R + k].v[j]);
                lap[j] = density_tap(lap[j], h, qb[R].v[j], qb[R - k].v[j], qp[R].v[j], qp[R - k].v[j]);
            }
        }
        const Vf res = leapfrog(qp[R], lap, pm, vv, gx, SPONGE ? gy[iy] * gz[z] : 0.0f, ix);
        store_row(out + (i64)z * plane + col, res, ix, nx, iy < ny);
    }
}
