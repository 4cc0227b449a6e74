// section.cu: copies one plane of a field (n1 lines of n0 points; in the field a point's neighbour
// along a line is s0 elements away, the next line s1) into a dense (n1, n0) f32 buffer, so that a
// plane snapshot brings only that plane to the host; and back (a block's halo rows).

template <class T>
DEVICE void extract(const T* RESTRICT field, float* RESTRICT out, int n0, int n1, i64 s0, i64 s1) {
    const int i0 = blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= n0) return;
    for (int i1 = blockIdx.y; i1 < n1; i1 += gridDim.y) out[(i64)i1 * n0 + i0] = ld(field + i1 * s1 + i0 * s0);
}

extern "C" __global__ void extract_section(const float* RESTRICT field, float* RESTRICT out, int n0, int n1,
                                           i64 s0, i64 s1) {
    extract<float>(field, out, n0, n1, s0, s1);
}

// The reverse for f32 fields: a dense (n1, n0) buffer written into the field's n0 x n1 plane (a
// decomposed run's halo rows going back in).
extern "C" __global__ void insert_section(float* RESTRICT field, const float* RESTRICT dense, int n0, int n1, i64 s0,
                                          i64 s1) {
    const int i0 = blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= n0) return;
    for (int i1 = blockIdx.y; i1 < n1; i1 += gridDim.y) field[i1 * s1 + i0 * s0] = dense[(i64)i1 * n0 + i0];
}

#if HALF
extern "C" __global__ void extract_section_half(const h16* RESTRICT field, float* RESTRICT out, int n0, int n1,
                                                i64 s0, i64 s1) {
    extract<h16>(field, out, n0, n1, s0, s1);
}
#endif
