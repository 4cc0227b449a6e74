// cpml.cu: CPML memory variables of one axis, over that axis's slab (its two layers packed
// together, fastest index first: see boundary.rs `Slab`). One thread per slab point.
// cpml_psi runs before the interior update (psi <- b psi + a dp^n/dx); cpml_correct after it
// (zeta <- b zeta + a (d2p^n/dx2 + dpsi/dx); p^{n+1} += c^2 dt^2 (dpsi/dx + zeta)). The order and
// formulas are those of the CPU reference.

struct SlabGeom {
    int axis;
    int width;
    int n[3];  // grid shape (nx, ny, nz)
    int e[3];  // slab extent: the grid shape with 2 * width along `axis`
    i64 pitch;
    i64 plane;
};

// Field offset (from the interior origin) of slab point i; also its slab and grid coordinates
// along the axis.
DEVICE i64 slab_point(const SlabGeom& g, i64 i, int& s, int& q) {
    const int sx = (int)(i % g.e[0]);
    const int sy = (int)((i / g.e[0]) % g.e[1]);
    const int sz = (int)(i / ((i64)g.e[0] * g.e[1]));
    s = g.axis == 0 ? sx : (g.axis == 1 ? sy : sz);
    const int na = g.n[g.axis];
    q = s < g.width ? s : na - 2 * g.width + s;
    const int px = g.axis == 0 ? q : sx;
    const int py = g.axis == 1 ? q : sy;
    const int pz = g.axis == 2 ? q : sz;
    return (i64)pz * g.plane + (i64)py * g.pitch + px;
}

DEVICE i64 axis_stride(const SlabGeom& g) { return g.axis == 0 ? 1 : (g.axis == 1 ? g.pitch : g.plane); }

extern "C" __global__ void cpml_psi(const float* RESTRICT cur, float* RESTRICT psi, const float* RESTRICT a,
                                    const float* RESTRICT b, AxisWeights w, SlabGeom g) {
    const i64 len = (i64)g.e[0] * g.e[1] * g.e[2];
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= len) return;
    int s, q;
    const i64 o = slab_point(g, i, s, q);
    const i64 st = axis_stride(g);
    float d = 0.0f;
#pragma unroll
    for (int k = 1; k <= RADIUS; k++) d += w.c1[k] * (cur[o + k * st] - cur[o - k * st]);
    psi[i] = b[q] * psi[i] + a[q] * d;
}

extern "C" __global__ void cpml_correct(const float* RESTRICT cur, float* RESTRICT out, const float* RESTRICT vel,
                                        const float* RESTRICT psi, float* RESTRICT zeta, const float* RESTRICT a,
                                        const float* RESTRICT b, AxisWeights w, SlabGeom g) {
    const i64 len = (i64)g.e[0] * g.e[1] * g.e[2];
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= len) return;
    int s, q;
    const i64 o = slab_point(g, i, s, q);
    const i64 st = axis_stride(g);
    const i64 sst = g.axis == 0 ? 1 : (g.axis == 1 ? (i64)g.e[0] : (i64)g.e[0] * g.e[1]);
    const int na = g.n[g.axis];
    const int wd = g.width;
    // psi at grid index q + k along the axis: zero outside the grid and between the two layers.
    auto psi_at = [&](int k) -> float {
        const int qk = q + k;
        if (qk < 0 || qk >= na) return 0.0f;
        int sk;
        if (qk < wd)
            sk = qk;
        else if (qk + wd >= na)
            sk = qk + 2 * wd - na;
        else
            return 0.0f;
        return psi[i + (i64)(sk - s) * sst];
    };
    float dpsi = 0.0f;
    float d2 = w.c2[0] * cur[o];
#pragma unroll
    for (int k = 1; k <= RADIUS; k++) {
        dpsi += w.c1[k] * (psi_at(k) - psi_at(-k));
        d2 += w.c2[k] * (cur[o + k * st] + cur[o - k * st]);
    }
    const float zn = b[q] * zeta[i] + a[q] * (d2 + dpsi);
    zeta[i] = zn;
    out[o] += vel[o] * (dpsi + zn);
}
