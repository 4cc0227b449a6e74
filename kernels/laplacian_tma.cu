// laplacian_tma.cu: the Laplacian-only operator (out = L p) fed by Hopper's tensor memory
// accelerator (sm_90+, CUDA only). The tiling, march and arithmetic are fused.cu's (2.5D blocks of
// BLOCK_X x BLOCK_Y threads, ROWS rows a thread, the z neighbours in a register queue,
// laplacian_rows), but each plane's whole tile, halos included, lands in shared memory by one bulk
// tensor copy that one thread issues, into a ring of TMA_SLOTS slots. The slot is the tile: no
// computing thread copies, stores into shared memory or waits at a block barrier. Each slot has two mbarriers: `full` completes
// when its copy has landed, `empty` when every warp has read the plane for the last time, after
// which the slot takes the plane TMA_SLOTS planes on. Warps therefore drift freely within the ring.
// The tensor map (host: GpuRuntime::tensor_map_f32) spans the grid's nx x ny points of the planes
// -R .. nz + R - 1, so the copies read the halo planes from memory and fill x and y outside the grid
// with zeros, as fused.cu's loads do (vload_if).
#if !SEISMIC_HIP
#ifndef TMA_SLOTS
#define TMA_SLOTS 8
#endif

// CUDA's CUtensorMap: 128 opaque bytes, passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
    u64 opaque[16];
};

DEVICE void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// The copy engine reads the barriers through the async proxy: their initialisation must be visible
// to it before the first copy.
DEVICE void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
DEVICE void mbar_expect_bytes(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
DEVICE void mbar_arrive(unsigned bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory"); }
DEVICE unsigned mbar_try_wait(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done;
}
// Waits until the barrier's phase of parity `parity` has completed (each thread observes it).
DEVICE void mbar_wait(unsigned bar, unsigned parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}
// A box of the tensor at element coordinates (x, y, z) into shared memory at `dst`; the bytes
// complete the transaction on `bar`.
DEVICE void tma_load_3d(unsigned dst, const TensorMap* map, unsigned bar, int x, int y, int z) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];" ::"r"(dst),
        "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar)
        : "memory");
}

namespace lap_tma {
constexpr int R = RADIUS;
constexpr int FX = BLOCK_X, FY = BLOCK_Y, RY = ROWS;
constexpr int TY = FY * RY;               // interior rows of the tile
constexpr int HV = (R + VEC - 1) / VEC;  // halo vectors on each side in x
#ifndef TMA_ALIGNED
#define TMA_ALIGNED 0
#endif
// TMA_ALIGNED 1: the box's rows run from a whole 128-byte line before the tile to one after it;
// 2: the tile's own columns as one box, and its interior rows' x halos as two boxes of one 32-byte
// sector a row (separate arrays after it in the slot).
constexpr int SPLIT = TMA_ALIGNED == 2;
constexpr int TWV = TMA_ALIGNED == 1 ? FX + 16 : (SPLIT ? FX : FX + 2 * HV);  // box row, in vectors
constexpr int C0 = TMA_ALIGNED == 1 ? 8 - HV : 0;  // a thread's first tap vector: tx + C0
constexpr int TH = TY + 2 * R;           // tile rows
constexpr int QN = 2 * R + 1;            // z stencil planes
constexpr int S = TMA_SLOTS;
constexpr unsigned MAIN_BYTES = TH * TWV * 16;
constexpr unsigned HALO_BYTES = SPLIT ? TY * 32 : 0;                 // one side's
constexpr unsigned HALO_AT = (MAIN_BYTES + 127) / 128 * 128;          // copies land on 128-byte boundaries
constexpr unsigned HALO_PITCH = (HALO_BYTES + 127) / 128 * 128;
constexpr unsigned BOX_BYTES = MAIN_BYTES + 2 * HALO_BYTES;
constexpr unsigned SLOT_BYTES = HALO_AT + 2 * HALO_PITCH;
constexpr int WARPS = FX * FY / 32;
static_assert(VEC == 4 && (FX * FY) % 32 == 0, "laplacian_tma: vectors of 4, whole warps");
static_assert(TWV * VEC <= 256 && TH <= 256 && HV <= 2, "a tensor copy's box is at most 256 points a side");
static_assert(S >= R + 2, "the ring holds the R + 1 planes in use and one ahead");
}  // namespace lap_tma

// laplacian_rows (prelude.h) with the tile's x halos in arrays of their own (TMA_ALIGNED 2): `tile`
// R rows above the thread's first row, FX vectors a row; `left` and `right` at the thread's first
// row, two vectors a row (the points x0 - 8 .. x0 - 1 and x0 + FX VEC .. + 7). The same operations
// in the same order.
DEVICE void split_rows(float (&lap)[lap_tma::RY][VEC], const Vf (&q)[lap_tma::RY][lap_tma::QN],
                       const Vf (*tile)[lap_tma::TWV], const Vf (*left)[2], const Vf (*right)[2], int tx,
                       StencilWeights w) {
    using namespace lap_tma;
#pragma unroll
    for (int r = 0; r < RY; r++) {
#pragma unroll
        for (int j = 0; j < VEC; j++) lap[r][j] = w.centre * q[r][R].v[j];
        float xr[(2 * HV + 1) * VEC];
#pragma unroll
        for (int s = 0; s < 2 * HV + 1; s++) {
            const int v = tx + s - HV;
            const Vf* p = v < 0 ? &left[r][2 + v] : (v >= FX ? &right[r][v - FX] : &tile[r + R][v]);
            const Vf t = s == HV ? q[r][R] : *p;
#pragma unroll
            for (int j = 0; j < VEC; j++) xr[s * VEC + j] = t.v[j];
        }
#pragma unroll
        for (int k = 1; k <= R; k++)
#pragma unroll
            for (int j = 0; j < VEC; j++) lap[r][j] = tap(lap[r][j], w.cx[k], xr[HV * VEC + j - k], xr[HV * VEC + j + k]);
    }
#pragma unroll
    for (int k = 1; k <= R; k++)
#pragma unroll
        for (int r = 0; r < RY; r++) {
            const int ml = r - k, mh = r + k;
            const Vf lo = ml >= 0 ? q[ml >= 0 ? ml : 0][R] : tile[ml + R][tx];
            const Vf hi = mh < RY ? q[mh < RY ? mh : 0][R] : tile[mh + R][tx];
#pragma unroll
            for (int j = 0; j < VEC; j++) lap[r][j] = tap(lap[r][j], w.cy[k], lo.v[j], hi.v[j]);
        }
#pragma unroll
    for (int r = 0; r < RY; r++)
#pragma unroll
        for (int k = 1; k <= R; k++)
#pragma unroll
            for (int j = 0; j < VEC; j++) lap[r][j] = tap(lap[r][j], w.cz[k], q[r][R - k].v[j], q[r][R + k].v[j]);
}

// Shared memory: TMA_SLOTS slots of SLOT_BYTES, then the slots' full and empty barriers (host:
// laplacian_tma_ring). Blocks of BLOCK_X x BLOCK_Y computing threads and one more warp, the
// producer, whose first lane issues the copies in order, each as soon as its slot is empty, so
// the computing warps' loop holds no copy. With that warp the block keeps the plain kernel's
// warps (the host takes one row of threads from it): nine warps would cap the registers at 168.
extern "C" __global__ LAUNCH_BOUNDS(BLOCK_X* BLOCK_Y + 32) void laplacian_tma(const __grid_constant__ TensorMap map,
                                                                             const __grid_constant__ TensorMap halo_map,
                                                                             float* RESTRICT out, StencilWeights w,
                                                                             int nx, int ny, int nz, i64 pitch,
                                                                             i64 plane, int window) {
    using namespace lap_tma;
    extern __shared__ __align__(128) unsigned char smem[];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int lt = ty * FX + tx;
    const Chunk ch = block_chunk(window, ny, nz, TY);
    if (!ch.owns) return;  // the whole block, before any barrier is initialised
    const int nsteps = ch.nsteps, dz = ch.dz, zfirst = ch.zfirst;
    const unsigned ring = smem_addr(smem);
    const unsigned bars = ring + S * SLOT_BYTES;
    auto full = [&](int j) { return bars + 8u * (unsigned)(j % S); };
    auto empty = [&](int j) { return bars + 8u * (unsigned)(S + j % S); };
    if (lt == 0) {
        for (int s = 0; s < S; s++) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), WARPS);
        }
        mbar_init_fence();
    }
    __syncthreads();
    // Loaded plane j (0 .. nsteps + 2R - 1) is grid plane zfirst + dz (j - R), the tensor's plane
    // zfirst + dz (j - R) + R; it sits in slot j % S, whose (j / S)-th use it is.
    const int loads = nsteps + 2 * R;
    const int warp = __shfl_sync(0xffffffffu, lt / 32, 0);  // warp-uniform, so the branch is too
    if (warp >= WARPS) {
        if (lt == FX * FY) {
            const int x0 = ch.tile_x * FX * VEC;
            const int box_x = x0 - (TMA_ALIGNED == 1 ? 32 : (SPLIT ? 0 : HV * VEC)), box_y = ch.row0 - R;
            for (int j = 0; j < loads; j++) {
                if (j >= S) mbar_wait(empty(j), (unsigned)(j / S - 1) & 1u);
                mbar_expect_bytes(full(j), BOX_BYTES);
                const unsigned dst = ring + (unsigned)(j % S) * SLOT_BYTES;
                const int zt = zfirst + dz * (j - R) + R;
                tma_load_3d(dst, &map, full(j), box_x, box_y, zt);
                if (SPLIT) {
                    tma_load_3d(dst + HALO_AT, &halo_map, full(j), x0 - 8, ch.row0, zt);
                    tma_load_3d(dst + HALO_AT + HALO_PITCH, &halo_map, full(j), x0 + FX * VEC, ch.row0, zt);
                }
            }
        }
        return;
    }
    const int ix = (ch.tile_x * FX + tx) * VEC;
    const int iy = ch.row0 + ty * RY;
    const i64 col = (i64)iy * pitch + ix;
    auto ready = [&](int j) { mbar_wait(full(j), (unsigned)(j / S) & 1u); };
    // The warp's last read of plane j is done: lane 0 arrives for it.
    auto release = [&](int j) {
        __syncwarp();
        if ((lt & 31) == 0) mbar_arrive(empty(j));
    };
    auto tile = [&](int j) { return reinterpret_cast<const Vf(*)[TWV]>(smem + (j % S) * SLOT_BYTES); };
    // The queue's first 2R planes: those below the first output plane are released as soon as
    // read, so that their slots take planes S on (the ring need not hold 2R planes at once).
    Vf q[RY][QN];  // q[r][R + k]: the thread's row r at plane z + dz k
#pragma unroll
    for (int i = 1; i < QN; i++) {
        const int j = i - 1;
        ready(j);
#pragma unroll
        for (int r = 0; r < RY; r++) q[r][i] = tile(j)[ty * RY + r + R][tx + C0 + HV];
        if (j < R) release(j);
    }
    // Slots (byte offsets) and phase of the loop's two planes, advanced a plane an iteration:
    // s + 2R (the queue's new plane; waited for) and s + R (the tile; released after).
    constexpr unsigned RING = S * SLOT_BYTES;
    unsigned at_q = (2 * R) % S * SLOT_BYTES, phase_q = (2 * R / S) & 1, at_t = R % S * SLOT_BYTES;
    float* o = out + (i64)zfirst * plane + col;
    const i64 o_step = (i64)dz * plane;
    SEISMIC_UNROLL(UNROLL_Z)
    for (int s = 0; s < nsteps; s++) {
#pragma unroll
        for (int r = 0; r < RY; r++)
#pragma unroll
            for (int i = 0; i < QN - 1; i++) q[r][i] = q[r][i + 1];
        mbar_wait(bars + at_q / SLOT_BYTES * 8u, phase_q);
        __syncwarp();
        const Vf(*tq)[TWV] = reinterpret_cast<const Vf(*)[TWV]>(smem + at_q);
#pragma unroll
        for (int r = 0; r < RY; r++) q[r][QN - 1] = tq[ty * RY + r + R][tx + C0 + HV];
        float lap[RY][VEC];
        if constexpr (SPLIT) {
            split_rows(lap, q, reinterpret_cast<const Vf(*)[TWV]>(smem + at_t) + ty * RY,
                       reinterpret_cast<const Vf(*)[2]>(smem + at_t + HALO_AT) + ty * RY,
                       reinterpret_cast<const Vf(*)[2]>(smem + at_t + HALO_AT + HALO_PITCH) + ty * RY, tx, w);
        } else {
            laplacian_rows<R, RY, HV, TWV, QN, (RY > 1)>(lap, q, reinterpret_cast<const Vf(*)[TWV]>(smem + at_t) + ty * RY,
                                                          tx + C0, w);
        }
        __syncwarp();
        if ((lt & 31) == 0) mbar_arrive(bars + (S + at_t / SLOT_BYTES) * 8u);
#pragma unroll
        for (int r = 0; r < RY; r++) {
            Vf res;
#pragma unroll
            for (int j = 0; j < VEC; j++) res.v[j] = lap[r][j];
            store_row(o + (i64)r * pitch, res, ix, nx, iy + r < ny);
        }
        o += o_step;
        at_q += SLOT_BYTES;
        if (at_q == RING) {
            at_q = 0;
            phase_q ^= 1;
        }
        at_t = at_t + SLOT_BYTES == RING ? 0 : at_t + SLOT_BYTES;
    }
}
#endif
