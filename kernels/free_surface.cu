// free_surface.cu: pressure-free surface at z = 0 (antisymmetric mirror): p(z = 0) = 0 and
// p(-k) = -p(k) in the R halo planes above, applied to p^n before the step. One thread per (ix, iy).
// The f16 step also zeroes d^n = p^n - p^{n-1} on the surface (both levels were mirrored there).

template <class T>
DEVICE void mirror(T* RESTRICT cur, int nx, int ny, i64 pitch, i64 plane, T* RESTRICT inc) {
    const int ix = blockIdx.x * blockDim.x + threadIdx.x;
    const int iy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ix >= nx || iy >= ny) return;
    const i64 o = (i64)iy * pitch + ix;
    cur[o] = T(0);
#pragma unroll
    for (int k = 1; k <= RADIUS; k++) cur[o - k * plane] = neg(cur[o + k * plane]);
    if (inc) inc[o] = T(0);
}

extern "C" __global__ void free_surface(float* RESTRICT cur, int nx, int ny, i64 pitch, i64 plane) {
    mirror<float>(cur, nx, ny, pitch, plane, nullptr);
}

#if HALF
extern "C" __global__ void free_surface_half(h16* RESTRICT cur, h16* RESTRICT inc, int nx, int ny, i64 pitch,
                                             i64 plane) {
    mirror<h16>(cur, nx, ny, pitch, plane, inc);
}
#endif
