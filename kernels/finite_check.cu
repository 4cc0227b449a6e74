// finite_check.cu: the run's blow-up check. Scans a field (grid-stride loop) and sets *flag to 1
// when any value is NaN or infinite (exponent bits all set). One launch reads the field once and
// writes at most one word per block, so a check costs about one field read at memory bandwidth.

DEVICE bool not_finite(float v) { return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u; }
DEVICE bool not_finite(h16 v) { return (v & 0x7c00u) == 0x7c00u; }

template <class T>
DEVICE void check(const T* RESTRICT field, u64 n, u32* RESTRICT flag) {
    u32 bad = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        bad |= not_finite(field[i]);
    }
    // One atomic per block at most: a block-wide OR through shared memory.
    __shared__ u32 any;
    if (threadIdx.x == 0) any = 0;
    BLOCK_SYNC();
    if (bad) any = 1;
    BLOCK_SYNC();
    if (threadIdx.x == 0 && any) atomicOr(flag, 1u);
}

extern "C" __global__ void finite_check(const float* RESTRICT field, u64 n, u32* RESTRICT flag) {
    check<float>(field, n, flag);
}

#if HALF
extern "C" __global__ void finite_check_half(const h16* RESTRICT field, u64 n, u32* RESTRICT flag) {
    check<h16>(field, n, flag);
}
#endif
