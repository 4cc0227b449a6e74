//! Launch shape of the GPU interior kernels: plain data, shared by the GPU backends (which compile
//! and launch by it), the autotuner's cache and the benchmark's reports (which record it), so it
//! is compiled with or without a GPU feature.

use anyhow::{Result, ensure};
use serde::{Deserialize, Serialize};

/// Launch shape of the interior kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuning {
    /// Threads of a fused block in x (8, 16 or 32); the three-pass kernels always use 32. Records
    /// written before the knob existed hold 32.
    #[serde(default = "thirty_two")]
    pub block_x: u32,
    /// Rows of a block's xy tile (the block is block_x x block_y threads).
    pub block_y: u32,
    /// Points per thread in x (1, 2 or 4).
    pub vec: u32,
    /// z-planes per block of the fused kernel (0: chosen from the grid and the device).
    pub window: u32,
    /// Planes the fused kernel fetches ahead through asynchronous copies into shared memory
    /// (0: one plane ahead, through registers).
    pub stages: u32,
    /// Blocks per multiprocessor the compiler must leave room for (caps registers per thread).
    pub min_blocks: u32,
    /// z iterations of the fused kernel unrolled (2R+1 lets the compiler rename the register
    /// queue instead of moving it).
    pub unroll_z: u32,
    /// Consecutive rows of y per thread of the fused kernel (register blocking, 1..=4): its tile is
    /// `block_y * rows` rows tall. Applies with `stages` > 0 only, and is lowered where the tile
    /// would not fit (see [`Tuning::effective`]). Records written before the knob existed hold one.
    #[serde(default = "one_row")]
    pub rows: u32,
    /// Grid-index order of the fused kernel: 0, every z-chunk marches up; 1, odd chunks march down
    /// (neighbouring chunks read their shared halo planes at the same moment, from L2); 2, as 1
    /// with blockIdx.x over y tiles. Records written before the knob existed hold 0.
    #[serde(default)]
    pub order: u32,
}

fn one_row() -> u32 {
    1
}

fn thirty_two() -> u32 {
    32
}

impl Tuning {
    /// The default shape (measured best on an H200, kernels/NOTES.md), overridable for experiments
    /// with SEISMIC_BLOCK_X, SEISMIC_BLOCK_Y, SEISMIC_VEC, SEISMIC_WINDOW, SEISMIC_STAGES,
    /// SEISMIC_MIN_BLOCKS, SEISMIC_UNROLL_Z, SEISMIC_ROWS (1 gives the one-row kernel, 8 rows of
    /// threads) and SEISMIC_ORDER.
    pub fn for_radius(radius: usize) -> Tuning {
        Self::defaults(radius, true)
    }

    /// As [`Tuning::for_radius`], but with the asynchronous ring off unless SEISMIC_STAGES asks for
    /// it and one row per thread unless SEISMIC_ROWS does: for devices where `cp_async16` is a plain
    /// copy (HIP).
    pub fn for_radius_without_ring(radius: usize) -> Tuning {
        Self::defaults(radius, false)
    }

    fn defaults(radius: usize, ring: bool) -> Tuning {
        let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
        let r = radius as u32;
        let vec = env("SEISMIC_VEC").unwrap_or(4);
        let stages = env("SEISMIC_STAGES").unwrap_or(if ring && vec == 4 { 2 } else { 0 });
        // Two rows per thread in 6 rows of threads where measured faster (R = 2: 86% of 3R1W
        // against 76%; R = 4: 82.5% against 79%); R = 1 was not faster, R = 3 and 5..8 were not measured.
        // Not where the ring is a plain copy: a 64 KiB LDS would not hold the doubled ring.
        let rows = env("SEISMIC_ROWS").unwrap_or(if ring && stages > 0 && matches!(r, 2 | 4) { 2 } else { 1 });
        Tuning {
            block_x: env("SEISMIC_BLOCK_X").unwrap_or(32),
            block_y: env("SEISMIC_BLOCK_Y").unwrap_or(if rows > 1 { 6 } else { 8 }).max(r),
            vec,
            window: env("SEISMIC_WINDOW").unwrap_or(0),
            stages,
            min_blocks: env("SEISMIC_MIN_BLOCKS").unwrap_or(2),
            unroll_z: env("SEISMIC_UNROLL_Z").unwrap_or(if r <= 4 { 2 * r + 1 } else { 1 }),
            rows,
            order: env("SEISMIC_ORDER").unwrap_or(0),
        }
    }

    /// Dynamic shared memory of the fused kernel: the ring of asynchronously copied planes.
    pub fn dynamic_shared_bytes(&self) -> u32 {
        if self.stages == 0 { 0 } else { (self.stages + 1) * 3 * self.block_x * self.block_y * self.rows * 16 }
    }

    /// The tuning the solver runs: `rows` lowered to 1 without the asynchronous ring (the kernel's
    /// register-prefetch paths keep one row per thread, as on AMD where the ring is off), and to
    /// the most rows whose tile stays within 32 rows (the fields' slack), 48 KiB of static shared
    /// memory and 227 KiB of shared memory in all.
    pub fn effective(self, radius: usize) -> Tuning {
        let mut t = self;
        if t.stages == 0 {
            t.rows = 1;
        }
        let r = radius as u32;
        let row_vectors = t.block_x + 2 * r.div_ceil(t.vec.max(1));
        while t.rows > 1 {
            let tile = 2 * (t.fused_tile_y() + 2 * r) * row_vectors * 4 * t.vec;
            if t.fused_tile_y() <= 32 && tile <= 48 << 10 && tile + t.dynamic_shared_bytes() <= 227 << 10 {
                break;
            }
            t.rows -= 1;
        }
        t
    }

    /// Errors when this shape cannot run the kernels at `radius`.
    pub fn check(&self, radius: usize) -> Result<()> {
        let r = radius as u32;
        ensure!(matches!(self.vec, 1 | 2 | 4), "vector width must be 1, 2 or 4, got {}", self.vec);
        ensure!(self.stages <= 8 && (self.stages == 0 || self.vec == 4), "stages must be 0..=8, with vector width 4");
        ensure!((1..=8).contains(&self.min_blocks), "min_blocks must be in 1..=8");
        ensure!((1..=32).contains(&self.unroll_z), "unroll_z must be in 1..=32");
        ensure!(self.block_y >= r && self.block_y <= 32, "block_y must be in {r}..=32, got {}", self.block_y);
        ensure!(matches!(self.block_x, 8 | 16 | 32), "block_x must be 8, 16 or 32, got {}", self.block_x);
        ensure!(self.order <= 2, "order must be 0, 1 or 2, got {}", self.order);
        ensure!(
            (1..=4).contains(&self.rows) && (self.rows == 1 || self.stages > 0),
            "rows must be 1..=4 (above 1 only with stages > 0), got {} with stages {}",
            self.rows,
            self.stages
        );
        // field_extra leaves slack for tiles of up to 32 rows overhanging the grid.
        ensure!(self.fused_tile_y() <= 32, "block_y * rows must be at most 32, got {}", self.fused_tile_y());
        let hv = r.div_ceil(self.vec);
        ensure!(
            (self.fused_tile_y() + 2 * r) * 2 * hv <= self.block_x * self.block_y,
            "block_y {} is too small for radius {r} at vector width {}",
            self.block_y,
            self.vec
        );
        Ok(())
    }

    /// Points of x a three-pass block covers.
    pub fn tile_x(&self) -> usize {
        32 * self.vec as usize
    }

    /// Points of x a fused block covers.
    pub(crate) fn fused_tile_x(&self) -> usize {
        (self.block_x * self.vec) as usize
    }

    /// Rows of the fused kernel's tile (the three-pass kernels keep one row per thread).
    pub(crate) fn fused_tile_y(&self) -> u32 {
        self.block_y * self.rows
    }

    /// "bx32 by6 v4 w64 s2 m2 u9 r2 o1": block columns and rows, vector width, z-window,
    /// asynchronous-copy stages, blocks per multiprocessor, z unrolling, rows of y per thread,
    /// grid-index order.
    pub fn label(&self) -> String {
        format!(
            "bx{} by{} v{} w{} s{} m{} u{} r{} o{}",
            self.block_x,
            self.block_y,
            self.vec,
            self.window,
            self.stages,
            self.min_blocks,
            self.unroll_z,
            self.rows,
            self.order
        )
    }
}
