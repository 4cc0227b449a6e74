//! The CPU reference: plain loops over the shared layout, rayon over z-planes, an inner x loop in
//! chunks the compiler vectorises. Generic over f32 and f64 so tests can take rounding out of play.

use super::{Backend, DeviceInfo};
use crate::boundary::{BoundaryKind, Slab};
use crate::grid::Layout;
use crate::problem::Problem;
use anyhow::{Result, ensure};
use rayon::prelude::*;
use std::time::Instant;

/// Floating-point type of a CPU run.
pub trait Real:
    Copy
    + Send
    + Sync
    + Default
    + PartialOrd
    + std::fmt::Debug
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::AddAssign
    + 'static
{
    fn of(v: f64) -> Self;
    fn f64(self) -> f64;
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn f64(self) -> f64 {
        self as f64
    }
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn f64(self) -> f64 {
        self
    }
}

/// Width of the x chunks the inner loops work on (a stack buffer, so the step allocates nothing).
const CHUNK: usize = 64;

struct CpmlAxis<T> {
    slab: Slab,
    psi: Vec<T>,
    zeta: Vec<T>,
    /// Scratch: this step's correction dpsi/dx + zeta per layer point.
    corr: Vec<T>,
}

/// Memory variables per axis, and the (a, b) coefficient tables per axis.
type CpmlState<T> = ([CpmlAxis<T>; 3], [(Vec<T>, Vec<T>); 3]);

pub struct CpuSolver<T: Real> {
    layout: Layout,
    radius: usize,
    /// Second-derivative weights scaled by 1/h^2 per axis; index 0 holds the sum of the three centres.
    c2: [Vec<T>; 3],
    centre: T,
    /// First-derivative weights scaled by 1/h per axis.
    c1: [Vec<T>; 3],
    vel2dt2: Vec<T>,
    damp: Option<[Vec<T>; 3]>,
    cpml: Option<CpmlState<T>>,
    free_surface: bool,
    cur: Vec<T>,
    prev: Vec<T>,
    /// (offset in the padded field, weight * c^2 dt^2) per source tap.
    src_taps: Vec<(usize, T)>,
    src_samples: Vec<T>,
    rec_taps: Vec<Vec<(usize, T)>>,
    traces: Vec<Vec<T>>,
    seconds: Vec<f64>,
}

impl<T: Real> CpuSolver<T> {
    pub fn new(problem: &Problem) -> Result<Self> {
        let layout = problem.layout;
        let shape = problem.shape();
        let r = problem.stencil.radius;
        ensure!(layout.halo == r, "layout halo must equal the stencil radius");
        let c2: [Vec<T>; 3] =
            std::array::from_fn(|a| problem.stencil.second_scaled(problem.spacing[a]).into_iter().map(T::of).collect());
        let centre = T::of((0..3).map(|a| c2[a][0].f64()).sum());
        let c1 = std::array::from_fn(|a| problem.stencil.first.iter().map(|c| T::of(c / problem.spacing[a])).collect());
        let mut vel2dt2 = vec![T::default(); layout.len()];
        let dense: Vec<T> = problem.vel2dt2().into_iter().map(T::of).collect();
        layout.scatter(&dense, &mut vel2dt2);
        let b = &problem.boundary;
        let damp = (b.kind == BoundaryKind::Sponge)
            .then(|| std::array::from_fn(|a| b.profiles[a].damp.iter().map(|&g| T::of(g)).collect()));
        let cpml = (b.kind == BoundaryKind::Cpml).then(|| {
            let slabs = b.slabs(shape);
            let axes = slabs.map(|slab| CpmlAxis {
                slab,
                psi: vec![T::default(); slab.len()],
                zeta: vec![T::default(); slab.len()],
                corr: vec![T::default(); slab.len()],
            });
            let coef = std::array::from_fn(|a| {
                let p = &b.profiles[a];
                (p.a.iter().map(|&v| T::of(v)).collect(), p.b.iter().map(|&v| T::of(v)).collect())
            });
            (axes, coef)
        });
        let taps = |t: &[crate::problem::Tap]| -> Vec<(usize, T)> {
            t.iter()
                .map(|t| {
                    let [x, y, z] = t.point;
                    (layout.index(x as isize, y as isize, z as isize), T::of(t.weight))
                })
                .collect()
        };
        let src_taps =
            taps(&problem.source.taps).into_iter().map(|(o, w)| (o, T::of(w.f64() * vel2dt2[o].f64()))).collect();
        Ok(CpuSolver {
            layout,
            radius: r,
            c2,
            centre,
            c1,
            vel2dt2,
            damp,
            cpml,
            free_surface: b.free_surface,
            cur: vec![T::default(); layout.len()],
            prev: vec![T::default(); layout.len()],
            src_taps,
            src_samples: problem.source.samples.iter().map(|&s| T::of(s)).collect(),
            rec_taps: problem.receivers.iter().map(|r| taps(&r.taps)).collect(),
            traces: vec![Vec::with_capacity(problem.steps); problem.receivers.len()],
            seconds: Vec::with_capacity(problem.steps),
        })
    }

    /// The current wavefield p^n, padded layout.
    pub fn field(&self) -> &[T] {
        &self.cur
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Receiver traces in the solver's precision.
    pub fn traces_native(&self) -> &[Vec<T>] {
        &self.traces
    }

    /// Sets p^n and p^{n-1} from dense (nz, ny, nx) arrays (initial-value problems in tests).
    pub fn set_state(&mut self, current: &[T], previous: &[T]) {
        self.layout.scatter(current, &mut self.cur);
        self.layout.scatter(previous, &mut self.prev);
    }

    /// Advances one step (module docs of `backend` give the order).
    pub fn advance(&mut self, n: usize) {
        let start = Instant::now();
        if self.free_surface {
            self.mirror_top();
        }
        if self.cpml.is_some() {
            self.update_psi();
        }
        self.update_interior();
        if self.cpml.is_some() {
            self.apply_cpml();
        }
        if let Some(&s) = self.src_samples.get(n) {
            for &(o, w) in &self.src_taps {
                self.prev[o] += w * s;
            }
        }
        for (taps, trace) in self.rec_taps.iter().zip(self.traces.iter_mut()) {
            let mut v = T::default();
            for &(o, w) in taps {
                v += w * self.prev[o];
            }
            trace.push(v);
        }
        std::mem::swap(&mut self.cur, &mut self.prev);
        self.seconds.push(start.elapsed().as_secs_f64());
    }

    /// p(-k) = -p(k) above z = 0, and p(0) = 0: a pressure-free surface at z = 0.
    fn mirror_top(&mut self) {
        let l = self.layout;
        for iy in 0..l.ny {
            let row0 = l.row(iy, 0);
            for v in &mut self.cur[row0..row0 + l.nx] {
                *v = T::default();
            }
            for k in 1..=self.radius {
                let src = l.row(iy, k);
                let dst = l.index(0, iy as isize, -(k as isize));
                for ix in 0..l.nx {
                    self.cur[dst + ix] = T::default() - self.cur[src + ix];
                }
            }
        }
    }

    fn update_interior(&mut self) {
        let l = self.layout;
        let r = self.radius;
        let (cur, vel) = (&self.cur, &self.vel2dt2);
        let (c2, centre, damp) = (&self.c2, self.centre, &self.damp);
        let two = T::of(2.0);
        let strides = [1usize, l.pitch, l.plane];
        // Plane iz of the interior starts at chunk iz + halo of the plane-sized chunks.
        self.prev.par_chunks_mut(l.plane).enumerate().for_each(|(pz, plane)| {
            if pz < r || pz >= r + l.nz {
                return;
            }
            let iz = pz - r;
            let base = pz * l.plane;
            for iy in 0..l.ny {
                let row = l.row(iy, iz);
                let mut x0 = 0;
                while x0 < l.nx {
                    let w = CHUNK.min(l.nx - x0);
                    let o = row + x0;
                    let mut lap = [T::default(); CHUNK];
                    for (i, acc) in lap[..w].iter_mut().enumerate() {
                        *acc = centre * cur[o + i];
                    }
                    for (axis, &s) in strides.iter().enumerate() {
                        for k in 1..=r {
                            let c = c2[axis][k];
                            let (lo, hi) = (&cur[o - k * s..o - k * s + w], &cur[o + k * s..o + k * s + w]);
                            for i in 0..w {
                                lap[i] += c * (lo[i] + hi[i]);
                            }
                        }
                    }
                    let out = &mut plane[o - base..o - base + w];
                    for i in 0..w {
                        let mut v = two * cur[o + i] - out[i] + vel[o + i] * lap[i];
                        if let Some(g) = damp {
                            v = v * g[0][x0 + i] * g[1][iy] * g[2][iz];
                        }
                        out[i] = v;
                    }
                    x0 += w;
                }
            }
        });
    }

    /// Calls f(point, slab offset, field offset) for every point of an axis's layers, in parallel
    /// over the slab's slowest index.
    fn for_slab<F>(layout: &Layout, slab: &Slab, mem: &mut [T], f: F)
    where
        F: Fn(usize, &mut [T], [usize; 3], usize) + Sync,
    {
        let e = slab.extent();
        let (ex, ey) = (e[0], e[1]);
        mem.par_chunks_mut(ex * ey).enumerate().for_each(|(sz, chunk)| {
            for sy in 0..ey {
                for sx in 0..ex {
                    let mut p = [sx, sy, sz];
                    p[slab.axis] = slab.grid_coord(p[slab.axis]);
                    let o = layout.index(p[0] as isize, p[1] as isize, p[2] as isize);
                    f(sy * ex + sx, chunk, p, o);
                }
            }
        });
    }

    fn update_psi(&mut self) {
        let (axes, coef) = self.cpml.as_mut().expect("cpml");
        let l = self.layout;
        let strides = [1usize, l.pitch, l.plane];
        for (axis, ax) in axes.iter_mut().enumerate() {
            let (a, b) = (&coef[axis].0, &coef[axis].1);
            let (c1, cur, s, r) = (&self.c1[axis], &self.cur, strides[axis], self.radius);
            Self::for_slab(&l, &ax.slab, &mut ax.psi, |i, psi, p, o| {
                let mut d = T::default();
                for k in 1..=r {
                    d += c1[k] * (cur[o + k * s] - cur[o - k * s]);
                }
                let q = p[axis];
                psi[i] = b[q] * psi[i] + a[q] * d;
            });
        }
    }

    fn apply_cpml(&mut self) {
        let (axes, coef) = self.cpml.as_mut().expect("cpml");
        let l = self.layout;
        let strides = [1usize, l.pitch, l.plane];
        for (axis, ax) in axes.iter_mut().enumerate() {
            let (a, b) = (&coef[axis].0, &coef[axis].1);
            let (c1, c2, cur, s, r) = (&self.c1[axis], &self.c2[axis], &self.cur, strides[axis], self.radius);
            let slab = ax.slab;
            let psi = &ax.psi;
            let n = slab.shape[axis];
            // dpsi/dx along the axis; psi is zero outside the layers (and beyond the grid).
            let psi_at = |p: [usize; 3], k: isize| -> T {
                let q = p[axis] as isize + k;
                if q < 0 || q >= n as isize {
                    return T::default();
                }
                let mut pp = p;
                pp[axis] = q as usize;
                slab.offset(pp).map_or(T::default(), |o| psi[o])
            };
            // Corrections first (parallel over the slab), then added to p^{n+1} serially by slab.
            let (zeta, corr) = (&mut ax.zeta, &mut ax.corr);
            corr.par_chunks_mut(slab.extent()[0] * slab.extent()[1])
                .zip(zeta.par_chunks_mut(slab.extent()[0] * slab.extent()[1]))
                .enumerate()
                .for_each(|(sz, (cchunk, zchunk))| {
                    let e = slab.extent();
                    for sy in 0..e[1] {
                        for sx in 0..e[0] {
                            let mut p = [sx, sy, sz];
                            p[axis] = slab.grid_coord(p[axis]);
                            let o = l.index(p[0] as isize, p[1] as isize, p[2] as isize);
                            let mut dpsi = T::default();
                            let mut d2 = c2[0] * cur[o];
                            for k in 1..=r {
                                dpsi += c1[k] * (psi_at(p, k as isize) - psi_at(p, -(k as isize)));
                                d2 += c2[k] * (cur[o + k * s] + cur[o - k * s]);
                            }
                            let i = sy * e[0] + sx;
                            let q = p[axis];
                            zchunk[i] = b[q] * zchunk[i] + a[q] * (d2 + dpsi);
                            cchunk[i] = dpsi + zchunk[i];
                        }
                    }
                });
            let e = slab.extent();
            for sz in 0..e[2] {
                for sy in 0..e[1] {
                    for sx in 0..e[0] {
                        let mut p = [sx, sy, sz];
                        p[axis] = slab.grid_coord(p[axis]);
                        let o = l.index(p[0] as isize, p[1] as isize, p[2] as isize);
                        self.prev[o] += self.vel2dt2[o] * corr[(sz * e[1] + sy) * e[0] + sx];
                    }
                }
            }
        }
    }
}

impl<T: Real> Backend for CpuSolver<T> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: "cpu",
            name: format!("CPU (rayon, {} threads)", rayon::current_num_threads()),
            kernel: "rayon".into(),
        }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        self.advance(n);
        Ok(())
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        let l = self.layout;
        for iz in 0..l.nz {
            for iy in 0..l.ny {
                let src = l.row(iy, iz);
                let dst = (iz * l.ny + iy) * l.nx;
                for ix in 0..l.nx {
                    out[dst + ix] = self.cur[src + ix].f64() as f32;
                }
            }
        }
        Ok(())
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        Ok(self.traces.iter().flat_map(|t| t[..steps.min(t.len())].iter().map(|v| v.f64() as f32)).collect())
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        Ok(self.seconds.clone())
    }
}
