// cpml.cu: the CPML memory variables of one axis and their correction of p^{n+1}, in one pass over
// that axis's slab (its two layers packed together, fastest index first: see boundary.rs `Slab`),
// after the interior update. Each thread owns one slab point and
//   psi  <- b psi + a dp^n/dx                          (its own point, written to psi_out)
//   zeta <- b zeta + a (d2p^n/dx2 + dpsi/dx)
//   p^{n+1} += c^2 dt^2 (dpsi/dx + zeta)
// dpsi/dx needs the new psi of the R neighbours on each side along the axis, which other threads
// write in the same launch: each thread recomputes them from psi_in (the previous step's, a separate
// buffer: the host swaps psi_in and psi_out every step) with exactly the expression the owner
// uses, so the values are the owner's bit for bit. That costs 2R extra first derivatives a point
// in arithmetic and saves a launch and a round trip of psi through memory. Neighbours outside the
// point's own layer count as zero, as in the CPU reference. The order and formulas are the CPU
// reference's.

struct SlabGeom {
    int width;
    int n[3];      // grid shape (nx, ny, nz)
    int e[3];      // slab extent: the grid shape with 2 * width along the axis
    int s_first;   // first slab coordinate along the axis to update (width: the high layer only)
    i64 pitch;
    i64 plane;
};
static_assert(sizeof(SlabGeom) == 48, "SlabGeom must match the host's struct");

template <int AXIS>
DEVICE void cpml_point(const float* RESTRICT cur, float* RESTRICT out, const float* RESTRICT vel,
                       const float* RESTRICT psi_in, float* RESTRICT psi_out, float* RESTRICT zeta,
                       const float* RESTRICT a, const float* RESTRICT b, const AxisWeights& w, const SlabGeom& g,
                       int sx, int sy, int sz) {
    const int s = AXIS == 0 ? sx : (AXIS == 1 ? sy : sz);
    const int wd = g.width;
    const int na = g.n[AXIS];
    const int lo = s < wd ? 0 : wd;  // the point's layer: slab coordinates lo .. lo + wd - 1
    const int shift = lo == 0 ? 0 : na - 2 * wd;  // grid coordinate = slab coordinate + shift
    const int q = s + shift;
    const int px = AXIS == 0 ? q : sx;
    const int py = AXIS == 1 ? q : sy;
    const int pz = AXIS == 2 ? q : sz;
    const i64 o = (i64)pz * g.plane + (i64)py * g.pitch + px;
    const i64 st = AXIS == 0 ? 1 : (AXIS == 1 ? g.pitch : g.plane);
    const i64 i = ((i64)sz * g.e[1] + sy) * g.e[0] + sx;
    const i64 sst = AXIS == 0 ? 1 : (AXIS == 1 ? (i64)g.e[0] : (i64)g.e[0] * g.e[1]);
    // New psi at slab coordinate s + j (zero outside the point's layer).
    auto psi_new = [&](int j) -> float {
        const int sj = s + j;
        if (sj < lo || sj >= lo + wd) return 0.0f;
        const i64 oj = o + j * st;
        float d = 0.0f;
#pragma unroll
        for (int k = 1; k <= RADIUS; k++) d += w.c1[k] * (cur[oj + k * st] - cur[oj - k * st]);
        return b[sj + shift] * psi_in[i + j * sst] + a[sj + shift] * d;
    };
    psi_out[i] = psi_new(0);
    float dpsi = 0.0f;
    float d2 = w.c2[0] * cur[o];
#pragma unroll
    for (int k = 1; k <= RADIUS; k++) {
        // Two separate terms, in the CPU reference's order, so both round alike.
        dpsi += w.c1[k] * psi_new(k);
        dpsi -= w.c1[k] * psi_new(-k);
        d2 += w.c2[k] * (cur[o + k * st] + cur[o - k * st]);
    }
    const float zn = b[q] * zeta[i] + a[q] * (d2 + dpsi);
    zeta[i] = zn;
    out[o] += vel[o] * (dpsi + zn);
}

#define CPML_PARAMS                                                                                    \
    const float *RESTRICT cur, float *RESTRICT out, const float *RESTRICT vel, const float *RESTRICT psi_in, \
        float *RESTRICT psi_out, float *RESTRICT zeta, const float *RESTRICT a, const float *RESTRICT b,      \
        AxisWeights w, SlabGeom g

// One thread per slab point: the slab's first index over x threads, its second over y, its third
// over z blocks (a grid-stride loop, for slabs deeper than the grid's z limit).
template <int AXIS>
DEVICE void cpml_slab(CPML_PARAMS) {
    const int sx = blockIdx.x * blockDim.x + threadIdx.x;
    const int sy = blockIdx.y * blockDim.y + threadIdx.y;
    if (sx >= g.e[0] || sy >= g.e[1]) return;
    if ((AXIS == 0 && sx < g.s_first) || (AXIS == 1 && sy < g.s_first)) return;
    for (int sz = (AXIS == 2 ? g.s_first : 0) + blockIdx.z; sz < g.e[2]; sz += gridDim.z)
        cpml_point<AXIS>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g, sx, sy, sz);
}

extern "C" __global__ void cpml_x(CPML_PARAMS) { cpml_slab<0>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g); }
extern "C" __global__ void cpml_y(CPML_PARAMS) { cpml_slab<1>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g); }
extern "C" __global__ void cpml_z(CPML_PARAMS) { cpml_slab<2>(cur, out, vel, psi_in, psi_out, zeta, a, b, w, g); }
