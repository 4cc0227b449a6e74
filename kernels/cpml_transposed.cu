// cpml_transposed.cu: the CPML layers' transposed terms of a backward step, after the interior's
// step without an absorber (src/backend/cpml_transposed.rs has the terms and their order; the
// CPU's are src/backend/cpu/cpml_transposed.rs, with the same bits). One axis a launch, one
// thread a point: cpml_transposed_prepare over the axis's slab (step 1), then
// cpml_transposed_gather over the points within R of its layers (steps 2 and 3). Slabs are the
// forward CPML's: dense, fastest index first, 2 width along their axis; `coord` gives each grid
// index along the axis its slab coordinate (-1: no computed layer point), `band` lists the grid
// indices within R of one. beta, gamma and sigma are scratch slabs the axes share.

#define CPML_TRANSPOSED_PARAMS                                                                          \
    const float *RESTRICT cur, float *RESTRICT next, const float *RESTRICT stiffness,                    \
        const float *RESTRICT bh, float *RESTRICT lambda, float *RESTRICT eta, float *RESTRICT beta,     \
        float *RESTRICT gamma, float *RESTRICT sigma, const float *RESTRICT a, const float *RESTRICT b, \
        const int *RESTRICT coord, const int *RESTRICT band, AxisWeights w, int axis, int width, int bands, \
        int nx, int ny, int nz, i64 pitch, i64 plane

// The slab extent of `axis`: the grid's, 2 width along the axis.
DEVICE void slab_extent(int axis, int width, int nx, int ny, int nz, int (&e)[3]) {
    e[0] = nx;
    e[1] = ny;
    e[2] = nz;
    e[axis] = 2 * width;
}

// Slab index of grid point c with its coordinate along `axis` replaced by slab coordinate t.
DEVICE i64 slab_at(const int (&c)[3], int axis, int t, const int (&e)[3]) {
    int q[3] = {c[0], c[1], c[2]};
    q[axis] = t;
    return ((i64)q[2] * e[1] + q[1]) * e[0] + q[0];
}

// Step 1 at every computed layer point of the axis.
extern "C" __global__ void cpml_transposed_prepare(CPML_TRANSPOSED_PARAMS) {
    int e[3];
    slab_extent(axis, width, nx, ny, nz, e);
    const i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= (i64)e[0] * e[1] * e[2]) return;
    int c[3] = {(int)(s % e[0]), (int)(s / e[0] % e[1]), (int)(s / ((i64)e[0] * e[1]))};
    const int n[3] = {nx, ny, nz};
    const int t = c[axis];
    const int q = t < width ? t : n[axis] - 2 * width + t;
    if (coord[q] != t) return;
    c[axis] = q;
    const i64 o = (i64)c[2] * plane + (i64)c[1] * pitch + c[0];
    const float u = bh ? bh[o] * cur[o] : cur[o];
    const float et = eta[s] + u;
    gamma[s] = a[q] * et;
    sigma[s] = fmaf(a[q], et, u);
    eta[s] = b[q] * et;
    beta[s] = (a[q] * b[q]) * lambda[s];
    lambda[s] = b[q] * lambda[s];
}

// Steps 2 and 3 at every point within R of a layer point of the axis.
extern "C" __global__ void cpml_transposed_gather(CPML_TRANSPOSED_PARAMS) {
    constexpr int R = RADIUS;
    int e[3];
    slab_extent(axis, width, nx, ny, nz, e);
    const int n[3] = {nx, ny, nz};
    int span[3] = {nx, ny, nz};
    span[axis] = bands;
    const i64 id = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (i64)span[0] * span[1] * span[2]) return;
    int c[3] = {(int)(id % span[0]), (int)(id / span[0] % span[1]), (int)(id / ((i64)span[0] * span[1]))};
    const int q = band[c[axis]];
    c[axis] = q;
    const int nq = n[axis];
    const float* RESTRICT c1 = w.c1;
    const float* RESTRICT c2 = w.c2;
    const float aq = a[q];
    float g = 0.0f;
    if (coord[q] >= 0) {
        const i64 s = slab_at(c, axis, coord[q], e);
        float ws = 0.0f;
#pragma unroll
        for (int k = 1; k <= R; k++) {
            ws = ws + c2[k] * a_pair(a, aq, q + k, nq);
            ws = ws + c2[k] * a_pair(a, aq, q - k, nq);
        }
        g = fmaf(-ws, sigma[s], c2[0] * gamma[s]);
    }
#pragma unroll
    for (int k = 1; k <= R; k++) {
        if (q >= k && coord[q - k] >= 0) {
            const i64 s = slab_at(c, axis, coord[q - k], e);
            g = fmaf(c1[k], beta[s], g);
            g = fmaf(c2[k], gamma[s], g);
            g = fmaf(c2[k] * a_pair(a, aq, q - k, nq), sigma[s], g);
        }
        if (q + k < nq && coord[q + k] >= 0) {
            const i64 s = slab_at(c, axis, coord[q + k], e);
            g = fmaf(-c1[k], beta[s], g);
            g = fmaf(c2[k], gamma[s], g);
            g = fmaf(c2[k] * a_pair(a, aq, q + k, nq), sigma[s], g);
        }
    }
    const i64 o = (i64)c[2] * plane + (i64)c[1] * pitch + c[0];
    next[o] = fmaf(stiffness[o], g, next[o]);
    // Step 3: the point's own lambda, from sigma of its neighbours in its own layer.
    const int t = coord[q];
    if (t < 0) return;
    const i64 s = slab_at(c, axis, t, e);
    const i64 ss = axis == 0 ? 1 : (axis == 1 ? (i64)nx : (i64)nx * ny);
    const int lo = t < width ? 0 : width;
    float acc = lambda[s];
#pragma unroll
    for (int k = 1; k <= R; k++) {
        if (t >= lo + k) acc = fmaf(c1[k], sigma[s - k * ss], acc);
        if (t + k < lo + width) acc = fmaf(-c1[k], sigma[s + k * ss], acc);
    }
    lambda[s] = acc;
}
