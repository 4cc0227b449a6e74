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
constexpr int TWV = FX + 2 * HV;         // tile row, in vectors
constexpr int TH = TY + 2 * R;           // tile rows
constexpr int QN = 2 * R + 1;            // z stencil planes
constexpr int S = TMA_SLOTS;
constexpr unsigned BOX_BYTES = TH * TWV * 16;
constexpr unsigned SLOT_BYTES = (BOX_BYTES + 127) / 128 * 128;  // copies land on 128-byte boundaries
constexpr int WARPS = FX * FY / 32;
static_assert(VEC == 4 && (FX * FY) % 32 == 0, "laplacian_tma: vectors of 4, whole warps");
static_assert(TWV * VEC <= 256 && TH <= 256, "a tensor copy's box is at most 256 points a side");
static_assert(S >= R + 2, "the ring holds the R + 1 planes in use and one ahead");
}  // namespace lap_tma

// Shared memory: TMA_SLOTS slots of SLOT_BYTES, then the slots' full and empty barriers (host:
// laplacian_tma_ring). Blocks of BLOCK_X x BLOCK_Y computing threads and one more warp, the
// producer, whose first lane issues the copies in order, each as soon as its slot is empty, so
// the computing warps' loop holds no copy. With that warp the block keeps the plain kernel's
// warps (the host takes one row of threads from it): nine warps would cap the registers at 168.
extern "C" __global__ LAUNCH_BOUNDS(BLOCK_X* BLOCK_Y + 32) void laplacian_tma(const __grid_constant__ TensorMap map,
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
            const int box_x = ch.tile_x * FX * VEC - HV * VEC, box_y = ch.row0 - R;
            for (int j = 0; j < loads; j++) {
                if (j >= S) mbar_wait(empty(j), (unsigned)(j / S - 1) & 1u);
                mbar_expect_bytes(full(j), BOX_BYTES);
                tma_load_3d(ring + (unsigned)(j % S) * SLOT_BYTES, &map, full(j), box_x, box_y,
                            zfirst + dz * (j - R) + R);
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
        for (int r = 0; r < RY; r++) q[r][i] = tile(j)[ty * RY + r + R][tx + HV];
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
        for (int r = 0; r < RY; r++) q[r][QN - 1] = tq[ty * RY + r + R][tx + HV];
        float lap[RY][VEC];
        laplacian_rows<R, RY, HV, TWV, QN, (RY > 1)>(lap, q, reinterpret_cast<const Vf(*)[TWV]>(smem + at_t) + ty * RY,
                                                      tx, w);
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
