// pass_y.cu: three-pass fallback, second pass: lap += y-derivative terms. Each thread owns VEC
// points in x of one z-plane and marches in y over `window` rows (add_axis_terms, prelude.h).

extern "C" __global__ LAUNCH_BOUNDS(32 * BLOCK_Y) void pass_y(const float* RESTRICT cur, float* RESTRICT lap,
                                                              StencilWeights w, int nx, int ny, int nz, i64 pitch,
                                                              i64 plane, int window) {
    const int ix = (blockIdx.x * 32 + threadIdx.x) * VEC;
    const int iz = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int y0 = blockIdx.z * window;
    if (ix >= nx || iz >= nz) return;
    const i64 base = (i64)iz * plane + ix;
    add_axis_terms<RADIUS>(cur + base, lap + base, w.cy, pitch, y0, imin(y0 + window, ny));
}
