// cpml.cu: the CPML memory variables of one axis and their correction of p^{n+1}, in one pass over
// that axis's slab (its two layers packed together, fastest index first: see boundary.rs `Slab`),
// after the interior update. For each layer point
//   psi  <- b psi + a dp^n/dx
//   zeta <- b zeta + a (d2p^n/dx2 + dpsi/dx)
//   p^{n+1} += c^2 dt^2 (dpsi/dx + zeta)
// with the CPU reference's formulas and operation order. dpsi/dx needs the new psi of R neighbours
// on each side along the axis, so each thread owns a whole line of one layer along the axis and
// marches through it, keeping p^n (4R + 1 points) and the new psi (2R + 1 points) in register
// windows: each point is loaded once and each psi computed once. psi is double-buffered (psi_in,
// the previous step's, and psi_out; the host swaps them every step) so that a line never reads a
// psi another line has already overwritten. Neighbours outside the point's own layer count as zero,
// as in the CPU reference.

struct SlabGeom {
    int width;
    int n[3];        // grid shape (nx, ny, nz)
    int e[3];        // slab extent: the grid shape with 2 * width along the axis
    int half_first;  // 0: both layers; 1: the high layer only (the free surface's axis)
    i64 pitch;
    i64 plane;
};
static_assert(sizeof(SlabGeom) == 48, "SlabGeom must match the host's struct");

#define CPML_PARAMS                                                                                      \
    const float *RESTRICT cur, float *RESTRICT out, const float *RESTRICT vel, const float *RESTRICT psi_in, \
        float *RESTRICT psi_out, float *RESTRICT zeta, const float *RESTRICT a, const float *RESTRICT b,      \
        AxisWeights w, SlabGeom g

// Threads: x over the first of the two other axes (x itself where it is one of them, so loads
// coalesce), y over the second; blocks in z: the layer (low, high).
template <int AXIS>
DEVICE void cpml_lines(CPML_PARAMS) {
    constexpr int R = RADIUS;
    constexpr int U = AXIS == 0 ? 1 : 0;  // the other two axes, u fastest
    constexpr int V = AXIS == 2 ? 1 : 2;
    const int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= g.n[U]) return;
    const int half = g.half_first + blockIdx.z;
    const int wd = g.width;
    const int na = g.n[AXIS];
    const int q0 = half == 0 ? 0 : na - wd;  // grid coordinate of the layer's first point
    const i64 st = AXIS == 0 ? 1 : (AXIS == 1 ? g.pitch : g.plane);
    const i64 su = U == 0 ? 1 : g.pitch;
    const i64 sv = V == 1 ? g.pitch : g.plane;
    // Slab strides: of the axis, of u and of v.
    const i64 e01 = (i64)g.e[0] * g.e[1];
    const i64 sst = AXIS == 0 ? 1 : (AXIS == 1 ? (i64)g.e[0] : e01);
    const i64 ssu = U == 0 ? 1 : (i64)g.e[0];
    const i64 ssv = V == 1 ? (i64)g.e[0] : e01;
    for (int v = blockIdx.y * blockDim.y + threadIdx.y; v < g.n[V]; v += gridDim.y * blockDim.y) {
        const i64 o0 = (i64)u * su + (i64)v * sv + (i64)q0 * st;  // field offset of the line's first point
        const i64 i0 = (i64)u * ssu + (i64)v * ssv + (i64)(half * wd) * sst;  // its slab offset
        // p^n at grid coordinates q - 2R .. q + 2R (only -R .. na + R - 1 exist: zero beyond).
        auto load = [&](int k) -> float {
            const int qk = q0 + k;
            return qk >= -R && qk < na + R ? cur[o0 + (i64)k * st] : 0.0f;
        };
        // The new psi at layer index t (0 .. wd - 1) from the window centred there.
        auto psi_new = [&](int t, const float* c) -> float {
            if (t < 0 || t >= wd) return 0.0f;
            float d = 0.0f;
#pragma unroll
            for (int k = 1; k <= R; k++) d += w.c1[k] * (c[k] - c[-k]);
            return b[q0 + t] * psi_in[i0 + (i64)t * sst] + a[q0 + t] * d;
        };
        float cw[4 * R + 1];  // p^n at t - 2R .. t + 2R
        float pw[2 * R + 1];  // new psi at t - R .. t + R
#pragma unroll
        for (int k = 0; k <= 4 * R; k++) cw[k] = load(k - 2 * R);
        // psi at t = -R .. -1 is zero (outside the layer); at 0 .. R from windows centred there.
#pragma unroll
        for (int k = 0; k < R; k++) pw[k] = 0.0f;
#pragma unroll
        for (int j = 0; j <= R; j++) {
            float c[2 * R + 1];
#pragma unroll
            for (int k = -R; k <= R; k++) c[k + R] = load(j + k);
            pw[R + j] = psi_new(j, c + R);
        }
        for (int t = 0; t < wd; t++) {
            const i64 o = o0 + (i64)t * st;
            const i64 i = i0 + (i64)t * sst;
            psi_out[i] = pw[R];
            float dpsi = 0.0f;
            float d2 = w.c2[0] * cw[2 * R];
#pragma unroll
            for (int k = 1; k <= R; k++) {
                // Two separate terms, in the CPU reference's order, so both round alike.
                dpsi += w.c1[k] * pw[R + k];
                dpsi -= w.c1[k] * pw[R - k];
                d2 += w.c2[k] * (cw[2 * R + k] + cw[2 * R - k]);
            }
            const float zn = b[q0 + t] * zeta[i] + a[q0 + t] * (d2 + dpsi);
            zeta[i] = zn;
            out[o] += vel[o] * (dpsi + zn);
            // Slide both windows one point along the axis.
#pragma unroll
            for (int k = 0; k < 4 * R; k++) cw[k] = cw[k + 1];
            cw[4 * R] = load(t + 1 + 2 * R);
#pragma unroll
            for (int k = 0; k < 2 * R; k++) pw[k] = pw[k + 1];
            pw[2 * R] = psi_new(t + 1 + R, cw + 3 * R);
        }
    }
}

extern "C" __global__ void cpml_x(CPML_PARAMS) { cpml_lines<0>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g); }
extern "C" __global__ void cpml_y(CPML_PARAMS) { cpml_lines<1>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g); }
extern "C" __global__ void cpml_z(CPML_PARAMS) { cpml_lines<2>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g); }
