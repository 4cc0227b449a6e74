// fused_ring.cu: the fused step of fused.cu with the whole xy tile of p^n, halos included, arriving
// through asynchronous copies (Tuning::tile_ring = 1). Same 2.5D blocking, same register queue in z,
// same operation order per point (so the same bits); what changes is how the tile gets to shared
// memory:
// - fused.cu: each thread writes its own rows' centre plane from its queue and a few threads copy
//   the halo rows and vectors through registers, fetched one plane ahead; a plane whose halo loads
//   are slow holds the whole block at the barrier;
// - here: the block copies the tile of plane z+R+STAGES with cp.async while it computes plane z,
//   into a ring of R+STAGES+1 tiles (plane z's tile for x and y, plane z+R's for the queue's
//   leading plane), so halo loads get R+STAGES planes of time and no registers.
// One barrier per plane: after it, every thread's copies for this plane have landed and nobody
// still reads the slot the next copies overwrite. Needs the asynchronous copies (STAGES >= 1) and
// VEC = 4; on HIP cp_async16 is a plain copy and this path is never the default there.


namespace fused_ring {
constexpr int R = RADIUS;
constexpr int FX = BLOCK_X;
constexpr int FY = BLOCK_Y;
constexpr int RY = ROWS;
constexpr int TY = FY * RY;
constexpr int HV = (R + VEC - 1) / VEC;
constexpr int TWV = FX + 2 * HV;
constexpr int TH = TY + 2 * R;
constexpr int QN = 2 * R + 1;
constexpr int TILES = R + STAGES + 1;  // tiles of p^n in the ring: planes z .. z+R+STAGES
constexpr int TILE = TH * TWV;         // vectors per tile
constexpr int PV = 2 * RY * FX * FY;   // vectors of p^{n-1} and c^2 dt^2 per slot
static_assert(STAGES >= 1, "the tile ring needs asynchronous copies (STAGES >= 1)");
static_assert(VEC == 4, "the tile ring copies 16-byte vectors");
static_assert(RY >= 1 && RY <= 4, "ROWS must be 1..4");
}  // namespace fused_ring

extern "C" __global__ LAUNCH_BOUNDS(BLOCK_X * BLOCK_Y) void fused_step(FUSED_STEP_PARAMS) {
    using namespace fused_ring;
    // ring: TILES tiles [TH][TWV], then STAGES + 1 slots of [field][row][thread] for p^{n-1} and
    // c^2 dt^2 of the output plane.
    extern __shared__ Vf ring[];
    Vf* const pv_ring = ring + TILES * TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int lt = ty * FX + tx;
    const Chunk ch = block_chunk(window, ny, nz, TY);
    if (!ch.owns) return;
    const int tile_x = ch.tile_x, nsteps = ch.nsteps, dz = ch.dz, zfirst = ch.zfirst;
    const int ix = (tile_x * FX + tx) * VEC;
    const int rowb = ch.tile_y * TY;
    const int iy = rowb + ty * RY;
    const i64 col = (i64)iy * pitch + ix;
    // The tile's first vector (row -R, vector -HV) in the field.
    const i64 tile0 = (i64)(rowb - R) * pitch + (tile_x * FX - HV) * VEC;
    bool row_in[RY];  // the thread's rows that lie in the grid (the rest is zero and is not read)
#pragma unroll
    for (int r = 0; r < RY; r++) row_in[r] = ix < nx && iy + r < ny;

    auto tile_at = [&](int k) -> Vf* { return ring + (k % TILES) * TILE; };  // tile of step k
    // The tile of step k: plane zfirst + dz * k, which may lie in the z halo (|dz * k| <= R past an
    // end) but never beyond it.
    auto copy_tile = [&](int k) {
        const int zz = zfirst + dz * k;
        if (k - R < nsteps) {
            Vf* t = tile_at(k);
            const float* src = cur + (i64)zz * plane + tile0;
            for (int i = lt; i < TILE; i += FX * FY) {
                const int row = i / TWV, v = i - row * TWV;
                const int gy = rowb - R + row;  // outside the grid: zero, not read (prelude.h)
                const bool in = gy >= 0 && gy < ny && vec_in_x((tile_x * FX - HV + v) * VEC, nx);
                cp_async16_cur(t + i, src + (i64)row * pitch + v * VEC, in);
            }
        }
    };
    auto copy_pv = [&](int s) {
#if !LAPLACIAN_ONLY
        if (s < nsteps) {
            const i64 o = (i64)(zfirst + dz * s) * plane;
            Vf* slot = pv_ring + (s % (STAGES + 1)) * PV;
#pragma unroll
            for (int r = 0; r < RY; r++) {
                const i64 c = col + (i64)r * pitch;
                cp_async16_once(slot + r * FX * FY + lt, out + o + c, row_in[r]);
                cp_async16_once(slot + (RY + r) * FX * FY + lt, vel + o + c, row_in[r]);
            }
        }
#endif
    };
    // Step s's group holds the tile of step s + R (the queue's leading plane) and p^{n-1}, c^2 dt^2
    // of step s; the tiles of steps 0 .. R-1 come in the first group.
    for (int k = 0; k < R; k++) copy_tile(k);
    cp_async_commit();
#pragma unroll
    for (int i = 0; i < STAGES; i++) {
        copy_tile(i + R);
        copy_pv(i);
        cp_async_commit();
    }
    // The queue: planes z-dz*R .. z+dz*R; the first 2R straight from global memory.
    Vf q[RY][QN];
#pragma unroll
    for (int r = 0; r < RY; r++)
#pragma unroll
        for (int i = 1; i < QN; i++) {
            const int zp = zfirst + dz * (i - 1 - R);
            if (zp >= -R && zp < nz + R) q[r][i] = vload_if(cur + (i64)zp * plane + col + (i64)r * pitch, row_in[r]);
        }

    SEISMIC_UNROLL(UNROLL_Z)
    for (int s = 0; s < nsteps; s++) {
        const int z = zfirst + dz * s;
        CP_ASYNC_WAIT(STAGES - 1);  // this thread's copies for step s have landed
        BLOCK_SYNC();               // everybody's have, and step s-1's tile and slot are free
        copy_tile(s + R + STAGES);
        copy_pv(s + STAGES);
        cp_async_commit();

        const Vf(*tile)[TWV] = reinterpret_cast<const Vf(*)[TWV]>(tile_at(s));
        const Vf(*lead)[TWV] = reinterpret_cast<const Vf(*)[TWV]>(tile_at(s + R));
#pragma unroll
        for (int r = 0; r < RY; r++) {
#pragma unroll
            for (int i = 0; i < QN - 1; i++) q[r][i] = q[r][i + 1];
            q[r][QN - 1] = lead[ty * RY + r + R][tx + HV];
        }

        float lap[RY][VEC];
        laplacian_rows<R, RY, HV, TWV, QN, true>(lap, q, tile + ty * RY, tx, w);

#if !LAPLACIAN_ONLY
        const Vf* pv = pv_ring + (s % (STAGES + 1)) * PV;
#endif
#pragma unroll
        for (int r = 0; r < RY; r++) {
#if LAPLACIAN_ONLY
            const Vf &pm = q[r][R], &vv = q[r][R];  // unused
#else
            const Vf pm = pv[r * FX * FY + lt];
            const Vf vv = pv[(RY + r) * FX * FY + lt];
#endif
            update_row(out + (i64)z * plane + col + (i64)r * pitch, q[r][R], lap[r], pm, vv, gx,
                       SPONGE ? gy[iy + r] * gz[z] : 0.0f, ix, nx, iy + r < ny);
        }
    }
}
