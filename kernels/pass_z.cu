// pass_z.cu: three-pass fallback, third pass: lap += z-derivative terms. Each thread owns VEC
// points in x of one row and marches in z over `window` planes (add_axis_terms, prelude.h).

extern "C" __global__ LAUNCH_BOUNDS(32 * BLOCK_Y) void pass_z(const float* RESTRICT cur, float* RESTRICT lap,
                                                              StencilWeights w, int nx, int ny, int nz, i64 pitch,
                                                              i64 plane, int window) {
    const int ix = (blockIdx.x * 32 + threadIdx.x) * VEC;
    const int iy = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int z0 = blockIdx.z * window;
    if (ix >= nx || iy >= ny) return;
    const i64 base = (i64)iy * pitch + ix;
    add_axis_terms<RADIUS>(cur + base, lap + base, w.cz, plane, z0, imin(z0 + window, nz));
}
