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
