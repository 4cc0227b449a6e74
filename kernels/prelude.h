// prelude.h: the few differences between CUDA (NVRTC / nvcc) and HIP (hipRTC / hipcc), plus small
// helpers every kernel file uses. No system headers: run-time compilers have none.
//
// Compile-time parameters (set with -D by the host, every one for every module; the Rust type
// `Tuning` documents the launch shape):
//   RADIUS      stencil radius R, 1..8
//   BLOCK_X     threads in x of a fused block (the three-pass kernels always use 32)
//   BLOCK_Y     rows of a block's xy tile (threads in y)
//   VEC         points per thread in x: 1, 2 or 4 (vector loads of that width)
//   ROWS        rows per thread in y of the fused kernel (register blocking; 1..4, > 1 needs STAGES)
//   STAGES, HALO_RING, UNROLL_Z, ORDER, MIN_BLOCKS  the fused kernel's ring, unrolling, grid-index
//               order and blocks per multiprocessor (fused.cu)
//   SPONGE      1: multiply the update by the sponge factors gx[ix] gy[iy] gz[iz]
//   LAPLACIAN_ONLY 1: the fused kernel writes out = L p (no leapfrog), for the operator benchmark
//   YLAYERS     1: the module also holds fused_step_ylayers and fused_step_zlayers, the fused step
//               with the CPML y layers, or one z layer, in its pass (fused.cu, layers.h)
//   HALF        1: the module also holds the f16-storage step (fused_half.cu and the *_half kernels
//               of cpml.cu, free_surface.cu, sources.cu, section.cu, finite_check.cu); optional, 0
#pragma once

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define SEISMIC_HIP 1
#else
#define SEISMIC_HIP 0
#endif

// The launch shape comes from the host for every module (src/backend/gpu/sources.rs,
// kernel_options), so that kernels and host never disagree on a default.
#if !defined(RADIUS) || !defined(BLOCK_X) || !defined(BLOCK_Y) || !defined(VEC) || !defined(ROWS) ||     \
    !defined(SPONGE) || !defined(LAPLACIAN_ONLY) || !defined(MIN_BLOCKS) || !defined(STAGES) ||           \
    !defined(UNROLL_Z) || !defined(ORDER) || !defined(HALO_RING) || !defined(YLAYERS)
#error "RADIUS, BLOCK_X, BLOCK_Y, VEC, ROWS, SPONGE, LAPLACIAN_ONLY, MIN_BLOCKS, STAGES, UNROLL_Z, ORDER, HALO_RING and YLAYERS are set by the host"
#endif

#define RESTRICT __restrict__
#define DEVICE __device__ __forceinline__
#if SEISMIC_HIP
#define LAUNCH_BOUNDS(n) __launch_bounds__(n)
#define LAUNCH_BOUNDS_BLOCKS(n, blocks) __launch_bounds__(n)
#else
// A kernel's own register cap: `blocks` of n threads on a multiprocessor.
#define LAUNCH_BOUNDS_BLOCKS(n, blocks) __launch_bounds__(n, blocks)
// With MIN_BLOCKS > 1 the compiler caps registers so that many blocks fit on a multiprocessor.
#define LAUNCH_BOUNDS(n) __launch_bounds__(n, MIN_BLOCKS)
#endif
#define BLOCK_SYNC() __syncthreads()

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

// Stencil weights, passed by value as one kernel argument (kernel arguments live in constant memory).
// Index 0 of each axis is unused by the kernels except through `centre`, the sum of the three centres.
struct StencilWeights {
    float cx[9];
    float cy[9];
    float cz[9];
    float centre;
};

// One axis's first- and second-derivative weights (CPML kernels and the single-axis passes).
struct AxisWeights {
    float c1[9];
    float c2[9];
};

// The host's structs (src/backend/gpu/kernels.rs) assert the same sizes, and their field offsets
// (NVRTC has no offsetof; same fields in the same order give the same offsets).
static_assert(sizeof(StencilWeights) == 112 && alignof(StencilWeights) == 4, "StencilWeights must match the host's");
static_assert(sizeof(AxisWeights) == 72 && alignof(AxisWeights) == 4, "AxisWeights must match the host's");

DEVICE int imin(int a, int b) { return a < b ? a : b; }
DEVICE int imax(int a, int b) { return a > b ? a : b; }
// A thread's VEC consecutive points in x.
struct alignas(4 * VEC) Vf {
    float v[VEC];
};

#if VEC == 4
DEVICE Vf vload(const float* p) {
    float4 t = *reinterpret_cast<const float4*>(p);
    Vf r;
    r.v[0] = t.x; r.v[1] = t.y; r.v[2] = t.z; r.v[3] = t.w;
    return r;
}
DEVICE void vstore(float* p, const Vf& a) {
    *reinterpret_cast<float4*>(p) = make_float4(a.v[0], a.v[1], a.v[2], a.v[3]);
}
#elif VEC == 2
DEVICE Vf vload(const float* p) {
    float2 t = *reinterpret_cast<const float2*>(p);
    Vf r;
    r.v[0] = t.x; r.v[1] = t.y;
    return r;
}
DEVICE void vstore(float* p, const Vf& a) { *reinterpret_cast<float2*>(p) = make_float2(a.v[0], a.v[1]); }
#elif VEC == 1
DEVICE Vf vload(const float* p) {
    Vf r;
    r.v[0] = *p;
    return r;
}
DEVICE void vstore(float* p, const Vf& a) { *p = a.v[0]; }
#else
#error "VEC must be 1, 2 or 4"
#endif

// Asks for the line holding `p` (into L1) without waiting for it: a thread's loads of its next
// plane, which the compiler cannot move above the current plane's stores into the same arrays.
// HIP: nothing.
DEVICE void prefetch_line(const void* p) {
#if SEISMIC_HIP
    (void)p;
#else
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#endif
}

// Streaming (non-temporal) stores: the new wavefield is not read again in this step, so it should
// not evict the planes other blocks still need from L2. No "memory" clobber, so the compiler may
// move loads across them: no kernel reads back what it stream-stores in the same launch.
#if SEISMIC_HIP
DEVICE void store_stream(float* p, float v) { __builtin_nontemporal_store(v, p); }
#else
DEVICE void store_stream(float* p, float v) { asm volatile("st.global.cs.f32 [%0], %1;" ::"l"(p), "f"(v)); }
#endif

#if SEISMIC_HIP
DEVICE void vstore_stream(float* p, const Vf& a) {
#pragma unroll
    for (int j = 0; j < VEC; j++) __builtin_nontemporal_store(a.v[j], p + j);
}
#else
#if VEC == 4
DEVICE void vstore_stream(float* p, const Vf& a) {
    asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a.v[0]), "f"(a.v[1]), "f"(a.v[2]),
                 "f"(a.v[3]));
}
#elif VEC == 2
DEVICE void vstore_stream(float* p, const Vf& a) {
    asm volatile("st.global.cs.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a.v[0]), "f"(a.v[1]));
}
#else
DEVICE void vstore_stream(float* p, const Vf& a) { store_stream(p, a.v[0]); }
#endif
#endif

// Loads of data used once (p^{n-1}, c^2 dt^2): evict-first, so that the planes of p^n that
// neighbouring blocks still need stay in L2.
#if SEISMIC_HIP
DEVICE Vf vload_once(const float* p) {
    Vf r;
#pragma unroll
    for (int j = 0; j < VEC; j++) r.v[j] = __builtin_nontemporal_load(p + j);
    return r;
}
#else
#if VEC == 4
DEVICE Vf vload_once(const float* p) {
    Vf r;
    asm volatile("ld.global.cs.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(r.v[0]), "=f"(r.v[1]), "=f"(r.v[2]), "=f"(r.v[3])
                 : "l"(p));
    return r;
}
#elif VEC == 2
DEVICE Vf vload_once(const float* p) {
    Vf r;
    asm volatile("ld.global.cs.v2.f32 {%0, %1}, [%2];" : "=f"(r.v[0]), "=f"(r.v[1]) : "l"(p));
    return r;
}
#else
DEVICE Vf vload_once(const float* p) {
    Vf r;
    asm volatile("ld.global.cs.f32 %0, [%1];" : "=f"(r.v[0]) : "l"(p));
    return r;
}
#endif
#endif

// Half-precision storage (`run.precision = "f16"`): a value is stored as the bits of an IEEE
// binary16 number and every operation is f32. Conversions by instruction, not through
// cuda_fp16.h / hip_fp16.h, so that no run-time compiler needs a header; f2h rounds to nearest
// even, as the CPU reference's `half::f16::from_f32`.
#ifndef HALF
#define HALF 0
#endif
typedef unsigned short h16;
#if SEISMIC_HIP
DEVICE float h2f(h16 h) { return (float)__builtin_bit_cast(_Float16, h); }
DEVICE h16 f2h(float f) { return __builtin_bit_cast(h16, (_Float16)f); }
#else
DEVICE float h2f(h16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
DEVICE h16 f2h(float f) {
    h16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#endif
// Negation flips the sign bit, exactly as in f32 (the free surface's mirror).
DEVICE float neg(float v) { return -v; }
DEVICE h16 neg(h16 v) { return v ^ 0x8000u; }
DEVICE float ld(const float* p) { return *p; }
DEVICE float ld(const h16* p) { return h2f(*p); }

// VEC halves: VEC * 2 bytes, loaded and stored as one access.
#if VEC == 4
typedef uint2 HalfBits;
DEVICE Vf unpack(HalfBits t) {
    Vf r;
    r.v[0] = h2f(t.x & 0xffffu); r.v[1] = h2f(t.x >> 16); r.v[2] = h2f(t.y & 0xffffu); r.v[3] = h2f(t.y >> 16);
    return r;
}
DEVICE HalfBits pack(const h16 (&h)[VEC]) { return make_uint2(h[0] | ((u32)h[1] << 16), h[2] | ((u32)h[3] << 16)); }
#elif VEC == 2
typedef u32 HalfBits;
DEVICE Vf unpack(HalfBits t) {
    Vf r;
    r.v[0] = h2f(t & 0xffffu); r.v[1] = h2f(t >> 16);
    return r;
}
DEVICE HalfBits pack(const h16 (&h)[VEC]) { return h[0] | ((u32)h[1] << 16); }
#else
typedef h16 HalfBits;
DEVICE Vf unpack(HalfBits t) {
    Vf r;
    r.v[0] = h2f(t);
    return r;
}
DEVICE HalfBits pack(const h16 (&h)[VEC]) { return h[0]; }
#endif
DEVICE HalfBits load_bits(const h16* p) { return *reinterpret_cast<const HalfBits*>(p); }
DEVICE Vf vload(const h16* p) { return unpack(load_bits(p)); }
DEVICE void vstore_bits(h16* p, const h16 (&h)[VEC]) { *reinterpret_cast<HalfBits*>(p) = pack(h); }

DEVICE Vf vzero() {
    Vf r;
#pragma unroll
    for (int j = 0; j < VEC; j++) r.v[j] = 0.0f;
    return r;
}

// What lies outside the grid in x or y is zero: the halo is held at zero (only the z halo is ever
// written, by the free surface's mirror) and the rows and columns a tile overhangs are slack
// that nobody writes. The fused kernels therefore do not read it: `vload_if` and the `read`
// argument of the asynchronous copies give zeros without a memory access (ncu, R = 4, Laplacian-only
// at 1024^3: p^n read 1.04 times per step instead of 1.10).
DEVICE Vf vload_if(const float* p, bool read) { return read ? vload(p) : vzero(); }
DEVICE Vf vload_if(const h16* p, bool read) { return read ? vload(p) : vzero(); }

// Whether the VEC points from x0 (a multiple of VEC) hold a point of the grid's rows 0..nx-1.
DEVICE bool vec_in_x(int x0, int nx) { return x0 < nx && x0 + VEC > 0; }

// Asynchronous 16-byte copies global -> shared (sm_80+ cp.async): data in flight costs shared
// memory instead of registers. The issuing thread alone reads what it copied, after
// CP_ASYNC_WAIT(n) (at most n of its newest groups still pending). With `read` false the 16 bytes
// are zero-filled and global memory is not touched (src-size 0). HIP: plain copies.
// SharedVf: a destination of these copies. On CUDA the 32-bit shared-window address cp.async
// takes, so that a kernel converts its buffers' generic pointers once: converted at each copy, the
// conversion cost about nine instructions a copy (the window's base fetched again each time; 229 of
// the y-layer kernel's 725 instructions a plane issued its ten copies). shared_at(b, n): n vectors on.
#if SEISMIC_HIP
typedef Vf* SharedVf;
DEVICE SharedVf shared_vf(Vf* p) { return p; }
DEVICE SharedVf shared_at(SharedVf b, int n) { return b + n; }
DEVICE void cp_async16(void* s, const float* g, bool read = true) {
    *reinterpret_cast<float4*>(s) = read ? *reinterpret_cast<const float4*>(g) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}
DEVICE void cp_async_commit() {}
#define CP_ASYNC_WAIT(n)
#else
DEVICE unsigned smem_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}
typedef unsigned SharedVf;
DEVICE SharedVf shared_vf(const Vf* p) { return smem_addr(p); }
DEVICE SharedVf shared_at(SharedVf b, int n) { return b + 16u * (unsigned)n; }
DEVICE void cp_async16(SharedVf s, const float* g, bool read = true) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "r"(read ? 16 : 0) : "memory");
}
DEVICE void cp_async16(void* s, const float* g, bool read = true) { cp_async16(smem_addr(s), g, read); }
DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
#define CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")
#endif

// L2 eviction priorities of the fused kernels' asynchronous copies: p^{n-1} and c^2 dt^2, read
// once, are marked evict-first, and the leading plane of p^n, which the neighbouring tiles and the
// next z-chunk read again, evict-last.
// So the planes of p^n are what stays in L2 (H100, 512^3 / 1024^3, R = 4: +2.0-2.2 / +0.9-1.1
// points of 3R1W). HIP: plain copies, no hint.
#ifndef WHOLE_ROWS
#define WHOLE_ROWS 0  // every row is whole vectors (nx % VEC == 0): no per-lane store at its end
#endif
#if SEISMIC_HIP
DEVICE void cp_async16_once(void* s, const float* g, bool read = true) { cp_async16(s, g, read); }
DEVICE void cp_async16_cur(void* s, const float* g, bool read = true) { cp_async16(s, g, read); }
#else
// A cp_async16 whose lines enter L2 with the eviction priority `policy` (a createpolicy result).
DEVICE void cp_async16_policy(SharedVf s, const float* g, u64 policy, bool read) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(s), "l"(g),
                 "r"(read ? 16 : 0), "l"(policy)
                 : "memory");
}
#define SEISMIC_CP_ASYNC_HINTED(name, priority)                                       \
    DEVICE void name(SharedVf s, const float* g, bool read = true) {                  \
        u64 policy;                                                                    \
        asm("createpolicy.fractional.L2::" priority ".b64 %0, 1.0;" : "=l"(policy)); \
        cp_async16_policy(s, g, policy, read);                                         \
    }                                                                                  \
    DEVICE void name(void* s, const float* g, bool read = true) { name(smem_addr(s), g, read); }
SEISMIC_CP_ASYNC_HINTED(cp_async16_once, "evict_first")
SEISMIC_CP_ASYNC_HINTED(cp_async16_cur, "evict_last")
#endif

// One symmetric pair of stencil taps added to a partial sum, acc + c (a + b), as one fused
// multiply-add: exactly rounded, so the CPU reference (`mul_add`) gets the same bits whatever the
// compiler's contraction flag, and a tap costs two instructions instead of three (H100, 512^3 /
// 1024^3, R = 4, Laplacian-only: +1.6 / +1.1 points of copy).
#if SEISMIC_HIP
DEVICE float tap(float acc, float c, float a, float b) { return __builtin_fmaf(c, a + b, acc); }
#else
DEVICE float tap(float acc, float c, float a, float b) { return __fmaf_rn(c, a + b, acc); }
#endif

// The Laplacian at a thread's RY consecutive rows of VEC points, in the CPU reference's operation
// order (centre, x, y, z; k ascending in each), so that the fused kernels reproduce it bit for bit.
// `tile` points at the shared-memory tile row R rows above the thread's first row (rows of TWV
// vectors with HV halo vectors on each side; `col` is the thread's vector column without them);
// q[r][R + k] is the thread's row r at plane z + k (z - k when marching down: the same sums).
// Rows inside the thread's own come from its queue; with CentreFromQueue the x centre does too
// (one shared load fewer per row). Every index is a compile-time constant once unrolled.
template <int R, int RY, int HV, int TWV, int QS, bool CentreFromQueue>
DEVICE void laplacian_rows(float (&lap)[RY][VEC], const Vf (&q)[RY][QS], const Vf (*tile)[TWV], int col,
                           StencilWeights w) {
#pragma unroll
    for (int r = 0; r < RY; r++) {
#pragma unroll
        for (int j = 0; j < VEC; j++) lap[r][j] = w.centre * q[r][R].v[j];
        float xr[(2 * HV + 1) * VEC];
#pragma unroll
        for (int s = 0; s < 2 * HV + 1; s++) {
            const Vf t = s == HV && CentreFromQueue ? q[r][R] : tile[r + R][col + s];
#pragma unroll
            for (int j = 0; j < VEC; j++) xr[s * VEC + j] = t.v[j];
        }
#pragma unroll
        for (int k = 1; k <= R; k++)
#pragma unroll
            for (int j = 0; j < VEC; j++) lap[r][j] = tap(lap[r][j], w.cx[k], xr[HV * VEC + j - k], xr[HV * VEC + j + k]);
    }
    // k outer, so that a tile row two of the thread's rows need is loaded once.
#pragma unroll
    for (int k = 1; k <= R; k++)
#pragma unroll
        for (int r = 0; r < RY; r++) {
            const int ml = r - k, mh = r + k;  // ml < RY and mh >= 0 always
            const Vf lo = ml >= 0 ? q[ml >= 0 ? ml : 0][R] : tile[ml + R][col + HV];
            const Vf hi = mh < RY ? q[mh < RY ? mh : 0][R] : tile[mh + R][col + HV];
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

// Marches one thread's VEC points in x along y (pass_y) or z (pass_z) from `first` to `last` - 1,
// adding that axis's derivative terms (weights c[1..R]) to lap; `p` and `l` point at index 0 of the
// march, `stride` floats apart. A register queue of 2R+1 vectors: each point of p is loaded once.
template <int R>
DEVICE void add_axis_terms(const float* RESTRICT p, float* RESTRICT l, const float* c, i64 stride, int first,
                           int last) {
    Vf q[2 * R + 1];
#pragma unroll
    for (int i = 0; i < 2 * R; i++) q[i + 1] = vload(p + (i64)(first - R + i) * stride);
    for (int m = first; m < last; m++) {
#pragma unroll
        for (int i = 0; i < 2 * R; i++) q[i] = q[i + 1];
        q[2 * R] = vload(p + (i64)(m + R) * stride);
        Vf acc = vload(l + (i64)m * stride);
#pragma unroll
        for (int k = 1; k <= R; k++)
#pragma unroll
            for (int j = 0; j < VEC; j++) acc.v[j] = tap(acc.v[j], c[k], q[R - k].v[j], q[R + k].v[j]);
        vstore(l + (i64)m * stride, acc);
    }
}

// Writes the first `valid` lanes of a vector (all of them when the vector lies inside the row):
// points past the row's end are halo of the next step and must stay zero.
DEVICE void vstore_guarded(float* p, const Vf& a, int valid) {
    if (valid >= VEC) {
        vstore_stream(p, a);
    } else {
#pragma unroll
        for (int j = 0; j < VEC; j++)
            if (j < valid) store_stream(p + j, a.v[j]);
    }
}

// The parameters of the fused-step kernels (fused.cu, fused_ring.cu): the host launches either one.
// L (layers.h) holds the CPML arrays and which blocks a launch computes; fused_ring.cu computes
// every block and no layer.
#define FUSED_STEP_PARAMS                                                                                \
    const float *RESTRICT cur, float *RESTRICT out, const float *RESTRICT vel, const float *RESTRICT gx, \
        const float *RESTRICT gy, const float *RESTRICT gz, StencilWeights w, int nx, int ny, int nz,    \
        i64 pitch, i64 plane, int window, Layers L
#define FUSED_STEP_ARGS cur, out, vel, gx, gy, gz, w, nx, ny, nz, pitch, plane, window, L

#define SEISMIC_PRAGMA(x) _Pragma(#x)
#define SEISMIC_UNROLL(n) SEISMIC_PRAGMA(unroll n)

// The xy tile and the z-chunk a block of a fused kernel owns, from its block index in grid-index
// order ORDER, and its march: planes zfirst + dz * s for s = 0 .. nsteps - 1. `owns` is false for the
// blocks past the last tile row of the last band (banded order), which must leave before any barrier.
struct Chunk {
    int tile_x, tile_y, nsteps, dz, zfirst;
    int row0;  // the tile's first grid row: tile_y * tile_rows, or where band_tile puts it
    bool owns;
};
DEVICE Chunk block_chunk(int window, int ny, int nz, int tile_rows) {
    Chunk c;
#if ORDER == 3
    const int nchunks = (nz + window - 1) / window;
    const int chunk = blockIdx.z % nchunks;
    c.tile_x = blockIdx.x;
    c.tile_y = blockIdx.z / nchunks * gridDim.y + blockIdx.y;
#else
    const int chunk = blockIdx.z;
    c.tile_x = ORDER == 2 ? blockIdx.y : blockIdx.x;
    c.tile_y = ORDER == 2 ? blockIdx.x : blockIdx.y;
#endif
    c.row0 = c.tile_y * tile_rows;
    c.owns = c.row0 < ny;
    const int z0 = chunk * window;
    c.nsteps = imin(z0 + window, nz) - z0;
    const bool down = (ORDER == 1 || ORDER == 2) && (chunk & 1);
    c.dz = down ? -1 : 1;
    c.zfirst = down ? z0 + c.nsteps - 1 : z0;
    return c;
}

// The leapfrog update of one of a thread's rows of VEC points from the centre p, L p, p^{n-1} (pm)
// and c^2 dt^2 (vv), in the CPU reference's order; with LAPLACIAN_ONLY, L p itself. The sponge
// (gx[ix + j] * gyz) damps p^{n-1} too (friction, not a restoring force): the expression of cpu.rs.
DEVICE Vf leapfrog(const Vf& p, const float (&lap)[VEC], const Vf& pm, const Vf& vv, const float* gx, float gyz,
                   int ix) {
    Vf res;
#pragma unroll
    for (int j = 0; j < VEC; j++) {
#if LAPLACIAN_ONLY
        res.v[j] = lap[j];
#elif SPONGE
        const float g = gx[ix + j] * gyz;
        res.v[j] = g * (2.0f * p.v[j] - g * pm.v[j] + vv.v[j] * lap[j]);
#else
        res.v[j] = 2.0f * p.v[j] - pm.v[j] + vv.v[j] * lap[j];
#endif
    }
    return res;
}

// Stores a row's result over p^{n-1} where the row and the points lie inside the grid.
DEVICE void store_row(float* out, const Vf& res, int ix, int nx, bool row_inside) {
#if WHOLE_ROWS
    if (row_inside && ix < nx) vstore_stream(out, res);
#else
    if (row_inside && ix < nx) vstore_guarded(out, res, nx - ix);
#endif
}

// The end of a fused step for one of a thread's rows: leapfrog, then store.
DEVICE void update_row(float* out, const Vf& p, const float (&lap)[VEC], const Vf& pm, const Vf& vv,
                       const float* gx, float gyz, int ix, int nx, bool row_inside) {
    store_row(out, leapfrog(p, lap, pm, vv, gx, gyz, ix), ix, nx, row_inside);
}
