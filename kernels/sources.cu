// sources.cu: the point sources and the receivers, on the device so that nothing returns to the
// host inside a step. Offsets are from the start of the field allocation (grid.rs `Layout::index`).

// The sample tap t adds at step `step`: samples hold `row` values a step, one shared by every tap
// (row 1: one source) or one per tap (several sources, summed on the host: problem/shot.rs
// `SourceInjection`).
DEVICE float source_sample(const float* RESTRICT samples, int row, int step, int t) {
    return samples[(i64)step * row + (row == 1 ? 0 : t)];
}

// p^{n+1}[tap] += (w c^2 dt^2)[tap] * s_n(tap), one thread per tap (taps are distinct points), for
// the taps with offsets in [lo, hi) (the planes of one part of a step in two parts).
extern "C" __global__ void inject_source(float* RESTRICT field, const u64* RESTRICT offsets,
                                         const float* RESTRICT weights, int ntaps, const float* RESTRICT samples,
                                         int row, int nsteps, int step, u64 lo, u64 hi) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntaps || step >= nsteps) return;
    const u64 o = offsets[t];
    if (o < lo || o >= hi) return;
    field[o] += weights[t] * source_sample(samples, row, step, t);
}

// trace[r * steps + step] = sum over the receiver's taps of w p^{n+1}; taps of receiver r are
// first[r]..first[r + 1]. One thread per receiver.
template <class T>
DEVICE void record(const T* RESTRICT field, const u64* RESTRICT offsets, const float* RESTRICT weights,
                   const u32* RESTRICT first, int nrec, float* RESTRICT traces, int steps, int step) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= nrec || step >= steps) return;
    float v = 0.0f;
    for (u32 t = first[r]; t < first[r + 1]; t++) v += weights[t] * ld(field + offsets[t]);
    traces[(i64)r * steps + step] = v;
}

extern "C" __global__ void record_receivers(const float* RESTRICT field, const u64* RESTRICT offsets,
                                            const float* RESTRICT weights, const u32* RESTRICT first, int nrec,
                                            float* RESTRICT traces, int steps, int step) {
    record<float>(field, offsets, weights, first, nrec, traces, steps, step);
}

#if HALF
// f16 storage (fused_half.cu): d^{n+1}[tap] += (w c^2 dt^2)[tap] * s_n(tap) (samples carry the
// field's scale), rounded, then p^{n+1} = p^n + d^{n+1} rounded again, as cpu_half.rs orders them.
extern "C" __global__ void inject_source_half(const h16* RESTRICT cur, h16* RESTRICT inc, h16* RESTRICT next,
                                              const u64* RESTRICT offsets, const float* RESTRICT weights, int ntaps,
                                              const float* RESTRICT samples, int row, int nsteps, int step) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntaps || step >= nsteps) return;
    const u64 o = offsets[t];
    const h16 d = f2h(h2f(inc[o]) + weights[t] * source_sample(samples, row, step, t));
    inc[o] = d;
    next[o] = f2h(h2f(cur[o]) + h2f(d));
}

// record_receivers of an f16 field (the traces carry the field's scale; the host divides it out).
extern "C" __global__ void record_receivers_half(const h16* RESTRICT field, const u64* RESTRICT offsets,
                                                 const float* RESTRICT weights, const u32* RESTRICT first, int nrec,
                                                 float* RESTRICT traces, int steps, int step) {
    record<h16>(field, offsets, weights, first, nrec, traces, steps, step);
}
#endif
