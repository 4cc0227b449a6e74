//! The CPU reference: one sweep per step over z-planes, a contiguous range of planes per rayon
//! task, that updates each row's interior points and, while the row is in cache, its CPML memory
//! variables and corrections (or applies the sponge), with the reference arithmetic per point in the
//! reference order. The x loop works on fixed blocks (the stencil radius is a const generic, so the
//! taps unroll and a block's Laplacian stays in vector registers), built for AVX-512, AVX2+FMA or
//! the portable target and chosen at run time; every build computes the same bits. The fields are
//! first touched by the ranges that sweep them, and the step allocates nothing
//! (tests/cpu_no_alloc.rs). Generic over f32 and f64 so tests can take rounding out of play.

use super::{Backend, DeviceInfo};
use crate::boundary::{BoundaryKind, Slab};
use crate::grid::{Layout, Section, for_each_section};
use crate::problem::Problem;
use aligned_vec::{AVec, ConstAlign};
use anyhow::{Result, ensure};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::OnceLock;
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

/// Width of the interior's x chunks (a stack buffer, so the step allocates nothing).
const CHUNK: usize = 64;

/// Width of the y and z layer rows' chunks: their four sums then fit the vector registers with
/// the taps (AMD EPYC, 200^3, CPML: 0.93x the time of 64-point chunks, 32 in between).
const LAYER_CHUNK: usize = 16;

/// Width of the chunks that finish a row whose length is not a multiple of CHUNK (or LAYER_CHUNK).
const TAIL: usize = 8;

/// Rows ahead of the sweep that the interior's memory streams are prefetched, each chunk's lines
/// with the chunk. On an AVX-512 Xeon (2 threads): 200^3 with a sponge 0.86x the time (1 and 2
/// rows alike, 4 less). A whole row's prefetches at once, at the row's start, were 1.17x the time
/// with CPML on marmousi.toml; spread over the chunks they gain there too (kernels/NOTES.md,
/// sessions 19 and 27).
const PREFETCH_ROWS: usize = 2;

/// Points of an x layer computed together: one AVX2 vector of f32. With whole chunks only (the
/// last overlapping, [`Sweep::cpml_x_row`]) 8 ran 0.93x the time of 16 and 4 1.17x (AMD EPYC,
/// 200^3, 20-point layers, CPML).
const XLANES: usize = 8;

/// Instruction set of the sweep, chosen once at run time: the widest this CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 (F, VL, BW, DQ) with FMA.
    Avx512,
    /// AVX2 with FMA.
    Avx2Fma,
    /// What the build targets (SSE2 on x86-64, where `mul_add` is a correct but slow library call).
    Portable,
}

impl Isa {
    /// The widest instruction set available here (detected once).
    pub fn detect() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| [Isa::Avx512, Isa::Avx2Fma].into_iter().find(|i| i.available()).unwrap_or(Isa::Portable))
    }

    /// Whether this CPU runs code built for `self`.
    pub fn available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2Fma.available()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512dq")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "AVX-512",
            Isa::Avx2Fma => "AVX2+FMA",
            Isa::Portable => "portable",
        }
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
    vel2dt2: Field<T>,
    damp: Option<[Vec<T>; 3]>,
    cpml: Option<([CpmlAxis<T>; 3], CpmlProfiles<T>)>,
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
    /// (offset in the padded field, weight * c^2 dt^2) per source tap.
    src_taps: Vec<(usize, T)>,
    src_samples: Vec<T>,
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
        let cpml_width = if b.kind == BoundaryKind::Cpml { b.width } else { 0 };
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
        problem.vel2dt2_into(&layout, &mut vel2dt2, T::of);
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
        let x_weights = cpml
            .as_ref()
            .map_or(Vec::new(), |(_, coef): &(_, CpmlProfiles<T>)| x_layer_weights(&coef[0][0], &c2[0], r, b.width));
        let (src_taps, rec_taps) = shot_taps(problem, &layout, &vel2dt2);
        Ok(CpuSolver {
            layout,
            radius: r,
            isa,
            flush: false,
            c2,
            centre,
            c1,
            vel2dt2,
            damp,
            cpml,
            x_weights,
            free_surface: b.free_surface,
            y_layer,
            cur: first_touch(&layout, &chunks),
            prev: first_touch(&layout, &chunks),
            z_layer,
            chunks,
            tiles: y_tiles(&layout, cpml_width, std::mem::size_of::<T>()),
            src_taps,
            src_samples: problem.source.samples.iter().map(|&s| T::of(s)).collect(),
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
        self.inject(n, Part::All);
        self.close_step(start);
    }

    /// The first part of step `n` (without step 6) for a decomposed run: the free surface, then
    /// interior planes `first` (sorted, disjoint ranges) with their source taps, so that they can
    /// be sent while [`Self::finish_field`] computes the rest, but for the planes `leave`. Every plane sees what
    /// [`Self::advance_field`] gives it: a plane's update reads only p^n and the memory variables
    /// of step n, which neither part writes, and a source tap is added after its plane's sweep.
    pub fn begin_field(&mut self, n: usize, first: &[Range<usize>], leave: &[Range<usize>]) {
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

    /// Step 5 for the source taps on the planes of `part`, in their order.
    fn inject(&mut self, n: usize, part: Part) {
        let Some(&s) = self.src_samples.get(n) else { return };
        let plane = self.layout.plane;
        let halo = self.layout.halo;
        let in_first = |o: usize| {
            let iz = o / plane - halo;
            self.split.as_ref().is_some_and(|sp| sp.first.iter().any(|r| r.contains(&iz)))
        };
        for &(o, w) in &self.src_taps {
            let take = match part {
                Part::All => true,
                Part::First => in_first(o),
                Part::Rest => !in_first(o),
            };
            if take {
                self.prev[o] += w * s;
            }
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

    /// Step 6: one sample per receiver from the current wavefield (p^{n+1} once the step is done).
    pub fn record(&mut self) {
        for (taps, trace) in self.rec_taps.iter().zip(self.traces.iter_mut()) {
            let mut v = T::default();
            for &(o, w) in taps {
                v += w * self.cur[o];
            }
            trace.push(v);
        }
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

    /// Steps 2-4 of the step for the planes of `part` in one sweep over z-planes, one contiguous
    /// range of planes per task (see [`Sweep`]); with CPML, each axis's new psi goes to its second
    /// buffer, which becomes the current one when the step closes.
    fn sweep<const R: usize>(&mut self, part: Part) {
        let cpml = self.cpml.as_mut().map(|(axes, coef)| {
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

/// Interior z-planes `z0..z0 + planes` of `field` into `buf`, dense (planes, ny, nx), through f32.
fn copy_planes_out<T: Real>(l: &Layout, field: &[T], z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
    let plane = l.nx * l.ny;
    ensure!(z0 + planes <= l.nz && buf.len() == planes * plane, "halo planes {z0}..{} of {}", z0 + planes, l.nz);
    for (k, chunk) in buf.chunks_exact_mut(plane).enumerate() {
        for (iy, row) in chunk.chunks_exact_mut(l.nx).enumerate() {
            let src = l.row(iy, z0 + k);
            for (o, v) in row.iter_mut().zip(&field[src..src + l.nx]) {
                *o = v.f64() as f32;
            }
        }
    }
    Ok(())
}

/// The problem's layout, its rows one ROW_ALIGN longer where a row is a whole number of 4 KiB
/// pages: every row of p^n, and so every y and z tap of a point, would then fall in the same L1
/// cache sets (and each store 4 KiB from the loads). marmousi.toml's 960-point rows are 4 KiB:
/// 0.94x the time of its first 150 steps with the longer rows; at 200^3 (1 KiB rows) a longer
/// row was slower (1.06x), so other pitches stay. Its planes are moved off whole pages as well
/// ([`plane_padding`]).
pub(crate) fn cpu_layout<T>(l: Layout) -> Layout {
    let elem = std::mem::size_of::<T>();
    let aliased = (l.pitch * elem).is_multiple_of(4096);
    let l = l.with_pitch(l.pitch + if aliased { crate::grid::ROW_ALIGN } else { 0 });
    l.with_plane_padding(plane_padding(l.plane * elem, elem))
}

/// Elements to add after each plane of `plane_bytes` so that the 2R + 1 planes a point's z taps
/// read do not share the L1 cache sets: a plane a whole number of 4 KiB pages apart put every z
/// tap, p^{n-1} and c^2 dt^2 of a point in one set (200^3: 208 rows of 1 KiB). Planes that far
/// from a page multiple are left as they are; others move to PLANE_SET_SHIFT bytes past one
/// (AMD EPYC, 200^3: the interior 0.95x the time, CPML 0.96x; 384 to 896 bytes alike).
fn plane_padding(plane_bytes: usize, elem: usize) -> usize {
    const PAGE: usize = 4096;
    const PLANE_SET_SHIFT: usize = 640;
    let off = plane_bytes % PAGE;
    if (PLANE_SET_SHIFT..=PAGE - PLANE_SET_SHIFT).contains(&off) {
        return 0;
    }
    let step = crate::grid::ROW_ALIGN * elem;
    ((PLANE_SET_SHIFT + PAGE - off) % PAGE).div_ceil(step) * step / elem
}

/// Bytes of the 2R + 1 planes of p^n a tile's sweep keeps in reach: half of a core's L2, the rest
/// left to p^{n-1}, c^2 dt^2 and the CPML arrays streaming through. SEISMIC_CPU_TILE_BYTES
/// overrides it (an experiment knob).
fn tile_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("SEISMIC_CPU_TILE_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(l2_bytes() / 2)
    })
}

/// One core's L2 cache in bytes, from Linux's sysfs; 1 MiB where it cannot be read.
fn l2_bytes() -> usize {
    let read = |f: &str| std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu0/cache/{f}")).ok();
    (0..8)
        .find_map(|i| {
            let level = read(&format!("index{i}/level"))?;
            let kind = read(&format!("index{i}/type"))?;
            if level.trim() != "2" || kind.trim() == "Instruction" {
                return None;
            }
            let size = read(&format!("index{i}/size"))?;
            let size = size.trim();
            let (digits, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit()).unwrap_or(size.len()));
            let k = digits.parse::<usize>().ok()?;
            Some(match unit {
                "K" => k << 10,
                "M" => k << 20,
                _ => k,
            })
        })
        .unwrap_or(1 << 20)
}

/// Row ranges that split 0..ny so that 2R + 1 planes of one range take about TILE_BYTES (the
/// z-neighbours a row reads then come from L2), none thinner than the CPML layer `width`. Any
/// split computes the same bits (a layer row reads only p^n and the previous step's psi); the
/// floor is a speed choice: thinner tiles ran slower on marmousi.toml (bench/HISTORY.md, session 13).
fn y_tiles(layout: &Layout, width: usize, elem: usize) -> Vec<(usize, usize)> {
    let window = (2 * layout.halo + 1) * layout.pitch * elem;
    y_split(layout.ny, width, tile_bytes() / window)
}

/// 0..ny in ranges of about `rows` rows, none thinner than `width`.
fn y_split(ny: usize, width: usize, rows: usize) -> Vec<(usize, usize)> {
    let tiles = ny.div_ceil(rows.max(1)).min(ny / width.max(1)).max(1);
    (0..tiles).map(|k| (k * ny / tiles, (k + 1) * ny / tiles)).collect()
}

/// Contiguous ranges of 0..nz, at most `tasks` of them, none empty, of about equal total weight.
fn partition(nz: usize, tasks: usize, weight: impl Fn(usize) -> f64) -> Vec<(usize, usize)> {
    let tasks = tasks.clamp(1, nz.max(1));
    let total: f64 = (0..nz).map(&weight).sum();
    let mut out = Vec::with_capacity(tasks);
    let (mut z0, mut acc) = (0, 0.0);
    for iz in 0..nz {
        acc += weight(iz);
        let left = tasks - out.len();
        // Close the range at the k-th share of the weight, leaving a plane for each range to come.
        if left > 1 && acc >= total * (out.len() + 1) as f64 / tasks as f64 && nz - (iz + 1) >= left - 1 {
            out.push((z0, iz + 1));
            z0 = iz + 1;
        }
    }
    out.push((z0, nz));
    out
}

/// The source's taps (offset in a field of `layout`, the solver's, and weight * c^2 dt^2 there)
/// and each receiver's (offset, weight), as the step applies them.
#[allow(clippy::type_complexity)]
fn shot_taps<T: Real>(problem: &Problem, layout: &Layout, vel2dt2: &[T]) -> (Vec<(usize, T)>, Vec<Vec<(usize, T)>>) {
    let taps = |t: &[crate::problem::Tap]| -> Vec<(usize, T)> {
        t.iter()
            .map(|t| {
                let [x, y, z] = t.point;
                (layout.index(x as isize, y as isize, z as isize), T::of(t.weight))
            })
            .collect()
    };
    let src = taps(&problem.source.taps).into_iter().map(|(o, w)| (o, T::of(w.f64() * vel2dt2[o].f64()))).collect();
    (src, problem.receivers.iter().map(|r| taps(&r.taps)).collect())
}

/// A zeroed padded field whose pages are first written by the task ranges of `chunks` (halo planes
/// going with the first and last range), as the sweep later writes them: on a NUMA machine the
/// pages then sit in the memory of the socket that sweeps them, and no step pays page faults.
fn first_touch<T: Real>(layout: &Layout, chunks: &[(usize, usize)]) -> Field<T> {
    first_touch_in(layout.len(), task_ends(layout, chunks))
}

/// Where each task range of `chunks` but the last ends in a field of `layout` (halo planes going
/// with the first and last range).
fn task_ends<'a>(layout: &'a Layout, chunks: &'a [(usize, usize)]) -> impl Iterator<Item = usize> + 'a {
    chunks[..chunks.len() - 1].iter().map(|&(_, z1)| (z1 + layout.halo) * layout.plane)
}

/// `v` cut at `ends` (increasing, within `v`): the pieces in order, covering all of it.
fn split_at_ends<U>(v: &mut [U], ends: impl Iterator<Item = usize>) -> Vec<&mut [U]> {
    let (mut rest, mut at, mut pieces) = (v, 0, Vec::new());
    for end in ends {
        let (piece, tail) = rest.split_at_mut(end - at);
        pieces.push(piece);
        rest = tail;
        at = end;
    }
    pieces.push(rest);
    pieces
}

/// `len` zeros whose pieces between `ends` (increasing, below `len`) are first written by one
/// rayon task each.
fn first_touch_in<T: Real>(len: usize, ends: impl Iterator<Item = usize>) -> Field<T> {
    let mut v = Field::<T>::with_capacity(FIELD_ALIGN, len);
    // SAFETY: the capacity holds len elements; MaybeUninit needs no initialisation.
    let spare = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<std::mem::MaybeUninit<T>>(), len) };
    split_at_ends(spare, ends).into_par_iter().for_each(|p| {
        for x in p {
            x.write(T::default());
        }
    });
    // SAFETY: the pieces cover 0..len, every element written above.
    unsafe { v.set_len(len) };
    v
}

/// A field the sweep's tasks write in disjoint parts (their own z-planes), shared as a raw pointer.
#[derive(Clone, Copy)]
struct Parts<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: Parts hands out element ranges only through its unsafe accessors, whose callers keep
// the ranges of concurrent tasks disjoint.
unsafe impl<T: Send> Send for Parts<T> {}
unsafe impl<T: Send> Sync for Parts<T> {}

impl<T> Parts<T> {
    fn new(v: &mut [T]) -> Self {
        Parts { ptr: v.as_mut_ptr(), len: v.len() }
    }

    /// Elements [at, at + n), writable.
    /// SAFETY: nothing else reads or writes them while the slice lives.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self, at: usize, n: usize) -> &mut [T] {
        assert!(at + n <= self.len);
        // SAFETY: in bounds (checked); exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), n) }
    }
}

/// The CPML side of a sweep: per axis the slab's current psi (read only), its new psi and zeta
/// (each point written by the task owning it), the profiles and the derivative weights. All three
/// slabs have the layer's width.
struct CpmlSweep<'a, T> {
    width: usize,
    psi: [&'a [T]; 3],
    psi_next: [Parts<T>; 3],
    zeta: [Parts<T>; 3],
    a: [&'a [T]; 3],
    b: [&'a [T]; 3],
    c1: [&'a [T]; 3],
    c2: [&'a [T]; 3],
    /// [`x_layer_weights`] of the x profile.
    x_weights: &'a [T],
    /// Slab plane of each interior z-plane in the z layers (CpuSolver::z_layer).
    z_layer: &'a [Option<usize>],
    /// Slab row of each interior row in the y layers (CpuSolver::y_layer).
    y_layer: &'a [Option<usize>],
}

/// One step's sweep. A task owns the interior planes [z0, z1) of p^{n+1} (written over p^{n-1})
/// and of every slab, and goes up its planes once: per row it computes the interior value and,
/// while the row is in cache, the y, z and x layers' memory variables and corrections in that
/// order ([`CPML_AXIS_ORDER`](crate::boundary::CPML_AXIS_ORDER)), so every point sees the
/// reference's operations in the reference's order. A layer point
/// reads only p^n and the current psi of its neighbours, which nobody writes during the sweep
/// (the new psi goes to the other buffer), so tasks need no ordering among themselves.
struct Sweep<'a, T: Real, const R: usize> {
    l: Layout,
    cur: &'a [T],
    vel: &'a [T],
    next: Parts<T>,
    damp: Option<&'a [Vec<T>; 3]>,
    centre: T,
    coef: [[T; R]; 3],
    cpml: Option<CpmlSweep<'a, T>>,
    tiles: &'a [(usize, usize)],
}

/// While alive, this thread's SSE/AVX arithmetic reads subnormal inputs as zero and writes
/// subnormal results as zero (MXCSR's DAZ and FTZ bits); dropping it restores the thread's mode.
/// A no-op off x86-64.
struct SubnormalsAsZero {
    #[cfg(target_arch = "x86_64")]
    saved: u32,
}

impl SubnormalsAsZero {
    #[cfg(target_arch = "x86_64")]
    const DAZ_FTZ: u32 = (1 << 6) | (1 << 15);

    fn enter() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let saved = read_mxcsr();
            write_mxcsr(saved | Self::DAZ_FTZ);
            SubnormalsAsZero { saved }
        }
        #[cfg(not(target_arch = "x86_64"))]
        SubnormalsAsZero {}
    }
}

impl Drop for SubnormalsAsZero {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        write_mxcsr(self.saved);
    }
}

#[cfg(target_arch = "x86_64")]
fn read_mxcsr() -> u32 {
    let mut v = 0u32;
    // SAFETY: stmxcsr stores the 4-byte control register to a valid, writable u32.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v, options(nostack, preserves_flags)) };
    v
}

#[cfg(target_arch = "x86_64")]
fn write_mxcsr(v: u32) {
    // SAFETY: ldmxcsr loads a control word that read_mxcsr produced, with only DAZ and FTZ
    // (valid, non-reserved bits) changed; no exception is unmasked.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &v, options(nostack, readonly, preserves_flags)) };
}

/// A hint to bring the cache line at `p` into L1; no effect off x86-64.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Slab coordinate of grid index i on an axis of n points with layers of width w, if in a layer.
#[inline(always)]
fn layer(i: usize, n: usize, w: usize) -> Option<usize> {
    if i < w {
        Some(i)
    } else if i + w >= n {
        Some(i + 2 * w - n)
    } else {
        None
    }
}

impl<T: Real, const R: usize> Sweep<'_, T, R> {
    /// Runs [`Self::run`] in the build for `isa`.
    /// SAFETY: as [`Self::run`]; `isa` is available on this CPU.
    unsafe fn dispatch(&self, isa: Isa, z0: usize, z1: usize) {
        // SAFETY: the caller checked isa (CpuSolver::with_isa) and keeps run's contract.
        unsafe {
            match isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => self.run_avx512(z0, z1),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2Fma => self.run_avx2(z0, z1),
                _ => self.run(z0, z1),
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
    unsafe fn run_avx512(&self, z0: usize, z1: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.run(z0, z1) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(&self, z0: usize, z1: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.run(z0, z1) }
    }

    /// Sweeps planes [z0, z1), tile by tile.
    /// SAFETY: concurrent calls have disjoint ranges of one partition of 0..nz.
    #[inline(always)]
    unsafe fn run(&self, z0: usize, z1: usize) {
        for &(y0, y1) in self.tiles {
            for iz in z0..z1 {
                // SAFETY: plane iz is this task's.
                unsafe { self.plane(iz, y0, y1) };
            }
        }
    }

    /// The whole update of rows y0..y1 of interior plane iz (a y tile, see [`y_tiles`]).
    /// SAFETY: plane iz of p^{n+1}, of the new psi and of the zetas is this task's.
    #[inline(always)]
    unsafe fn plane(&self, iz: usize, y0: usize, y1: usize) {
        let l = self.l;
        for iy in y0..y1 {
            let row = l.row(iy, iz);
            // SAFETY: p^{n+1} of plane iz is this task's.
            let out = unsafe { self.next.get(row, l.nx) };
            self.interior_row(out, row, iy, iz);
            if let Some(c) = &self.cpml {
                // SAFETY: forwarded.
                // y, z, then x (CPML_AXIS_ORDER): the GPU's fused pass adds the y layers, and the
                // z layers of its other rows, itself.
                unsafe {
                    if let Some(t) = c.y_layer[iy] {
                        self.cpml_yz_row(c, 1, out, iy, iz, t);
                    }
                    if let Some(t) = c.z_layer[iz] {
                        self.cpml_yz_row(c, 2, out, iy, iz, t);
                    }
                    self.cpml_x_row(c, out, iy, iz);
                }
            }
        }
    }

    /// p^{n+1} = g (2 p^n - g p^{n-1} + c^2 dt^2 L p^n) on one row (g = 1 without a sponge), CHUNK
    /// points at a time, the tail TAIL at a time.
    #[inline(always)]
    fn interior_row(&self, out: &mut [T], row: usize, iy: usize, iz: usize) {
        let nx = self.l.nx;
        // The streams only this row's points read from memory (p^n's leading plane, c^2 dt^2,
        // p^{n-1}) are prefetched PREFETCH_ROWS rows ahead: the hardware prefetchers, following
        // 2R + 1 rows of p^n as well, bring them late. Each chunk's prefetches go out with it:
        // a row's all at once filled the fill buffers at the row's start.
        let ahead = row + PREFETCH_ROWS * self.l.pitch;
        let whole = nx - nx % CHUNK;
        for x0 in (0..whole).step_by(CHUNK) {
            self.prefetch_streams(ahead, x0, x0 + CHUNK);
            self.interior_chunk::<CHUNK, true>(out, row, iy, iz, x0);
        }
        self.prefetch_streams(ahead, whole, nx);
        // The row's tail in vectors of TAIL points, not a whole CHUNK of mostly padding.
        for x0 in (whole..nx).step_by(TAIL) {
            self.interior_chunk::<TAIL, false>(out, row, iy, iz, x0);
        }
    }

    /// Prefetches points x0..x1 of the row at offset `ahead` of the streams only the interior
    /// reads from memory.
    #[inline(always)]
    fn prefetch_streams(&self, ahead: usize, x0: usize, x1: usize) {
        for x in (x0..x1).step_by(64 / std::mem::size_of::<T>()) {
            prefetch(self.cur.as_ptr().wrapping_add(ahead + R * self.l.plane + x));
            prefetch(self.vel.as_ptr().wrapping_add(ahead + x));
            prefetch(self.next.ptr.cast_const().wrapping_add(ahead + x));
        }
    }

    /// [`Self::interior_row`] at the N points from x0 (those inside the row; all N where WHOLE,
    /// so that the update's loops have a fixed length and no remainder).
    #[inline(always)]
    fn interior_chunk<const N: usize, const WHOLE: bool>(
        &self,
        out: &mut [T],
        row: usize,
        iy: usize,
        iz: usize,
        x0: usize,
    ) {
        let l = self.l;
        let two = T::of(2.0);
        let w = if WHOLE { N } else { N.min(l.nx - x0) };
        let o = row + x0;
        let mut lap = [T::default(); N];
        laplacian_chunk::<T, R, N>(self.cur, o, [l.pitch, l.plane], &self.coef, self.centre, &mut lap);
        let out = &mut out[x0..x0 + w];
        let (c, v) = (&self.cur[o..o + w], &self.vel[o..o + w]);
        if let Some(g) = self.damp {
            // Sponge: p^{n-1} is damped too, so the factor acts as a friction term
            // (~ -2 (1 - g) dp/dt) rather than a restoring force that would reflect.
            let gyz = g[1][iy] * g[2][iz];
            let gx = &g[0][x0..x0 + w];
            for i in 0..w {
                let gi = gx[i] * gyz;
                out[i] = gi * (two * c[i] - gi * out[i] + v[i] * lap[i]);
            }
        } else {
            for i in 0..w {
                out[i] = two * c[i] - out[i] + v[i] * lap[i];
            }
        }
    }

    /// The x layers of row (iy, iz), point by point (boundary.rs has the formulation): with dp/dx
    /// and d2p/dx2 from p^n and dphi/dx from the current phi_x = b psi_x of the neighbours in the
    /// same layer (phi is zero outside its layers),
    ///   dpsi/dx = dphi/dx + D(a D p),  phi_x' = b (phi_x + a dp/dx),
    ///   zeta_x <- b zeta_x + a (d2p/dx2 + dpsi/dx),  p^{n+1} += c^2 dt^2 (dpsi/dx + zeta_x).
    /// SAFETY: the new phi_x and zeta_x of the row are this task's.
    #[inline(always)]
    unsafe fn cpml_x_row(&self, c: &CpmlSweep<'_, T>, out: &mut [T], iy: usize, iz: usize) {
        let (l, w) = (self.l, c.width);
        let at = (iz * l.ny + iy) * 2 * w;
        // psi and its next buffer: each half of the row between R zeros on each side.
        let half_stride = w + 2 * R;
        let pat = (iz * l.ny + iy) * 2 * half_stride;
        let psi = &c.psi[0][pat..pat + 2 * half_stride];
        // SAFETY: forwarded.
        let (psi_next, zeta) = unsafe { (c.psi_next[0].get(pat, 2 * half_stride), c.zeta[0].get(at, 2 * w)) };
        // The memory variables of the row PREFETCH_ROWS ahead in the slabs (the next rows of the
        // sweep but at a tile's end): a few lines a row at both ends of it, which the hardware
        // prefetchers did not bring in time (AMD EPYC, 200^3: the CPML step 0.91x the time).
        let line = 64 / std::mem::size_of::<T>();
        let ahead = pat + PREFETCH_ROWS * 2 * half_stride;
        for e in (0..2 * half_stride).step_by(line).chain([2 * half_stride - 1]) {
            prefetch(c.psi[0].as_ptr().wrapping_add(ahead + e));
            prefetch(c.psi_next[0].ptr.cast_const().wrapping_add(ahead + e));
        }
        let ahead = at + PREFETCH_ROWS * 2 * w;
        for e in (0..2 * w).step_by(line).chain([2 * w - 1]) {
            prefetch(c.zeta[0].ptr.cast_const().wrapping_add(ahead + e));
        }
        for half in 0..2 {
            let x0 = if half == 0 { 0 } else { l.nx - w };
            let half_row = XHalf {
                x0,
                o: l.row(iy, iz) + x0,
                own: pat + half * half_stride + R,
                seg: half * half_stride + R,
                slab: half * w,
            };
            // XLANES points at a time, every lane computed (whole vectors). A layer narrower than
            // XLANES takes one partial chunk (its n points kept); a wider one whole chunks only,
            // the last ending at the layer's end and overlapping the one before it, whose stores
            // wait until the last has read its inputs: the lanes computed twice get the same
            // values from the same inputs, so every chunk's loops have a fixed length.
            if w < XLANES {
                self.x_partial_chunk(c, &half_row, out, psi, psi_next, zeta);
                continue;
            }
            let last = w - XLANES;
            let mut held: Option<(usize, XValues<T>)> = None;
            for j in (0..last).step_by(XLANES).chain([last]) {
                let v = self.x_values(c, &half_row, out, psi, zeta, j);
                if let Some((k, u)) = held.replace((j, v)) {
                    x_store(&half_row, out, psi_next, zeta, k, &u);
                }
            }
            if let Some((k, u)) = held {
                x_store(&half_row, out, psi_next, zeta, k, &u);
            }
        }
    }

    /// The sums of [`Self::cpml_x_row`] at the XLANES points from j of one half's layer: dp/dx,
    /// d2p/dx2, D(a D p) and dphi/dx.
    #[inline(always)]
    fn x_sums(&self, c: &CpmlSweep<'_, T>, h: &XHalf, j: usize) -> [[T; XLANES]; 4] {
        let (cur, w) = (self.cur, c.width);
        let (c1, c2) = (c.c1[0], c.c2[0]);
        let c1k: [T; R] = std::array::from_fn(|k| c1[k + 1]);
        let c2k: [T; R] = std::array::from_fn(|k| c2[k + 1]);
        let pairs = x_pairs_stride(w);
        let q = h.o + j;
        assert!(q >= R && q + XLANES + R <= cur.len(), "x layer chunk at {q} outside the field");
        let u = h.slab + j;
        // SAFETY: [q - R, q + XLANES + R) is inside `cur` (checked above).
        let ld = |off: isize| -> [T; XLANES] {
            unsafe { std::ptr::read_unaligned(cur.as_ptr().offset(q as isize + off).cast()) }
        };
        let cc = ld(0);
        let fl: [[T; XLANES]; R] = std::array::from_fn(|k| ld(-(k as isize) - 1));
        let fh: [[T; XLANES]; R] = std::array::from_fn(|k| ld(k as isize + 1));
        // One bounds check a chunk for the weights and phi's taps below, not one a vector
        // (three instructions each, about fifty a chunk).
        let table = c.x_weights;
        assert!(2 * R * pairs + u + XLANES <= table.len(), "x layer weights at {u} outside their table");
        // SAFETY: rows 0..=2R of the table at lanes u..u + XLANES are inside it (checked above).
        let wl = |at: usize| -> [T; XLANES] { unsafe { std::ptr::read_unaligned(table.as_ptr().add(at).cast()) } };
        let wp: [[T; XLANES]; R] = std::array::from_fn(|k| wl(k * pairs + u));
        let wm: [[T; XLANES]; R] = std::array::from_fn(|k| wl((R + k) * pairs + u));
        let ws: [T; XLANES] = wl(2 * R * pairs + u);
        let (mut dp, mut d2, mut sa) = ([T::default(); XLANES], [T::default(); XLANES], [T::default(); XLANES]);
        for i in 0..XLANES {
            let c0 = cc[i];
            let (mut sdp, mut sd2, mut ssa) = (T::default(), c2[0] * c0, T::default());
            for k in 0..R {
                let (lv, hv) = (fl[k][i], fh[k][i]);
                sdp = c1k[k].mul_add(hv - lv, sdp);
                sd2 = c2k[k].mul_add(lv + hv, sd2);
                ssa = wp[k][i].mul_add(hv, ssa);
                ssa = wm[k][i].mul_add(lv, ssa);
            }
            (dp[i], d2[i], sa[i]) = (sdp, sd2, (-ws[i]).mul_add(c0, ssa));
        }
        // phi's taps as whole vectors straight from the padded slab: the zeros around each layer
        // are phi outside it, and lanes past the layer read the pad, the next half or the slack
        // (discarded). No copy into a window: its loads stalled on store forwarding.
        let own = h.own + j;
        let slab = c.psi[0];
        assert!(own >= R && own + R + XLANES <= slab.len(), "the x slab's slack holds the taps");
        // SAFETY: [own - R, own + R + XLANES) is inside the slab (checked above).
        let tap = |at: usize| -> [T; XLANES] { unsafe { std::ptr::read_unaligned(slab.as_ptr().add(at).cast()) } };
        let hi: [[T; XLANES]; R] = std::array::from_fn(|k| tap(own + k + 1));
        let lo: [[T; XLANES]; R] = std::array::from_fn(|k| tap(own - k - 1));
        // Both taps of each k in one pass over the lanes: a pass a tap left the sum on the stack
        // in pieces, reloaded whole (a store-forwarding stall).
        let mut dpsi = [T::default(); XLANES];
        for k in 0..R {
            for i in 0..XLANES {
                dpsi[i] = c1k[k].mul_add(hi[k][i], dpsi[i]);
                dpsi[i] = (-c1k[k]).mul_add(lo[k][i], dpsi[i]);
            }
        }
        [dp, d2, sa, dpsi]
    }

    /// The new phi, zeta and p^{n+1} of the XLANES points from j of one half's layer, all inside
    /// it, not yet stored ([`x_store`]).
    #[inline(always)]
    fn x_values(&self, c: &CpmlSweep<'_, T>, h: &XHalf, out: &[T], psi: &[T], zeta: &[T], j: usize) -> XValues<T> {
        let [dp, d2, sa, dpsi] = self.x_sums(c, h, j);
        let x = h.x0 + j;
        let lanes = |v: &[T], at: usize| -> [T; XLANES] { v[at..at + XLANES].try_into().expect("a whole chunk") };
        let (aq, bq, ps) = (lanes(c.a[0], x), lanes(c.b[0], x), lanes(psi, h.seg + j));
        let (z, v, o) = (lanes(zeta, h.slab + j), lanes(self.vel, h.o + j), lanes(out, x));
        let mut r = XValues { psi: [T::default(); XLANES], zeta: z, out: o };
        for i in 0..XLANES {
            let ds = dpsi[i] + sa[i];
            r.psi[i] = bq[i] * aq[i].mul_add(dp[i], ps[i]);
            r.zeta[i] = bq[i].mul_add(z[i], aq[i] * (d2[i] + ds));
            r.out[i] = v[i].mul_add(ds + r.zeta[i], o[i]);
        }
        r
    }

    /// [`Self::cpml_x_row`] for a layer narrower than XLANES: one chunk, its w points kept.
    #[inline(always)]
    fn x_partial_chunk(
        &self,
        c: &CpmlSweep<'_, T>,
        h: &XHalf,
        out: &mut [T],
        psi: &[T],
        psi_next: &mut [T],
        zeta: &mut [T],
    ) {
        let n = c.width;
        let [dp, d2, sa, dpsi] = self.x_sums(c, h, 0);
        let x0 = h.x0;
        let (aq, bq) = (&c.a[0][x0..x0 + n], &c.b[0][x0..x0 + n]);
        let (ps, ns) = (&psi[h.seg..h.seg + n], &mut psi_next[h.seg..h.seg + n]);
        let (z, v) = (&mut zeta[h.slab..h.slab + n], &self.vel[h.o..h.o + n]);
        let out = &mut out[x0..x0 + n];
        for i in 0..n {
            let ds = dpsi[i] + sa[i];
            ns[i] = bq[i] * aq[i].mul_add(dp[i], ps[i]);
            z[i] = bq[i].mul_add(z[i], aq[i] * (d2[i] + ds));
            out[i] = v[i].mul_add(ds + z[i], out[i]);
        }
    }

    /// The y (axis 1) or z (axis 2) layer update of row (iy, iz), slab coordinate t, as
    /// [`Self::cpml_x_row`] along that axis, with phi's neighbours t +- k taken only within t's
    /// half of the slab: whole LAYER_CHUNKs, then the row's tail TAIL points at a time.
    /// SAFETY: the new phi and zeta of the row are this task's.
    #[inline(always)]
    unsafe fn cpml_yz_row(&self, c: &CpmlSweep<'_, T>, axis: usize, out: &mut [T], iy: usize, iz: usize, t: usize) {
        let l = self.l;
        let w = c.width;
        let (s, ps, q, prow) = if axis == 1 {
            (l.pitch, l.nx, iy, (iz * 2 * w + t) * l.nx)
        } else {
            (l.plane, l.nx * l.ny, iz, (t * l.ny + iy) * l.nx)
        };
        let (wp, wm, ws) = layer_weights::<T, R>(c.a[axis], c.c2[axis], q);
        // SAFETY: forwarded.
        let (nrow, zrow) = unsafe { (c.psi_next[axis].get(prow, l.nx), c.zeta[axis].get(prow, l.nx)) };
        let row = LayerRow {
            axis,
            s,
            ps,
            prow,
            row: l.row(iy, iz),
            lo: if t < w { 0 } else { w },
            t,
            ab: (c.a[axis][q], c.b[axis][q]),
            weights: (wp, wm, ws),
        };
        let whole = l.nx - l.nx % LAYER_CHUNK;
        for x0 in (0..whole).step_by(LAYER_CHUNK) {
            self.layer_chunk::<LAYER_CHUNK, true>(c, &row, out, nrow, zrow, x0);
        }
        for x0 in (whole..l.nx).step_by(TAIL) {
            self.layer_chunk::<TAIL, false>(c, &row, out, nrow, zrow, x0);
        }
    }

    /// [`Self::cpml_yz_row`] at the N points from x0 (those inside the row; all N where WHOLE). The
    /// sums live in arrays of N that no loop indexes by a runtime bound where WHOLE, so that they
    /// stay in vector registers: one function with a whole and a partial path kept them on the
    /// stack, every tap's accumulation a load and a store.
    #[inline(always)]
    fn layer_chunk<const N: usize, const WHOLE: bool>(
        &self,
        c: &CpmlSweep<'_, T>,
        r: &LayerRow<T, R>,
        out: &mut [T],
        nrow: &mut [T],
        zrow: &mut [T],
        x0: usize,
    ) {
        let (cur, vel, w) = (self.cur, self.vel, c.width);
        let (c1, c2) = (c.c1[r.axis], c.c2[r.axis]);
        let c1k: [T; R] = std::array::from_fn(|k| c1[k + 1]);
        let c2k: [T; R] = std::array::from_fn(|k| c2[k + 1]);
        let (wp, wm, ws) = r.weights;
        let (aq, bq) = r.ab;
        let psi = c.psi[r.axis];
        let (o, po) = (r.row + x0, r.prow + x0);
        let n = if WHOLE { N } else { N.min(self.l.nx - x0) };
        // The next row's memory variables and the leading phi tap it reads first: with p^n's
        // 2R + 1 rows and three more fields in flight the prefetchers lose these streams (y
        // layers: 0.94x the wall time on 519 steps of marmousi.toml, where they hold 62% of the
        // points; z layers: 0.98x at 200^3, CPML, five rounds in turns).
        let ahead = |v: *const T, at: usize| prefetch(v.wrapping_add(at));
        let next = po + self.l.nx;
        for line in (0..n).step_by(64 / std::mem::size_of::<T>()) {
            ahead(c.zeta[r.axis].ptr, next + line);
            ahead(c.psi_next[r.axis].ptr, next + line);
            ahead(psi.as_ptr(), next + R * r.ps + line);
        }
        let mut dp = [T::default(); N];
        let mut dpsi = [T::default(); N];
        let mut d2 = [T::default(); N];
        let mut sa = [T::default(); N];
        // The sums over p^n in one loop, all taps unrolled, so the three sums stay in vector
        // registers (points past the row are read from padding and discarded). One bounds check
        // for the chunk's 2R + 1 rows along the axis, not one a row.
        let s = r.s;
        assert!(o >= R * s && o + R * s + N <= cur.len(), "the layer chunk at {o} leaves the field");
        // SAFETY: every `off` below lies in [o - R s, o + R s], so off..off + N is inside cur.
        let at = |off: usize| -> &[T; N] { unsafe { &*cur.as_ptr().add(off).cast::<[T; N]>() } };
        let cc = at(o);
        let fl: [&[T; N]; R] = std::array::from_fn(|k| at(o - (k + 1) * s));
        let fh: [&[T; N]; R] = std::array::from_fn(|k| at(o + (k + 1) * s));
        for i in 0..N {
            let c0 = cc[i];
            let (mut sdp, mut sd2, mut ssa) = (T::default(), c2[0] * c0, T::default());
            for k in 0..R {
                let (lv, hv) = (fl[k][i], fh[k][i]);
                sdp = c1k[k].mul_add(hv - lv, sdp);
                sd2 = c2k[k].mul_add(lv + hv, sd2);
                ssa = wp[k].mul_add(hv, ssa);
                ssa = wm[k].mul_add(lv, ssa);
            }
            (dp[i], d2[i], sa[i]) = (sdp, sd2, (-ws).mul_add(c0, ssa));
        }
        let (t, lo, ps) = (r.t, r.lo, r.ps);
        for k in 1..=R {
            if t + k < lo + w {
                axpy(&mut dpsi, c1[k], &psi[po + k * ps..], n);
            }
            if t >= lo + k {
                axpy(&mut dpsi, -c1[k], &psi[po - k * ps..], n);
            }
        }
        let (p0, ns, z) = (&psi[po..po + n], &mut nrow[x0..x0 + n], &mut zrow[x0..x0 + n]);
        let (out, v) = (&mut out[x0..x0 + n], &vel[o..o + n]);
        for i in 0..n {
            let ds = dpsi[i] + sa[i];
            ns[i] = bq * aq.mul_add(dp[i], p0[i]);
            z[i] = bq.mul_add(z[i], aq * (d2[i] + ds));
            out[i] = v[i].mul_add(ds + z[i], out[i]);
        }
    }
}

/// One half of a row's x layers ([`Sweep::cpml_x_row`]): its first x (`x0`) and that point's
/// offset in the field (`o`), in the padded psi slab (`own`; `seg` within the row's two halves)
/// and in the row's zeta and the weights' table (`slab`, half x width).
struct XHalf {
    x0: usize,
    o: usize,
    own: usize,
    seg: usize,
    slab: usize,
}

/// [`Sweep::x_values`]'s results for one chunk: the new phi, zeta and p^{n+1} of its XLANES points.
struct XValues<T> {
    psi: [T; XLANES],
    zeta: [T; XLANES],
    out: [T; XLANES],
}

/// Stores [`XValues`] of the chunk from j of one half's x layer.
#[inline(always)]
fn x_store<T: Copy>(h: &XHalf, out: &mut [T], psi_next: &mut [T], zeta: &mut [T], j: usize, v: &XValues<T>) {
    psi_next[h.seg + j..h.seg + j + XLANES].copy_from_slice(&v.psi);
    zeta[h.slab + j..h.slab + j + XLANES].copy_from_slice(&v.zeta);
    out[h.x0 + j..h.x0 + j + XLANES].copy_from_slice(&v.out);
}

/// What every chunk of a y or z layer row shares ([`Sweep::cpml_yz_row`]): the axis, the field's
/// stride along it and the slab's, the row's offsets in the field and in the slab, the slab
/// coordinate t and its half's start, the row's a and b, and its D(a D p) weights.
struct LayerRow<T, const R: usize> {
    axis: usize,
    s: usize,
    ps: usize,
    prow: usize,
    row: usize,
    lo: usize,
    t: usize,
    ab: (T, T),
    weights: ([T; R], [T; R], T),
}

/// acc[i] += w p[i] (one rounding) for the first n lanes; a whole chunk in a loop of known length
/// (vectorised without a remainder loop).
#[inline(always)]
fn axpy<T: Real, const N: usize>(acc: &mut [T; N], w: T, p: &[T], n: usize) {
    if n == N {
        let p: &[T; N] = p[..N].try_into().expect("a whole chunk");
        for i in 0..N {
            acc[i] = w.mul_add(p[i], acc[i]);
        }
    } else {
        for i in 0..n {
            acc[i] = w.mul_add(p[i], acc[i]);
        }
    }
}

/// [`layer_weights`] of every x-slab point: w+_k at [(k - 1) * x_pairs_stride(width) + t], w-_k at
/// [(R + k - 1) * ...] and S at [2R * ...] for slab index t (low layer, then high), so that the x
/// layers' loop reads them as rows. Each row ends in XLANES zeros, read by the whole-vector lanes
/// past the layer.
fn x_layer_weights<T: Real>(a: &[T], c2: &[T], radius: usize, width: usize) -> Vec<T> {
    let nx = a.len();
    let stride = x_pairs_stride(width);
    let mut out = vec![T::default(); (2 * radius + 1) * stride];
    for t in 0..2 * width {
        let q = if t < width { t } else { nx - 2 * width + t };
        let (mut wp, mut wm) = ([T::default(); 8], [T::default(); 8]);
        let ws = layer_weights_into(a, c2, q, &mut wp[..radius], &mut wm[..radius]);
        for k in 0..radius {
            out[k * stride + t] = wp[k];
            out[(radius + k) * stride + t] = wm[k];
        }
        out[2 * radius * stride + t] = ws;
    }
    out
}

/// The weights of the compact self-adjoint D(a D p) (boundary.rs) at grid index q, evaluated as
/// sum_k (w+_k p_{q+k} + w-_k p_{q-k}) - S p_q (each sum in k order, the last term one fused
/// multiply-add): w+_k, w-_k ([`layer_weight`]) for k = 1..R and S = w+_1 + w-_1 + w+_2 + ... in
/// that order. kernels/layers.h computes the same bits. Two fused multiply-adds a tap instead of
/// five operations.
pub(crate) fn layer_weights<T: Real, const R: usize>(a: &[T], c2: &[T], q: usize) -> ([T; R], [T; R], T) {
    let (mut wp, mut wm) = ([T::default(); R], [T::default(); R]);
    let ws = layer_weights_into(a, c2, q, &mut wp, &mut wm);
    (wp, wm, ws)
}

/// [`layer_weights`] for the radius `wp.len()`: w+_k into wp[k - 1], w-_k into wm[k - 1]; returns S.
#[inline(always)]
pub(crate) fn layer_weights_into<T: Real>(a: &[T], c2: &[T], q: usize, wp: &mut [T], wm: &mut [T]) -> T {
    let mut ws = T::default();
    for k in 0..wp.len() {
        (wp[k], wm[k]) = layer_weight(a, c2, q, k + 1);
        ws += wp[k];
        ws += wm[k];
    }
    ws
}

/// c2_k a_mean(a, q, q + k) and c2_k a_mean(a, q, q - k) (clamped at 0): tap k's weights in D(a D p).
#[inline(always)]
fn layer_weight<T: Real>(a: &[T], c2: &[T], q: usize, k: usize) -> (T, T) {
    (c2[k] * a_mean(a, q, q + k), c2[k] * a_mean(a, q, q.saturating_sub(k)))
}

/// Length of the x slab's psi buffers for a slab of `len` values in layers of `width`: each
/// layer of a row between `radius` zeros on each side (phi outside its layer, read by the taps of
/// the layer's edge points), and XLANES of slack for the whole-vector taps past the last row.
fn x_psi_len(len: usize, width: usize, radius: usize) -> usize {
    len / width.max(1) * (width + 2 * radius) + XLANES
}

/// Row length of [`x_layer_weights`]'s table.
fn x_pairs_stride(width: usize) -> usize {
    2 * width + XLANES
}

/// (a_q + a_m) / 2, a clamped at the grid's end: the weight of the pair (q, m) in the compact
/// self-adjoint D(a D p) of the CPML update (boundary.rs).
#[inline(always)]
pub(crate) fn a_mean<T: Real>(a: &[T], q: usize, m: usize) -> T {
    T::of(0.5) * (a[q] + a[m.min(a.len() - 1)])
}

/// The star-stencil Laplacian at the N points from offset `o` of field `f` (strides 1, pitch,
/// plane). Points past the row's end are computed from padding and discarded by the caller; the
/// layout's tail slack keeps every read inside the allocation.
#[inline(always)]
fn laplacian_chunk<T: Real, const R: usize, const N: usize>(
    f: &[T],
    o: usize,
    [py, pz]: [usize; 2],
    coef: &[[T; R]; 3],
    centre: T,
    lap: &mut [T; N],
) {
    // One bounds check for the chunk's whole star instead of one a tap row (2-3 instructions each,
    // 6R + 1 of them: about a sixth of the loop at R = 4).
    let reach = R * pz.max(py).max(1);
    assert!(o >= reach && o + reach + N <= f.len(), "the stencil of chunk {o} leaves the field");
    // SAFETY: every `off` below lies in [o - reach, o + reach], so off..off + N is inside f.
    let at = |off: usize| -> &[T; N] { unsafe { &*f.as_ptr().add(off).cast::<[T; N]>() } };
    let c = at(o);
    let xm: [&[T; N]; R] = std::array::from_fn(|k| at(o - k - 1));
    let xp: [&[T; N]; R] = std::array::from_fn(|k| at(o + k + 1));
    let ym: [&[T; N]; R] = std::array::from_fn(|k| at(o - (k + 1) * py));
    let yp: [&[T; N]; R] = std::array::from_fn(|k| at(o + (k + 1) * py));
    let zm: [&[T; N]; R] = std::array::from_fn(|k| at(o - (k + 1) * pz));
    let zp: [&[T; N]; R] = std::array::from_fn(|k| at(o + (k + 1) * pz));
    // One pass per axis keeps the live streams (2R + 1) within the vector registers for R = 8.
    for i in 0..N {
        let mut acc = centre * c[i];
        for k in 0..R {
            acc = coef[0][k].mul_add(xm[k][i] + xp[k][i], acc);
        }
        lap[i] = acc;
    }
    for (axis, (m, p)) in [(1, (&ym, &yp)), (2, (&zm, &zp))] {
        for i in 0..N {
            let mut acc = lap[i];
            for k in 0..R {
                acc = coef[axis][k].mul_add(m[k][i] + p[k][i], acc);
            }
            lap[i] = acc;
        }
    }
}

impl<T: Real> Backend for CpuSolver<T> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: "cpu",
            name: format!("CPU (rayon, {} threads, {})", rayon::current_num_threads(), self.isa.name()),
            kernel: "rayon".into(),
        }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        self.advance(n);
        Ok(())
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        ensure!(
            out.len() == self.layout.points(),
            "snapshot buffer has {} values, grid {}",
            out.len(),
            self.layout.points()
        );
        Section::Volume.copy_from(&self.layout, |i| self.cur[i].f64() as f32, out);
        Ok(())
    }

    fn snapshot_sections(&mut self, sections: &[Section], out: &mut [f32]) -> Result<()> {
        let l = self.layout;
        for_each_section(sections, [l.nx, l.ny, l.nz], out, |s, part| {
            s.copy_from(&l, |i| self.cur[i].f64() as f32, part);
            Ok(())
        })
    }

    fn start_shot(&mut self, problem: &Problem) -> Result<()> {
        ensure!(cpu_layout::<T>(problem.layout) == self.layout, "a shot must use the grid the backend was opened with");
        let (layout, chunks) = (self.layout, &self.chunks);
        // Each thread clears the planes it sweeps (the pages stay where first touch put them).
        let zero = |v: &mut Field<T>| {
            split_at_ends(v, task_ends(&layout, chunks)).into_par_iter().for_each(|p| p.fill(T::default()));
        };
        zero(&mut self.cur);
        zero(&mut self.prev);
        if let Some((axes, _)) = &mut self.cpml {
            for a in axes.iter_mut() {
                a.psi.fill(T::default());
                a.psi_next.fill(T::default());
                a.zeta.fill(T::default());
            }
        }
        (self.src_taps, self.rec_taps) = shot_taps(problem, &self.layout, &self.vel2dt2);
        self.src_samples = problem.source.samples.iter().map(|&s| T::of(s)).collect();
        self.traces = (0..problem.receivers.len()).map(|_| Vec::with_capacity(problem.steps)).collect();
        self.seconds.clear();
        self.open = None;
        Ok(())
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        Ok(self.traces.iter().flat_map(|t| t[..steps.min(t.len())].iter().map(|v| v.f64() as f32)).collect())
    }

    /// Also false when a value is finite in f64 but beyond f32 (the output's type).
    fn field_is_finite(&mut self) -> Result<bool> {
        let max = f32::MAX as f64;
        Ok(self.cur.par_iter().all(|v| v.f64().abs() <= max))
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        Ok(self.seconds.clone())
    }

    fn step_field(&mut self, n: usize) -> Result<()> {
        self.advance_field(n);
        Ok(())
    }

    fn record_receivers(&mut self) -> Result<()> {
        self.record();
        Ok(())
    }

    /// The planes go through f32: a decomposed run is exact in f32 only.
    fn planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        copy_planes_out(&self.layout, &self.cur, z0, planes, buf)
    }

    fn rows_out(&mut self, y0: usize, rows: usize, buf: &mut [f32]) -> Result<()> {
        let l = self.layout;
        ensure!(y0 + rows <= l.ny && buf.len() == l.nz * rows * l.nx, "halo rows {y0}..{} of {}", y0 + rows, l.ny);
        for (k, row) in buf.chunks_exact_mut(l.nx).enumerate() {
            let src = l.row(y0 + k % rows, k / rows);
            for (o, v) in row.iter_mut().zip(&self.cur[src..src + l.nx]) {
                *o = v.f64() as f32;
            }
        }
        Ok(())
    }

    fn rows_in(&mut self, y0: usize, rows: usize, buf: &[f32]) -> Result<()> {
        let l = self.layout;
        ensure!(y0 + rows <= l.ny && buf.len() == l.nz * rows * l.nx, "halo rows {y0}..{} of {}", y0 + rows, l.ny);
        for (k, row) in buf.chunks_exact(l.nx).enumerate() {
            let dst = l.row(y0 + k % rows, k / rows);
            for (o, &v) in self.cur[dst..dst + l.nx].iter_mut().zip(row) {
                *o = T::of(v as f64);
            }
        }
        Ok(())
    }

    fn begin_field(&mut self, n: usize, first: &[Range<usize>], leave: &[Range<usize>]) -> Result<()> {
        let nz = self.layout.nz;
        for ranges in [first, leave] {
            ensure!(
                ranges.windows(2).all(|w| w[0].end <= w[1].start)
                    && ranges.iter().all(|r| r.start <= r.end && r.end <= nz),
                "planes {ranges:?} of a step in two parts are not sorted disjoint ranges of 0..{nz}"
            );
        }
        CpuSolver::begin_field(self, n, first, leave);
        Ok(())
    }

    fn next_planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        copy_planes_out(&self.layout, self.newest(), z0, planes, buf)
    }

    fn finish_field(&mut self, n: usize) -> Result<()> {
        CpuSolver::finish_field(self, n);
        Ok(())
    }

    fn splits_steps(&self) -> bool {
        true
    }

    fn planes_in(&mut self, z0: usize, planes: usize, buf: &[f32]) -> Result<()> {
        let l = self.layout;
        let plane = l.nx * l.ny;
        ensure!(z0 + planes <= l.nz && buf.len() == planes * plane, "halo planes {z0}..{} of {}", z0 + planes, l.nz);
        for (k, chunk) in buf.chunks_exact(plane).enumerate() {
            for (iy, row) in chunk.chunks_exact(l.nx).enumerate() {
                let dst = l.row(iy, z0 + k);
                for (o, &v) in self.cur[dst..dst + l.nx].iter_mut().zip(row) {
                    *o = T::of(v as f64);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every CPU layout's planes lie at least 640 bytes from a page multiple, by less than a page
    /// of padding: 200^3 at R = 4 (208 rows of 1 KiB, a whole number of pages) is padded to 640
    /// bytes past one, marmousi.toml's planes (1 KiB past a page) are not padded.
    #[test]
    fn planes_are_moved_off_whole_pages() {
        for (shape, radius) in [([200, 200, 200], 4), ([960, 64, 240], 4), ([24, 24, 24], 4), ([64, 40, 48], 8)] {
            let plain = Layout::new(shape, radius);
            for (l, elem) in [(cpu_layout::<f32>(plain), 4), (cpu_layout::<f64>(plain), 8)] {
                let off = l.plane * elem % 4096;
                assert!(
                    (640..=4096 - 640).contains(&off),
                    "{shape:?} R {radius}: plane {} B, {off} past a page",
                    l.plane * elem
                );
                assert!(l.plane - l.pitch * (l.ny + 2 * l.halo) < 4096 / elem, "{shape:?}: padding under a page");
                assert_eq!(l.row(1, 1) % crate::grid::ROW_ALIGN, l.row(0, 0) % crate::grid::ROW_ALIGN);
            }
        }
        let l = cpu_layout::<f32>(Layout::new([200, 200, 200], 4));
        assert_eq!(l.plane * 4 % 4096, 640);
        let l = cpu_layout::<f32>(Layout::new([960, 64, 240], 4));
        assert_eq!(l.plane, l.pitch * (l.ny + 2 * l.halo), "marmousi.toml's planes are not padded");
    }
}
