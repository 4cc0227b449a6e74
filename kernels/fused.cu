// fused.cu: one pass over the grid per time step. Each block owns an xy tile (BLOCK_X threads x
// VEC points in x, BLOCK_Y rows in y) and marches in z over `window` planes (2.5D blocking):
// - z neighbours: each thread keeps its column of 2R+1 planes in a register queue; the plane z+R+1
//   is fetched DEPTH iterations ahead, so its latency hides behind whole planes of work;
// - y and x neighbours: the current plane's tile, with R halo rows and ceil(R/VEC) halo vectors on
//   each side, sits in shared memory (double-buffered: one barrier per plane); with HALO_RING the
//   halos come through the asynchronous ring as early as the interior (fetched one plane ahead
//   they stalled the Laplacian-only operator, whose planes are short: 77% -> 88% of copy);
// - the leapfrog update (and the sponge factor) is applied in registers and p^{n+1} is written over
//   p^{n-1} with streaming stores. Reads may overhang the grid (the allocation has slack); writes
//   never do.
// With LAPLACIAN_ONLY the kernel writes out = L p instead (the operator benchmark).
// With ROWS > 1 each thread owns ROWS consecutive rows (register blocking in y): the tile is
// BLOCK_Y * ROWS rows tall, so the 2R y-halo rows are a smaller share of it, and a row's y
// neighbours inside the thread's own rows come from its registers instead of shared memory.
// ORDER (the grid-index order, seed 002's knob for the last-level cache): 0, every z-chunk marches
// up; 1, odd chunks march down, so two chunks that share a boundary read its 2R halo planes at the
// same moment (both at their start, or both at their end), meant to let the second read hit L2
// (no gain measured on an H200); 2, as 1 with blockIdx.x running over y tiles (tile columns before
// tile rows); 3, banded (seed 002's subdomains, the default): gridDim.y tile rows form a band,
// blockIdx.z runs over the z-chunks of a band before the next band, so a tile's consecutive chunks
// run close in time and the planes one primes with are still in L2 from the other (1024^3, R = 4:
// 81% -> 84% of 3R1W).
// Marching down only swaps the two operands of each z term's addition, which is exact.

// p^{n-1} and c^2 dt^2, read once, are loaded with the evict-first hint.
#define LOAD_ONCE(p) vload_once(p)
#define LOAD_ONCE_IF(p, read) ((read) ? LOAD_ONCE(p) : vzero())  // zeros outside the grid, unread

// STAGES > 0: the leading plane of p^n, p^{n-1} and c^2 dt^2 come STAGES planes ahead through
// cp.async into a shared-memory ring (dynamic shared memory); HALO_RING 1: the y and x halos of p^n
// through the ring too (else registers, one plane ahead). STAGES 0: the plane of p^n is fetched
// into registers one iteration ahead of its first use in the z queue (DEPTH), and p^{n-1} and
// c^2 dt^2 one plane ahead (PREFETCH_PV).
#if HALO_RING && STAGES == 0
#error "HALO_RING needs STAGES > 0"
#endif
#if STAGES > 0
#define DEPTH 0
#define PREFETCH_PV 0
#else
#define DEPTH 1
#define PREFETCH_PV 1
#endif

// UNROLL_Z: z iterations unrolled (QN lets the compiler rename the queue instead of moving it).

namespace fused {
constexpr int R = RADIUS;
constexpr int FX = BLOCK_X;
constexpr int FY = BLOCK_Y;               // threads in y
constexpr int RY = ROWS;                  // rows per thread
constexpr int TY = FY * RY;               // interior rows of the tile
constexpr int HV = (R + VEC - 1) / VEC;  // halo vectors on each side in x
constexpr int TWV = FX + 2 * HV;         // tile row, in vectors
constexpr int TH = TY + 2 * R;           // tile rows
constexpr int QN = 2 * R + 1;            // z stencil planes
constexpr int QS = QN + DEPTH;           // z queue length, planes in flight included
static_assert(FY >= R, "BLOCK_Y must be at least RADIUS (threads ty < R load the y halo rows)");
static_assert(RY >= 1 && RY <= 4, "ROWS must be 1..4");
static_assert(TY * 2 * HV <= FX * FY, "too few threads to load the x halo");
// Vectors of dynamic shared memory before fused_step_layers's phi tile (2 TH FX vectors): the ring
// (Tuning::dynamic_shared_bytes and Tuning::layer_tile_bytes on the host).
#if STAGES > 0
constexpr int LAYER_TILE_OFFSET = (STAGES + 1) * ((LAPLACIAN_ONLY ? 1 : 3) * RY * FX * FY +
                                                   HALO_RING * (2 * R * FX + TY * 2 * HV));
#else
constexpr int LAYER_TILE_OFFSET = 0;
#endif
}  // namespace fused

// LAYERS: 1, the CPML layer points of the block get layers.h's update in the same pass (the
// fused_step_layers kernel); 2, its y-layer rows only (fused_step_ylayers, cpml.cu adds the x and z
// layers after the pass); 4, a launch whose planes all lie in one z layer (fused_step_zlayers, the
// y mode's gap on the z layers' planes): every point's z update in the pass, phi along z in a
// register queue beside p^n's, its leading plane and zeta through the fields' ring, so a z-layer
// point is read and written once a step. L.select picks the blocks a launch computes (prelude.h,
// Chunk).
template <int LAYERS>
DEVICE void fused_body(FUSED_STEP_PARAMS) {
    using namespace fused;
    __shared__ Vf tile[2][TH][TWV];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int lt = ty * FX + tx;
    Chunk ch = block_chunk(window, ny, nz, TY);
    if (L.select >= 3) ch.owns = ch.owns && band_tile(ch, TY, ny, L);
    if (!ch.owns || !selected(ch, FX * VEC, TY, nx, ny, nz, L)) return;  // the whole block, before any barrier
    const int tile_x = ch.tile_x, nsteps = ch.nsteps, dz = ch.dz, zfirst = ch.zfirst;
    const int ix = (tile_x * FX + tx) * VEC;
    const int rowb = ch.row0;  // first grid row of the tile
    const int iy = rowb + ty * RY;    // the thread's first row; its rows are iy .. iy + RY - 1
    const i64 col = (i64)iy * pitch + ix;
    // Threads ty < R also fetch tile rows ty (grid row rowb + ty - R) and ty + TY + R (grid row
    // rowb + TY + ty).
    const bool yhalo = ty < R;
    const i64 col_ylo = col - (i64)(ty * (RY - 1) + R) * pitch;
    const i64 col_yhi = col + (i64)(TY - ty * (RY - 1)) * pitch;
    // The first TY * 2 * HV threads fetch one halo vector each: left side tile columns 0..HV-1,
    // right side FX+HV..FX+2HV-1, of the interior rows only (the star stencil never reads a corner).
    const bool xhalo = lt < TY * 2 * HV;
    const int xrow = lt / (2 * HV) + R;
    const int xside = lt % (2 * HV);
    const int xcolv = xside < HV ? xside : FX + xside;
    const i64 col_x = (i64)(rowb + xrow - R) * pitch + (tile_x * FX - HV + xcolv) * VEC;
    // Which of these lie in the grid (prelude.h, vload_if): the rest is zero and is not read.
    const bool col_in = ix < nx;
    bool row_in[RY];
#pragma unroll
    for (int r = 0; r < RY; r++) row_in[r] = col_in && iy + r < ny;
    // fused_step_ylayers stores band rows only (its tiles may reach into the gap); fused_step's
    // under select 3 tile the gap exactly (band_tile).
    bool row_stored[RY];
#pragma unroll
    for (int r = 0; r < RY; r++) row_stored[r] = iy + r < ny && (LAYERS != 2 || band_row(iy + r, L));
    const bool ylo_in = col_in && rowb + ty - R >= 0;
    const bool yhi_in = col_in && rowb + TY + ty < ny;
    const bool xhalo_in = rowb + xrow - R < ny && vec_in_x((tile_x * FX - HV + xcolv) * VEC, nx);
    // The y layers (layers.h) of a block that has some: phi of the tile's rows (no x halo) through
    // shared memory, after the fields' ring. fused_step_layers (LAYERS 1) double-buffers one tile
    // and fetches each row's phi and zeta into registers a plane ahead; fused_step_ylayers
    // (LAYERS 2) brings them through a ring of its own STAGES planes ahead, in the fields' copy
    // groups, which holds no registers. Overlapping layers (ny < 2 width) keep the direct loads.
    const int lw = (LAYERS == 1 || LAYERS == 2) ? L.width : 0;
    // fused_step_zlayers: the z layer (low 0, high 1) of the launch's planes and the layer index of
    // its first plane (launch plane zz has index zt0 + zz); the slab index of the thread's rows in a
    // slab plane.
    int zhalf = 0, zt0 = 0;
    i64 zrow_at[RY];
    if constexpr (LAYERS == 4) {
        zhalf = layer_of(L.z_offset, L.nz, L.width, L.low[2] != 0, L.high[2] != 0, zt0);
#pragma unroll
        for (int r = 0; r < RY; r++) zrow_at[r] = (i64)(iy + r) * nx + ix;
    }
    const i64 zslab_plane = (i64)nx * ny;
    // The slab index of launch plane zz's first point of row r.
    auto zslab = [&](int zz, int r) { return (i64)(zhalf * L.width + zt0 + zz) * zslab_plane + zrow_at[r]; };
    const bool ytile = LAYERS && lw > 0 && ny >= 2 * lw && nx % VEC == 0 &&
                       ((L.low[1] && rowb < lw) || (L.high[1] && rowb + TY > ny - lw));
    extern __shared__ Vf layer_shared[];
    Vf* const phi_tile = layer_shared + LAYER_TILE_OFFSET;
    // The slab index of grid row y of plane zz in the y layers; `in`: a layer row, in the grid.
    auto yslab = [&](int zz, int y, bool& in) {
        int t;
        const int half = layer_of(y, ny, lw, L.low[1] != 0, L.high[1] != 0, t);
        in = half >= 0 && col_in;
        return in ? ((i64)(zz + L.z_offset) * (2 * lw) + half * lw + t) * nx + ix : 0;
    };
    // fused_step_ylayers's ring: per slot phi of the TH tile rows, then zeta of the TY thread rows,
    // FX vectors a row. STAGES + 2 slots: issue(s + STAGES) at iteration s refills the slot read at
    // iteration s - 2, which every thread has left (it passed iteration s - 1's barrier), while
    // the other threads may still read their neighbours' phi of iteration s - 1.
    constexpr int YSLOTS = STAGES + 2;
    constexpr int YSLOT = (TH + TY) * FX;
    // Vectors from the tile's start to step s's slot: read through yslot, copied into through
    // phi_tile_s (SharedVf).
    auto yslot_at = [&](int s) { return (s % YSLOTS) * YSLOT; };
    auto yslot = [&](int s) -> Vf* { return phi_tile + yslot_at(s); };
    const SharedVf phi_tile_s = shared_vf(phi_tile);
    // The slab indices of the rows the thread copies at the launch's plane 0 (yslab's), so that a
    // copy adds only the plane's term.
    bool yrow_in[RY], yslab_lo_in = false, yslab_hi_in = false;
    i64 yrow_at[RY], ylo_at = 0, yhi_at = 0;
    if constexpr (LAYERS == 2) {
#pragma unroll
        for (int r = 0; r < RY; r++) yrow_at[r] = yslab(0, iy + r, yrow_in[r]);
        if (yhalo) {
            ylo_at = yslab(0, rowb + ty - R, yslab_lo_in);
            yhi_at = yslab(0, rowb + TY + ty, yslab_hi_in);
        }
    }
    auto issue_ylayers = [&](int s, int zz) {
        const i64 zo = (i64)zz * (2 * lw) * nx;
        const float* RESTRICT phi = L.phi_in[1] + zo;
        const float* RESTRICT zeta = L.zeta[1] + zo;
        const SharedVf ys = shared_at(phi_tile_s, yslot_at(s) + tx);
#pragma unroll
        for (int r = 0; r < RY; r++) {
            cp_async16(shared_at(ys, (ty * RY + r + R) * FX), phi + yrow_at[r], yrow_in[r]);
            cp_async16(shared_at(ys, (TH + ty * RY + r) * FX), zeta + yrow_at[r], yrow_in[r]);
        }
        if (yhalo) {
            cp_async16(shared_at(ys, ty * FX), phi + ylo_at, yslab_lo_in);
            cp_async16(shared_at(ys, (ty + TY + R) * FX), phi + yhi_at, yslab_hi_in);
        }
    };
    // fused_step_ylayers's coefficients of the tile's rows (RowAB), reread from shared memory every
    // plane instead of held in registers.
    __shared__ float yab[LAYERS == 2 ? ROW_WEIGHT_FIELDS<R> * TY : 1];
    if constexpr (LAYERS == 2) {
        if (ytile && lt < TY && rowb + lt < ny) row_weights<R>(yab + lt, TY, L.a[1], L.b[1], L.w[1].c2, rowb + lt, ny);
    }

#if STAGES > 0
    static_assert(VEC == 4, "the asynchronous path copies 16-byte vectors");
    // ring[slot][field][row][thread], field 0: plane z+R (z-R marching down) of p^n, 1: p^{n-1},
    // 2: c^2 dt^2 of plane z (fields 1 and 2 not with LAPLACIAN_ONLY); step s of the march uses
    // slot s % SLOTS.
    extern __shared__ Vf ring[];
    constexpr int SLOTS = STAGES + 1;
    // fused_step_zlayers adds field 3, zeta of plane z, and 4, phi of plane z+R (z-R marching down).
    constexpr int FIELDS = LAPLACIAN_ONLY ? 1 : (LAYERS == 4 ? 5 : 3);
    // Vectors from the ring's start to the thread's entry: read through slot, copied into through
    // slot_s (SharedVf).
    auto slot_at = [&](int s, int field, int r) { return (((s % SLOTS) * FIELDS + field) * RY + r) * (FX * FY) + lt; };
    auto slot = [&](int s, int field, int r) -> Vf* { return ring + slot_at(s, field, r); };
    const SharedVf ring_s = shared_vf(ring);
    auto slot_s = [&](int s, int field, int r) { return shared_at(ring_s, slot_at(s, field, r)); };
#if HALO_RING
    // After the SLOTS * FIELDS * RY * FX * FY vectors of the fields, per slot: the y halo rows
    // below (threads ty < R), above (the same threads) and the x halo vectors (threads lt < TY * 2 * HV)
    // of plane z, so that they too arrive STAGES planes ahead.
    constexpr int HALO_VECS = 2 * R * FX + TY * 2 * HV;
    Vf* const halo_ring = ring + SLOTS * FIELDS * RY * (FX * FY);
    auto halo_slot_at = [&](int s) { return (s % SLOTS) * HALO_VECS; };
    auto halo_slot = [&](int s) -> Vf* { return halo_ring + halo_slot_at(s); };
    const SharedVf halo_ring_s = shared_vf(halo_ring);
#endif
    // The copies' sources at the march's first plane; `issue_at`, the byte offset of the plane
    // issue(s) copies, advances by one plane of the march a call (issue is called for s = 0, 1,
    // ...), so that a source address is one 64-bit add, not a 64-bit multiply-add chain a copy.
    const char* src_cur[RY];
    const char* src_out[RY];
    const char* src_vel[RY];
#pragma unroll
    for (int r = 0; r < RY; r++) {
        const i64 c = col + (i64)r * pitch;
        src_cur[r] = reinterpret_cast<const char*>(cur + (i64)dz * R * plane + c);
        src_out[r] = reinterpret_cast<const char*>(out + c);
        src_vel[r] = reinterpret_cast<const char*>(vel + c);
    }
#if HALO_RING
    const char* src_ylo = reinterpret_cast<const char*>(cur + col_ylo);
    const char* src_yhi = reinterpret_cast<const char*>(cur + col_yhi);
    const char* src_x = reinterpret_cast<const char*>(cur + col_x);
#endif
    auto at = [](const char* p, i64 bytes) { return reinterpret_cast<const float*>(p + bytes); };
    const i64 march_step = (i64)dz * plane * (i64)sizeof(float);
    i64 issue_at = (i64)zfirst * plane * (i64)sizeof(float);
    auto issue = [&](int s) {
        if (s < nsteps) {
            const int zz = zfirst + dz * s;
            const i64 pz = issue_at;
#if HALO_RING
            const SharedVf h = shared_at(halo_ring_s, halo_slot_at(s) + lt);
            if (yhalo) {
                cp_async16(h, at(src_ylo, pz), ylo_in);
                cp_async16(shared_at(h, R * FX), at(src_yhi, pz), yhi_in);
            }
            if (xhalo) cp_async16(shared_at(h, 2 * R * FX), at(src_x, pz), xhalo_in);
#endif
#pragma unroll
            for (int r = 0; r < RY; r++) {
                cp_async16_cur(slot_s(s, 0, r), at(src_cur[r], pz), row_in[r]);
#if !LAPLACIAN_ONLY
                cp_async16_once(slot_s(s, 1, r), at(src_out[r], pz), row_in[r]);
                cp_async16_once(slot_s(s, 2, r), at(src_vel[r], pz), row_in[r]);
#endif
            }
            if constexpr (LAYERS == 2) {
                if (ytile) issue_ylayers(s, zz);
            }
            if constexpr (LAYERS == 4) {
                const int lead = zt0 + zz + dz * R;  // phi's leading plane, read inside the layer only
#pragma unroll
                for (int r = 0; r < RY; r++) {
                    const i64 at = zslab(zz, r);
                    cp_async16_once(slot_s(s, 3, r), L.zeta[2] + at, row_in[r]);
                    cp_async16_once(slot_s(s, 4, r), L.phi_in[2] + at + dz * R * zslab_plane,
                                    row_in[r] && lead >= 0 && lead < L.width);
                }
            }
        }
        issue_at += march_step;
        cp_async_commit();  // one group per plane, empty past the window, so the count stays right
    };
#pragma unroll
    for (int i = 0; i < STAGES; i++) issue(i);
#endif
    // q[0..QN-1]: planes z-dz*R..z+dz*R of the current iteration; q[QN..QS-1]: the next DEPTH
    // planes, already in flight. Planes past the last halo plane are never needed and not loaded.
    Vf q[RY][QS];
#pragma unroll
    for (int r = 0; r < RY; r++)
#pragma unroll
        for (int i = 1; i < QS; i++) {
            const int zp = zfirst + dz * (i - 1 - R);
            if (zp >= -R && zp < nz + R) q[r][i] = vload_if(cur + (i64)zp * plane + col + (i64)r * pitch, row_in[r]);
        }
    // fused_step_zlayers: phi of planes z-dz*R .. z+dz*R (zl[r][R + k] is plane z + dz k), the
    // leading one from the ring each plane; zeros outside the layer, never read (layer_row).
    Vf zl[RY][LAYERS == 4 ? QN : 1];
    if constexpr (LAYERS == 4) {
#pragma unroll
        for (int r = 0; r < RY; r++)
#pragma unroll
            for (int i = 1; i < QN; i++) {
                const int zz = zfirst + dz * (i - 1 - R), t = zt0 + zz;
                zl[r][i] = vload_if(L.phi_in[2] + zslab(zz, r), row_in[r] && t >= 0 && t < L.width);
            }
    }
    Vf nylo, nyhi, nxh;
    // The halo rows and vectors of plane zz into registers, to be written into a tile later.
    auto fetch_halos = [&](int zz) {
        const i64 pf = (i64)zz * plane;
        if (yhalo) {
            nylo = vload_if(cur + pf + col_ylo, ylo_in);
            nyhi = vload_if(cur + pf + col_yhi, yhi_in);
        }
        if (xhalo) nxh = vload_if(cur + pf + col_x, xhalo_in);
    };
#if !HALO_RING
    fetch_halos(zfirst);
#endif
    Vf nphi[RY], nzeta[RY], zeta_now[RY], nphlo, nphhi;
    // fused_step_layers: phi and zeta of plane zz into registers.
    auto fetch_layers = [&](int zz) {
        const float* RESTRICT phi = L.phi_in[1];
        bool in;
#pragma unroll
        for (int r = 0; r < RY; r++) {
            const i64 sr = yslab(zz, iy + r, in);
            nphi[r] = vload_if(phi + sr, in);
            nzeta[r] = vload_if(L.zeta[1] + sr, in);
        }
        if (yhalo) {
            const i64 slo = yslab(zz, rowb + ty - R, in);
            nphlo = vload_if(phi + slo, in);
            const i64 shi = yslab(zz, rowb + TY + ty, in);
            nphhi = vload_if(phi + shi, in);
        }
    };
    if (LAYERS == 1 && ytile) fetch_layers(zfirst);
    static_assert(LAYERS != 2 || STAGES > 0, "fused_step_ylayers needs STAGES > 0");
    static_assert(LAYERS != 4 || STAGES > 0, "fused_step_zlayers needs STAGES > 0");
    static_assert(RY == 1 || STAGES > 0, "ROWS > 1 needs STAGES > 0");
#if PREFETCH_PV && !LAPLACIAN_ONLY
    Vf npm = LOAD_ONCE_IF(out + (i64)zfirst * plane + col, row_in[0]);
    Vf nvv = LOAD_ONCE_IF(vel + (i64)zfirst * plane + col, row_in[0]);
#endif

    // One plane of the march.
    auto plane_step = [&](int s) {
        const int z = zfirst + dz * s;
#pragma unroll
        for (int r = 0; r < RY; r++)
#pragma unroll
            for (int i = 0; i < QS - 1; i++) q[r][i] = q[r][i + 1];
#if STAGES > 0
        issue(s + STAGES);
        CP_ASYNC_WAIT(STAGES);  // this plane's group has landed
#pragma unroll
        for (int r = 0; r < RY; r++) q[r][QS - 1] = *slot(s, 0, r);
        if constexpr (LAYERS == 4) {
#pragma unroll
            for (int r = 0; r < RY; r++) {
#pragma unroll
                for (int i = 0; i < QN - 1; i++) zl[r][i] = zl[r][i + 1];
                zl[r][QN - 1] = *slot(s, 4, r);
            }
        }
#if HALO_RING
        {
            const Vf* h = halo_slot(s);
            if (yhalo) {
                nylo = h[lt];
                nyhi = h[R * FX + lt];
            }
            if (xhalo) nxh = h[2 * R * FX + lt];
        }
#endif
#else
        {
            const int zp = z + dz * (R + DEPTH);
            if (zp >= -R && zp < nz + R) q[0][QS - 1] = vload_if(cur + (i64)zp * plane + col, row_in[0]);
        }
#endif
        const int b = s & 1;
#pragma unroll
        for (int r = 0; r < RY; r++) tile[b][ty * RY + r + R][tx + HV] = q[r][R];
        if (yhalo) {
            tile[b][ty][tx + HV] = nylo;
            tile[b][ty + TY + R][tx + HV] = nyhi;
        }
        if (xhalo) tile[b][xrow][xcolv] = nxh;
        if (LAYERS == 1 && ytile) {
            Vf* const pt = phi_tile + b * TH * FX;
#pragma unroll
            for (int r = 0; r < RY; r++) {
                pt[(ty * RY + r + R) * FX + tx] = nphi[r];
                zeta_now[r] = nzeta[r];
            }
            if (yhalo) {
                pt[ty * FX + tx] = nphlo;
                pt[(ty + TY + R) * FX + tx] = nphhi;
            }
            if (s + 1 < nsteps) fetch_layers(z + dz);
        }
#if PREFETCH_PV && !LAPLACIAN_ONLY
        const Vf pm = npm;
        const Vf vv = nvv;
#endif
        // Fetch the next plane's data now; it is not needed before the next barrier.
        if (s + 1 < nsteps) {
#if !HALO_RING
            fetch_halos(z + dz);
#endif
#if PREFETCH_PV && !LAPLACIAN_ONLY
            const i64 pn = (i64)(z + dz) * plane;
            npm = LOAD_ONCE_IF(out + pn + col, row_in[0]);
            nvv = LOAD_ONCE_IF(vel + pn + col, row_in[0]);
#endif
        }
#if !PREFETCH_PV && !LAPLACIAN_ONLY && STAGES == 0
        const Vf pm = LOAD_ONCE_IF(out + (i64)z * plane + col, row_in[0]);
        const Vf vv = LOAD_ONCE_IF(vel + (i64)z * plane + col, row_in[0]);
#endif
        BLOCK_SYNC();

        // One row keeps the x centre from the tile (its measured code); several take it from the queue.
        float lap[RY][VEC];
        laplacian_rows<R, RY, HV, TWV, QS, (RY > 1)>(lap, q, tile[b] + ty * RY, tx, w);

#pragma unroll
        for (int r = 0; r < RY; r++) {
#if LAPLACIAN_ONLY
            const Vf &pm = q[r][R], &vv = q[r][R];  // unused
#elif STAGES > 0
            // Read after the stencil, not before the barrier: 8 * ROWS registers stay free during
            // it (one row at R = 8: 0.930 -> 0.788 ms at 512^3, no spill; neutral at R = 1, 4, 7).
            // The slot stays valid until the next iteration's issue.
            const Vf pm = *slot(s, 1, r);
            const Vf vv = *slot(s, 2, r);
#endif
            Vf res = leapfrog(q[r][R], lap[r], pm, vv, gx, SPONGE ? gy[iy + r] * gz[z] : 0.0f, ix);
            if constexpr (LAYERS == 1)
                add_layers<false, R, RY, HV, TWV, QS, FX>(res, r, q, tile[b] + ty * RY, tx, dz, vv, ix, iy + r, z, nx,
                                                          ny, nz, L, ytile, phi_tile + (b * TH + ty * RY) * FX,
                                                          zeta_now[r], nullptr, 0);
#if STAGES > 0
            if constexpr (LAYERS == 4) {
                if (row_in[r]) {
                    const int t = zt0 + z;
                    // q[r][R + k] and zl[r][R + k] are plane z + k marching up, z - k marching down.
                    auto nb = [&](int k, Vf& lo, Vf& hi) {
                        lo = dz > 0 ? q[r][R - k] : q[r][R + k];
                        hi = dz > 0 ? q[r][R + k] : q[r][R - k];
                    };
                    auto phi = [&](int k) { return dz > 0 ? zl[r][R + k] : zl[r][R - k]; };
                    res = layer_row<R>(res, q[r][R], nb, phi, *slot(s, 3, r), vv, L, 2, zslab(z, r), t,
                                       AxisAB{L.a[2], L.b[2], z + L.z_offset, L.nz});
                }
            }
#endif
            if constexpr (LAYERS == 2)
                add_layers<true, R, RY, HV, TWV, QS, FX>(res, r, q, tile[b] + ty * RY, tx, dz, vv, ix, iy + r, z, nx, ny,
                                                         nz, L, ytile, yslot(s) + ty * RY * FX,
                                                         yslot(s)[(TH + ty * RY + r) * FX + tx], yab + ty * RY, TY);
            store_row(out + (i64)z * plane + col + (i64)r * pitch, res, ix, nx, row_stored[r]);
        }
    };
    SEISMIC_UNROLL(UNROLL_Z)
    for (int s = 0; s < nsteps; s++) plane_step(s);
}

extern "C" __global__ LAUNCH_BOUNDS(BLOCK_X * BLOCK_Y) void fused_step(FUSED_STEP_PARAMS) {
    fused_body<0>(FUSED_STEP_ARGS);
}
#if YLAYERS
// The tiles that hold y-layer rows (L.select 4; fused_step takes the others with select 3), with a
// register cap of one block a multiprocessor (167 registers at R = 4; a lower cap spills): its
// blocks of 16 x 8 threads (Tuning::for_ylayers) still run three a multiprocessor.
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(BLOCK_X * BLOCK_Y, 1) void fused_step_ylayers(FUSED_STEP_PARAMS) {
    fused_body<2>(FUSED_STEP_ARGS);
}
// The gap's tiles on the planes of one z layer (select 3, the y-layer module's shape): the z queue
// of phi holds 2R + 1 more vectors a row; up to R = 4 capped at three blocks a multiprocessor, as
// fused_step_ylayers runs.
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(BLOCK_X * BLOCK_Y, (RADIUS <= 4 ? 3 : 1)) void fused_step_zlayers(FUSED_STEP_PARAMS) {
    fused_body<4>(FUSED_STEP_ARGS);
}
#endif
