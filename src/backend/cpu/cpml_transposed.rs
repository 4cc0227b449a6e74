//! The CPU's transposed CPML layers: [`crate::backend::cpml_transposed`]'s three steps after the
//! interior's sweep of a backward step, each over its points in parallel, in the sums' order that
//! module fixes (so the GPU's kernels, kernels/cpml_transposed.cu, give the same bits).

use super::{Real, cpml::layer_weight};
use crate::backend::cpml_transposed::{self, TransposedLayers, TransposedState};
use crate::boundary::CPML_AXIS_ORDER;
use crate::grid::Layout;
use crate::problem::Problem;
use anyhow::Result;
use rayon::prelude::*;

/// The adjoints of the layers' memory variables and the scratch of a step.
pub(super) struct TransposedCpml<T> {
    layers: TransposedLayers,
    /// Per axis, the adjoints of phi and zeta (slabs).
    lambda: [Vec<T>; 3],
    eta: [Vec<T>; 3],
    /// The current axis's beta, gamma and sigma (the largest slab's size).
    beta: Vec<T>,
    gamma: Vec<T>,
    sigma: Vec<T>,
    /// Per axis, the profiles a and b over the grid index.
    a: [Vec<T>; 3],
    b: [Vec<T>; 3],
}

/// What a step reads besides the layers: the field nu^{n+1} it starts from, the stiffness, the
/// buoyancy and the derivative weights (per axis x, y, z, scaled; a 2D grid's y empty).
pub(super) struct StepFields<'a, T> {
    pub layout: &'a Layout,
    pub cur: &'a [T],
    pub stiffness: &'a [T],
    pub bh: Option<&'a [T]>,
    pub c1: [&'a [T]; 3],
    pub c2: [&'a [T]; 3],
}

impl<T: Real> TransposedState for TransposedCpml<T> {
    fn layers(&self) -> &TransposedLayers {
        &self.layers
    }

    fn zero(&mut self) -> Result<()> {
        for v in self.lambda.iter_mut().chain(self.eta.iter_mut()) {
            v.fill(T::default());
        }
        Ok(())
    }
}

impl<T: Real> TransposedCpml<T> {
    fn new(problem: &Problem) -> Result<Self> {
        let layers = TransposedLayers::new(problem)?;
        let slabs = |_| std::array::from_fn(|axis| vec![T::default(); layers.slab_len(axis)]);
        let scratch = vec![T::default(); layers.largest_slab()];
        let profile = |f: fn(&crate::boundary::AxisProfile) -> &Vec<f64>| {
            std::array::from_fn(|axis| f(&problem.boundary.profiles[axis]).iter().map(|&v| T::of(v)).collect())
        };
        Ok(TransposedCpml {
            lambda: slabs(()),
            eta: slabs(()),
            beta: scratch.clone(),
            gamma: scratch.clone(),
            sigma: scratch,
            a: profile(|p| &p.a),
            b: profile(|p| &p.b),
            layers,
        })
    }

    /// Readies a solver's `slot` for a shot of `problem` ([`cpml_transposed::for_shot`]).
    pub fn for_shot(slot: &mut Option<Self>, problem: &Problem, forward_cpml: bool) -> Result<bool> {
        cpml_transposed::for_shot(slot, problem, forward_cpml, || Self::new(problem))
    }

    /// The layers' terms of one backward step, added to `next` (nu^n after the interior's sweep).
    pub fn apply(&mut self, f: &StepFields<T>, next: &mut [T]) {
        // The axes in their order, without collecting them (the step allocates nothing).
        for axis in CPML_AXIS_ORDER {
            if self.layers.band[axis].is_empty() {
                continue;
            }
            self.prepare(f, axis);
            self.gather(f, axis, next);
            self.spread_lambda(f.c1[axis], axis);
        }
    }

    /// Step 1 at every computed layer point of `axis`.
    fn prepare(&mut self, f: &StepFields<T>, axis: usize) {
        let l = &self.layers;
        let e = l.slab_extent(axis);
        let (a, b) = (&self.a[axis], &self.b[axis]);
        let n = self.lambda[axis].len();
        let (beta, gamma, sigma) = (&mut self.beta[..n], &mut self.gamma[..n], &mut self.sigma[..n]);
        let rows = e[0];
        self.lambda[axis]
            .par_chunks_mut(rows)
            .zip(self.eta[axis].par_chunks_mut(rows))
            .zip(beta.par_chunks_mut(rows))
            .zip(gamma.par_chunks_mut(rows).zip(sigma.par_chunks_mut(rows)))
            .enumerate()
            .for_each(|(row, (((lambda, eta), beta), (gamma, sigma)))| {
                let (c1, c2) = (row % e[1], row / e[1]);
                for c0 in 0..rows {
                    let mut p = [c0, c1, c2];
                    let t = p[axis];
                    let q = l.grid_index(axis, t);
                    if l.coord[axis][q] != t as i32 {
                        continue;
                    }
                    p[axis] = q;
                    let o = f.layout.index(p[0] as isize, p[1] as isize, p[2] as isize);
                    let u = f.bh.map_or(f.cur[o], |bh| bh[o] * f.cur[o]);
                    let et = eta[c0] + u;
                    gamma[c0] = a[q] * et;
                    sigma[c0] = a[q].mul_add(et, u);
                    eta[c0] = b[q] * et;
                    beta[c0] = (a[q] * b[q]) * lambda[c0];
                    lambda[c0] = b[q] * lambda[c0];
                }
            });
    }

    /// Step 2: nu^n += K g at every point within R of a layer point of `axis`, a task per z-plane.
    fn gather(&self, f: &StepFields<T>, axis: usize, next: &mut [T]) {
        let (l, layout) = (&self.layers, f.layout);
        let band = &l.band[axis];
        let in_band = |i: usize| band.binary_search(&(i as i32)).is_ok();
        let base = layout.index(0, 0, 0);
        next[base..].par_chunks_mut(layout.plane).enumerate().for_each(|(z, plane)| {
            if z >= layout.nz || (axis == 2 && !in_band(z)) {
                return;
            }
            for y in (0..layout.ny).filter(|&y| axis != 1 || in_band(y)) {
                let mut point = |x: usize| {
                    let local = y * layout.pitch + x;
                    let g = self.layer_sum(f, axis, [x, y, z]);
                    plane[local] = f.stiffness[base + z * layout.plane + local].mul_add(g, plane[local]);
                };
                if axis == 0 {
                    band.iter().for_each(|&x| point(x as usize));
                } else {
                    (0..layout.nx).for_each(point);
                }
            }
        });
    }

    /// g of step 2 at point `p`.
    #[inline]
    fn layer_sum(&self, f: &StepFields<T>, axis: usize, p: [usize; 3]) -> T {
        let l = &self.layers;
        let (r, n, q) = (l.radius, l.shape[axis], p[axis]);
        let (c1, c2, a) = (f.c1[axis], f.c2[axis], &self.a[axis]);
        let coord = &l.coord[axis];
        let at = |i: usize| l.slab_index(axis, p, coord[i] as usize);
        let mut g = T::default();
        if coord[q] >= 0 {
            let s = at(q);
            let mut ws = T::default();
            for k in 1..=r {
                let (wp, wm) = layer_weight(a, c2, q, k);
                ws += wp;
                ws += wm;
            }
            g = (-ws).mul_add(self.sigma[s], c2[0] * self.gamma[s]);
        }
        for k in 1..=r {
            let (wp, wm) = layer_weight(a, c2, q, k);
            if q >= k && coord[q - k] >= 0 {
                let s = at(q - k);
                g = c1[k].mul_add(self.beta[s], g);
                g = c2[k].mul_add(self.gamma[s], g);
                g = wm.mul_add(self.sigma[s], g);
            }
            if q + k < n && coord[q + k] >= 0 {
                let s = at(q + k);
                g = (-c1[k]).mul_add(self.beta[s], g);
                g = c2[k].mul_add(self.gamma[s], g);
                g = wp.mul_add(self.sigma[s], g);
            }
        }
        g
    }

    /// Step 3: lambda += the transposed D1' of sigma, within each layer.
    fn spread_lambda(&mut self, c1: &[T], axis: usize) {
        let l = &self.layers;
        let (w, r) = (l.width, l.radius);
        let ss = l.slab_stride(axis);
        let e = l.slab_extent(axis);
        let sigma = &self.sigma;
        self.lambda[axis].par_iter_mut().enumerate().for_each(|(s, lambda)| {
            let c = [s % e[0], s / e[0] % e[1], s / (e[0] * e[1])];
            let t = c[axis];
            if l.coord[axis][l.grid_index(axis, t)] != t as i32 {
                return;
            }
            let lo = if t < w { 0 } else { w };
            let mut acc = *lambda;
            for k in 1..=r {
                if t >= lo + k {
                    acc = c1[k].mul_add(sigma[s - k * ss], acc);
                }
                if t + k < lo + w {
                    acc = (-c1[k]).mul_add(sigma[s + k * ss], acc);
                }
            }
            *lambda = acc;
        });
    }
}
