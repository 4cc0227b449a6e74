//! The CPML layers' transposed terms: the part of a CPML run's backward step that is not the
//! forward step ([`BoundaryKind::CpmlTransposed`]). `imaging::adjoint`'s module docs derive the
//! backward step; written for nu = K mu (the field every backward pass carries), it is the
//! interior's step without an absorber plus, per axis in [`CPML_AXIS_ORDER`], these terms, from
//! nu^{n+1} (the field the step starts from, mirrored under a free surface), the buoyancy bh (1
//! for a constant density), the stiffness K and the layers' adjoints lambda (of phi) and eta (of
//! zeta), zero at the backward pass's start:
//!
//! 1. at each computed layer point (profile values a and b at its grid index along the axis):
//!    u = bh nu, eta~ = eta + u, gamma = a eta~, sigma = fma(a, eta~, u), eta <- b eta~,
//!    beta = (a b) lambda, lambda <- b lambda;
//! 2. at each point q within R of a layer point along the axis, with layer points i only:
//!    g = fma(-S_q, sigma_q, c2_0 gamma_q) (if q is one), then for k = 1..R
//!    g += c1_k beta_{q-k}, c2_k gamma_{q-k}, w-_k sigma_{q-k} (each one fma, if q - k is one) and
//!    g += -c1_k beta_{q+k}, c2_k gamma_{q+k}, w+_k sigma_{q+k} (if q + k is one);
//!    nu^n += K g (one fma), w+-_k and S_q being the forward step's weights of D(a D) at q;
//! 3. at each layer point t, lambda += c1_k sigma_{t-k} - c1_k sigma_{t+k} for k = 1..R (each one
//!    fma, the neighbours in its own layer only).
//!
//! beta, gamma and sigma are the adjoints of the forward step's dp, d2 and ds (see
//! `imaging::adjoint`); step 2 is the transpose of the forward rows taken at the layer points,
//! so it reaches R points past the layers. The sums run in this order on every backend, so the
//! CPU's and the GPU's agree bit for bit. This module holds the geometry both use: which grid
//! indices are layer points (and their slab coordinate), which lie within R of one, and the
//! slabs' indexing, which is the forward CPML's ([`crate::boundary::Slab`]).

use crate::boundary::{BoundaryKind, CPML_AXIS_ORDER};
use crate::problem::Problem;
use anyhow::{Result, ensure};

/// A backend's state for the transposed terms (its adjoint slabs): what [`for_shot`] needs of it.
pub trait TransposedState: Sized {
    /// The layers the state was opened for.
    fn layers(&self) -> &TransposedLayers;
    /// Zeros the adjoints for a new backward pass.
    fn zero(&mut self) -> Result<()>;
}

/// Readies `slot` for a shot of `problem` and says whether the shot is a backward pass with
/// transposed layers: their state is kept and zeroed where the layers are the same, else opened
/// anew by `open`. `forward_cpml` says whether the backend holds forward layers: one opened for a
/// backward pass refuses a forward CPML shot.
pub fn for_shot<T: TransposedState>(
    slot: &mut Option<T>,
    problem: &Problem,
    forward_cpml: bool,
    open: impl FnOnce() -> Result<T>,
) -> Result<bool> {
    match problem.boundary.kind {
        BoundaryKind::CpmlTransposed => {
            match slot {
                Some(t) if TransposedLayers::new(problem).is_ok_and(|l| &l == t.layers()) => t.zero()?,
                _ => *slot = Some(open()?),
            }
            Ok(true)
        }
        BoundaryKind::Cpml => {
            ensure!(forward_cpml, "a backend opened for a backward pass runs no forward CPML shot");
            Ok(false)
        }
        _ => Ok(false),
    }
}

/// The layers of a transposed CPML step on a whole grid (a 2D grid's y axis has none).
#[derive(Clone, Debug, PartialEq)]
pub struct TransposedLayers {
    pub shape: [usize; 3],
    pub width: usize,
    pub radius: usize,
    /// Per axis and grid index: its slab coordinate (0..2 width) where it is a computed layer
    /// point, else -1 (the top z layer under a free surface is none).
    pub coord: [Vec<i32>; 3],
    /// Per axis: the grid indices within R of a layer point, ascending (step 2's points).
    pub band: [Vec<i32>; 3],
}

impl TransposedLayers {
    /// The layers of `problem`, whose boundary is [`BoundaryKind::CpmlTransposed`].
    pub fn new(problem: &Problem) -> Result<Self> {
        let b = &problem.boundary;
        ensure!(b.kind == BoundaryKind::CpmlTransposed, "not a transposed CPML step");
        ensure!(problem.vp_first == 0, "the transposed CPML step runs on a whole grid, not on one rank's part of it");
        let (shape, width, radius) = (problem.shape(), b.width, problem.stencil.radius);
        let mut coord: [Vec<i32>; 3] = shape.map(|n| vec![-1; n]);
        let mut band: [Vec<i32>; 3] = Default::default();
        for axis in 0..3 {
            let n = shape[axis];
            let [low, high] = b.layer_faces[axis];
            if !(low || high) || width == 0 {
                continue;
            }
            ensure!(
                n >= 2 * width,
                "the backward pass with CPML needs 2 x boundary.width = {} points or more along each axis; axis {} has {n}",
                2 * width,
                ["x", "y", "z"][axis]
            );
            for (i, c) in coord[axis].iter_mut().enumerate() {
                if low && i < width {
                    *c = i as i32;
                } else if high && i + width >= n {
                    *c = (i + 2 * width - n) as i32;
                }
            }
            let near = |q: usize| (q.saturating_sub(radius)..(q + radius + 1).min(n)).any(|i| coord[axis][i] >= 0);
            band[axis] = (0..n).filter(|&q| near(q)).map(|q| q as i32).collect();
        }
        Ok(TransposedLayers { shape, width, radius, coord, band })
    }

    /// The axes with layer points, in [`CPML_AXIS_ORDER`].
    pub fn axes(&self) -> impl Iterator<Item = usize> + '_ {
        CPML_AXIS_ORDER.into_iter().filter(|&a| !self.band[a].is_empty())
    }

    /// Dense extent of an axis's slab: the grid's, with 2 width along the axis.
    pub fn slab_extent(&self, axis: usize) -> [usize; 3] {
        let mut e = self.shape;
        e[axis] = 2 * self.width;
        e
    }

    /// Values in an axis's slab.
    pub fn slab_len(&self, axis: usize) -> usize {
        self.slab_extent(axis).iter().product()
    }

    /// Values in the largest slab (the scratch beta, gamma and sigma are shared by the axes).
    pub fn largest_slab(&self) -> usize {
        (0..3).map(|a| if self.band[a].is_empty() { 0 } else { self.slab_len(a) }).max().unwrap_or(0)
    }

    /// Slab index of the point `p` with its coordinate along `axis` replaced by slab coordinate `t`.
    pub fn slab_index(&self, axis: usize, p: [usize; 3], t: usize) -> usize {
        let mut q = p;
        q[axis] = t;
        let e = self.slab_extent(axis);
        (q[2] * e[1] + q[1]) * e[0] + q[0]
    }

    /// Distance in a slab between neighbours along its axis.
    pub fn slab_stride(&self, axis: usize) -> usize {
        [1, self.shape[0], self.shape[0] * self.shape[1]][axis]
    }

    /// Grid index along `axis` of slab coordinate `t`.
    pub fn grid_index(&self, axis: usize, t: usize) -> usize {
        if t < self.width { t } else { self.shape[axis] - 2 * self.width + t }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::Boundary;

    fn problem(shape: [usize; 3], width: usize, free_surface: bool, radius: usize) -> Problem {
        let mut p = Problem::homogeneous_interior(shape, radius);
        let b = Boundary::new(BoundaryKind::Cpml, width, free_surface, shape, p.spacing, 2000.0, 10.0, p.dt);
        p.boundary = b.transposed();
        p
    }

    /// Layer points carry their slab coordinate, the band reaches R past them, and the top z
    /// layer under a free surface is none.
    #[test]
    fn layer_points_and_bands() {
        let l = TransposedLayers::new(&problem([20, 16, 12], 3, true, 2)).unwrap();
        assert_eq!(&l.coord[0][..4], &[0, 1, 2, -1]);
        assert_eq!(&l.coord[0][16..], &[-1, 3, 4, 5]);
        assert_eq!(l.band[0], (0..5).chain(15..20).collect::<Vec<i32>>());
        assert!(l.coord[2][..9].iter().all(|&c| c == -1));
        assert_eq!(&l.coord[2][9..], &[3, 4, 5]);
        assert_eq!(l.band[2], (7..12).collect::<Vec<i32>>());
        assert_eq!(l.axes().collect::<Vec<_>>(), [1, 2, 0]);
        for axis in 0..3 {
            for t in 0..6 {
                let q = l.grid_index(axis, t);
                assert!(l.coord[axis][q] == t as i32 || (axis == 2 && t < 3), "axis {axis}, t {t}");
            }
        }
        assert_eq!(l.slab_index(1, [4, 7, 2], 5), (2 * 6 + 5) * 20 + 4);
        assert_eq!(l.slab_stride(2), 320);
    }

    #[test]
    fn thin_grids_and_other_boundaries_are_refused() {
        let err = TransposedLayers::new(&problem([20, 5, 12], 3, false, 2)).unwrap_err();
        assert!(format!("{err:#}").contains("axis y has 5"), "{err:#}");
        let mut p = problem([20, 16, 12], 3, false, 2);
        p.boundary.kind = BoundaryKind::Cpml;
        assert!(TransposedLayers::new(&p).is_err());
    }
}
