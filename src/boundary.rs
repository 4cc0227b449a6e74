//! Absorbing boundaries: CPML memory-variable profiles and the damping sponge.
//!
//! CPML follows the second-order acoustic formulation of Pasalic & McGarry (SEG 2010): per axis i
//! with damping profile d_i and frequency shift alpha_i, at step n (every derivative of p from p^n)
//!   lap_i = d2p/dx_i2 + d(psi_i^n)/dx_i + zeta_i^{n+1}
//!   psi_i^n       = b_i psi_i^{n-1} + a_i dp/dx_i
//!   zeta_i^{n+1}  = b_i zeta_i^n + a_i (d2p/dx_i2 + d(psi_i^n)/dx_i)
//! with b = exp(-(d + alpha) dt) and a = d (b - 1) / (d + alpha). The derivative of psi^n is taken
//! term by term: D1(b psi^{n-1}) plus d(a dp/dx)/dx in the compact self-adjoint form
//!   sum_k c2_k [ (a_q + a_{q+k}) / 2 (p_{q+k} - p_q) + (a_q + a_{q-k}) / 2 (p_{q-k} - p_q) ]
//! (a clamped at the grid's ends), which is a d2p/dx2 where a is constant. So the layers store
//! phi_i = b_i psi_i^{n-1} and a point's whole update reads only phi of its neighbours, a of its
//! neighbours and p^n: no neighbour's new psi is needed (one pass computes it). The product rule
//! with the profile's exact derivative, a d2p/dx2 + a' dp/dx, reflects as little but is not
//! self-adjoint: it grew without bound in long runs at 0.9 of the CFL limit (docs/design/boundary-layers.md).
//! phi and zeta are non-zero only inside the layers, so they are stored per axis in
//! two slabs of `width` points (one per face); phi is double-buffered (neighbours read the old
//! one). The interior update knows nothing of them: the boundary adds its correction afterwards.
//! The axes' corrections are added to p^{n+1} in [`CPML_AXIS_ORDER`], on every backend, so the
//! rounding is the same everywhere.
//!
//! What varies by boundary kind lives here: the profiles ([`Boundary::new`]), the bytes the
//! layers add to a step ([`Boundary::step_bytes`]) and the GPU kernels' compile-time defines
//! ([`BoundaryDefines`]). The input's `boundary.kind` deserialises into [`BoundaryKind`] itself.

use crate::numerics::stencil::MAX_RADIUS;

/// The order the axes' CPML corrections are added to p^{n+1}: y first, because the GPU's fused
/// step computes the y layers inside its pass (the bulk of the layer points on the usual survey
/// shapes), then z, which the pass computes on its other rows (fused_step_zlayers), then x by a
/// pass of its own after it.
pub const CPML_AXIS_ORDER: [usize; 3] = [1, 2, 0];

/// Per-axis 1D coefficient tables over the interior index range of that axis.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisProfile {
    /// CPML decay factor b per index (1 where there is no layer).
    pub b: Vec<f64>,
    /// CPML coefficient a per index (0 where there is no layer).
    pub a: Vec<f64>,
    /// Sponge factor per index (1 where there is no layer).
    pub damp: Vec<f64>,
}

impl AxisProfile {
    fn inactive(n: usize) -> AxisProfile {
        AxisProfile { b: vec![1.0; n], a: vec![0.0; n], damp: vec![1.0; n] }
    }
}

/// The absorbing boundary's kind: `boundary.kind` in the input ("cpml", the default, "sponge" or
/// "none"), or the transpose of a CPML step, which no input names.
#[derive(serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BoundaryKind {
    #[default]
    Cpml,
    Sponge,
    None,
    /// The backward pass of a CPML run (migration, the gradient: `imaging::adjoint`): the
    /// interior's step without an absorber, then the CPML layers' transposed terms
    /// ([`crate::backend::cpml_transposed`]), from the same profiles. Only
    /// [`Boundary::transposed`] makes it.
    #[serde(skip)]
    CpmlTransposed,
}

impl BoundaryKind {
    /// The GPU kernels' compile-time defines this kind sets.
    pub fn kernel_defines(self) -> BoundaryDefines {
        BoundaryDefines { sponge: self == BoundaryKind::Sponge }
    }
}

/// The compile-time defines of the GPU kernels' modules that depend on the boundary: `SPONGE`
/// (1: the update multiplies by the sponge factors gx gy gz). CPML layers need none of their own
/// here: whether the fused kernel computes them is the GPU's pass choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BoundaryDefines {
    pub sponge: bool,
}

impl BoundaryDefines {
    /// Every distinct set the boundary kinds need, each once (CPML and no boundary share one):
    /// the module variants ahead-of-time builds must cover.
    pub const VARIANTS: [BoundaryDefines; 2] = [BoundaryDefines { sponge: false }, BoundaryDefines { sponge: true }];

    /// (name, value) of each define.
    pub fn pairs(self) -> [(&'static str, u32); 1] {
        [("SPONGE", self.sponge as u32)]
    }

    /// The defines as compiler options (`-DNAME=value`).
    pub fn options(self) -> Vec<String> {
        self.pairs().iter().map(|(name, v)| format!("-D{name}={v}")).collect()
    }

    /// Label of the module variant: "sponge" or "none".
    pub fn label(self) -> &'static str {
        if self.sponge { "sponge" } else { "none" }
    }
}

/// Bytes the CPML memory variables add to a step (psi and zeta, f32, each read and written once:
/// 16 bytes) for every point of every axis's layers of `width` points: two per axis, one along z
/// under a free surface. A point in a corner counts once per axis whose layer it lies in.
pub fn cpml_step_bytes(shape: [usize; 3], width: usize, free_surface: bool) -> u64 {
    layer_step_bytes(shape, width, [[true; 2], [true; 2], [!free_surface, true]])
}

/// [`cpml_step_bytes`] for layers on the faces `faces` (per axis, low and high) only.
fn layer_step_bytes(shape: [usize; 3], width: usize, faces: [[bool; 2]; 3]) -> u64 {
    let [nx, ny, nz] = shape.map(|n| n as u64);
    let w = width as u64;
    let count = |axis: usize| faces[axis].iter().filter(|&&f| f).count() as u64;
    let layer_points: u64 = (0..3).map(|a| count(a) * w * nx * ny * nz / [nx, ny, nz][a].max(1)).sum();
    16 * layer_points
}

/// The boundary treatment of a run, ready for any backend.
#[derive(Clone, Debug, PartialEq)]
pub struct Boundary {
    pub kind: BoundaryKind,
    /// Layer width in points.
    pub width: usize,
    /// z = 0 is a pressure-free surface (antisymmetric mirror), not absorbing.
    pub free_surface: bool,
    /// x, y, z profiles.
    pub profiles: [AxisProfile; 3],
    /// Per axis, whether the grid's low and high faces hold a CPML layer: every face of a whole
    /// grid but a free surface; a subdomain's cut faces hold none ([`Boundary::cut`]), its
    /// profiles being the whole grid's restricted to it.
    pub layer_faces: [[bool; 2]; 3],
}

/// Normalised depth into the layer of index i on an axis of n points: 1 at the outermost point,
/// 1/width at the innermost layer point, 0 outside. `low` says whether the low face absorbs.
pub fn layer_depth(i: usize, n: usize, width: usize, low: bool) -> f64 {
    if width == 0 {
        return 0.0;
    }
    if low && i < width {
        (width - i) as f64 / width as f64
    } else if i + width >= n {
        (i + width + 1 - n) as f64 / width as f64
    } else {
        0.0
    }
}

/// The parameters of the CPML's profiles: the damping d(x) = d0 x^order over the normalised depth
/// x into the layer, d0 = -(order + 1) vmax ln(reflection) / (2 L) for a layer L thick (the
/// continuous layer's reflection at normal incidence), and the frequency shift
/// alpha(x) = alpha_max (1 - x), alpha_max = alpha_factor pi f0 for a source of peak frequency f0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpmlTuning {
    /// Polynomial order of the damping profile.
    pub order: i32,
    /// Reflection coefficient of the continuous layer, which sets d0.
    pub reflection: f64,
    /// alpha_max in units of pi f0.
    pub alpha_factor: f64,
}

/// The profiles every CPML uses: order 3, d0 for a continuous-layer reflection of 1e-5 and
/// alpha_max = pi f0. Measured (tests/cpml_tuning.rs, docs/numerics.md "Absorbing boundaries") in
/// layers of 8 to 12 points against orders 2 to 4, reflections 1e-2 to 1e-6 and alpha_max of 0.5
/// to 2 pi f0: order 3 had the lowest worst-case reflection and pi f0 was within 2 dB of the best
/// alpha_max. A reflection of 1e-4 lowers the worst case by 1 to 4 dB in layers of 8 to 16 points
/// but raises grazing reflections by up to 20 dB in layers of 16 and 20 points, which inputs use.
/// A kappa stretch is not part of the formulation (it would change every backend's update).
impl Default for CpmlTuning {
    fn default() -> Self {
        CpmlTuning { order: 3, reflection: 1e-5, alpha_factor: 1.0 }
    }
}

/// The layer width when the input gives none, per stencil radius R = 1..8 (entry R - 1): the
/// thinnest multiple of 4 points whose reflection is -60 dB or less at 5, 10 and 15 points per
/// minimum wavelength, normal and grazing incidence, measured by `cpml_reflection_by_width`
/// (tests/cpu_boundaries.rs; docs/numerics.md, "Absorbing boundaries", has the table). Multiples
/// of 4 because the GPU's x layers go by 4-point vectors (kernels/cpml.cu's `x_rows`): another
/// width takes the scalar path, slower at 512^3 than a 20-point layer by vectors
/// (docs/performance.md). R = 1 reaches -60 dB only at 36 points; R = 2 at 16; the rest at 12.
pub const DEFAULT_WIDTHS: [usize; MAX_RADIUS] = [36, 16, 12, 12, 12, 12, 12, 12];

/// The layer width when the input gives none, for a stencil of `radius` ([`DEFAULT_WIDTHS`]; a
/// radius outside 1..=8, which the stencil refuses, gets the widest).
pub fn default_width(radius: usize) -> usize {
    let widest = DEFAULT_WIDTHS.iter().copied().max().unwrap_or(0);
    radius.checked_sub(1).and_then(|i| DEFAULT_WIDTHS.get(i)).copied().unwrap_or(widest)
}

/// Why the default width is what it is, as the run's header says it.
pub const DEFAULT_WIDTH_REASON: &str =
    "the thinnest multiple of 4 points reflecting -60 dB or less at 5 to 15 points per wavelength for this radius";

/// Cerjan's sponge strength (0.015 per point over 20 points).
const SPONGE_STRENGTH: f64 = 0.3;

impl Boundary {
    pub fn none(shape: [usize; 3]) -> Boundary {
        Boundary {
            kind: BoundaryKind::None,
            width: 0,
            free_surface: false,
            profiles: shape.map(AxisProfile::inactive),
            layer_faces: [[true; 2]; 3],
        }
    }

    /// This boundary on the points `held[a]` of each axis `a` of its grid (the whole range where
    /// not cut): the profiles restricted to them, and no layer on a face that is not the grid's
    /// own, nor a free surface below a cut.
    pub fn cut(&self, held: [std::ops::Range<usize>; 3]) -> Boundary {
        let mut b = self.clone();
        b.free_surface &= held[2].start == 0;
        for (a, r) in held.into_iter().enumerate() {
            let p = &self.profiles[a];
            let n = p.b.len();
            b.layer_faces[a] = [self.layer_faces[a][0] && r.start == 0, self.layer_faces[a][1] && r.end == n];
            b.profiles[a] =
                AxisProfile { b: p.b[r.clone()].to_vec(), a: p.a[r.clone()].to_vec(), damp: p.damp[r].to_vec() };
        }
        b
    }

    /// Profiles for a layer of `width` points; `spacing` in m, `vmax` in m/s, `f0` the source's
    /// peak frequency (sets the CPML frequency shift), `dt` the time step.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kind: BoundaryKind,
        width: usize,
        free_surface: bool,
        shape: [usize; 3],
        spacing: [f64; 3],
        vmax: f64,
        f0: f64,
        dt: f64,
    ) -> Boundary {
        let tuning = CpmlTuning::default();
        Boundary::tuned(kind, width, free_surface, shape, spacing, vmax, f0, dt, tuning)
    }

    /// [`Boundary::new`] with the CPML profiles of `tuning`.
    #[allow(clippy::too_many_arguments)]
    pub fn tuned(
        kind: BoundaryKind,
        width: usize,
        free_surface: bool,
        shape: [usize; 3],
        spacing: [f64; 3],
        vmax: f64,
        f0: f64,
        dt: f64,
        tuning: CpmlTuning,
    ) -> Boundary {
        if kind == BoundaryKind::None || width == 0 {
            return Boundary { free_surface, ..Boundary::none(shape) };
        }
        let profiles = std::array::from_fn(|axis| {
            let n = shape[axis];
            let low = !(axis == 2 && free_surface);
            let thickness = width as f64 * spacing[axis];
            let d0 = -((tuning.order + 1) as f64) * vmax * tuning.reflection.ln() / (2.0 * thickness);
            let alpha_max = tuning.alpha_factor * std::f64::consts::PI * f0;
            let mut p = AxisProfile::inactive(n);
            for i in 0..n {
                let xi = layer_depth(i, n, width, low);
                if xi == 0.0 {
                    continue;
                }
                match kind {
                    BoundaryKind::Sponge => p.damp[i] = (-(SPONGE_STRENGTH * xi).powi(2)).exp(),
                    BoundaryKind::Cpml => {
                        let d = d0 * xi.powi(tuning.order);
                        let alpha = alpha_max * (1.0 - xi);
                        let b = (-(d + alpha) * dt).exp();
                        p.b[i] = b;
                        p.a[i] = if d + alpha > 0.0 { d * (b - 1.0) / (d + alpha) } else { 0.0 };
                    }
                    BoundaryKind::None | BoundaryKind::CpmlTransposed => {}
                }
            }
            p
        });
        let layer_faces = [[true; 2], [true; 2], [!free_surface, true]];
        Boundary { kind, width, free_surface, profiles, layer_faces }
    }

    /// The boundary of this CPML run's backward pass ([`BoundaryKind::CpmlTransposed`]): the same
    /// profiles, width and faces.
    pub fn transposed(&self) -> Boundary {
        debug_assert_eq!(self.kind, BoundaryKind::Cpml, "only a CPML step has a transposed layer step");
        Boundary { kind: BoundaryKind::CpmlTransposed, ..self.clone() }
    }

    /// This boundary on a 2D grid: no layers along y (its one row), the x and z faces as they are.
    pub fn without_y_layers(mut self) -> Boundary {
        self.profiles[1] = AxisProfile::inactive(self.profiles[1].b.len());
        self.layer_faces[1] = [false; 2];
        self
    }

    /// Width of the CPML layers: the layer width with CPML, else 0 (no memory variables).
    pub fn cpml_width(&self) -> usize {
        if self.kind == BoundaryKind::Cpml { self.width } else { 0 }
    }

    /// Bytes this boundary adds to a step on a grid of `shape` at the least: the CPML memory
    /// variables ([`cpml_step_bytes`]); the sponge's factors are three 1D profiles, which stay in
    /// cache, and count nothing.
    pub fn step_bytes(&self, shape: [usize; 3]) -> u64 {
        layer_step_bytes(shape, self.cpml_width(), self.layer_faces)
    }

    /// The GPU kernels' compile-time defines this boundary sets.
    pub fn kernel_defines(&self) -> BoundaryDefines {
        self.kind.kernel_defines()
    }

    /// Whether the point at fractional grid index `u` (per axis, 0 at the first interior point)
    /// lies in an absorbing layer: within `width` points of an absorbing face (the top face under
    /// a free surface does not absorb). Always false without a boundary.
    pub fn absorbs_at(&self, u: [f64; 3]) -> bool {
        if self.kind == BoundaryKind::None || self.width == 0 {
            return false;
        }
        let w = self.width as f64;
        // An axis without layers on either face (a 2D grid's y) absorbs nowhere.
        (0..3).filter(|&a| self.layer_faces[a] != [false; 2]).any(|a| {
            let last = (self.profiles[a].b.len() as f64 - 1.0).max(0.0);
            let low = !(a == 2 && self.free_surface);
            (low && u[a] < w) || u[a] > last - w
        })
    }

    /// Slabs holding CPML memory variables, one per axis (empty when not CPML).
    pub fn slabs(&self, shape: [usize; 3]) -> [Slab; 3] {
        std::array::from_fn(|axis| Slab { axis, width: self.cpml_width(), shape })
    }
}

/// Storage of one axis's CPML memory variables: the two layers of that axis, `width` points thick
/// each, packed together. For axis x the slab is (nz, ny, 2w), for y (nz, 2w, nx), for z
/// (2w, ny, nx), always fastest index last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slab {
    pub axis: usize,
    pub width: usize,
    pub shape: [usize; 3],
}

impl Slab {
    /// Dense extent (sx, sy, sz) of the slab.
    pub fn extent(&self) -> [usize; 3] {
        let mut e = self.shape;
        e[self.axis] = if self.width == 0 { 0 } else { 2 * self.width };
        e
    }

    pub fn len(&self) -> usize {
        self.extent().iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Grid index along the slab's axis of slab coordinate s (0..2w).
    pub fn grid_coord(&self, s: usize) -> usize {
        if s < self.width { s } else { self.shape[self.axis] - 2 * self.width + s }
    }

    /// Slab offset of grid point (ix, iy, iz), if it lies in a layer of this axis.
    pub fn offset(&self, p: [usize; 3]) -> Option<usize> {
        if self.width == 0 {
            return None;
        }
        let n = self.shape[self.axis];
        let i = p[self.axis];
        let s = if i < self.width {
            i
        } else if i + self.width >= n {
            i + 2 * self.width - n
        } else {
            return None;
        };
        let mut q = p;
        q[self.axis] = s;
        let e = self.extent();
        Some((q[2] * e[1] + q[1]) * e[0] + q[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_round_trip() {
        let shape = [11, 9, 13];
        for axis in 0..3 {
            let s = Slab { axis, width: 3, shape };
            let mut seen = vec![false; s.len()];
            for iz in 0..shape[2] {
                for iy in 0..shape[1] {
                    for ix in 0..shape[0] {
                        let p = [ix, iy, iz];
                        let inside = p[axis] < 3 || p[axis] >= shape[axis] - 3;
                        match s.offset(p) {
                            Some(o) => {
                                assert!(inside && !seen[o]);
                                seen[o] = true;
                            }
                            None => assert!(!inside),
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&x| x));
            assert_eq!(s.grid_coord(4), shape[axis] - 2);
        }
    }

    #[test]
    fn profiles_are_symmetric_and_vanish_inside() {
        let b = Boundary::new(BoundaryKind::Cpml, 5, false, [20, 20, 20], [10.0; 3], 2000.0, 10.0, 1e-3);
        let p = &b.profiles[0];
        for i in 0..20 {
            assert!((p.a[i] - p.a[19 - i]).abs() < 1e-15);
        }
        assert_eq!(p.a[5], 0.0);
        assert!(p.a[0] < p.a[4] && p.a[4] < 0.0);
        let fs = Boundary::new(BoundaryKind::Cpml, 5, true, [20, 20, 20], [10.0; 3], 2000.0, 10.0, 1e-3);
        assert_eq!(fs.profiles[2].a[0], 0.0);
        assert!(fs.profiles[2].a[19] < 0.0);
    }

    /// Only the sponge sets SPONGE = 1; CPML and no boundary share the other module variant, and
    /// the variants cover every kind once.
    #[test]
    fn kernel_defines_set_the_sponge_only_for_the_sponge() {
        let defines = |kind| Boundary::new(kind, 4, false, [12; 3], [10.0; 3], 2000.0, 10.0, 1e-3).kernel_defines();
        assert_eq!(defines(BoundaryKind::Sponge).pairs(), [("SPONGE", 1)]);
        assert_eq!(defines(BoundaryKind::Cpml).pairs(), [("SPONGE", 0)]);
        assert_eq!(defines(BoundaryKind::None).pairs(), [("SPONGE", 0)]);
        assert_eq!(Boundary::none([12; 3]).kernel_defines().options(), ["-DSPONGE=0"]);
        assert_eq!(defines(BoundaryKind::Sponge).options(), ["-DSPONGE=1"]);
        let kinds = [BoundaryKind::None, BoundaryKind::Sponge, BoundaryKind::Cpml];
        for v in BoundaryDefines::VARIANTS {
            assert!(kinds.iter().any(|k| k.kernel_defines() == v), "{v:?} serves a kind");
        }
        assert!(kinds.iter().all(|k| BoundaryDefines::VARIANTS.contains(&k.kernel_defines())));
        assert_eq!(BoundaryDefines::VARIANTS.map(|v| v.label()), ["none", "sponge"]);
    }

    /// The boundary's step bytes: 16 a CPML layer point per axis (10 x 8 x 6, layers of 2: 192 x,
    /// 240 y and 320 z points, 160 z under a free surface), nothing for the sponge or none.
    #[test]
    fn step_bytes_count_the_cpml_memory_variables_only() {
        let b = |kind, fs| Boundary::new(kind, 2, fs, [10, 8, 6], [10.0; 3], 2000.0, 10.0, 1e-3);
        assert_eq!(b(BoundaryKind::Cpml, false).step_bytes([10, 8, 6]), 16 * (192 + 240 + 320));
        assert_eq!(b(BoundaryKind::Cpml, true).step_bytes([10, 8, 6]), 16 * (192 + 240 + 160));
        assert_eq!(b(BoundaryKind::Sponge, false).step_bytes([10, 8, 6]), 0);
        assert_eq!(b(BoundaryKind::None, true).step_bytes([10, 8, 6]), 0);
        assert_eq!(b(BoundaryKind::Cpml, false).cpml_width(), 2);
        assert_eq!(b(BoundaryKind::Sponge, false).cpml_width(), 0);
    }

    /// The default widths by radius, each a multiple of the GPU's 4-point vectors; a radius the
    /// stencil refuses gets the widest.
    #[test]
    fn default_widths_are_multiples_of_4_by_radius() {
        let by_radius: Vec<usize> = (1..=MAX_RADIUS).map(default_width).collect();
        assert_eq!(by_radius, [36, 16, 12, 12, 12, 12, 12, 12]);
        assert!(by_radius.iter().all(|w| w % 4 == 0), "{by_radius:?}");
        assert_eq!([default_width(0), default_width(MAX_RADIUS + 1)], [36, 36]);
    }

    /// The input's `boundary.kind` strings deserialise into the kinds, "cpml" by default.
    #[test]
    fn kinds_deserialise_from_their_lowercase_names() {
        #[derive(serde::Deserialize)]
        struct T {
            #[serde(default)]
            kind: BoundaryKind,
        }
        let kind = |s: &str| toml::from_str::<T>(s).map(|t| t.kind);
        assert_eq!(kind("kind = \"cpml\"").unwrap(), BoundaryKind::Cpml);
        assert_eq!(kind("kind = \"sponge\"").unwrap(), BoundaryKind::Sponge);
        assert_eq!(kind("kind = \"none\"").unwrap(), BoundaryKind::None);
        assert_eq!(kind("").unwrap(), BoundaryKind::Cpml);
        assert!(kind("kind = \"pml\"").is_err());
    }
}
