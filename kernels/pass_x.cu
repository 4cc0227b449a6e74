// pass_x.cu: three-pass fallback, first pass: lap = centre p + x-derivative terms (centre of all
// three axes included, so the y and z passes only add). One thread per VEC points; the x
// neighbours come from aligned vector loads of the row (overlapping between threads, L1 serves
// the reuse). The scratch field may be written past nx (padding only; it is never read there).

namespace pass_x_ns {
constexpr int R = RADIUS;
constexpr int HV = (R + VEC - 1) / VEC;
}  // namespace pass_x_ns

extern "C" __global__ LAUNCH_BOUNDS(32 * BLOCK_Y) void pass_x(const float* RESTRICT cur, float* RESTRICT lap,
                                                              StencilWeights w, int nx, int ny, int nz, i64 pitch,
                                                              i64 plane) {
    using namespace pass_x_ns;
    const int ix = (blockIdx.x * 32 + threadIdx.x) * VEC;
    const int iy = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int iz = blockIdx.z;
    if (ix >= nx || iy >= ny || iz >= nz) return;
    const i64 o = (i64)iz * plane + (i64)iy * pitch + ix;
    float xr[(2 * HV + 1) * VEC];
#pragma unroll
    for (int s = 0; s < 2 * HV + 1; s++) {
        const Vf t = vload(cur + o + (s - HV) * VEC);
#pragma unroll
        for (int j = 0; j < VEC; j++) xr[s * VEC + j] = t.v[j];
    }
    Vf res;
#pragma unroll
    for (int j = 0; j < VEC; j++) res.v[j] = w.centre * xr[HV * VEC + j];
#pragma unroll
    for (int k = 1; k <= R; k++)
#pragma unroll
        for (int j = 0; j < VEC; j++) res.v[j] = tap(res.v[j], w.cx[k], xr[HV * VEC + j - k], xr[HV * VEC + j + k]);
    vstore(lap + o, res);
}
