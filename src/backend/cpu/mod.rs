//! The CPU reference: one sweep per step over z-planes, a contiguous range of planes per rayon
//! task, that updates each row's interior points and, while the row is in cache, its CPML memory
//! variables and corrections (or applies the sponge), with the reference arithmetic per point in the
//! reference order. The x loop works on fixed blocks (the stencil radius is a const generic, so the
//! taps unroll and a block's Laplacian stays in vector registers), built for AVX-512, AVX2+FMA or
//! the portable target and chosen at run time; every build computes the same bits. The fields are
//! first touched by the ranges that sweep them, and the step allocates nothing
//! (tests/cpu_no_alloc.rs). Generic over f32 and f64 so tests can take rounding out of play.
//! Where the density varies, rows take the variable-density operator (`sweep`'s
//! `density_laplacian_chunk`, [`crate::problem::Density`] has the scheme); the constant-density
//! rows are unchanged.
//!
//! This module owns the solver's state and its step in parts; `sweep` the interior update,
//! `cpml` the layers' update within the sweep, `isa` the instruction-set builds and the
//! threads' floating-point mode, `memory` the fields' layout, tiles, task ranges and first
//! touch, `shot` the source and receivers and the free surface, `backend` the `Backend` impl,
//! `plane` the 2D grid's solver.

mod backend;
mod cpml;
mod cpml_transposed;
mod isa;
mod memory;
mod plane;
mod shot;
mod sweep;

pub(crate) use cpml::layer_weights_into;
pub use isa::Isa;
pub(crate) use memory::cpu_layout;
pub use plane::PlaneSolver;

use crate::boundary::{BoundaryKind, Slab};
use crate::grid::Layout;
use crate::problem::Problem;
use aligned_vec::{AVec, ConstAlign};
use anyhow::{Result, ensure};
use cpml::{x_layer_weights, x_psi_len};
use cpml_transposed::{StepFields, TransposedCpml};
use isa::SubnormalsAsZero;
use memory::{Parts, first_touch, first_touch_in, partition, y_split, y_tiles};
use rayon::prelude::*;
use shot::{SourceTaps, shot_taps};
use std::ops::Range;
use sweep::{CpmlSweep, Sweep, layer};

use std::time::Instant;

/// A padded field: its rows start on whole cache lines (the layout pads rows to ROW_ALIGN
/// elements), so the sweep's vectors do not straddle two lines. A large Vec starts 16 bytes into a
/// line (glibc's mmap'd chunks), and then every 64-byte load and store of the AVX-512 build did.
type Field<T> = AVec<T, ConstAlign<FIELD_ALIGN>>;

/// Bytes a [`Field`] is aligned to: a 4 KiB page, so its layout's rows fall on the same cache sets
/// and pages on every run.
const FIELD_ALIGN: usize = 4096;

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
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
    + 'static
{
    fn of(v: f64) -> Self;
    fn f64(self) -> f64;
    /// self * a + b, rounded once (a stencil tap: the GPU kernels' `tap` computes the same).
    fn mul_add(self, a: Self, b: Self) -> Self;
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f64::mul_add(self, a, b)
    }
}

/// Per axis, the CPML coefficients (a, b) over that axis's grid index.
type CpmlProfiles<T> = [[Vec<T>; 2]; 3];

/// One axis's memory variables: psi of step n (read by the sweep), psi of step n + 1 (written by
/// it; the two swap after each step) and zeta (read and written in place: only its own point).
struct CpmlAxis<T> {
    slab: Slab,
    psi: Field<T>,
    psi_next: Field<T>,
    zeta: Field<T>,
}

pub struct CpuSolver<T: Real> {
    layout: Layout,
    radius: usize,
    isa: Isa,
    /// Whether the sweep's threads flush subnormal values to zero ([`Self::flushing_subnormals`]).
    flush: bool,
    /// Interior z-ranges [z0, z1), one per task of the sweep, of about equal work.
    chunks: Vec<(usize, usize)>,
    /// Row ranges [y0, y1) the sweep goes up z in, one after the other (see [`y_tiles`]).
    tiles: Vec<(usize, usize)>,
    /// Second-derivative weights scaled by 1/h^2 per axis (index 0: that axis's centre weight).
    c2: [Vec<T>; 3],
    centre: T,
    /// First-derivative weights scaled by 1/h per axis.
    c1: [Vec<T>; 3],
    /// The stiffness K: c^2 dt^2 for a constant density, c^2 dt^2 rho / rho_ref for a variable
    /// one ([`Problem::stiffness_into`]).
    vel2dt2: Field<T>,
    /// The buoyancy rho_ref / rho in every element (halo and padding included,
    /// [`Problem::buoyancy_into`]) where the density varies: the sweep then takes the
    /// variable-density operator.
    bh: Option<Field<T>>,
    damp: Option<[Vec<T>; 3]>,
    cpml: Option<([CpmlAxis<T>; 3], CpmlProfiles<T>)>,
    /// The CPML's transposed layer terms, where a shot is a backward pass
    /// ([`BoundaryKind::CpmlTransposed`]): the sweep then computes no layers, and these follow it.
    transposed: Option<TransposedCpml<T>>,
    /// Whether the current shot is such a backward pass.
    backward: bool,
    /// The x layers' weights of D(a D p) (the same on every row), see [`x_layer_weights`].
    x_weights: Vec<T>,
    free_surface: bool,
    cur: Field<T>,
    prev: Field<T>,
    /// Per interior plane, its plane in the z CPML slab (the global grid's layers: a subdomain's
    /// planes keep the coefficients and slab planes they have in the whole grid).
    z_layer: Vec<Option<usize>>,
    /// Per interior row, its row in the y CPML slab (likewise).
    y_layer: Vec<Option<usize>>,
    /// The sources' taps and samples.
    source: SourceTaps<T>,
    rec_taps: Vec<Vec<(usize, T)>>,
    traces: Vec<Vec<T>>,
    seconds: Vec<f64>,
    /// The planes a decomposed run computes first ([`Self::begin_field`]) and the task ranges of
    /// both parts, kept from the last call (the same every step).
    split: Option<Split>,
    /// When the step [`Self::begin_field`] opened began.
    open: Option<Instant>,
}

/// A step in two parts: the task ranges of the planes computed first and of the rest.
struct Split {
    first: Vec<Range<usize>>,
    leave: Vec<Range<usize>>,
    first_chunks: Vec<(usize, usize)>,
    rest_chunks: Vec<(usize, usize)>,
}

/// Which planes a sweep computes.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    All,
    First,
    Rest,
}

impl<T: Real> CpuSolver<T> {
    /// A solver using the widest instruction set this CPU has ([`Isa::detect`]).
    pub fn new(problem: &Problem) -> Result<Self> {
        Self::with_isa(problem, Isa::detect())
    }

    /// A solver whose sweep runs the build for `isa` (every one computes the same bits).
    pub fn with_isa(problem: &Problem, isa: Isa) -> Result<Self> {
        Self::with_isa_in(problem, isa, [0, 0], [problem.layout.ny, problem.layout.nz])
    }

    /// A solver for a block of a larger grid: row 0 and plane 0 of `problem` are row `offset[0]`
    /// and plane `offset[1]` of a grid of `global[0]` rows and `global[1]` planes, whose CPML y
    /// and z layers it keeps (`problem`'s y and z profiles are the global ones restricted to the
    /// block).
    pub fn with_isa_in(problem: &Problem, isa: Isa, offset: [usize; 2], global: [usize; 2]) -> Result<Self> {
        let ([y_offset, z_offset], [global_ny, global_nz]) = (offset, global);
        ensure!(isa.available(), "this CPU cannot run the {} build of the CPU step", isa.name());
        ensure!(!problem.is_2d(), "a 2D grid runs on the 2D CPU solver (PlaneSolver)");
        let layout = cpu_layout::<T>(problem.layout);
        let shape = problem.shape();
        let r = problem.stencil.radius;
        ensure!(layout.halo == r, "layout halo must equal the stencil radius");
        ensure!((1..=8).contains(&r), "stencil radius {r} outside 1..=8");
        let c2: [Vec<T>; 3] =
            std::array::from_fn(|a| problem.stencil.second_scaled(problem.spacing[a]).into_iter().map(T::of).collect());
        let centre = T::of((0..3).map(|a| c2[a][0].f64()).sum());
        let c1 = std::array::from_fn(|a| problem.stencil.first.iter().map(|c| T::of(c / problem.spacing[a])).collect());
        let b = &problem.boundary;
        let cpml_width = b.cpml_width();
        // A plane in the z layers also updates phi_z and adds the z correction: about twice the
        // work of one that does not (measured at 200^3, R = 4, a 20-point layer).
        ensure!(
            z_offset + layout.nz <= global_nz && y_offset + layout.ny <= global_ny,
            "planes {z_offset}..{} and rows {y_offset}..{} outside a grid of {global_nz} planes and {global_ny} rows",
            z_offset + layout.nz,
            y_offset + layout.ny
        );
        // Under a free surface the top z layer is no layer (a = 0): not computed, as on the GPU.
        let top_absorbs = !b.free_surface;
        let z_layer: Vec<Option<usize>> = (0..layout.nz)
            .map(|iz| if cpml_width > 0 { layer(z_offset + iz, global_nz, cpml_width) } else { None })
            .map(|t| t.filter(|&t| top_absorbs || t >= cpml_width))
            .collect();
        let y_layer: Vec<Option<usize>> = (0..layout.ny)
            .map(|iy| if cpml_width > 0 { layer(y_offset + iy, global_ny, cpml_width) } else { None })
            .collect();
        let chunks =
            partition(layout.nz, rayon::current_num_threads(), |iz| if z_layer[iz].is_some() { 2.0 } else { 1.0 });
        let mut vel2dt2 = first_touch::<T>(&layout, &chunks);
        problem.stiffness_into(&layout, &mut vel2dt2, T::of);
        let bh = problem.density.as_ref().map(|_| {
            let mut bh = first_touch::<T>(&layout, &chunks);
            problem.buoyancy_into(&layout, &mut bh, T::of);
            bh
        });
        let damp = (b.kind == BoundaryKind::Sponge)
            .then(|| std::array::from_fn(|a| b.profiles[a].damp.iter().map(|&g| T::of(g)).collect()));
        let cpml = (b.kind == BoundaryKind::Cpml).then(|| {
            let slabs = b.slabs(shape);
            // Each slab's major planes (z for the x and y slabs, slab plane t for the z slab) are
            // first written by the task whose interior planes they belong to, as the fields are.
            let task_of = |iz: usize| chunks.iter().position(|&(z0, z1)| (z0..z1).contains(&iz));
            let owner = |axis: usize, p: usize| match axis {
                2 => (0..layout.nz).find(|&iz| z_layer[iz] == Some(p)).and_then(task_of),
                _ => task_of(p),
            };
            let axes = slabs.map(|slab| {
                let planes = if slab.axis == 2 { 2 * slab.width } else { layout.nz };
                // `len` elements in planes of `per` (and slack after them).
                let touched = |len: usize, per: usize| {
                    let ends = (1..planes).filter(|&p| owner(slab.axis, p) != owner(slab.axis, p - 1));
                    first_touch_in(len, ends.map(|p| p * per))
                };
                let per = slab.len() / planes.max(1);
                // The x slab's psi holds R zeros on each side of each layer (x_psi_len).
                let (psi_len, psi_per) = match slab.axis {
                    0 => (x_psi_len(slab.len(), slab.width, r), per / slab.width.max(1) * (slab.width + 2 * r)),
                    _ => (slab.len(), per),
                };
                let psi = touched(psi_len, psi_per);
                CpmlAxis { slab, psi_next: touched(psi_len, psi_per), psi, zeta: touched(slab.len(), per) }
            });
            let coef = std::array::from_fn(|a| {
                let p = &b.profiles[a];
                [&p.a, &p.b].map(|v| v.iter().map(|&v| T::of(v)).collect())
            });
            (axes, coef)
        });
        ensure!(
            b.kind != BoundaryKind::CpmlTransposed || (offset == [0, 0] && global == [layout.ny, layout.nz]),
            "the transposed CPML step runs on a whole grid"
        );
        let mut transposed = None;
        let backward = TransposedCpml::for_shot(&mut transposed, problem, true)?;
        let x_weights = cpml
            .as_ref()
            .map_or(Vec::new(), |(_, coef): &(_, CpmlProfiles<T>)| x_layer_weights(&coef[0][0], &c2[0], r, b.width));
        let (source, rec_taps) = shot_taps(problem, &layout, &vel2dt2);
        Ok(CpuSolver {
            layout,
            radius: r,
            isa,
            flush: false,
            c2,
            centre,
            c1,
            vel2dt2,
            bh,
            damp,
            cpml,
            transposed,
            backward,
            x_weights,
            free_surface: b.free_surface,
            y_layer,
            cur: first_touch(&layout, &chunks),
            prev: first_touch(&layout, &chunks),
            z_layer,
            chunks,
            tiles: y_tiles(&layout, cpml_width, std::mem::size_of::<T>()),
            source,
            rec_taps,
            // One Vec per receiver, each with its own capacity (vec![v; n] clones drop capacity).
            traces: (0..problem.receivers.len()).map(|_| Vec::with_capacity(problem.steps)).collect(),
            seconds: Vec::with_capacity(problem.steps),
            split: None,
            open: None,
        })
    }

    /// The current wavefield p^n, padded layout.
    pub fn field(&self) -> &[T] {
        &self.cur
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Sweeps in y tiles of about `rows` rows (never thinner than the CPML layer) instead of the
    /// cache-sized default; the result is the same bits (tests/cpu_isa.rs).
    pub fn with_tile_rows(mut self, rows: usize) -> Self {
        let width = self.cpml.as_ref().map_or(0, |(axes, _)| axes[0].slab.width);
        self.tiles = y_split(self.layout.ny, width, rows);
        self
    }

    /// With `true`, the sweep runs with subnormal inputs read as zero and subnormal results
    /// written as zero (x86-64's DAZ and FTZ; elsewhere no change). A wave's far field decays
    /// through the subnormal range (below 1.2e-38 in f32), where each operation can cost a
    /// hundred cycles or more on some CPUs: marmousi.toml's step went from 24 ms to 168 ms and back
    /// as its wavefield passed through that range (AVX-512 Xeon). The flushed values are part of
    /// a far field that grows as the wave comes, so the change reaches the last bits of larger
    /// values, no further than a few f32 roundings of the signal (marmousi.toml's traces: 1.9e-7
    /// of their peak; tests/cpu_subnormals.rs bounds it). The default keeps IEEE arithmetic, the
    /// GPU's, so that GPU = CPU comparisons stay bit for bit; seismic-run's own CPU runs flush.
    pub fn flushing_subnormals(mut self, flush: bool) -> Self {
        self.flush = flush;
        self
    }

    /// The instruction set the sweep runs with.
    pub fn isa(&self) -> Isa {
        self.isa
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
        self.advance_field(n);
        self.record();
    }

    /// Steps 1-5 and 7 of step `n`: the receivers are left to [`Self::record`].
    pub fn advance_field(&mut self, n: usize) {
        let start = Instant::now();
        if self.free_surface {
            self.mirror_top();
        }
        self.sweep_part(Part::All);
        if self.backward {
            self.add_transposed_layers();
        }
        self.inject(n, Part::All);
        self.close_step(start);
    }

    /// The CPML's transposed layer terms of a backward step, into p^{n+1}.
    fn add_transposed_layers(&mut self) {
        let Some(t) = &mut self.transposed else { return };
        let f = StepFields {
            layout: &self.layout,
            cur: &self.cur,
            stiffness: &self.vel2dt2,
            bh: self.bh.as_deref(),
            c1: self.c1.each_ref().map(|v| &v[..]),
            c2: self.c2.each_ref().map(|v| &v[..]),
        };
        t.apply(&f, &mut self.prev);
    }

    /// Makes the next shot a forward one or, for a [`BoundaryKind::CpmlTransposed`] problem, a
    /// backward pass with the transposed layers (zeroed).
    fn set_direction(&mut self, problem: &Problem) -> Result<()> {
        self.backward = TransposedCpml::for_shot(&mut self.transposed, problem, self.cpml.is_some())?;
        Ok(())
    }

    /// The first part of step `n` (without step 6) for a decomposed run: the free surface, then
    /// interior planes `first` (sorted, disjoint ranges) with their source taps, so that they can
    /// be sent while [`Self::finish_field`] computes the rest, but for the planes `leave`. Every plane sees what
    /// [`Self::advance_field`] gives it: a plane's update reads only p^n and the memory variables
    /// of step n, which neither part writes, and a source tap is added after its plane's sweep.
    pub fn begin_field(&mut self, n: usize, first: &[Range<usize>], leave: &[Range<usize>]) {
        debug_assert!(!self.backward, "a backward pass runs on a whole grid");
        let start = Instant::now();
        if self.split.as_ref().is_none_or(|s| s.first != first || s.leave != leave) {
            // Made once: a decomposed run computes the same planes first every step.
            self.split = Some(self.split_for(first, leave));
        }
        if self.free_surface {
            self.mirror_top();
        }
        self.sweep_part(Part::First);
        self.inject(n, Part::First);
        self.open = Some(start);
    }

    /// p^{n+1} while a step is open (between [`Self::begin_field`] and [`Self::finish_field`]),
    /// else p^n.
    fn newest(&self) -> &[T] {
        if self.open.is_some() { &self.prev } else { &self.cur }
    }

    /// The rest of the step [`Self::begin_field`] opened, as step `n`.
    pub fn finish_field(&mut self, n: usize) {
        let Some(start) = self.open.take() else { return self.advance_field(n) };
        self.sweep_part(Part::Rest);
        self.inject(n, Part::Rest);
        self.close_step(start);
    }

    /// The two parts' task ranges: each part's planes split into about as many ranges of equal
    /// work as there are threads.
    fn split_for(&self, first: &[Range<usize>], leave: &[Range<usize>]) -> Split {
        let nz = self.layout.nz;
        // Per plane: Some(true) first, Some(false) the rest, None left alone.
        let mut in_first = vec![Some(false); nz];
        for (ranges, part) in [(leave, None), (first, Some(true))] {
            for r in ranges {
                in_first[r.start.min(nz)..r.end.min(nz)].iter_mut().for_each(|f| *f = part);
            }
        }
        let weight = |iz: usize| if self.z_layer[iz].is_some() { 2.0 } else { 1.0 };
        let tasks = rayon::current_num_threads();
        let pieces = |keep: bool| {
            let planes: Vec<usize> = (0..nz).filter(|&iz| in_first[iz] == Some(keep)).collect();
            let mut out = Vec::new();
            if planes.is_empty() {
                return out;
            }
            for (i0, i1) in partition(planes.len(), tasks, |i| weight(planes[i])) {
                let mut s = i0;
                for i in i0 + 1..=i1 {
                    if i == i1 || planes[i] != planes[i - 1] + 1 {
                        out.push((planes[s], planes[i - 1] + 1));
                        s = i;
                    }
                }
            }
            out
        };
        Split { first: first.to_vec(), leave: leave.to_vec(), first_chunks: pieces(true), rest_chunks: pieces(false) }
    }

    fn sweep_part(&mut self, part: Part) {
        match self.radius {
            1 => self.sweep::<1>(part),
            2 => self.sweep::<2>(part),
            3 => self.sweep::<3>(part),
            4 => self.sweep::<4>(part),
            5 => self.sweep::<5>(part),
            6 => self.sweep::<6>(part),
            7 => self.sweep::<7>(part),
            8 => self.sweep::<8>(part),
            r => unreachable!("stencil radius {r} outside 1..=8"),
        }
    }

    /// Step 7, and the step's time.
    fn close_step(&mut self, start: Instant) {
        if let Some((axes, _)) = &mut self.cpml {
            for a in axes.iter_mut() {
                std::mem::swap(&mut a.psi, &mut a.psi_next);
            }
        }
        std::mem::swap(&mut self.cur, &mut self.prev);
        self.seconds.push(start.elapsed().as_secs_f64());
    }

    /// Steps 2-4 of the step for the planes of `part` in one sweep over z-planes, one contiguous
    /// range of planes per task (see [`Sweep`]); with CPML, each axis's new psi goes to its second
    /// buffer, which becomes the current one when the step closes.
    fn sweep<const R: usize>(&mut self, part: Part) {
        let layers = if self.backward { None } else { self.cpml.as_mut() };
        let cpml = layers.map(|(axes, coef)| {
            let [ax, ay, az] = axes;
            CpmlSweep {
                width: ax.slab.width,
                psi: [&ax.psi[..], &ay.psi[..], &az.psi[..]],
                psi_next: [Parts::new(&mut ax.psi_next), Parts::new(&mut ay.psi_next), Parts::new(&mut az.psi_next)],
                zeta: [Parts::new(&mut ax.zeta), Parts::new(&mut ay.zeta), Parts::new(&mut az.zeta)],
                a: std::array::from_fn(|i| &coef[i][0][..]),
                b: std::array::from_fn(|i| &coef[i][1][..]),
                c1: std::array::from_fn(|i| &self.c1[i][..]),
                c2: std::array::from_fn(|i| &self.c2[i][..]),
                x_weights: &self.x_weights,
                z_layer: &self.z_layer,
                y_layer: &self.y_layer,
            }
        });
        let sweep = Sweep::<T, R> {
            l: self.layout,
            cur: &self.cur,
            vel: &self.vel2dt2,
            bh: self.bh.as_deref(),
            next: Parts::new(&mut self.prev),
            damp: self.damp.as_ref(),
            centre: self.centre,
            coef: std::array::from_fn(|a| std::array::from_fn(|k| self.c2[a][k + 1])),
            cpml,
            tiles: &self.tiles,
        };
        let isa = self.isa;
        let flush = self.flush;
        let chunks = match (part, &self.split) {
            (Part::First, Some(s)) => &s.first_chunks,
            (Part::Rest, Some(s)) => &s.rest_chunks,
            _ => &self.chunks,
        };
        chunks.par_iter().for_each(|&(z0, z1)| {
            let _mode = flush.then(SubnormalsAsZero::enter);
            // SAFETY: each task writes its own planes of p^{n+1}, of the new psi and of zeta (the
            // ranges of one part are disjoint, and a plane is swept by one part a step), and reads
            // only p^n and the current psi, which no task writes (Sweep's docs).
            unsafe { sweep.dispatch(isa, z0, z1) }
        });
    }
}
