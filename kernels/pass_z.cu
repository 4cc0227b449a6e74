// pass_z.cu: three-pass fallback, third pass: lap += z-derivative terms. Each thread owns VEC
// points in x of one row and marches in z over `window` planes with a register queue of 2R+1
// planes, so every plane of p is loaded once per window.

extern "C" __global__ LAUNCH_BOUNDS(32 * BLOCK_Y) void pass_z(const float* RESTRICT cur, float* RESTRICT lap,
                                                              StencilWeights w, int nx, int ny, int nz, i64 pitch,
                                                              i64 plane, int window) {
    constexpr int R = RADIUS;
    const int ix = (blockIdx.x * 32 + threadIdx.x) * VEC;
    const int iy = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int z0 = blockIdx.z * window;
    const int z1 = imin(z0 + window, nz);
    if (ix >= nx || iy >= ny) return;
    const float* base = cur + (i64)iy * pitch + ix;
    Vf q[2 * R + 1];
#pragma unroll
    for (int i = 0; i < 2 * R; i++) q[i + 1] = vload(base + (i64)(z0 - R + i) * plane);
    for (int z = z0; z < z1; z++) {
#pragma unroll
        for (int i = 0; i < 2 * R; i++) q[i] = q[i + 1];
        q[2 * R] = vload(base + (i64)(z + R) * plane);
        const i64 o = (i64)z * plane + (i64)iy * pitch + ix;
        Vf acc = vload(lap + o);
#pragma unroll
        for (int k = 1; k <= R; k++)
#pragma unroll
            for (int j = 0; j < VEC; j++) acc.v[j] += w.cz[k] * (q[R - k].v[j] + q[R + k].v[j]);
        vstore(lap + o, acc);
    }
}
