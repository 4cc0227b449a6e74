// fused_half.cu: the fused step with f16 storage (`run.precision = "f16"`, docs/numerics.md, "f16 storage").
// p^n, the increment d^n = p^n - p^{n-1} and c^2 dt^2 are stored as f16 and every operation is
// f32, in the CPU reference's order (src/backend/cpu_half.rs), so both give the same bits. A step
// reads p^n (with its face halos), d^n and c^2 dt^2, and writes d^{n+1} over d^n and
// p^{n+1} = p^n + d^{n+1} into the other p buffer: 10 bytes a point against f32's 16. d^n is read
// and written at the thread's own points only, so it is updated in place; p^{n+1} needs its own
// buffer because neighbouring blocks still read p^n.
// The blocking is fused.cu's register-prefetch path with one row a thread: each block's xy tile
// marches in z, each thread holding its column's 2R + 1 planes in a register queue (one plane
// fetched ahead), and the plane's tile with its x and y halos sits in shared memory as f32,
// converted once on load. The CPML layers, the source and the free surface are cpml.cu's,
// sources.cu's and free_surface.cu's *_half kernels.

#if HALF
namespace fused_half {
constexpr int R = RADIUS;
constexpr int FX = BLOCK_X;
constexpr int FY = BLOCK_Y;              // threads in y
constexpr int RY = ROWS;                 // rows per thread
constexpr int TY = FY * RY;              // interior rows of the tile
constexpr int HV = (R + VEC - 1) / VEC;  // halo vectors on each side in x
constexpr int TWV = FX + 2 * HV;         // tile row, in vectors
constexpr int TH = TY + 2 * R;           // tile rows
constexpr int QN = 2 * R + 1;            // z stencil planes
// Without the ring (STAGES 0): planes of p^n in flight ahead of the queue, as raw f16 bits (2
// registers for 4 points).
constexpr int D = 2;
static_assert(FY >= R, "BLOCK_Y must be at least RADIUS (threads ty < R load the y halo rows)");
static_assert(TY * 2 * HV <= FX * FY, "too few threads to load the x halo");
static_assert(RY == 1 || STAGES > 0, "ROWS > 1 needs STAGES > 0");
}  // namespace fused_half

// Asynchronous copies of VEC halves global -> shared (cp.async of 8, 4 or 2 bytes; zero-filled,
// without a memory access, where `read` is false). HIP: plain copies.
#if SEISMIC_HIP
DEVICE void cp_async_half(HalfBits* s, const h16* g, bool read) {
    *s = read ? *reinterpret_cast<const HalfBits*>(g) : HalfBits();
}
// The ring's slot addresses: SharedVf's reason (prelude.h).
DEVICE HalfBits* half_slot_at(HalfBits* b, int n) { return b + n; }
#else
// `s` a 32-bit shared-window address (prelude.h, SharedVf).
DEVICE void cp_async_half(unsigned s, const h16* g, bool read) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(s), "l"(g), "n"(2 * VEC), "r"(read ? 2 * VEC : 0)
                 : "memory");
}
DEVICE unsigned half_slot_at(unsigned b, int n) { return b + (unsigned)(n * sizeof(HalfBits)); }
#endif

// The raw bits of VEC values, zero (without a memory access) where `read` is false.
DEVICE HalfBits bits_if(const h16* p, bool read) {
    if (read) return load_bits(p);
    HalfBits z;
    z = HalfBits();
    return z;
}

// d^{n+1} before rounding, from p^n, L p, d^n, c^2 dt^2 and the sponge factor g
// (cpu_half.rs, interior_plane): without a sponge d^n + c^2 dt^2 L p.
DEVICE float increment(float p, float lap, float d, float vv, float g) {
#if SPONGE
    return g * (2.0f * p - g * (p - d) + vv * lap) - p;
#else
    (void)p;
    (void)g;
    return d + vv * lap;
#endif
}

// Every load is kept as raw bits until the iteration that uses it and converted there: a
// conversion right after a load would wait for the data (measured: 3x slower than f32, at 19% of
// the 3R1W bound). With STAGES > 0 the leading plane of p^n, d^n and c^2 dt^2 come STAGES planes
// ahead through cp.async into a shared-memory ring (a register queue that deep spills); without,
// p^n's planes come HALF_DEPTH planes ahead in registers. The halos come one plane ahead in
// registers. The z queue too holds raw bits: as f32 values it took 162 registers at R = 4 with two
// rows a thread (2 blocks of 192 threads a multiprocessor, 19% occupancy).
extern "C" __global__ LAUNCH_BOUNDS(BLOCK_X * BLOCK_Y) void fused_step_half(
    const h16* RESTRICT cur, h16* RESTRICT inc, h16* RESTRICT next, const h16* RESTRICT vel, const float* RESTRICT gx,
    const float* RESTRICT gy, const float* RESTRICT gz, StencilWeights w, int nx, int ny, int nz, i64 pitch, i64 plane,
    int window) {
    using namespace fused_half;
    __shared__ Vf tile[2][TH][TWV];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int lt = ty * FX + tx;
    const Chunk ch = block_chunk(window, ny, nz, TY);
    if (!ch.owns) return;  // the whole block, before any barrier
    const int nsteps = ch.nsteps, dz = ch.dz, zfirst = ch.zfirst;
    const int ix = (ch.tile_x * FX + tx) * VEC;
    const int rowb = ch.tile_y * TY;  // first grid row of the tile
    const int iy = rowb + ty * RY;    // the thread's first row; its rows are iy .. iy + RY - 1
    const i64 col = (i64)iy * pitch + ix;
    // Threads ty < R also fetch tile rows ty (grid row rowb + ty - R) and ty + TY + R (grid row
    // rowb + TY + ty); the first TY * 2 * HV threads one x halo vector each, of the interior rows.
    const bool yhalo = ty < R;
    const i64 col_ylo = col - (i64)(ty * (RY - 1) + R) * pitch;
    const i64 col_yhi = col + (i64)(TY - ty * (RY - 1)) * pitch;
    const bool xhalo = lt < TY * 2 * HV;
    const int xrow = lt / (2 * HV) + R;
    const int xside = lt % (2 * HV);
    const int xcolv = xside < HV ? xside : FX + xside;
    const int xhalo_x = (ch.tile_x * FX - HV + xcolv) * VEC;
    const i64 col_x = (i64)(rowb + xrow - R) * pitch + xhalo_x;
    // Which of these lie in the grid (prelude.h, vload_if): the rest is zero and is not read.
    const bool col_in = ix < nx;
    bool row_in[RY];
#pragma unroll
    for (int r = 0; r < RY; r++) row_in[r] = col_in && iy + r < ny;
    const bool ylo_in = col_in && rowb + ty - R >= 0;
    const bool yhi_in = col_in && rowb + TY + ty < ny;
    const bool xhalo_in = rowb + xrow - R < ny && vec_in_x(xhalo_x, nx);
    // p^n at plane zp of the thread's row r, where the field has it (the halo reaches R past the grid).
    auto column = [&](int zp, int r) {
        return bits_if(cur + (i64)zp * plane + col + (i64)r * pitch, row_in[r] && zp >= -R && zp < nz + R);
    };

    // qb[r][0..2R]: planes z - dz R .. z + dz R of row r in the current iteration, as raw bits
    // (half the registers of f32 values; each is converted where the stencil reads it).
    HalfBits qb[RY][QN];
#pragma unroll
    for (int r = 0; r < RY; r++)
#pragma unroll
        for (int i = 1; i < QN; i++) qb[r][i] = column(zfirst + dz * (i - 1 - R), r);
#if STAGES > 0
    // ring[slot][field][row][thread], field 0: plane z + dz R of p^n, 1: d^n, 2: c^2 dt^2 of plane
    // z; step s of the march uses slot s % SLOTS. Each thread reads back only what it copied.
    extern __shared__ HalfBits hring[];
    constexpr int SLOTS = STAGES + 1;
    // Entries from the ring's start to the thread's: read through slot, copied into through slot_s.
    auto slot_at = [&](int s, int field, int r) { return (((s % SLOTS) * 3 + field) * RY + r) * (FX * FY) + lt; };
    auto slot = [&](int s, int field, int r) { return hring + slot_at(s, field, r); };
#if SEISMIC_HIP
    HalfBits* const hring_s = hring;
#else
    const unsigned hring_s = smem_addr(hring);
#endif
    auto slot_s = [&](int s, int field, int r) { return half_slot_at(hring_s, slot_at(s, field, r)); };
    auto issue = [&](int s) {
        if (s < nsteps) {
            const int zz = zfirst + dz * s, zp = zz + dz * R;
#pragma unroll
            for (int r = 0; r < RY; r++) {
                const i64 c = col + (i64)r * pitch;
                cp_async_half(slot_s(s, 0, r), cur + (i64)zp * plane + c, row_in[r] && zp >= -R && zp < nz + R);
                cp_async_half(slot_s(s, 1, r), inc + (i64)zz * plane + c, row_in[r]);
                cp_async_half(slot_s(s, 2, r), vel + (i64)zz * plane + c, row_in[r]);
            }
        }
        cp_async_commit();  // one group per plane, empty past the window, so the count stays right
    };
#pragma unroll
    for (int i = 0; i < STAGES; i++) issue(i);
#else
    // ahead[i]: plane z + dz (R + 1 + i), in flight (one row a thread).
    HalfBits ahead[D];
#pragma unroll
    for (int i = 0; i < D; i++) ahead[i] = column(zfirst + dz * (R + i), 0);
    HalfBits nd = bits_if(inc + (i64)zfirst * plane + col, row_in[0]);
    HalfBits nvv = bits_if(vel + (i64)zfirst * plane + col, row_in[0]);
#endif
    HalfBits nylo, nyhi, nxh;
    auto fetch_halos = [&](int zz) {
        const i64 pf = (i64)zz * plane;
        if (yhalo) {
            nylo = bits_if(cur + pf + col_ylo, ylo_in);
            nyhi = bits_if(cur + pf + col_yhi, yhi_in);
        }
        if (xhalo) nxh = bits_if(cur + pf + col_x, xhalo_in);
    };
    fetch_halos(zfirst);

    SEISMIC_UNROLL(UNROLL_Z)
    for (int s = 0; s < nsteps; s++) {
        const int z = zfirst + dz * s;
#pragma unroll
        for (int r = 0; r < RY; r++)
#pragma unroll
            for (int i = 0; i < QN - 1; i++) qb[r][i] = qb[r][i + 1];
#if STAGES > 0
        issue(s + STAGES);
        CP_ASYNC_WAIT(STAGES);  // this plane's group has landed
#pragma unroll
        for (int r = 0; r < RY; r++) qb[r][QN - 1] = *slot(s, 0, r);
#else
        qb[0][QN - 1] = ahead[0];
#pragma unroll
        for (int i = 0; i < D - 1; i++) ahead[i] = ahead[i + 1];
        ahead[D - 1] = column(z + dz * (R + D), 0);
        const HalfBits db = nd, vb = nvv;
#endif
        const int b = s & 1;
#pragma unroll
        for (int r = 0; r < RY; r++) tile[b][ty * RY + r + R][tx + HV] = unpack(qb[r][R]);
        if (yhalo) {
            tile[b][ty][tx + HV] = unpack(nylo);
            tile[b][ty + TY + R][tx + HV] = unpack(nyhi);
        }
        if (xhalo) tile[b][xrow][xcolv] = unpack(nxh);
        // The next plane's data now; it is not needed before the next barrier.
        if (s + 1 < nsteps) {
            fetch_halos(z + dz);
#if STAGES == 0
            const i64 pn = (i64)(z + dz) * plane + col;
            nd = bits_if(inc + pn, row_in[0]);
            nvv = bits_if(vel + pn, row_in[0]);
#endif
        }
        BLOCK_SYNC();

        // One row takes the x centre from the tile; several from the queue (fused.cu's choice).
        Vf q[RY][QN];
#pragma unroll
        for (int r = 0; r < RY; r++)
#pragma unroll
            for (int i = 0; i < QN; i++) q[r][i] = unpack(qb[r][i]);
        float lap[RY][VEC];
        laplacian_rows<R, RY, HV, TWV, QN, (RY > 1)>(lap, q, tile[b] + ty * RY, tx, w);
#pragma unroll
        for (int r = 0; r < RY; r++) {
            if (!row_in[r]) continue;
#if STAGES > 0
            // Read after the stencil; the slot stays valid until the next iteration's issue.
            const HalfBits db = *slot(s, 1, r), vb = *slot(s, 2, r);
#endif
            const Vf d = unpack(db), vv = unpack(vb);
            const float gyz = SPONGE ? gy[iy + r] * gz[z] : 0.0f;
            h16 dn[VEC], pn[VEC];
#pragma unroll
            for (int j = 0; j < VEC; j++) {
                const float p = q[r][R].v[j];
                dn[j] = f2h(increment(p, lap[r][j], d.v[j], vv.v[j], SPONGE ? gx[ix + j] * gyz : 1.0f));
                pn[j] = f2h(p + h2f(dn[j]));
            }
            const i64 o = (i64)z * plane + col + (i64)r * pitch;
            if (ix + VEC <= nx) {
                vstore_bits(inc + o, dn);
                vstore_bits(next + o, pn);
            } else {
                // Points past the row's end are the next step's halo and stay zero.
#pragma unroll
                for (int j = 0; j < VEC; j++)
                    if (ix + j < nx) {
                        inc[o + j] = dn[j];
                        next[o + j] = pn[j];
                    }
            }
        }
    }
}
#endif
