//! The transposed CPU step term by term: F^T for a problem whose backward step is not the forward
//! step on another problem (CPML: `adjoint`'s module docs say why), on the CPU in f32 or f64, one
//! term at a time. It is the reference the backends' transposed CPML step
//! ([`crate::backend::cpml_transposed`]) is tested against, not a path runs take.
//!
//! # How the transpose is built
//!
//! One step of the CPU solver (the backend module docs give its order; src/backend/cpu/cpml.rs
//! the layers' arithmetic) is a linear map from the state (p^n, p^{n-1}, phi, zeta) (phi, zeta:
//! per axis, the layers' memory variables) to (p^{n+1}, p^n as the step left it, phi', zeta'),
//! plus the sources' term. It is written here as four sub-steps, each defining new variables from
//! older ones by listed terms `new[i] += w old[j]` (`StepOperator::terms`):
//!
//! 1. `mirrored` from p^n: p^n itself but, under a free surface, zero at z = 0 and minus p at
//!    z = k in the halo plane z = -k (the solver mirrors p^n in place, so this is also the p^{n-1}
//!    of the next step);
//! 2. per axis and layer point (slab coordinate t of the axis's low or high layer, the top z
//!    layer under a free surface being none): `dp` = D1 mirrored, `d2` = D2 mirrored (the axis's
//!    centred first and second derivatives), and `ds` = A mirrored + D1 phi, A = D(a D) the compact
//!    operator with the weights of src/backend/cpu/cpml.rs's `layer_weights_into`, D1 phi taking only
//!    neighbours within t's layer (phi is zero outside it);
//! 3. phi' = b (phi + a dp) and zeta' = b zeta + a (d2 + ds) at the layer points (zero elsewhere:
//!    the solver never writes them);
//! 4. p^{n+1} = g (2 mirrored - g p^{n-1} + K L mirrored) + sum over the point's layers of
//!    K bh (ds + zeta'), g the sponge's factor (1 without one), L the star or variable-density
//!    operator, bh the buoyancy (1 for a constant density).
//!
//! Applying the terms in that order is the forward step ([`forward_traces_by_terms`] checks it
//! against the solver's traces). The transposed step takes the adjoints of the outputs and
//! applies each sub-step's transpose (`old[j] += w new[i]`) in the reverse order, so it is the
//! exact transpose of the step whatever the coefficients' placement around each derivative: the
//! terms are the solver's, read off once. Which variable is which between steps is a swap.
//!
//! Step n records d^n = R p^{n+1} and injects K S^T x^n into p^{n+1}; run backward from zero,
//! transposed step n first adds R^T y^n to the adjoint of p^{n+1} (mu^n), then gives
//! (F^T y)^n = S K mu^n and nu^n = K mu^n, the adjoint field that pairs with the step-n source
//! term (`rtm`'s image and gradient take nu unchanged: G = 1 under CPML, and the memory variables
//! do not depend on K, so dJ/dK = sum_n mu^n (u^{n+1} - 2 u^n + u^{n-1}) / K as without it).
//!
//! The terms are applied one by one on one thread: this is the reference, not a fast path.

use crate::backend::cpu::{Real, layer_weights_into};
use crate::boundary::BoundaryKind;
use crate::grid::Layout;
use crate::problem::{Problem, Tap};
use anyhow::{Result, ensure};

/// The variables of one step, each a vector: p^n, p^{n-1}, p^n mirrored, p^{n+1} (fields of the
/// problem's layout), then per axis (x, y, z) phi, zeta, dp, d2, ds, phi', zeta' (slabs).
const CUR: usize = 0;
const PREV: usize = 1;
const MIRRORED: usize = 2;
const NEXT: usize = 3;
const PHI: usize = 4;
const ZETA: usize = 7;
const DP: usize = 10;
const D2: usize = 13;
const DS: usize = 16;
const PHI_NEXT: usize = 19;
const ZETA_NEXT: usize = 22;
const VARS: usize = 25;

/// The sub-steps of a step, in the forward order (module docs).
#[derive(Clone, Copy, Debug)]
enum SubStep {
    Mirror,
    LayerSums,
    Memory,
    Pressure,
}

const SUB_STEPS: [SubStep; 4] = [SubStep::Mirror, SubStep::LayerSums, SubStep::Memory, SubStep::Pressure];

/// The CPML layers as the solver computes them: the width, per axis the profiles a and b over
/// the grid index, and the slab coordinate of each grid index that holds a computed layer point.
struct Layers<T> {
    width: usize,
    a: [Vec<T>; 3],
    b: [Vec<T>; 3],
    slab_coordinate: [Vec<Option<usize>>; 3],
}

/// One step of the CPU solver as lists of terms, with the solver's coefficients in `T`.
pub struct StepOperator<T: Real> {
    layout: Layout,
    radius: usize,
    free_surface: bool,
    /// First- and second-derivative weights scaled by 1/h and 1/h^2 per axis (index k = tap k).
    c1: [Vec<T>; 3],
    c2: [Vec<T>; 3],
    centre: T,
    /// The stiffness K (every interior element).
    k: Vec<T>,
    /// The buoyancy where the density varies (halo included, as the solver holds it).
    bh: Option<Vec<T>>,
    damp: Option<[Vec<T>; 3]>,
    layers: Option<Layers<T>>,
}

/// Slab coordinate of grid index i on an axis of n points with layers of width w, if in one.
fn layer(i: usize, n: usize, w: usize) -> Option<usize> {
    if i < w {
        Some(i)
    } else if i + w >= n {
        Some(i + 2 * w - n)
    } else {
        None
    }
}

impl<T: Real> StepOperator<T> {
    /// The step of `problem` (a whole 3D grid).
    pub fn new(problem: &Problem) -> Result<Self> {
        ensure!(!problem.layout.is_planar(), "the transposed step runs on 3D grids (a 2D grid's is not built yet)");
        ensure!(problem.vp_first == 0, "the transposed step runs on a whole grid, not on one rank's part of it");
        let layout = problem.layout;
        let radius = problem.stencil.radius;
        ensure!(layout.halo == radius, "layout halo {} for stencil radius {radius}", layout.halo);
        let c2: [Vec<T>; 3] =
            std::array::from_fn(|a| problem.stencil.second_scaled(problem.spacing[a]).into_iter().map(T::of).collect());
        let centre = T::of((0..3).map(|a| c2[a][0].f64()).sum());
        let c1 = std::array::from_fn(|a| problem.stencil.first.iter().map(|c| T::of(c / problem.spacing[a])).collect());
        let mut k = vec![T::default(); layout.len()];
        problem.stiffness_into(&layout, &mut k, T::of);
        let bh = problem.density.as_ref().map(|_| {
            let mut bh = vec![T::default(); layout.len()];
            problem.buoyancy_into(&layout, &mut bh, T::of);
            bh
        });
        let b = &problem.boundary;
        let damp = (b.kind == BoundaryKind::Sponge)
            .then(|| std::array::from_fn(|a| b.profiles[a].damp.iter().map(|&g| T::of(g)).collect()));
        let shape = problem.shape();
        let layers = (b.kind == BoundaryKind::Cpml && b.width > 0).then(|| {
            let w = b.width;
            Layers {
                width: w,
                a: std::array::from_fn(|a| b.profiles[a].a.iter().map(|&v| T::of(v)).collect()),
                b: std::array::from_fn(|a| b.profiles[a].b.iter().map(|&v| T::of(v)).collect()),
                slab_coordinate: std::array::from_fn(|a| {
                    (0..shape[a])
                        .map(|i| layer(i, shape[a], w))
                        // Under a free surface the top z layer is none (the solver's z_layer).
                        .map(|t| t.filter(|&t| a != 2 || !b.free_surface || t >= w))
                        .collect()
                }),
            }
        });
        Ok(StepOperator { layout, radius, free_surface: b.free_surface, c1, c2, centre, k, bh, damp, layers })
    }

    /// Elements of each variable (`VARS` of them).
    fn var_lens(&self) -> [usize; VARS] {
        let l = self.layout;
        let slab = |axis: usize| {
            self.layers.as_ref().map_or(0, |c| {
                let mut e = [l.nx, l.ny, l.nz];
                e[axis] = 2 * c.width;
                e.iter().product()
            })
        };
        std::array::from_fn(|v| if v < PHI { l.len() } else { slab((v - PHI) % 3) })
    }

    /// Offset in the slab of `axis` of the point at `p` with slab coordinate t along the axis.
    fn slab_index(&self, axis: usize, [ix, iy, iz]: [usize; 3], t: usize) -> usize {
        let l = self.layout;
        let w2 = 2 * self.layers.as_ref().map_or(0, |c| c.width);
        match axis {
            0 => (iz * l.ny + iy) * w2 + t,
            1 => (iz * w2 + t) * l.nx + ix,
            _ => (t * l.ny + iy) * l.nx + ix,
        }
    }

    /// Calls `each(axis, point, t)` for every computed layer point.
    fn for_each_layer_point(&self, mut each: impl FnMut(usize, [usize; 3], usize)) {
        let Some(c) = &self.layers else { return };
        let l = self.layout;
        for axis in 0..3 {
            for iz in 0..l.nz {
                for iy in 0..l.ny {
                    for ix in 0..l.nx {
                        let p = [ix, iy, iz];
                        if let Some(t) = c.slab_coordinate[axis][p[axis]] {
                            each(axis, p, t);
                        }
                    }
                }
            }
        }
    }

    /// Calls `emit(new, i, old, j, w)` for every term `vars[new][i] += w vars[old][j]` of
    /// `sub` (module docs); `new` and `old` always differ.
    fn terms(&self, sub: SubStep, emit: &mut impl FnMut(usize, usize, usize, usize, T)) {
        let l = self.layout;
        let r = self.radius;
        let one = T::of(1.0);
        let at = |[ix, iy, iz]: [usize; 3]| l.index(ix as isize, iy as isize, iz as isize);
        let strides = [1, l.pitch, l.plane];
        match sub {
            SubStep::Mirror => {
                for iz in 0..l.nz {
                    for iy in 0..l.ny {
                        for ix in 0..l.nx {
                            if !(self.free_surface && iz == 0) {
                                let o = at([ix, iy, iz]);
                                emit(MIRRORED, o, CUR, o, one);
                            }
                        }
                    }
                }
                if self.free_surface {
                    for k in 1..=r {
                        for iy in 0..l.ny {
                            for ix in 0..l.nx {
                                let halo = l.index(ix as isize, iy as isize, -(k as isize));
                                emit(MIRRORED, halo, CUR, at([ix, iy, k]), -one);
                            }
                        }
                    }
                }
            }
            SubStep::LayerSums => {
                let Some(c) = &self.layers else { return };
                let w = c.width;
                let (mut wp, mut wm) = ([T::default(); 8], [T::default(); 8]);
                self.for_each_layer_point(|axis, p, t| {
                    let (o, s, q) = (at(p), strides[axis], p[axis]);
                    let si = self.slab_index(axis, p, t);
                    let ws = layer_weights_into(&c.a[axis], &self.c2[axis], q, &mut wp[..r], &mut wm[..r]);
                    let (c1, c2) = (&self.c1[axis], &self.c2[axis]);
                    emit(D2 + axis, si, MIRRORED, o, c2[0]);
                    emit(DS + axis, si, MIRRORED, o, -ws);
                    let lo = if t < w { 0 } else { w };
                    for k in 1..=r {
                        let (up, down) = (o + k * s, o - k * s);
                        emit(DP + axis, si, MIRRORED, up, c1[k]);
                        emit(DP + axis, si, MIRRORED, down, -c1[k]);
                        emit(D2 + axis, si, MIRRORED, up, c2[k]);
                        emit(D2 + axis, si, MIRRORED, down, c2[k]);
                        emit(DS + axis, si, MIRRORED, up, wp[k - 1]);
                        emit(DS + axis, si, MIRRORED, down, wm[k - 1]);
                        if t + k < lo + w {
                            emit(DS + axis, si, PHI + axis, self.slab_index(axis, p, t + k), c1[k]);
                        }
                        if t >= lo + k {
                            emit(DS + axis, si, PHI + axis, self.slab_index(axis, p, t - k), -c1[k]);
                        }
                    }
                });
            }
            SubStep::Memory => {
                let Some(c) = &self.layers else { return };
                self.for_each_layer_point(|axis, p, t| {
                    let si = self.slab_index(axis, p, t);
                    let (a, b) = (c.a[axis][p[axis]], c.b[axis][p[axis]]);
                    emit(PHI_NEXT + axis, si, PHI + axis, si, b);
                    emit(PHI_NEXT + axis, si, DP + axis, si, b * a);
                    emit(ZETA_NEXT + axis, si, ZETA + axis, si, b);
                    emit(ZETA_NEXT + axis, si, D2 + axis, si, a);
                    emit(ZETA_NEXT + axis, si, DS + axis, si, a);
                });
            }
            SubStep::Pressure => {
                let two = T::of(2.0);
                let half = T::of(0.5);
                for iz in 0..l.nz {
                    for iy in 0..l.ny {
                        for ix in 0..l.nx {
                            let o = at([ix, iy, iz]);
                            let g = self.damp.as_ref().map_or(one, |d| d[0][ix] * (d[1][iy] * d[2][iz]));
                            let gk = g * self.k[o];
                            emit(NEXT, o, MIRRORED, o, two * g);
                            emit(NEXT, o, PREV, o, -(g * g));
                            match &self.bh {
                                None => {
                                    emit(NEXT, o, MIRRORED, o, gk * self.centre);
                                    for (axis, &s) in strides.iter().enumerate() {
                                        for k in 1..=r {
                                            let w = gk * self.c2[axis][k];
                                            emit(NEXT, o, MIRRORED, o + k * s, w);
                                            emit(NEXT, o, MIRRORED, o - k * s, w);
                                        }
                                    }
                                }
                                Some(bh) => {
                                    for (axis, &s) in strides.iter().enumerate() {
                                        for k in 1..=r {
                                            let h = half * self.c2[axis][k];
                                            for m in [o + k * s, o - k * s] {
                                                let w = gk * (h * (bh[o] + bh[m]));
                                                emit(NEXT, o, MIRRORED, m, w);
                                                emit(NEXT, o, MIRRORED, o, -w);
                                            }
                                        }
                                    }
                                }
                            }
                            if let Some(c) = &self.layers {
                                let v = self.bh.as_ref().map_or(self.k[o], |bh| self.k[o] * bh[o]);
                                let p = [ix, iy, iz];
                                for axis in 0..3 {
                                    if let Some(t) = c.slab_coordinate[axis][p[axis]] {
                                        let si = self.slab_index(axis, p, t);
                                        emit(NEXT, o, DS + axis, si, v);
                                        emit(NEXT, o, ZETA_NEXT + axis, si, v);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Zeroed variables for a run.
    fn zero_vars(&self) -> Vec<Vec<T>> {
        self.var_lens().iter().map(|&n| vec![T::default(); n]).collect()
    }

    /// The forward step's sub-steps on `vars` (the outputs and temporaries zero on entry).
    fn apply(&self, vars: &mut [Vec<T>]) {
        for sub in SUB_STEPS {
            self.terms(sub, &mut |new, i, old, j, w| {
                let x = vars[old][j];
                vars[new][i] = w.mul_add(x, vars[new][i]);
            });
        }
    }

    /// The transposed sub-steps in reverse order on adjoints `vars` (those of the outputs set,
    /// the inputs' and temporaries' zero on entry).
    fn apply_transposed(&self, vars: &mut [Vec<T>]) {
        for sub in SUB_STEPS.into_iter().rev() {
            self.terms(sub, &mut |new, i, old, j, w| {
                let x = vars[new][i];
                vars[old][j] = w.mul_add(x, vars[old][j]);
            });
        }
    }
}

/// Moves the outputs of a step into the inputs (`forward`) or the inputs' adjoints into the
/// outputs' places (backward), zeroing the rest.
fn rotate<T: Real>(vars: &mut [Vec<T>], forward: bool) {
    let pairs = [(CUR, NEXT), (PREV, MIRRORED)]
        .into_iter()
        .chain((0..3).flat_map(|a| [(PHI + a, PHI_NEXT + a), (ZETA + a, ZETA_NEXT + a)]));
    let mut cleared = vec![DP, DP + 1, DP + 2, D2, D2 + 1, D2 + 2, DS, DS + 1, DS + 2];
    for (input, output) in pairs {
        vars.swap(input, output);
        cleared.push(if forward { output } else { input });
    }
    for v in cleared {
        vars[v].iter_mut().for_each(|x| *x = T::default());
    }
}

/// (offset, weight) of taps in the problem's layout, the weights rounded to `T` and scaled by
/// `scale` at the offset.
fn taps_at<T: Real>(layout: &Layout, taps: &[Tap], scale: impl Fn(usize) -> f64) -> Vec<(usize, T)> {
    taps.iter()
        .map(|t| {
            let [x, y, z] = t.point;
            let o = layout.index(x as isize, y as isize, z as isize);
            (o, T::of(T::of(t.weight).f64() * scale(o)))
        })
        .collect()
}

/// F on the CPU by the step's terms in precision `T`: the traces of `problem` (one per
/// receiver), the reference the transposed step is the transpose of.
pub fn forward_traces_by_terms<T: Real>(problem: &Problem) -> Result<Vec<Vec<f64>>> {
    let op = StepOperator::<T>::new(problem)?;
    let mut vars = op.zero_vars();
    let sources: Vec<_> =
        problem.sources.iter().map(|s| taps_at::<T>(&op.layout, &s.taps, |o| op.k[o].f64())).collect();
    let receivers: Vec<_> = problem.receivers.iter().map(|r| taps_at::<T>(&op.layout, &r.taps, |_| 1.0)).collect();
    let mut traces = vec![Vec::with_capacity(problem.steps); receivers.len()];
    for n in 0..problem.steps {
        op.apply(&mut vars);
        for (s, taps) in problem.sources.iter().zip(&sources) {
            let x = T::of(s.samples.get(n).copied().unwrap_or(0.0));
            for &(o, w) in taps {
                vars[NEXT][o] = w.mul_add(x, vars[NEXT][o]);
            }
        }
        for (taps, trace) in receivers.iter().zip(&mut traces) {
            trace.push(taps.iter().map(|&(o, w)| (w * vars[NEXT][o]).f64()).sum());
        }
        rotate(&mut vars, true);
    }
    Ok(traces)
}

/// Runs the transposed steps of `problem` in precision `T` from step N - 1 down to 0, with
/// `traces` (one per receiver, `problem.steps` samples) as y: calls `each(n, mu, k)` with the
/// adjoint mu^n of p^{n+1} and the stiffness K, both in the layout's padded fields.
fn run_transposed<T: Real>(
    problem: &Problem,
    traces: &[Vec<f64>],
    mut each: impl FnMut(usize, &[T], &[T]) -> Result<()>,
) -> Result<()> {
    super::adjoint::check_traces(problem, traces)?;
    let steps = problem.steps;
    let op = StepOperator::<T>::new(problem)?;
    let receivers: Vec<_> = problem.receivers.iter().map(|r| taps_at::<T>(&op.layout, &r.taps, |_| 1.0)).collect();
    let mut vars = op.zero_vars();
    for n in (0..steps).rev() {
        for (taps, trace) in receivers.iter().zip(traces) {
            let y = T::of(trace[n]);
            for &(o, w) in taps {
                vars[NEXT][o] = w.mul_add(y, vars[NEXT][o]);
            }
        }
        each(n, &vars[NEXT], &op.k)?;
        op.apply_transposed(&mut vars);
        rotate(&mut vars, false);
    }
    Ok(())
}

/// F^T on the CPU by the transposed step in precision `T`: per source of `problem`, the samples
/// (in [`crate::problem::PointSource::samples`]' units, forward time) that `traces` (one per
/// receiver) transpose to.
pub fn transposed_samples<T: Real>(problem: &Problem, traces: &[Vec<f64>]) -> Result<Vec<Vec<f64>>> {
    let layout = problem.layout;
    let mut out = vec![vec![0.0; problem.steps]; problem.sources.len()];
    let mut sources: Option<Vec<Vec<(usize, T)>>> = None;
    run_transposed::<T>(problem, traces, |n, mu, k| {
        let sources = sources.get_or_insert_with(|| {
            problem.sources.iter().map(|s| taps_at::<T>(&layout, &s.taps, |o| k[o].f64())).collect()
        });
        for (taps, row) in sources.iter().zip(&mut out) {
            row[n] = taps.iter().map(|&(o, w)| w.f64() * mu[o].f64()).sum();
        }
        Ok(())
    })?;
    Ok(out)
}
