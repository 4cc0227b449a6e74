// cpml.cu: the CPML layers of one axis as a pass of their own, after the interior update (both
// kernels; fused_step_layers applies the same update inside its pass where asked, fused.cu). One
// thread per slab point, fastest slab index across the threads so that every access runs along x
// in a warp (along the axis for the x layers); the point's update is layers.h's. With nx a multiple
// of VEC the y and z layers march instead (cpml_march).
// T is the storage of the fields: float, or h16 for the f16 step (fused_half.cu), where `out` is
// d^{n+1} and `next` p^{n+1} (`put`); the f32 kernels pass no `next`.

// A layer point's corrected update `res`: f32, p^{n+1} itself; f16, d^{n+1} rounded, then
// p^{n+1} = p^n + d^{n+1} rounded again (cpu_half.rs; the last axis's write is the final one).
DEVICE void put(float* RESTRICT out, float* RESTRICT, i64 o, float, float res) { out[o] = res; }
DEVICE void put(h16* RESTRICT inc, h16* RESTRICT next, i64 o, float p0, float res) {
    const h16 d = f2h(res);
    inc[o] = d;
    next[o] = f2h(p0 + h2f(d));
}
DEVICE void put_row(float* RESTRICT out, float* RESTRICT, i64 o, const Vf&, const Vf& res) { vstore(out + o, res); }
DEVICE void put_row(h16* RESTRICT inc, h16* RESTRICT next, i64 o, const Vf& p0, const Vf& res) {
    h16 d[VEC], p[VEC];
#pragma unroll
    for (int j = 0; j < VEC; j++) {
        d[j] = f2h(res.v[j]);
        p[j] = f2h(p0.v[j] + h2f(d[j]));
    }
    vstore_bits(inc + o, d);
    vstore_bits(next + o, p);
}

// c^2 dt^2 at layer point o: `vel` itself, or K bh where the density varies (L.buoyancy set; the
// layers' correction takes the density as locally constant, src/problem/density.rs), one rounding
// as the CPU reference's.
template <class T>
DEVICE float layer_vel(const T* RESTRICT vel, const Layers& L, i64 o) {
    const float v = ld(vel + o);
    return L.buoyancy ? v * L.buoyancy[o] : v;
}
template <class T>
DEVICE Vf layer_vel_row(const T* RESTRICT vel, const Layers& L, i64 o) {
    Vf v = vload(vel + o);
    if (L.buoyancy) {
        const Vf b = vload(L.buoyancy + o);
#pragma unroll
        for (int j = 0; j < VEC; j++) v.v[j] = v.v[j] * b.v[j];
    }
    return v;
}

template <class T, int AXIS>
DEVICE void cpml_axis(const T* RESTRICT cur, T* RESTRICT out, T* RESTRICT next, const T* RESTRICT vel,
                      const Layers& L, int nx, int ny, int nz, i64 pitch, i64 plane) {
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
    // Along z only the planes [z_begin, z_end): x and y slabs start there, z slabs filter below.
    const int k2_end = AXIS == 2 ? e[2] : imin(e[2], L.z_end);
    for (int k2 = (AXIS == 2 ? 0 : L.z_begin) + blockIdx.y; k2 < k2_end; k2 += gridDim.y) {
        c[2] = k2;
        const int sc = AXIS == 2 ? k2 : u;  // slab coordinate along the axis
        const int half = sc < w ? 0 : 1;
        const int t = sc - half * w;
        if (half == 0 ? !L.low[AXIS] : !L.high[AXIS]) continue;
        int g[3] = {c[0], c[1], c[2]};
        g[AXIS] = half == 0 ? t : n[AXIS] - w + t;  // grid coordinate along the axis
        if (g[AXIS] < 0 || g[AXIS] >= n[AXIS]) continue;  // a subdomain thinner than its layers
        if (g[2] < L.z_begin || g[2] >= L.z_end) continue;
        const i64 o = (i64)g[2] * plane + (i64)g[1] * pitch + g[0];
        const i64 s = ((i64)c[2] * e[1] + c[1]) * e[0] + c[0];
        float lo[R + 1], hi[R + 1];
#pragma unroll
        for (int k = 1; k <= R; k++) {
            lo[k] = ld(cur + o - k * st);
            hi[k] = ld(cur + o + k * st);
        }
        const float p0 = ld(cur + o);
        put(out, next, o, p0,
            layer_point<R>(ld(out + o), p0, lo, hi, layer_vel(vel, L, o), L, AXIS, s, ss, t, g[AXIS], n[AXIS]));
    }
}

// The y or z layers with nx a multiple of VEC: a thread marches VEC points of x through one layer
// along the axis (t = 0 .. width - 1) for one row (y layers: one plane; z layers: one y), holding
// p^n of the 2R + 1 points around its point in registers, so each is read once rather than
// 2R + 1 times through L2; a warp's loads are 32 neighbouring vectors along x. phi's neighbours
// are loads (the thread read them an iteration or two before: L1): a register window for them
// too leaves fewer threads to hide latency. Grid x runs over the
// nx / VEC vectors of a row times the rows across (threads of the last row spill into the next, so
// no block idles at a row's end), grid z over the two layers, each in segments; the update is
// layers.h's layer_row, so the bits are the scalar path's.
template <class T, int AXIS>
DEVICE void cpml_march(const T* RESTRICT cur, T* RESTRICT out, T* RESTRICT next, const T* RESTRICT vel,
                       const Layers& L, int nx, int ny, int nz, i64 pitch, i64 plane) {
    constexpr int R = RADIUS;
    const int w = L.width;
    const int n = AXIS == 1 ? ny : nz;
    const int across = AXIS == 1 ? nz : ny;
    // y layers: the planes [z_begin, z_end) are the rows across; z layers: every y is (select 5:
    // those below band_lo and from band_hi on, fused_step_zlayers took the others), only the planes
    // [z_begin, z_end) are written.
    const bool band = AXIS == 2 && L.select == 5;
    const int band_lo = imax(L.band_lo, 0), band_hi = imax(L.band_hi, band_lo);
    const int c_first = AXIS == 1 ? L.z_begin : 0;
    const int c_end = AXIS == 1 ? imin(across, L.z_end) : (band ? band_lo + imax(across - band_hi, 0) : across);
    const int nxv = nx / VEC;
    const i64 id = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // over nxv * (c_end - c_first)
    if (id >= (i64)nxv * (c_end - c_first)) return;
    const int ix = (int)(id % nxv) * VEC;
    const int cr = c_first + (int)(id / nxv);
    const int c = band && cr >= band_lo ? cr - band_lo + band_hi : cr;
    // grid z: the faces that hold a layer (not a free surface, nor a subdomain's cut), each in
    // gridDim.z / layers segments along the axis, so that thin grids still have enough threads
    // in flight (the host picks the count and launches none without a layer: launch.rs, launch_cpml).
    const int layers = (L.low[AXIS] != 0) + (L.high[AXIS] != 0);
    const int half = layers == 2 ? (int)(blockIdx.z & 1) : (L.low[AXIS] ? 0 : 1);
    const int segments = gridDim.z / layers, seg = blockIdx.z / layers;
    const int t0 = seg * w / segments, t1 = (seg + 1) * w / segments;
    const i64 st = AXIS == 1 ? pitch : plane;
    const i64 ss = AXIS == 1 ? (i64)nx : (i64)nx * ny;
    const float* RESTRICT phi_in = L.phi_in[AXIS];
    const int q0 = half == 0 ? 0 : n - w;  // grid index of the layer's t = 0
    Vf zero;
#pragma unroll
    for (int j = 0; j < VEC; j++) zero.v[j] = 0.0f;
    const i64 o0 = AXIS == 1 ? (i64)c * plane + (i64)q0 * pitch + ix : (i64)q0 * plane + (i64)c * pitch + ix;
    const i64 s0 = AXIS == 1 ? ((i64)c * (2 * w) + half * w) * nx + ix : ((i64)half * w * ny + c) * nx + ix;
    // p^n at grid index q0 + u where it exists (the halo reaches R past the grid; a subdomain
    // thinner than its layers leaves points outside it, never used).
    auto p_at = [&](int u) { return q0 + u >= -R && q0 + u < n + R ? vload(cur + o0 + (i64)u * st) : zero; };
    Vf pw[2 * R + 1];  // [R + k]: k points along the axis from the current point
#pragma unroll
    for (int j = 0; j < 2 * R; j++) pw[j] = p_at(t0 + j - R);
    for (int t = t0; t < t1; t++) {
        pw[2 * R] = p_at(t + R);
        const int q = q0 + t;
        if (q >= 0 && q < n && (AXIS == 1 || (q >= L.z_begin && q < L.z_end))) {
            const i64 o = o0 + (i64)t * st, s = s0 + (i64)t * ss;
            auto nb = [&](int k, Vf& lo, Vf& hi) {
                lo = pw[R - k];
                hi = pw[R + k];
            };
            auto phi = [&](int k) { return vload(phi_in + s + (i64)k * ss); };
            put_row(out, next, o, pw[R],
                    layer_row<R>(vload(out + o), pw[R], nb, phi, vload(L.zeta[AXIS] + s), layer_vel_row(vel, L, o), L, AXIS,
                                 s, t, AxisAB{L.a[AXIS], L.b[AXIS], q, n}));
        }
#pragma unroll
        for (int j = 0; j < 2 * R; j++) pw[j] = pw[j + 1];
    }
}

// The x layers where nx and the width are multiples of VEC and the two layers do not meet: a
// thread takes VEC neighbouring points of one layer row, p^n of the 2 HV + 1 vectors around them in
// registers (a vector load per VEC points instead of 2R + 1 scalar loads a point) and its slab
// values as vectors; each point's update is layers.h's point_update, so the bits are the scalar
// path's. The launch has 2 width / VEC threads a row over grid x (low layer, then high), the
// planes over grid y, a thread every gridDim.y-th plane (the host picks two planes a thread).
template <class T>
DEVICE void cpml_x_rows(const T* RESTRICT cur, T* RESTRICT out, T* RESTRICT next, const T* RESTRICT vel,
                        const Layers& L, int nx, int ny, i64 pitch, i64 plane) {
    constexpr int R = RADIUS;
    constexpr int HV = (R + VEC - 1) / VEC;
    const int w = L.width, wv = w / VEC;
    const i64 id = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // over 2 wv * ny
    if (id >= (i64)2 * wv * ny) return;
    const int v = (int)(id % (2 * wv)), y = (int)(id / (2 * wv));
    const int half = v < wv ? 0 : 1;
    if (half == 0 ? !L.low[0] : !L.high[0]) return;
    const int t0 = (v - half * wv) * VEC;         // the first point's index in its layer
    const int x0 = half == 0 ? t0 : nx - w + t0;  // and its grid x
    for (int z = L.z_begin + blockIdx.y; z < L.z_end; z += gridDim.y) {
        const i64 o = (i64)z * plane + (i64)y * pitch + x0;
        const i64 s = ((i64)z * ny + y) * (2 * w) + half * w + t0;
        // Where a thread takes several planes, the next one's lines are asked for first.
        if (z + (int)gridDim.y < L.z_end) {
            const i64 on = o + (i64)gridDim.y * plane, sn = s + (i64)gridDim.y * ny * (2 * w);
            prefetch_line(cur + on - HV * VEC);
            prefetch_line(cur + on + (HV + 1) * VEC - 1);
            prefetch_line(out + on);
            prefetch_line(vel + on);
            prefetch_line(L.zeta[0] + sn);
            prefetch_line(L.phi_in[0] + sn);
        }
        // Up to R = 4, phi of the VEC points and of a vector on each side as three whole vectors
        // from the slab (the layer's own only: point_update reads phi(k) where t + k stays in the
        // layer, and w and t0 are multiples of VEC) instead of 2R + 1 scalar loads a point; at
        // R > 4 the five vectors' registers would spill under the 128-register cap.
        const float* RESTRICT phi_in = L.phi_in[0] + s;
        float pr[HV == 1 ? 3 * VEC : 1];
        if constexpr (HV == 1) {
#pragma unroll
            for (int i = 0; i < 3; i++) {
                const int tv = t0 + (i - 1) * VEC;
                const Vf f = vload_if(phi_in + (i - 1) * VEC, tv >= 0 && tv < w);
#pragma unroll
                for (int j = 0; j < VEC; j++) pr[i * VEC + j] = f.v[j];
            }
        }
        float xr[(2 * HV + 1) * VEC];
#pragma unroll
        for (int i = 0; i < 2 * HV + 1; i++) {
            const int xv = x0 + (i - HV) * VEC;
            const Vf p = vload_if(cur + o + (i - HV) * VEC, vec_in_x(xv, nx));
#pragma unroll
            for (int j = 0; j < VEC; j++) xr[i * VEC + j] = p.v[j];
        }
        const Vf res0 = vload(out + o), vv = layer_vel_row(vel, L, o), zeta = vload(L.zeta[0] + s);
        Vf p0, res, phn, zn;
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            float lo[R + 1], hi[R + 1];
#pragma unroll
            for (int k = 1; k <= R; k++) {
                lo[k] = xr[HV * VEC + j - k];
                hi[k] = xr[HV * VEC + j + k];
            }
            p0.v[j] = xr[HV * VEC + j];
            auto phi = [&](int k) { return HV == 1 ? pr[VEC + j + k] : phi_in[j + k]; };
            res.v[j] = point_update<R>(res0.v[j], p0.v[j], lo, hi, vv.v[j], phi, zeta.v[j], L, 0, t0 + j, x0 + j, nx,
                                       phn.v[j], zn.v[j]);
        }
        vstore(L.phi_out[0] + s, phn);
        vstore(L.zeta[0] + s, zn);
        put_row(out, next, o, p0, res);
    }
}

#define CPML_PARAMS                                                                                       \
    const float *RESTRICT cur, float *RESTRICT out, const float *RESTRICT vel, Layers L, int nx, int ny, int nz, \
        i64 pitch, i64 plane

// Whether the x layers go by rows of vectors (cpml_x_rows; the host launches to match).
DEVICE bool x_rows(int nx, int w) { return nx % VEC == 0 && w % VEC == 0 && 2 * w <= nx; }

// The y and z layers march where nx is a multiple of VEC, except on AMD: under hipcc the march's
// windows spill scalar registers (tools/hip-static-report); the host launches to match
// (solver.rs, launch_cpml).
template <class T, int AXIS>
DEVICE void cpml_layers(const T* RESTRICT cur, T* RESTRICT out, T* RESTRICT next, const T* RESTRICT vel,
                        const Layers& L, int nx, int ny, int nz, i64 pitch, i64 plane) {
    if constexpr (AXIS > 0 && !SEISMIC_HIP) {
        if (nx % VEC == 0) {
            cpml_march<T, AXIS>(cur, out, next, vel, L, nx, ny, nz, pitch, plane);
            return;
        }
    }
    if constexpr (AXIS == 0 && !SEISMIC_HIP) {
        if (x_rows(nx, L.width)) {
            cpml_x_rows<T>(cur, out, next, vel, L, nx, ny, pitch, plane);
            return;
        }
    }
    cpml_axis<T, AXIS>(cur, out, next, vel, L, nx, ny, nz, pitch, plane);
}

// Launches of 128 threads; 5 blocks a multiprocessor (96 registers) keep enough loads in flight.
// The x layers' rows of vectors need up to 128 registers (R = 4..8 spilled under 96): 4 blocks.
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(128, 4) void cpml_x(CPML_PARAMS) {
    cpml_layers<float, 0>(cur, out, nullptr, vel, L, nx, ny, nz, pitch, plane);
}
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(128, 5) void cpml_y(CPML_PARAMS) {
    cpml_layers<float, 1>(cur, out, nullptr, vel, L, nx, ny, nz, pitch, plane);
}
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(128, 5) void cpml_z(CPML_PARAMS) {
    cpml_layers<float, 2>(cur, out, nullptr, vel, L, nx, ny, nz, pitch, plane);
}

#if HALF
// The f16 step's layers: `inc` is d^{n+1}, `next` p^{n+1} (fused_half.cu).
#define CPML_HALF_PARAMS                                                                                  \
    const h16 *RESTRICT cur, h16 *RESTRICT inc, h16 *RESTRICT next, const h16 *RESTRICT vel, Layers L, int nx, \
        int ny, int nz, i64 pitch, i64 plane
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(128, 4) void cpml_x_half(CPML_HALF_PARAMS) {
    cpml_layers<h16, 0>(cur, inc, next, vel, L, nx, ny, nz, pitch, plane);
}
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(128, 5) void cpml_y_half(CPML_HALF_PARAMS) {
    cpml_layers<h16, 1>(cur, inc, next, vel, L, nx, ny, nz, pitch, plane);
}
extern "C" __global__ LAUNCH_BOUNDS_BLOCKS(128, 5) void cpml_z_half(CPML_HALF_PARAMS) {
    cpml_layers<h16, 2>(cur, inc, next, vel, L, nx, ny, nz, pitch, plane);
}
#endif
