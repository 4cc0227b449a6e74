//! A variable density: the problem's [`Density`] and the two per-point factors every backend
//! builds from it, the buoyancy and the stiffness.
//!
//! The equation is (1 / (rho c^2)) p_tt = div((1 / rho) grad p) + s. With the buoyancy normalised
//! by the lowest density of the whole model, bh = rho_ref / rho (at most 1), the update is
//!
//!   p^{n+1} = 2 p^n - p^{n-1} + K (L_x + L_y + L_z),   K = c^2 dt^2 rho / rho_ref,
//!
//! and along each axis, with the star stencil's second-derivative weights c_k (h^2 folded in),
//!
//!   L_i = sum_k (c_k / 2) [ (bh_i + bh_{i+k}) (p_{i+k} - p_i) + (bh_i + bh_{i-k}) (p_{i-k} - p_i) ].
//!
//! Why this form: the pair weight (bh_i + bh_j) / 2 is symmetric in i and j, so the operator is a
//! weighted graph Laplacian, symmetric, and the scheme with K-scaled source injection is exactly
//! reciprocal; for a smooth bh the even-function expansion gives (bh p')' to O(h^{2R}), the
//! stencil's own order; it reads p at the same R neighbours as the constant-density stencil (same
//! halo); and the arithmetic mean of buoyancy is the harmonic mean of density, the effective
//! medium for the flux across an interface. A uniform bh of 1 gives back the constant-density
//! operator, but in other rounding: a uniform density is therefore no [`Density`] at all, and the
//! run takes the constant-density path bit for bit.
//!
//! CPML layers keep their corrections, scaled by c^2 dt^2 = K bh (the density taken as locally
//! constant in the stretched-coordinate correction, exact where the model is extended into an
//! outside layer along its normal). bh is read at the R neighbours, so it has values beyond the
//! interior: the real model values where the problem holds them, mirrored evenly above a free
//! surface (as p is mirrored oddly), the edge value elsewhere ([`Problem::buoyancy_into`]).

use super::Problem;
use crate::grid::Layout;
use rayon::prelude::*;

/// The density of a problem whose density varies (None in [`Problem::density`] otherwise).
#[derive(Clone, Debug, PartialEq)]
pub struct Density {
    /// kg/m^3, dense (planes, ny, nx): the problem's z-planes `first..first + planes`, covering the
    /// planes the velocity covers and, where the grid has them, up to R planes beyond on each side.
    pub rho: Vec<f32>,
    /// The z-plane of the problem's grid `rho` starts at.
    pub first: usize,
    /// The lowest density of the whole model (the same on every rank of a decomposed run and for
    /// every shot of a survey): the buoyancy's normalisation.
    pub rho_ref: f32,
    /// The highest density of the whole model (likewise): the time step's bound.
    pub rho_max: f32,
}

impl Density {
    /// The factor by which the density can raise the operator's spectral radius over a constant
    /// density's for the same velocities, (1 + rho_max / rho_ref) / 2: the update's pair terms are
    /// c_i^2 dt^2 (1 + rho_i / rho_j) / 2 times the constant-density ones. The stability limit is
    /// taken for the highest velocity times its square root. (Eigenvalues of the 1D operator,
    /// R = 1..8, steps, random layers and checkerboards of contrast up to 300, reach 0.85 of it; a
    /// plane interface of contrast 2.5 raises the spectral radius 2%, a checkerboard 22%.)
    pub fn cfl_factor(&self) -> f64 {
        (1.0 + self.rho_max as f64 / self.rho_ref as f64) / 2.0
    }

    /// The z-planes of the grid `rho` covers, for a grid of `nx * ny` points a plane.
    pub fn planes(&self, plane: usize) -> std::ops::Range<usize> {
        self.first..self.first + self.rho.len() / plane.max(1)
    }
}

/// Stiffness K = c^2 dt^2 rho / rho_ref from c^2 dt^2: the one expression every copy is made with.
#[inline]
fn stiffness_of(c2dt2: f64, rho: f32, rho_ref: f32) -> f64 {
    c2dt2 * (rho as f64 / rho_ref as f64)
}

/// Buoyancy bh = rho_ref / rho.
#[inline]
fn buoyancy_of(rho: f32, rho_ref: f32) -> f64 {
    rho_ref as f64 / rho as f64
}

impl Problem {
    /// Whether the density varies (the buoyancy field and the density operator are in use).
    pub fn variable_density(&self) -> bool {
        self.density.is_some()
    }

    /// The density (kg/m^3) at grid point (x, y, z) of the problem and rho_ref; None for a
    /// constant density.
    fn density_at(&self, [x, y, z]: [usize; 3]) -> Option<(f32, f32)> {
        let d = self.density.as_ref()?;
        let [nx, ny, _] = self.shape();
        Some((d.rho[((z - d.first) * ny + y) * nx + x], d.rho_ref))
    }

    /// The stiffness K = c^2 dt^2 rho / rho_ref at one grid point: the update's factor of the
    /// operator and the source injection's factor (c^2 dt^2 for a constant density).
    pub fn stiffness_at(&self, p: [usize; 3]) -> f64 {
        let c2dt2 = self.vel2dt2_at(p);
        match self.density_at(p) {
            Some((rho, rho_ref)) => stiffness_of(c2dt2, rho, rho_ref),
            None => c2dt2,
        }
    }

    /// The buoyancy rho_ref / rho at one grid point (1 for a constant density).
    pub fn buoyancy_at(&self, p: [usize; 3]) -> f64 {
        self.density_at(p).map_or(1.0, |(rho, rho_ref)| buoyancy_of(rho, rho_ref))
    }

    /// The stiffness per point of `vp`, dense ([`Problem::vel2dt2`] for a constant density).
    pub fn stiffness(&self) -> Vec<f64> {
        let [nx, ny, _] = self.shape();
        let plane = nx * ny;
        (0..self.vp.len()).map(|i| self.stiffness_at([i % nx, i / nx % ny, self.vp_first + i / plane])).collect()
    }

    /// [`Self::stiffness`] converted by `of` into the interior rows of `field`, a field of
    /// `layout` (halo and padding left as they are), in parallel over the planes.
    pub fn stiffness_into<T: Send>(&self, layout: &Layout, field: &mut [T], of: impl Fn(f64) -> T + Sync) {
        assert_eq!(layout.points(), self.vp.len(), "a field of the planes the problem holds");
        assert!(field.len() >= layout.len() - layout.slack(), "a field of {} elements for {layout:?}", field.len());
        let start = layout.halo * layout.plane;
        self.stiffness_planes_into(layout, 0, &mut field[start..start + layout.nz * layout.plane], of);
    }

    /// [`Self::stiffness_into`] for the planes `first..` of the problem's planes that `planes`
    /// holds (whole planes of `layout`, from each one's first halo row), in parallel over them:
    /// [`Problem::vel2dt2_planes_into`] scaled by rho / rho_ref.
    pub fn stiffness_planes_into<T: Send>(
        &self,
        layout: &Layout,
        first: usize,
        planes: &mut [T],
        of: impl Fn(f64) -> T + Sync,
    ) {
        let Some(d) = &self.density else { return self.vel2dt2_planes_into(layout, first, planes, of) };
        let (nx, ny) = (layout.nx, layout.ny);
        assert!(
            planes.len().is_multiple_of(layout.plane)
                && (first + planes.len() / layout.plane) * nx * ny <= self.vp.len()
        );
        let rho_at = (self.vp_first - d.first) * nx * ny;
        let plane_start = layout.halo * layout.plane;
        planes.par_chunks_mut(layout.plane).enumerate().for_each(|(k, plane)| {
            let vp = &self.vp[(first + k) * nx * ny..][..nx * ny];
            let rho = &d.rho[rho_at + (first + k) * nx * ny..][..nx * ny];
            for (iy, (v, r)) in vp.chunks_exact(nx).zip(rho.chunks_exact(nx)).enumerate() {
                let row = layout.row(iy, 0) - plane_start;
                for ((o, &v), &r) in plane[row..row + nx].iter_mut().zip(v).zip(r) {
                    *o = of(stiffness_of(self.c2dt2(v), r, d.rho_ref));
                }
            }
        });
    }

    /// The buoyancy rho_ref / rho converted by `of` into EVERY element of `field`, a field of
    /// `layout` over the problem's planes (`layout`'s plane 0 is the problem's z-plane
    /// `vp_first`): the interior, and the halo and padding with the values the operator reads
    /// there. A halo plane takes the real model values where the density holds that plane (the
    /// grid's planes beyond a part's own), its mirror image above a free surface (bh(-k) = bh(k)),
    /// and the grid's edge plane elsewhere; halo rows and columns and the padding take the edge
    /// row and column (clamped). Panics for a constant density.
    pub fn buoyancy_into<T: Send>(&self, layout: &Layout, field: &mut [T], of: impl Fn(f64) -> T + Sync) {
        let d = self.density.as_ref().expect("buoyancy_into: the problem's density varies");
        let (nx, ny, h) = (layout.nx, layout.ny, layout.halo);
        let [gx, gy, gz] = self.shape();
        assert!(nx == gx && ny == gy, "a field of the problem's rows ({layout:?} for {:?})", self.shape());
        let held = (self.vp_first, self.vp_first + layout.nz);
        let planes = layout.plane * (layout.nz + 2 * h);
        assert!(field.len() >= planes, "a field of {} elements for {layout:?}", field.len());
        let covered = d.planes(nx * ny);
        // The rows of a plane: a 2D grid's layout has no y halo rows.
        let yh = layout.y_halo;
        let rows_end = layout.pitch * (ny + 2 * yh);
        let free_surface = self.boundary.free_surface;
        let plane_of = |k: usize| -> &[f32] {
            // Layout plane k is the grid's z-plane held.0 + k - h.
            let z = held.0 as isize + k as isize - h as isize;
            let z = if z < 0 && free_surface { -z } else { z };
            let z = z.clamp(0, gz as isize - 1) as usize;
            // Where the density does not hold a plane (beyond a part's planes), the nearest it holds.
            let z = z.clamp(covered.start, covered.end - 1);
            &d.rho[(z - d.first) * nx * ny..][..nx * ny]
        };
        let value = |rho: &[f32], row: usize, col: usize| {
            let y = (row as isize - yh as isize).clamp(0, ny as isize - 1) as usize;
            let x = (col as isize - layout.x_offset as isize).clamp(0, nx as isize - 1) as usize;
            of(buoyancy_of(rho[y * nx + x], d.rho_ref))
        };
        let (body, slack) = field.split_at_mut(planes);
        body.par_chunks_mut(layout.plane).enumerate().for_each(|(k, plane)| {
            let rho = plane_of(k);
            for (i, o) in plane.iter_mut().enumerate() {
                // The plane's padding after its rows repeats its last row's first point.
                let (row, col) = if i < rows_end { (i / layout.pitch, i % layout.pitch) } else { (ny + 2 * yh - 1, 0) };
                *o = value(rho, row, col);
            }
        });
        let last = plane_of(layout.nz + 2 * h - 1);
        for o in slack {
            *o = value(last, ny + 2 * yh - 1, 0);
        }
    }
}
