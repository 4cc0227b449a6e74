//! Domain decomposition: one model split into slabs along z, one subdomain per rank, each a
//! [`Problem`] of its own that a backend runs unchanged, with halo planes exchanged every step.
//!
//! A rank owns a contiguous range of z-planes and also holds `halo` planes on each side that has a
//! neighbour ("ghost" planes). Ghost planes are computed like any other plane, wrongly near the
//! subdomain's edge, and overwritten every step by the neighbour's owned planes ([`Exchange`]),
//! so every owned plane sees exactly the values a single-domain run gives it: the decomposed run
//! is bit-identical to the single one. The halo is R planes, 2R where a CPML z layer comes within
//! R of a cut (phi_z of the ghost planes within R of the cut is then recomputed from p up to 2R
//! away instead of exchanged), and wider where a receiver's taps reach further past its rank's
//! last owned plane: a receiver belongs to the rank owning its first tap plane and is recorded
//! after the exchange, from owned and ghost planes alike, with its taps summed in the same order
//! as in one domain. Each rank injects the source taps on its owned planes, builds its velocity
//! and boundary profiles as the global ones restricted to its planes, and keeps the free surface
//! only on the top rank.
//!
//! The time loop is the solver's, as for one domain: [`Decomposed`] (this process's subdomains
//! and their [`Exchange`]) is what it steps, and [`gather`] brings snapshots and traces to rank 0.

pub mod exchange;
pub mod gather;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod stepper;

pub use exchange::{Exchange, InProcess};
pub use stepper::{Decomposed, run};

use crate::backend::Backend;
use crate::backend::cpu::CpuSolver;
use crate::boundary::BoundaryKind;
use crate::grid::Layout;
use crate::problem::{Problem, Tap};
use anyhow::{Result, ensure};

/// A CPML layer plane's share of a GPU step against an interior plane's, for balancing GPU ranks
/// ([`Decomposition::for_gpus`]). H200, R = 4, 1024^3: the real step with CPML 20 takes 5.29 ms,
/// the interior alone about 4.4; the layers' 0.86 ms over their 120 plane-equivalents (40 planes
/// each along x, y and z) add 7.2 us a z-layer plane to the 4.9 us of a plane with its x and y
/// layer points.
pub const GPU_LAYER_PLANE_COST: f64 = 2.5;

/// How the z-planes (and, in y-z blocks, the y-rows) of a grid are shared among ranks. Rank r
/// owns z-slab `r / py` and row block `r % py` (py = `rows.len()`, 1 for z-slabs alone): the ranks
/// of one z-slab are consecutive.
#[derive(Clone, Debug, PartialEq)]
pub struct Decomposition {
    /// Planes of the whole grid.
    pub nz: usize,
    /// Owned planes [z0, z1) of each z-slab, in order, covering 0..nz.
    pub slabs: Vec<(usize, usize)>,
    /// Rows of the whole grid.
    pub ny: usize,
    /// Owned rows [y0, y1) of each row block, in order, covering 0..ny: one block of every row for
    /// z-slabs alone.
    pub rows: Vec<(usize, usize)>,
    /// Planes (and rows) exchanged across every cut, each way.
    pub halo: usize,
    /// The rank recording each receiver.
    pub receiver_rank: Vec<usize>,
}

/// One subdomain and the backend running it.
pub struct Domain {
    pub sub: SubDomain,
    pub backend: Box<dyn Backend>,
}

/// One rank's part: its problem (owned and ghost planes) and where it sits in the grid.
#[derive(Clone, Debug)]
pub struct SubDomain {
    pub rank: usize,
    /// Owned planes [z0, z1), global indices.
    pub owned: (usize, usize),
    /// Global index of the subdomain's plane 0 (the first ghost plane, or the first owned one).
    pub first: usize,
    /// Owned rows [y0, y1), global indices (every row for z-slabs alone).
    pub owned_rows: (usize, usize),
    /// Global index of the subdomain's row 0.
    pub first_row: usize,
    /// The whole grid's shape.
    pub grid: [usize; 3],
    /// The subdomain's run: its planes, its source taps, the receivers it records.
    pub problem: Problem,
    /// Global indices of the receivers it records, in order.
    pub receivers: Vec<usize>,
}

impl SubDomain {
    /// Planes held, ghosts included.
    pub fn planes(&self) -> usize {
        self.problem.layout.nz
    }

    /// Local index of the first owned plane.
    pub fn owned_local(&self) -> usize {
        self.owned.0 - self.first
    }

    /// Rows held, ghosts included.
    pub fn rows(&self) -> usize {
        self.problem.layout.ny
    }

    /// Local index of the first owned row.
    pub fn owned_rows_local(&self) -> usize {
        self.owned_rows.0 - self.first_row
    }

    /// A CPU solver for this subdomain (the single domain's CPML y and z layers kept), flushing
    /// subnormals as seismic-run's single-domain CPU runs do.
    pub fn cpu_solver(&self) -> Result<CpuSolver<f32>> {
        let isa = crate::backend::cpu::Isa::detect();
        let (offset, extent) = ([self.first_row, self.first], [self.grid[1], self.grid[2]]);
        Ok(CpuSolver::with_isa_in(&self.problem, isa, offset, extent)?.flushing_subnormals(true))
    }

    /// Bytes the CPU backend holds for this subdomain: three padded f32 fields (p^n, p^{n-1},
    /// c^2 dt^2) and the CPML memory variables (psi and zeta per layer point of each axis).
    pub fn cpu_bytes(&self) -> u64 {
        let p = &self.problem;
        let slabs: u64 = p.boundary.slabs(p.shape()).iter().map(|s| 2 * s.len() as u64).sum();
        4 * (3 * p.layout.len() as u64 + slabs)
    }

    /// Errors when [`cpu_bytes`](Self::cpu_bytes) exceeds `available` bytes (this rank's share of
    /// its host), naming both, the slab and how many ranks would fit.
    pub fn check_fits(&self, d: &Decomposition, grid: [usize; 3], available: u64) -> Result<()> {
        let need = self.cpu_bytes();
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let fit = (need as f64 * d.ranks() as f64 / available.max(1) as f64).ceil() as usize;
        ensure!(
            need <= available,
            "grid.shape = {grid:?} over {} ranks: rank {} holds {} z-planes of {} rows (halo included) and needs about {:.2} GiB, \
             but has {:.2} GiB (its share of the host's available memory): use at least {} ranks, or hosts with more memory",
            d.ranks(),
            self.rank,
            self.planes(),
            self.rows(),
            gib(need),
            gib(available),
            fit.max(d.ranks() + 1)
        );
        Ok(())
    }

    /// [`cpu_solver`](Self::cpu_solver), boxed as a backend.
    pub fn cpu_backend(&self) -> Result<Box<dyn Backend>> {
        Ok(Box::new(self.cpu_solver()?))
    }
}

impl Decomposition {
    /// `ranks` slabs of nz / ranks planes, the first nz % ranks of them one plane thicker.
    pub fn even(problem: &Problem, ranks: usize) -> Result<Decomposition> {
        Self::even_blocks(problem, ranks, 1)
    }

    /// `slabs` z-slabs of `rows` row blocks each, as even as the counts allow (the first ones one
    /// plane or row thicker).
    pub fn even_blocks(problem: &Problem, slabs: usize, rows: usize) -> Result<Decomposition> {
        let len = |r: &std::ops::Range<usize>| r.len();
        let z: Vec<usize> = Self::even_planes(problem.layout.nz, slabs)?.iter().map(len).collect();
        let y: Vec<usize> = Self::even_planes(problem.layout.ny, rows)?.iter().map(len).collect();
        Self::with_blocks(problem, &z, &y)
    }

    /// The owned planes of each rank in [`even`](Self::even)'s split of `nz` planes (known before
    /// the problem is: a rank samples its part of the model from them); rows likewise.
    pub fn even_planes(nz: usize, ranks: usize) -> Result<Vec<std::ops::Range<usize>>> {
        ensure!(ranks >= 1, "a decomposition needs at least one rank");
        let mut z = 0;
        Ok((0..ranks)
            .map(|r| {
                let n = nz / ranks + usize::from(r < nz % ranks);
                z += n;
                z - n..z
            })
            .collect())
    }

    /// The row blocks and z-slabs for `ranks` ranks in y-z blocks: the split of the ranks into
    /// (rows, slabs) whose cuts move the fewest halo points (a cut along z moves nx * ny points a
    /// halo plane, one along y nx * nz), slabs no thinner than `min_thick` planes and blocks no
    /// narrower than `min_thick` rows where that is possible.
    pub fn block_counts(shape: [usize; 3], ranks: usize, min_thick: usize) -> (usize, usize) {
        let [_, ny, nz] = shape;
        let cost = |py: usize, pz: usize| (pz - 1) * ny + (py - 1) * nz;
        (1..=ranks)
            .filter(|py| ranks.is_multiple_of(*py))
            .map(|py| (py, ranks / py))
            .min_by_key(|&(py, pz)| (ny / py < min_thick || nz / pz < min_thick, cost(py, pz)))
            .unwrap_or((1, ranks))
    }

    /// Slabs of the given plane counts, top first (they must add up to `grid.shape[2]`).
    pub fn with_planes(problem: &Problem, counts: &[usize]) -> Result<Decomposition> {
        Self::with_blocks(problem, counts, &[problem.layout.ny])
    }

    /// Blocks of the given plane counts along z and row counts along y (each adding up to the
    /// grid's), rank r owning z-slab r / rows.len() and row block r % rows.len().
    pub fn with_blocks(problem: &Problem, counts: &[usize], row_counts: &[usize]) -> Result<Decomposition> {
        let (ny, nz) = (problem.layout.ny, problem.layout.nz);
        ensure!(!counts.is_empty() && !row_counts.is_empty(), "a decomposition needs at least one rank");
        ensure!(counts.iter().sum::<usize>() == nz, "slabs of {counts:?} planes do not add up to grid.shape[2] = {nz}");
        ensure!(
            row_counts.iter().sum::<usize>() == ny,
            "blocks of {row_counts:?} rows do not add up to grid.shape[1] = {ny}"
        );
        let ranges = |counts: &[usize]| {
            let mut z = 0;
            counts
                .iter()
                .map(|&c| {
                    z += c;
                    (z - c, z)
                })
                .collect::<Vec<_>>()
        };
        let (slabs, rows) = (ranges(counts), ranges(row_counts));
        let r = problem.stencil.radius;
        let b = &problem.boundary;
        let cpml_width = if b.kind == BoundaryKind::Cpml { b.width } else { 0 };
        // A point reads phi of the points within R in its own layer: only a cut through a layer
        // puts such points on the other side.
        let through_layer = |c: usize, n: usize| cpml_width > 0 && (c < cpml_width || c > n - cpml_width);
        let cuts = |v: &[(usize, usize)]| v[..v.len() - 1].iter().map(|s| s.1).collect::<Vec<_>>();
        let layered = cuts(&slabs).into_iter().any(|c| through_layer(c, nz))
            || cuts(&rows).into_iter().any(|c| through_layer(c, ny));
        let mut halo = if layered { 2 * r } else { r };
        let owner = |v: &[(usize, usize)], i: usize| v.iter().position(|s| i < s.1).expect("inside the grid");
        let py = rows.len();
        let mut receiver_rank = Vec::with_capacity(problem.receivers.len());
        for rec in &problem.receivers {
            // The rank owning the receiver's first tap (its lowest z, then its lowest y).
            let first = rec.taps.iter().map(|t| (t.point[2], t.point[1])).min();
            let Some((z, y)) = first else {
                receiver_rank.push(0);
                continue;
            };
            let (kz, ky) = (owner(&slabs, z), owner(&rows, y));
            for t in &rec.taps {
                if kz + 1 < slabs.len() {
                    halo = halo.max((t.point[2] + 1).saturating_sub(slabs[kz].1));
                }
                if ky + 1 < py {
                    halo = halo.max((t.point[1] + 1).saturating_sub(rows[ky].1));
                }
                // Taps before the owner's first row (a receiver whose first tap is not its lowest y).
                if ky > 0 {
                    halo = halo.max(rows[ky].0.saturating_sub(t.point[1]));
                }
            }
            receiver_rank.push(kz * py + ky);
        }
        for (k, s) in slabs.iter().enumerate() {
            let thick = s.1 - s.0;
            ensure!(
                slabs.len() == 1 || thick >= halo,
                "rank {} owns {thick} z-planes, fewer than the {halo} halo planes its neighbours need from it \
                 (stencil.radius {r}): use fewer ranks for grid.shape[2] = {nz}",
                k * py
            );
        }
        for (k, s) in rows.iter().enumerate() {
            let wide = s.1 - s.0;
            ensure!(
                py == 1 || wide >= halo,
                "rank {k} owns {wide} rows, fewer than the {halo} halo rows its neighbours need from it \
                 (stencil.radius {r}): use fewer row blocks for grid.shape[1] = {ny}"
            );
        }
        Ok(Decomposition { nz, slabs, ny, rows, halo, receiver_rank })
    }

    /// Errors unless GPU backends run this decomposition exactly. A subdomain on a GPU holds a
    /// CPML layer at each of its faces that is the whole grid's ([`Boundary::cut`](crate::boundary::Boundary::cut)), of any
    /// width: its owned points then compute as in one domain wherever no cut runs through a layer.
    pub fn check_gpu(&self, problem: &Problem) -> Result<()> {
        let b = &problem.boundary;
        if b.kind != BoundaryKind::Cpml || self.ranks() == 1 {
            return Ok(());
        }
        let w = b.width;
        for (cuts, n, axis, what) in [(&self.slabs, self.nz, 2, "plane"), (&self.rows, self.ny, 1, "row")] {
            let [low, high] = b.layer_faces[axis];
            for s in &cuts[..cuts.len() - 1] {
                let c = s.1;
                ensure!(
                    (!low || c >= w) && (!high || c + w <= n),
                    "boundary.width = {w}: the cut at {what} {c} of {n} runs through a CPML layer, which a \
                     decomposed GPU run does not split: use fewer ranks or a thinner layer"
                );
            }
        }
        Ok(())
    }

    /// The split GPU ranks run: along z and y, cuts that share the step's cost evenly, a CPML
    /// layer plane (row) counting [`GPU_LAYER_PLANE_COST`] interior ones, each cut then moved out
    /// of the layers where it falls inside one ([`check_gpu`](Self::check_gpu)).
    pub fn for_gpus(problem: &Problem, slabs: usize, rows: usize) -> Result<Decomposition> {
        let b = &problem.boundary;
        let w = b.cpml_width();
        let counts = |n: usize, parts: usize, axis: usize| -> Vec<usize> {
            let [low, high] = b.layer_faces[axis];
            let in_layer = |i: usize| (low && i < w) || (high && i + w >= n);
            let cost = |i: usize| if in_layer(i) { GPU_LAYER_PLANE_COST } else { 1.0 };
            let total: f64 = (0..n).map(cost).sum();
            let (first, last) = (if low { w } else { 0 }, if high { n.saturating_sub(w) } else { n });
            let mut cuts = Vec::with_capacity(parts);
            let (mut at, mut sum) = (0, 0.0);
            for k in 1..parts {
                let share = total * k as f64 / parts as f64;
                while at < n && sum + 0.5 * cost(at) < share {
                    sum += cost(at);
                    at += 1;
                }
                cuts.push(if first <= last { at.clamp(first, last) } else { at });
            }
            cuts.push(n);
            cuts.iter().scan(0, |prev, &c| Some(c - std::mem::replace(prev, c))).collect()
        };
        Self::with_blocks(problem, &counts(problem.layout.nz, slabs, 2), &counts(problem.layout.ny, rows, 1))
    }

    pub fn ranks(&self) -> usize {
        self.slabs.len() * self.rows.len()
    }

    /// Whether the grid is cut along y too.
    pub fn blocks(&self) -> bool {
        self.rows.len() > 1
    }

    /// Rank `rank`'s owned planes [z0, z1).
    pub fn planes_of(&self, rank: usize) -> (usize, usize) {
        self.slabs[rank / self.rows.len()]
    }

    /// Rank `rank`'s owned rows [y0, y1).
    pub fn rows_of(&self, rank: usize) -> (usize, usize) {
        self.rows[rank % self.rows.len()]
    }

    /// The rank above `rank` (lower z) and the one below, where they exist.
    pub fn z_neighbours(&self, rank: usize) -> (Option<usize>, Option<usize>) {
        let py = self.rows.len();
        ((rank >= py).then(|| rank - py), (rank + py < self.ranks()).then_some(rank + py))
    }

    /// The rank before `rank` along y (lower y) and the one after, where they exist.
    pub fn y_neighbours(&self, rank: usize) -> (Option<usize>, Option<usize>) {
        let (py, ky) = (self.rows.len(), rank % self.rows.len());
        ((ky > 0).then(|| rank - 1), (ky + 1 < py).then_some(rank + 1))
    }

    /// Bytes crossing one z cut per step, both ways (f32 planes of nx * ny points; of a block's
    /// rows in y-z blocks).
    pub fn halo_bytes_per_cut(&self, problem: &Problem) -> u64 {
        let rows = self.rows.iter().map(|r| r.1 - r.0).max().unwrap_or(0);
        2 * (self.halo * problem.layout.nx * rows * 4) as u64
    }

    /// The z-planes rank `rank` holds: its owned planes and its ghost planes.
    pub fn planes_held(&self, rank: usize) -> std::ops::Range<usize> {
        let (z0, z1) = self.planes_of(rank);
        let (up, down) = self.z_neighbours(rank);
        z0 - if up.is_some() { self.halo } else { 0 }..z1 + if down.is_some() { self.halo } else { 0 }
    }

    /// The rows rank `rank` holds: its owned rows and its ghost rows.
    pub fn rows_held(&self, rank: usize) -> std::ops::Range<usize> {
        let (y0, y1) = self.rows_of(rank);
        let (before, after) = self.y_neighbours(rank);
        y0 - if before.is_some() { self.halo } else { 0 }..y1 + if after.is_some() { self.halo } else { 0 }
    }

    /// Rank `rank`'s subdomain of `problem` (the single-domain run, built from the whole model or
    /// from a part holding at least [`planes_held`](Self::planes_held), every row).
    pub fn subdomain(&self, problem: &Problem, rank: usize) -> Result<SubDomain> {
        self.subdomain_with(problem, rank, None)
    }

    /// [`subdomain`](Self::subdomain) of a problem that holds exactly the planes and rows the rank
    /// holds: its model moves into the subdomain instead of being copied (a rank's part of a
    /// model larger than one GPU is tens of GB); `problem` is left without one.
    pub fn subdomain_taking(&self, problem: &mut Problem, rank: usize) -> Result<SubDomain> {
        let held = self.planes_held(rank);
        let whole_rows = self.rows_held(rank) == (0..problem.layout.ny);
        let plane = problem.layout.nx * problem.layout.ny;
        let exact = whole_rows && problem.vp_first == held.start && problem.vp.len() == held.len() * plane;
        let vp = if exact { Some(std::mem::take(&mut problem.vp)) } else { None };
        let sub = self.subdomain_with(problem, rank, vp);
        problem.vp = Vec::new();
        problem.vp_first = 0;
        sub
    }

    /// [`subdomain`](Self::subdomain), its model `vp` where given (exactly its held points).
    fn subdomain_with(&self, problem: &Problem, rank: usize, vp: Option<Vec<f32>>) -> Result<SubDomain> {
        let (z0, z1) = self.planes_of(rank);
        let (y0, y1) = self.rows_of(rank);
        let std::ops::Range { start: first, end } = self.planes_held(rank);
        let std::ops::Range { start: first_row, end: end_row } = self.rows_held(rank);
        let l = problem.layout;
        let plane = l.nx * l.ny;
        let vp_planes = match &vp {
            Some(_) => first..end,
            None => problem.vp_first..problem.vp_first + problem.vp.len() / plane.max(1),
        };
        ensure!(
            vp_planes.start <= first && end <= vp_planes.end,
            "rank {rank} holds z-planes {first}..{end} but the problem's model has planes {vp_planes:?}"
        );
        let shift = |taps: &[Tap], keep: &dyn Fn(usize, usize) -> bool| -> Vec<Tap> {
            taps.iter()
                .filter(|t| keep(t.point[1], t.point[2]))
                .map(|t| Tap { point: [t.point[0], t.point[1] - first_row, t.point[2] - first], weight: t.weight })
                .collect()
        };
        // Each source keeps its taps on the owned planes and rows: a point's sum over the sources
        // is then the whole run's ([`crate::problem::SourceInjection`]).
        let sources = problem
            .sources
            .iter()
            .map(|s| {
                let taps = shift(&s.taps, &|y, z| (z0..z1).contains(&z) && (y0..y1).contains(&y));
                crate::problem::PointSource { taps, ..s.clone() }
            })
            .collect();
        let receivers: Vec<usize> = (0..problem.receivers.len()).filter(|&i| self.receiver_rank[i] == rank).collect();
        let rec = receivers
            .iter()
            .map(|&i| {
                let mut r = problem.receivers[i].clone();
                r.taps = shift(&r.taps, &|_, _| true);
                r
            })
            .collect();
        let boundary = problem.boundary.cut([0..l.nx, first_row..end_row, first..end]);
        let mut origin = problem.origin;
        origin[1] += first_row as f64 * problem.spacing[1];
        origin[2] += first as f64 * problem.spacing[2];
        let vp = vp.unwrap_or_else(|| {
            let mut vp = Vec::with_capacity(l.nx * (end_row - first_row) * (end - first));
            for z in first..end {
                let at = (z - problem.vp_first) * plane;
                vp.extend_from_slice(&problem.vp[at + first_row * l.nx..at + end_row * l.nx]);
            }
            vp
        });
        // The subdomain's density: its held planes and rows. Its halo planes at a cut take the
        // edge plane's values ([`Problem::buoyancy_into`]), read only by ghost planes, which the
        // exchange overwrites.
        let density = problem.density.as_ref().map(|d| {
            let mut rho = Vec::with_capacity(l.nx * (end_row - first_row) * (end - first));
            for z in first..end {
                let at = (z - d.first) * plane;
                rho.extend_from_slice(&d.rho[at + first_row * l.nx..at + end_row * l.nx]);
            }
            crate::problem::Density { rho, first: 0, rho_ref: d.rho_ref, rho_max: d.rho_max }
        });
        let sub = Problem {
            layout: Layout::new([l.nx, end_row - first_row, end - first], l.halo),
            spacing: problem.spacing,
            origin,
            stencil: problem.stencil.clone(),
            dt: problem.dt,
            steps: problem.steps,
            vp,
            vp_first: 0,
            vp_range: problem.vp_range,
            boundary,
            sources,
            receivers: rec,
            warnings: Vec::new(),
            precision: problem.precision,
            density,
        };
        let grid = [l.nx, l.ny, l.nz];
        Ok(SubDomain { rank, owned: (z0, z1), first, owned_rows: (y0, y1), first_row, grid, problem: sub, receivers })
    }
}

#[cfg(test)]
mod tests;
