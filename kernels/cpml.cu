// cpml.cu: the CPML memory variables of one axis and their correction of p^{n+1}, in one pass over
// that axis's slab (its two layers packed together, fastest index first: see boundary.rs `Slab`),
// after the interior update. For each layer point
//   psi  <- b psi + a dp^n/dx
//   zeta <- b zeta + a (d2p^n/dx2 + dpsi/dx)
//   p^{n+1} += c^2 dt^2 (dpsi/dx + zeta)
// with the CPU reference's formulas and operation order. dpsi/dx needs the new psi of R neighbours
// on each side along the axis, which other blocks own: a block takes a segment of SEG points of a
// layer along the axis for 32 lines (lanes) across it, stages p^n of the segment with 2R points on
// each side in shared memory, computes the new psi of the segment and of R points on each side
// there (the outer ones again, by the same expression as their owner, so bit for bit the owner's
// value) and then the update. psi is double-buffered (psi_in, the previous step's, and psi_out; the
// host swaps them every step) so that no block reads a psi another has already overwritten.
// Neighbours outside the point's own layer count as zero, as in the CPU reference. Every global
// access runs along x in a warp: along the lanes for the y and z layers, along the axis for x.

struct SlabGeom {
    int width;
    int n[3];        // grid shape (nx, ny, nz)
    int e[3];        // slab extent: the grid shape with 2 * width along the axis
    int half_first;  // 0: both layers; 1: the high layer only (the free surface's axis)
    i64 pitch;
    i64 plane;
};
static_assert(sizeof(SlabGeom) == 48 && alignof(SlabGeom) == 8, "SlabGeom must match the host's struct");

#define CPML_PARAMS                                                                                      \
    const float *RESTRICT cur, float *RESTRICT out, const float *RESTRICT vel, const float *RESTRICT psi_in, \
        float *RESTRICT psi_out, float *RESTRICT zeta, const float *RESTRICT a, const float *RESTRICT b,      \
        AxisWeights w, SlabGeom g

namespace cpml {
constexpr int SEG = 32;    // points of a segment along the axis
constexpr int LANES = 32;  // lines across the axis per block
constexpr int THREADS = 256;
}  // namespace cpml

// Eight blocks of 256 threads per multiprocessor (32 registers): the three phases of a block each
// wait for memory, so resident blocks are what keeps the DRAM busy (H200, marmousi-large's y
// layers: 1.71 ms at 2 blocks, 1.01 ms at 8; kernels/NOTES.md).

// Blocks: x over groups of 32 lines (the first of the two other axes, x itself for y and z), y over
// the segments of the layers (low ones first), z over the second other axis (grid-stride).
template <int AXIS>
DEVICE void cpml_segment(CPML_PARAMS) {
    using namespace cpml;
    constexpr int R = RADIUS;
    constexpr int U = AXIS == 0 ? 1 : 0;  // the two other axes: u across the lanes, v over blocks
    constexpr int V = AXIS == 2 ? 1 : 2;
    constexpr int CW = SEG + 4 * R;  // p^n staged along the axis
    constexpr int PW = SEG + 2 * R;  // new psi along the axis
    // +1: the x layers walk the first index, the others the second; either way no bank conflict.
    __shared__ float cs[CW][LANES + 1];
    __shared__ float ps[PW][LANES + 1];

    const int tid = threadIdx.x;
    const int wd = g.width;
    const int na = g.n[AXIS];
    // A layer of at most SEG points is one segment of exactly its width: no idle rows, and no
    // neighbour beyond the segment inside the layer, so the outer R staged rows on each side (only
    // those neighbours' psi reads them) are not loaded. The host's grid, ceil(width / SEG)
    // segments a layer, is the same either way.
    const int seg = wd < SEG ? wd : SEG;
    const int segs = (wd + seg - 1) / seg;
    const int skip = segs == 1 ? R : 0;     // staged rows not loaded on each side
    const int staged = seg + 4 * R - 2 * skip;
    const int half = g.half_first + blockIdx.y / segs;
    const int t0 = (blockIdx.y % segs) * seg;  // first layer index of the segment
    const int q0 = half == 0 ? 0 : na - wd;    // grid coordinate of layer index 0
    const int u0 = blockIdx.x * LANES;
    const i64 st = AXIS == 0 ? 1 : (AXIS == 1 ? g.pitch : g.plane);
    const i64 su = U == 0 ? 1 : g.pitch;
    const i64 sv = V == 1 ? g.pitch : g.plane;
    const i64 e01 = (i64)g.e[0] * g.e[1];
    const i64 sst = AXIS == 0 ? 1 : (AXIS == 1 ? (i64)g.e[0] : e01);
    const i64 ssu = U == 0 ? 1 : (i64)g.e[0];
    const i64 ssv = V == 1 ? (i64)g.e[0] : e01;
    // Position k of a loop over n x 32 (along, lane) pairs: along fastest for the x layers.
    auto split = [&](int k, int n, int& along, int& lane) {
        if (AXIS == 0) {
            along = k % n;
            lane = k / n;
        } else {
            lane = k % LANES;
            along = k / LANES;
        }
    };
    for (int v = blockIdx.z; v < g.n[V]; v += gridDim.z) {
        const i64 base = (i64)v * sv + (i64)u0 * su + (i64)(q0 + t0) * st;  // field, lane 0, segment start
        const i64 sbase = (i64)v * ssv + (i64)u0 * ssu + (i64)(half * wd + t0) * sst;
        for (int k = tid; k < staged * LANES; k += THREADS) {
            int along, lane;
            split(k, staged, along, lane);
            along += skip;
            const int q = q0 + t0 + along - 2 * R;  // p^n exists at -R .. na + R - 1
            const bool in = u0 + lane < g.n[U] && q >= -R && q < na + R;
            cs[along][lane] = in ? cur[base + (i64)lane * su + (i64)(along - 2 * R) * st] : 0.0f;
        }
        BLOCK_SYNC();
        for (int k = tid; k < (seg + 2 * R) * LANES; k += THREADS) {
            int along, lane;
            split(k, seg + 2 * R, along, lane);
            const int t = t0 + along - R;  // layer index
            float p = 0.0f;
            if (t >= 0 && t < wd && u0 + lane < g.n[U]) {
                float d = 0.0f;
#pragma unroll
                for (int j = 1; j <= R; j++) d += w.c1[j] * (cs[along + R + j][lane] - cs[along + R - j][lane]);
                const i64 i = sbase + (i64)lane * ssu + (i64)(along - R) * sst;
                p = b[q0 + t] * psi_in[i] + a[q0 + t] * d;
                if (along >= R && along < seg + R) psi_out[i] = p;
            }
            ps[along][lane] = p;
        }
        BLOCK_SYNC();
        for (int k = tid; k < seg * LANES; k += THREADS) {
            int along, lane;
            split(k, seg, along, lane);
            const int t = t0 + along;
            if (t >= wd || u0 + lane >= g.n[U]) continue;
            float dpsi = 0.0f;
            float d2 = w.c2[0] * cs[along + 2 * R][lane];
#pragma unroll
            for (int j = 1; j <= R; j++) {
                // Two separate terms, in the CPU reference's order, so both round alike.
                dpsi += w.c1[j] * ps[along + R + j][lane];
                dpsi -= w.c1[j] * ps[along + R - j][lane];
                d2 += w.c2[j] * (cs[along + 2 * R + j][lane] + cs[along + 2 * R - j][lane]);
            }
            const i64 i = sbase + (i64)lane * ssu + (i64)along * sst;
            const i64 o = base + (i64)lane * su + (i64)along * st;
            const float zn = b[q0 + t] * zeta[i] + a[q0 + t] * (d2 + dpsi);
            zeta[i] = zn;
            out[o] += vel[o] * (dpsi + zn);
        }
        BLOCK_SYNC();  // the next v reuses the shared arrays
    }
}

extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(256, 8) void cpml_x(CPML_PARAMS) {
    cpml_segment<0>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g);
}
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(256, 8) void cpml_y(CPML_PARAMS) {
    cpml_segment<1>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g);
}
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(256, 8) void cpml_z(CPML_PARAMS) {
    cpml_segment<2>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g);
}
