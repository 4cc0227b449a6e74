// stream.cu: STREAM-like ceilings on the same GPU, 16-byte accesses, grid-stride loops.
// copy: b = a (1 read + 1 write); three_read_one_write: d = a + b + c (the leapfrog's traffic).

extern "C" __global__ void stream_copy(const float4* RESTRICT a, float4* RESTRICT b, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) b[i] = a[i];
}

extern "C" __global__ void stream_3r1w(const float4* RESTRICT a, const float4* RESTRICT b,
                                       const float4* RESTRICT c, float4* RESTRICT d, u64 n) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const float4 x = a[i], y = b[i], z = c[i];
        d[i] = make_float4(x.x + y.x + z.x, x.y + y.y + z.y, x.z + y.z + z.z, x.w + y.w + z.w);
    }
}

// Fills an array with non-zero values (the ceilings are not measured on zeros).
extern "C" __global__ void stream_fill(float4* RESTRICT a, u64 n, float seed) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const float v = seed + (float)(i & 1023) * 1e-3f;
        a[i] = make_float4(v, -v, 0.5f * v, 2.0f * v);
    }
}

// The same with 4 independent vectors per thread (more bytes in flight, no loop): one block per
// 1024 vectors.
extern "C" __global__ void stream_copy_x4(const float4* RESTRICT a, float4* RESTRICT b, u64 n) {
    const u64 base = (u64)blockIdx.x * blockDim.x * 4 + threadIdx.x;
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (base + k * blockDim.x < n) v[k] = a[base + k * blockDim.x];
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (base + k * blockDim.x < n) b[base + k * blockDim.x] = v[k];
}

extern "C" __global__ void stream_3r1w_x4(const float4* RESTRICT a, const float4* RESTRICT b,
                                          const float4* RESTRICT c, float4* RESTRICT d, u64 n) {
    const u64 base = (u64)blockIdx.x * blockDim.x * 4 + threadIdx.x;
    float4 x[4], y[4], z[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const u64 i = base + k * blockDim.x;
        if (i < n) {
            x[k] = a[i];
            y[k] = b[i];
            z[k] = c[i];
        }
    }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const u64 i = base + k * blockDim.x;
        if (i < n) d[i] = make_float4(x[k].x + y[k].x + z[k].x, x[k].y + y[k].y + z[k].y, x[k].z + y[k].z + z[k].z,
                                      x[k].w + y[k].w + z[k].w);
    }
}
