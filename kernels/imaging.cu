// imaging.cu: reverse-time migration's imaging condition on the device (src/imaging/rtm.rs has the
// sums and why they are these). The fields are the interior z-planes of the padded layout, n values
// from interior plane 0; the padding and halo columns are summed too and never read back. Sums are
// in f64, each product of f32 values exact in it, in the host reference's order of operations, so
// that the device's sums equal the CPU's for the same fields.

// kept = u; illumination += u^2 (the source pass, at each step it keeps).
extern "C" __global__ void keep_source(const float* RESTRICT field, float* RESTRICT kept,
                                       double* RESTRICT illumination, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const float u = field[i];
        kept[i] = u;
        illumination[i] += (double)u * (double)u;
    }
}

// image += u nu: the zero-lag cross-correlation of the kept source field and the adjoint field.
extern "C" __global__ void correlate_image(const float* RESTRICT source, const float* RESTRICT adjoint,
                                           double* RESTRICT image, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        image[i] += (double)source[i] * (double)adjoint[i];
    }
}

// gradient += nu (u^{n+1} - 2 g u^n + g^2 u^{n-1}), g the sponge factor (null: 1 everywhere); a
// null u^n or u^{n-1} is a field of zeros (before the first step).
extern "C" __global__ void correlate_gradient(const float* RESTRICT next, const float* RESTRICT cur,
                                              const float* RESTRICT prev, const double* RESTRICT sponge,
                                              const float* RESTRICT adjoint, double* RESTRICT gradient, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const double g = sponge ? sponge[i] : 1.0;
        const double c = cur ? (double)cur[i] : 0.0;
        const double p = prev ? (double)prev[i] : 0.0;
        const double bracket = (double)next[i] - 2.0 * g * c + g * g * p;
        gradient[i] += (double)adjoint[i] * bracket;
    }
}

// The shots' stack on the device. The points are the grid's: nx points of each of ny rows (the
// first at `origin` values into its plane, rows `pitch` apart) on the z-planes z0..nz - 1 (z0 = 1
// under a free surface, where the top plane sums nothing), planes `plane` apart, so that the
// result is the host's over the dense sums.

// The point of index i in that order (the caller keeps i < nx ny (nz - z0)).
DEVICE u64 stack_point(u64 i, int nx, int ny, int z0, i64 pitch, i64 plane, i64 origin) {
    const u64 row = i / (u64)nx, x = i % (u64)nx;
    const u64 y = row % (u64)ny, z = row / (u64)ny + (u64)z0;
    return z * (u64)plane + y * (u64)pitch + (u64)origin + x;
}

// *highest = max(*highest, illumination) over the points, as the bits of a non-negative double
// (which order as the values do): one atomic a block.
extern "C" __global__ void illumination_max(const double* RESTRICT illumination, u64* RESTRICT highest, int nx,
                                            int ny, int nz, int z0, i64 pitch, i64 plane, i64 origin) {
    const u64 n = (u64)nx * (u64)ny * (u64)(nz - z0);
    double m = 0.0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        m = fmax(m, illumination[stack_point(i, nx, ny, z0, pitch, plane, origin)]);
    }
    __shared__ double part[256];
    part[threadIdx.x] = m;
    BLOCK_SYNC();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) part[threadIdx.x] = fmax(part[threadIdx.x], part[threadIdx.x + s]);
        BLOCK_SYNC();
    }
    if (threadIdx.x == 0 && part[0] > 0.0) atomicMax(highest, (u64)__double_as_longlong(part[0]));
}

// stack += image / (illumination + floor) over the points, floor = fraction * highest (nothing
// where the highest illumination is 0): the host's add_normalised.
extern "C" __global__ void stack_normalised(const double* RESTRICT image, const double* RESTRICT illumination,
                                            const u64* RESTRICT highest, double fraction, double* RESTRICT stack,
                                            int nx, int ny, int nz, int z0, i64 pitch, i64 plane, i64 origin) {
    const double floor = fraction * __longlong_as_double((long long)*highest);
    if (floor == 0.0) return;
    const u64 n = (u64)nx * (u64)ny * (u64)(nz - z0);
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const u64 at = stack_point(i, nx, ny, z0, pitch, plane, origin);
        stack[at] += image[at] / (illumination[at] + floor);
    }
}
