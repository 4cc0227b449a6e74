// update.cu: three-pass fallback, last pass: p^{n+1} = g (2 p^n - g p^{n-1} + c^2 dt^2 lap), written
// over p^{n-1}; lanes past nx are not written (they are the next step's halo).

extern "C" __global__ LAUNCH_BOUNDS(32 * BLOCK_Y) void update(const float* RESTRICT cur, float* RESTRICT out,
                                                              const float* RESTRICT vel, const float* RESTRICT lap,
                                                              const float* RESTRICT gx, const float* RESTRICT gy,
                                                              const float* RESTRICT gz, int nx, int ny, int nz,
                                                              i64 pitch, i64 plane) {
    const int ix = (blockIdx.x * 32 + threadIdx.x) * VEC;
    const int iy = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int iz = blockIdx.z;
    if (ix >= nx || iy >= ny || iz >= nz) return;
    const i64 o = (i64)iz * plane + (i64)iy * pitch + ix;
    const Vf c = vload(cur + o), p = vload(out + o), v = vload(vel + o), l = vload(lap + o);
    update_row(out + o, c, l.v, p, v, gx, SPONGE ? gy[iy] * gz[iz] : 0.0f, ix, nx, true);
}
