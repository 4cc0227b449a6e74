// cpml.cu: the CPML layers of one axis as a pass of their own, after the interior update (the
// three-pass fallback; the fused kernel applies the same update inside its pass, fused.cu). One
// thread per slab point, fastest slab index across the threads so that every access runs along x
// in a warp (along the axis for the x layers); the point's update is layers.h's. With nx a multiple
// of VEC the y and z layers take VEC points a thread (cpml_rows).

template <int AXIS>
DEVICE void cpml_axis(const float* RESTRICT cur, float* RESTRICT out, const float* RESTRICT vel, const Layers& L,
                      int nx, int ny, int nz, i64 pitch, i64 plane) {
    constexpr int R = RADIUS;
    const int w = L.width;
    const int n[3] = {nx, ny, nz};
    int e[3] = {nx, ny, nz};
    e[AXIS] = 2 * w;
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // over e[0] * e[1]
    if (row >= (i64)e[0] * e[1]) return;
    int c[3];
    c[0] = (int)(row % e[0]);
    c[1] = (int)(row / e[0]);
    const int u = c[AXIS];  // slab coordinate along the axis, if the axis is x or y
    const i64 st = AXIS == 0 ? 1 : (AXIS == 1 ? pitch : plane);
    const i64 ss = AXIS == 0 ? 1 : (AXIS == 1 ? (i64)e[0] : (i64)e[0] * e[1]);
    for (int k2 = blockIdx.y; k2 < e[2]; k2 += gridDim.y) {
        c[2] = k2;
        const int sc = AXIS == 2 ? k2 : u;  // slab coordinate along the axis
        const int half = sc < w ? 0 : 1;
        const int t = sc - half * w;
        if (half == 0 && !L.low[AXIS]) continue;
        int g[3] = {c[0], c[1], c[2]};
        g[AXIS] = half == 0 ? t : n[AXIS] - w + t;  // grid coordinate along the axis
        if (g[AXIS] < 0 || g[AXIS] >= n[AXIS]) continue;  // a subdomain thinner than its layers
        const i64 o = (i64)g[2] * plane + (i64)g[1] * pitch + g[0];
        const i64 s = ((i64)c[2] * e[1] + c[1]) * e[0] + c[0];
        float lo[R + 1], hi[R + 1];
#pragma unroll
        for (int k = 1; k <= R; k++) {
            lo[k] = cur[o - k * st];
            hi[k] = cur[o + k * st];
        }
        out[o] = layer_point<R>(out[o], cur[o], lo, hi, vel[o], L, AXIS, s, ss, t, g[AXIS], n[AXIS]);
    }
}

// The y or z layers with nx a multiple of VEC: one thread per VEC points of a slab row, vector
// loads and stores throughout (layers.h, layer_row); the launch has e[0] / VEC threads a row.
template <int AXIS>
DEVICE void cpml_rows(const float* RESTRICT cur, float* RESTRICT out, const float* RESTRICT vel, const Layers& L,
                      int nx, int ny, int nz, i64 pitch, i64 plane) {
    constexpr int R = RADIUS;
    const int w = L.width;
    const int n[3] = {nx, ny, nz};
    int e[3] = {nx, ny, nz};
    e[AXIS] = 2 * w;
    const int ev = e[0] / VEC;
    const i64 row = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // over ev * e[1]
    if (row >= (i64)ev * e[1]) return;
    int c[3];
    c[0] = (int)(row % ev) * VEC;
    c[1] = (int)(row / ev);
    const i64 st = AXIS == 1 ? pitch : plane;
    const i64 ss = AXIS == 1 ? (i64)e[0] : (i64)e[0] * e[1];
    for (int k2 = blockIdx.y; k2 < e[2]; k2 += gridDim.y) {
        c[2] = k2;
        const int sc = c[AXIS];
        const int half = sc < w ? 0 : 1;
        const int t = sc - half * w;
        if (half == 0 && !L.low[AXIS]) continue;
        int g[3] = {c[0], c[1], c[2]};
        g[AXIS] = half == 0 ? t : n[AXIS] - w + t;
        if (g[AXIS] < 0 || g[AXIS] >= n[AXIS]) continue;  // a subdomain thinner than its layers
        const i64 o = (i64)g[2] * plane + (i64)g[1] * pitch + g[0];
        const i64 s = ((i64)c[2] * e[1] + c[1]) * e[0] + c[0];
        auto nb = [&](int k, Vf& lo, Vf& hi) {
            lo = vload(cur + o - k * st);
            hi = vload(cur + o + k * st);
        };
        auto phi = [&](int k) { return vload(L.phi_in[AXIS] + s + k * ss); };
        vstore(out + o, layer_row<R>(vload(out + o), vload(cur + o), nb, phi, vload(L.zeta[AXIS] + s), vload(vel + o), L,
                                     AXIS, s, t, g[AXIS], n[AXIS]));
    }
}

#define CPML_PARAMS                                                                                       \
    const float *RESTRICT cur, float *RESTRICT out, const float *RESTRICT vel, Layers L, int nx, int ny, int nz, \
        i64 pitch, i64 plane

extern "C" __global__ void cpml_x(CPML_PARAMS) { cpml_axis<0>(cur, out, vel, L, nx, ny, nz, pitch, plane); }
extern "C" __global__ void cpml_y(CPML_PARAMS) {
    if (nx % VEC == 0)
        cpml_rows<1>(cur, out, vel, L, nx, ny, nz, pitch, plane);
    else
        cpml_axis<1>(cur, out, vel, L, nx, ny, nz, pitch, plane);
}
extern "C" __global__ void cpml_z(CPML_PARAMS) {
    if (nx % VEC == 0)
        cpml_rows<2>(cur, out, vel, L, nx, ny, nz, pitch, plane);
    else
        cpml_axis<2>(cur, out, vel, L, nx, ny, nz, pitch, plane);
}
