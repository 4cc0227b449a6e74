// free_surface.cu: pressure-free surface at z = 0 (antisymmetric mirror): p(z = 0) = 0 and
// p(-k) = -p(k) in the R halo planes above, applied to p^n before the step. One thread per (ix, iy).

extern "C" __global__ void free_surface(float* RESTRICT cur, int nx, int ny, i64 pitch, i64 plane) {
    const int ix = blockIdx.x * blockDim.x + threadIdx.x;
    const int iy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ix >= nx || iy >= ny) return;
    const i64 o = (i64)iy * pitch + ix;
    cur[o] = 0.0f;
#pragma unroll
    for (int k = 1; k <= RADIUS; k++) cur[o - k * plane] = -cur[o + k * plane];
}
