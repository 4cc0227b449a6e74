// pass_y.cu: three-pass fallback, second pass: lap += y-derivative terms. Each thread owns VEC
// points in x of one z-plane and marches in y over `window` rows with a register queue of 2R+1
// rows, so every row of p is loaded once per window.

extern "C" __global__ LAUNCH_BOUNDS(32 * BLOCK_Y) void pass_y(const float* RESTRICT cur, float* RESTRICT lap,
                                                              StencilWeights w, int nx, int ny, int nz, i64 pitch,
                                                              i64 plane, int window) {
    constexpr int R = RADIUS;
    const int ix = (blockIdx.x * 32 + threadIdx.x) * VEC;
    const int iz = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int y0 = blockIdx.z * window;
    const int y1 = imin(y0 + window, ny);
    if (ix >= nx || iz >= nz) return;
    const float* base = cur + (i64)iz * plane + ix;
    Vf q[2 * R + 1];
#pragma unroll
    for (int i = 0; i < 2 * R; i++) q[i + 1] = vload(base + (i64)(y0 - R + i) * pitch);
    for (int y = y0; y < y1; y++) {
#pragma unroll
        for (int i = 0; i < 2 * R; i++) q[i] = q[i + 1];
        q[2 * R] = vload(base + (i64)(y + R) * pitch);
        const i64 o = (i64)iz * plane + (i64)y * pitch + ix;
        Vf acc = vload(lap + o);
#pragma unroll
        for (int k = 1; k <= R; k++)
#pragma unroll
            for (int j = 0; j < VEC; j++) acc.v[j] += w.cy[k] * (q[R - k].v[j] + q[R + k].v[j]);
        vstore(lap + o, acc);
    }
}
