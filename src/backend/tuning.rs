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
    /// with blockIdx.x over y tiles; 3, banded: the tile rows in bands of about half the resident
    /// blocks, each band's z-chunks launched before the next band. Records written before the knob
    /// existed hold 0.
    #[serde(default)]
    pub order: u32,
    /// 1: the fused kernel's whole xy tile of p^n, halos included, arrives through the
    /// asynchronous ring (kernels/fused_ring.cu; needs `stages` >= 1 and `vec` 4); 0: threads copy
    /// the halos through registers (kernels/fused.cu). Records written before the knob existed hold 0.
    #[serde(default)]
    pub tile_ring: u32,
    /// 1: the y and x halos of p^n arrive through the asynchronous ring too, `stages` planes ahead
    /// (needs `stages` >= 1); 0: threads fetch them through registers one plane ahead. Records
    /// written before the knob existed hold 0.
    #[serde(default)]
    pub halo_ring: u32,
}

/// The environment variable that sets the launch shape by hand: comma-separated `field=value`
/// pairs of [`Tuning`]'s fields (e.g. `SEISMIC_TUNING="block_x=16,rows=2"`), read once when a GPU
/// backend opens ([`TuningOverride::from_environment`]). A shape set so wins over the tuning cache.
pub const TUNING_VARIABLE: &str = "SEISMIC_TUNING";

/// A field [`TUNING_VARIABLE`] may set: its name, its values in words, and their test.
type OverrideField = (&'static str, &'static str, fn(u32) -> bool);

/// Each field [`TUNING_VARIABLE`] may set and the values it takes (checked before anything
/// compiles; [`Tuning::check`] then checks the whole shape).
const OVERRIDE_FIELDS: [OverrideField; 11] = [
    ("block_x", "8, 16 or 32", |v| matches!(v, 8 | 16 | 32)),
    ("block_y", "1 to 32", |v| (1..=32).contains(&v)),
    ("vec", "1, 2 or 4", |v| matches!(v, 1 | 2 | 4)),
    ("window", "0 (automatic) to 4096", |v| v <= 4096),
    ("stages", "0 to 4", |v| v <= 4),
    ("min_blocks", "1 to 16", |v| (1..=16).contains(&v)),
    ("unroll_z", "1 to 17", |v| (1..=17).contains(&v)),
    ("rows", "1 to 4", |v| (1..=4).contains(&v)),
    ("order", "0 to 3", |v| v <= 3),
    ("tile_ring", "0 or 1", |v| v <= 1),
    ("halo_ring", "0 or 1", |v| v <= 1),
];

/// Fields of the launch shape set by hand ([`TUNING_VARIABLE`]), each in place of its default;
/// the fields derived from it follow (`vec=2` also turns the ring off).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TuningOverride {
    values: Vec<(&'static str, u32)>,
}

impl TuningOverride {
    /// Parses `field=value,field=value`, naming the field and its allowed values on an error.
    pub fn parse(text: &str) -> Result<TuningOverride> {
        let mut values: Vec<(&'static str, u32)> = Vec::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let names = || OVERRIDE_FIELDS.map(|(n, _, _)| n).join(", ");
            let Some((name, value)) = pair.split_once('=') else {
                anyhow::bail!("{TUNING_VARIABLE}: {pair:?} is not field=value (fields: {})", names());
            };
            let (name, value) = (name.trim(), value.trim());
            let Some(&(field, allowed, ok)) = OVERRIDE_FIELDS.iter().find(|(n, _, _)| *n == name) else {
                anyhow::bail!("{TUNING_VARIABLE}: no launch-shape field {name:?} (fields: {})", names());
            };
            let v = value.parse::<u32>().ok().filter(|&v| ok(v));
            let Some(v) = v else {
                anyhow::bail!("{TUNING_VARIABLE}: {field}={value:?}, but {field} takes {allowed}");
            };
            ensure!(values.iter().all(|(n, _)| *n != field), "{TUNING_VARIABLE}: {field} is set twice");
            values.push((field, v));
        }
        Ok(TuningOverride { values })
    }

    /// [`TUNING_VARIABLE`] parsed, or None where it is unset or empty.
    pub fn from_environment() -> Result<Option<TuningOverride>> {
        match std::env::var(TUNING_VARIABLE) {
            Ok(text) if !text.trim().is_empty() => Self::parse(&text).map(Some),
            _ => Ok(None),
        }
    }

    fn get(&self, field: &str) -> Option<u32> {
        self.values.iter().find(|(n, _)| *n == field).map(|&(_, v)| v)
    }

    /// [`Tuning::default_for`]`(radius, ring, laplacian)` with these fields set.
    pub fn tuning(&self, radius: usize, ring: bool, laplacian: bool) -> Tuning {
        Tuning::defaults(radius, ring, laplacian, |k| self.get(k))
    }
}

fn one_row() -> u32 {
    1
}

fn thirty_two() -> u32 {
    32
}

impl Tuning {
    /// The default shape (measured best on an H200).
    pub fn for_radius(radius: usize) -> Tuning {
        Self::defaults(radius, true, false, |_| None)
    }

    /// As [`Tuning::for_radius`], but with the asynchronous ring off and one row per thread: for
    /// devices where `cp_async16` is a plain copy (HIP).
    pub fn for_radius_without_ring(radius: usize) -> Tuning {
        Self::defaults(radius, false, false, |_| None)
    }

    /// The default shape at `radius`, with the asynchronous ring or without ([`Tuning::for_radius`],
    /// [`Tuning::for_radius_without_ring`]); where `laplacian`, that of the Laplacian-only
    /// benchmark operator, which runs [`Tuning::for_laplacian`] of it: the step's, except at R = 4
    /// with the ring, where four rows a thread in 8 rows of threads at one block a multiprocessor
    /// (32-row tiles, so a point's share of the y halo through L2 and shared memory is 3/8 of the
    /// step's 12-row tiles'; 241 registers) measured faster: H200, one call, 512^3 0.325 -> 0.315
    /// ms (82.7 -> 85.5% of copy), 1024^3 2.521 -> 2.489 ms (84.4 -> 85.5%).
    pub fn default_for(radius: usize, ring: bool, laplacian: bool) -> Tuning {
        Self::defaults(radius, ring, laplacian, |_| None)
    }

    /// The default shape at `radius` (of the Laplacian-only operator where `laplacian`), each field
    /// `var` names replaced by its value.
    fn defaults(radius: usize, ring: bool, laplacian: bool, var: impl Fn(&str) -> Option<u32>) -> Tuning {
        let r = radius as u32;
        let vec = var("vec").unwrap_or(4);
        // Three cp.async stages for the step at R = 6 (with its 24-plane windows, geometry.rs's
        // FUSED_WINDOWS): H200, 512^3 90.1 -> 91.0% of 3R1W, 1024^3 86.4 -> 86.5%.
        // At R = 7 and 8 a third stage won at 512^3 and lost at 1024^3.
        let deep = ring && vec == 4 && r == 6 && !laplacian;
        let stages = var("stages").unwrap_or(if deep {
            3
        } else if ring && vec == 4 {
            2
        } else {
            0
        });
        // From R = 6, blocks of 16 x 8 threads with two rows a thread (16-row tiles) at two a
        // multiprocessor, halos through the ring (192-224 registers, no spill). H200, 512^3, one
        // call, % of 3R1W: R = 6 84.7 -> 89.5, R = 7 76.2 -> 87.0, R = 8 71.7 -> 80.6; 1024^3: R = 7
        // 77.2 -> 82.1, R = 8 73.0 -> 81.4. Before, 32 x 6 with two
        // rows at R = 6 (no halo ring: it spilled then) and 16 x 8 with one row at three a
        // multiprocessor from R = 7 (32 x 8 at two capped ptxas at 128 registers and
        // R = 7 spilled); two rows at three a multiprocessor spill under its 170-register cap.
        let high = ring && stages > 0 && r >= 6;
        // The Laplacian-only operator's own (Tuning::default_for): four rows a thread in 8 rows of
        // threads at one block a multiprocessor at R = 4.
        let tall = laplacian && ring && stages > 0 && r == 4;
        // Two rows per thread where measured faster (R = 2: 86% of 3R1W against 76%; R = 4: 82.5%
        // against 79%; the autotuner's winners at R = 3, 5, 6 have two rows too, 8-18% faster than
        // one; from R = 6 as above); R = 1 keeps one. Not where the ring is a
        // plain copy: a 64 KiB LDS would not hold the doubled ring.
        let rows = var("rows").unwrap_or(if tall {
            4
        } else if ring && stages > 0 && r >= 2 {
            2
        } else {
            1
        });
        Tuning {
            block_x: var("block_x").unwrap_or(if high { 16 } else { 32 }),
            block_y: var("block_y").unwrap_or(if rows > 1 && !tall && !high { 6 } else { 8 }).max(r),
            vec,
            window: var("window").unwrap_or(0),
            stages,
            min_blocks: var("min_blocks").unwrap_or(if tall { 1 } else { 2 }),
            // The z loop unrolled where the queue's moves cost more than the copied code: fully up
            // to R = 4; the Laplacian-only operator twice at R = 8 (H200, 50.6 -> 52.5% of copy at
            // 512^3, 51.5 -> 53.6% at 1024^3; the step gained nothing from R = 5).
            unroll_z: var("unroll_z").unwrap_or(if r <= 4 {
                2 * r + 1
            } else if laplacian && stages > 0 && r == 8 {
                2
            } else {
                1
            }),
            rows,
            order: var("order").unwrap_or(3),
            tile_ring: var("tile_ring").unwrap_or(0),
            // Halos through the ring wherever it is on (H100, 512^3: R = 4 Laplacian-only 77.0 ->
            // 87.7% of copy, fused R = 4, 5, 7 +1.4 to +5.8 points;
            // H200, R = 6 in 32 x 6 blocks 84.7 -> 85.8%).
            halo_ring: var("halo_ring").unwrap_or((stages > 0) as u32),
        }
    }

    /// Dynamic shared memory of the fused kernel at `radius`: the ring of asynchronously copied
    /// planes and halos (with `tile_ring`, R + stages + 1 whole tiles of p^n and stages + 1 slots of p^{n-1}
    /// and c^2 dt^2). The Laplacian-only build (`laplacian_only`) has no p^{n-1} and c^2 dt^2 slots.
    pub fn dynamic_shared_bytes(&self, radius: usize, laplacian_only: bool) -> u32 {
        let per_thread_row = self.block_x * self.block_y * self.rows * 16;
        let once_fields = if laplacian_only { 0 } else { 2 };
        let r = radius as u32;
        // Per slot of the halo ring: 2R rows of block_x vectors, 2 ceil(R / vec) vectors a tile row.
        let halo = self.halo_ring * (2 * r * self.block_x + self.fused_tile_y() * 2 * r.div_ceil(self.vec.max(1))) * 16;
        if self.stages == 0 {
            0
        } else if self.tile_ring == 1 {
            (radius as u32 + self.stages + 1) * self.static_tile_bytes(radius) / 2
                + (self.stages + 1) * once_fields * per_thread_row
        } else {
            (self.stages + 1) * ((1 + once_fields) * per_thread_row + halo)
        }
    }

    /// Dynamic shared memory that fused_step_ylayers adds after the ring (kernels/fused.cu):
    /// stages + 2 slots of a plane of phi of the tile's rows (halos included, no x halo) and of
    /// zeta of the tile's own rows.
    pub fn layer_tile_bytes(&self, radius: usize) -> u32 {
        let (rows, r) = (self.fused_tile_y(), radius as u32);
        let row = self.block_x * 4 * self.vec;
        (self.stages + 2) * (2 * rows + 2 * r) * row
    }

    /// Bytes fused_step_zlayers adds to the fields' ring (fused.cu): per slot (stages + 1) and
    /// thread row, zeta of the output plane and phi's leading plane.
    pub fn z_layer_ring_bytes(&self) -> u32 {
        (self.stages + 1) * 2 * self.block_x * self.block_y * self.rows * 16
    }

    /// Whether fused_step_ylayers's shared memory (the tile, the ring, the layers' tile and its
    /// copies of a and b) fits in the 227 KiB of a multiprocessor; where it does not, the layers
    /// run after the interior. It needs the ring (stages > 0).
    pub fn layer_tile_fits(&self, radius: usize) -> bool {
        let weights = 2 * (self.fused_tile_y() + 2 * radius as u32) * 4;
        self.tile_ring == 0
            && self.stages > 0
            && self.static_tile_bytes(radius)
                + weights
                + self.dynamic_shared_bytes(radius, false)
                + self.layer_tile_bytes(radius)
                <= 227 << 10
    }

    /// Static shared memory of the fused kernel without `tile_ring`: two tiles of p^n with halos.
    fn static_tile_bytes(&self, radius: usize) -> u32 {
        let r = radius as u32;
        2 * (self.fused_tile_y() + 2 * r) * (self.block_x + 2 * r.div_ceil(self.vec.max(1))) * 4 * self.vec
    }

    /// The tuning the solver runs: `rows` lowered to 1 without the asynchronous ring (the kernel's
    /// register-prefetch paths keep one row per thread, as on AMD where the ring is off), and to
    /// the most rows whose tile stays within 32 rows (the fields' slack), 48 KiB of static shared
    /// memory and 227 KiB of shared memory in all.
    pub fn effective(self, radius: usize) -> Tuning {
        let mut t = self.without_idle_rings();
        if t.stages == 0 {
            t.rows = 1;
        }
        while t.rows > 1 {
            let tile = if t.tile_ring == 1 { 0 } else { t.static_tile_bytes(radius) };
            if t.fused_tile_y() <= 32 && tile <= 48 << 10 && tile + t.dynamic_shared_bytes(radius, false) <= 227 << 10 {
                break;
            }
            t.rows -= 1;
        }
        t
    }

    /// The ring knobs cleared where they cannot act: the tile ring without the asynchronous ring
    /// or with narrower vectors, the halo ring without the asynchronous ring or inside the tile
    /// ring (which carries the halos itself).
    pub fn without_idle_rings(self) -> Tuning {
        let mut t = self;
        if t.stages == 0 || t.vec != 4 {
            t.tile_ring = 0;
        }
        if t.stages == 0 || t.tile_ring == 1 {
            t.halo_ring = 0;
        }
        t
    }

    /// The launch shape of the Laplacian-only operator: this one with the ring one plane deeper.
    /// A plane of it moves a third of the full step's bytes, so one more plane in flight hides the
    /// same latency (H100, R = 4, 512^3 / 1024^3: 87.7 / 86.2% of copy with 2 stages, 90.6 / 88.4%
    /// with 3, 82.3 / 84.8% with 4). The tile ring keeps its depth.
    /// Unchanged where the deeper ring would not run this tile (see [`Tuning::effective`]), counted
    /// as the step's three-field ring, as the module's options are (sources::kernel_options):
    /// conservative for this one-field ring, whose own bytes would give the tall R = 4 tile a third
    /// stage, which ran no faster (H200, 512^3 0.317 against 0.315 ms, 1024^3 2.505 against 2.49).
    pub fn for_laplacian(self, radius: usize) -> Tuning {
        let deeper = Tuning { stages: self.stages + 1, ..self };
        if self.stages > 0 && self.tile_ring == 0 && deeper.check(radius).is_ok() && deeper.effective(radius) == deeper
        {
            deeper
        } else {
            self
        }
    }

    /// The launch shape of the f16 step (kernels/fused_half.cu) at `radius`: this one's vector
    /// width, ring depth, window and grid-index order, with one row a thread in blocks of 8 rows
    /// (or R) and the halos through registers (that kernel has no halo or tile ring); up to R = 5
    /// this one's block width at 3 blocks a multiprocessor, at R = 6 blocks 32 wide at 3, from R = 7
    /// 32 wide at 2, as measured. H200, 512^3: R = 4, 0.476
    /// ms against 0.533 with the f32 default's two rows of 6 (162 registers, 2 blocks); R = 1, 3
    /// blocks 0.366 against 0.379 ms; R = 5, 0.564 against 0.631; R = 6, 0.656 against 0.677; R = 8,
    /// 2 blocks 0.767 against 0.793 ms.
    pub fn for_half(self, radius: usize) -> Tuning {
        let r = radius as u32;
        let block_y = (self.block_y * self.rows).min(8).max(r);
        let (block_x, min_blocks) = match r {
            ..=5 => (self.block_x, self.min_blocks.max(3)),
            6 => (32, self.min_blocks.max(3)),
            _ => (32, 2),
        };
        // The f16 shapes were measured with two stages at R = 6, where the f32 step takes three.
        let stages = if r == 6 { self.stages.min(2) } else { self.stages };
        Tuning { block_x, block_y, rows: 1, min_blocks, stages, tile_ring: 0, halo_ring: 0, ..self }
    }

    /// The launch shape of a step with the y layers inside the fused pass (fused_step and
    /// fused_step_ylayers, kernels/fused.cu), from the interior's: one row a thread, the z loop not
    /// unrolled, no tile ring (two rows a thread or the loop unrolled ran slower: H100, R = 4), and
    /// blocks of 128 threads, of which three share a multiprocessor (167 registers a thread at
    /// R = 4), so that one waits at a plane's barrier while the others compute. Up to R = 4, 8
    /// threads (32 points) a row in 16 rows: a block
    /// reads 1.9 times its points of p^n's plane with the halos, against 2.25 in 16 x 8 (H200:
    /// marmousi.toml's real step 0.166 -> 0.163 ms, marmousi-large 13.88 -> 13.74 s in
    /// steps, the same bits). From R = 5 the x halo is two vectors a side, and the shape stays 16
    /// x 8 (at least R rows), timed there.
    pub fn for_ylayers(self, radius: usize) -> Tuning {
        let (block_x, block_y) = if radius <= 4 { (8, 16) } else { (16, 8.max(radius as u32)) };
        Tuning { block_x, block_y, rows: 1, unroll_z: 1, tile_ring: 0, ..self }.effective(radius)
    }

    /// Dynamic shared memory of the f16 step's ring (kernels/fused_half.cu): stages + 1 slots of
    /// three fields (p^n's leading plane, d^n, c^2 dt^2) for each thread's rows, 2 bytes a value.
    pub fn half_ring_bytes(&self) -> u32 {
        let per_slot = 3 * self.block_x * self.block_y * self.rows * 2 * self.vec;
        if self.stages == 0 { 0 } else { (self.stages + 1) * per_slot }
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
        ensure!(self.order <= 3, "order must be 0..=3, got {}", self.order);
        ensure!(
            self.tile_ring == 0 || (self.tile_ring == 1 && self.stages > 0 && self.vec == 4),
            "tile_ring must be 0, or 1 with stages > 0 and vector width 4"
        );
        ensure!(
            self.dynamic_shared_bytes(radius, false) <= 227 << 10,
            "the fused kernel's ring needs {} B of shared memory (at most 227 KiB)",
            self.dynamic_shared_bytes(radius, false)
        );
        // Without the tile ring the plane's tile is static shared memory, which compilers cap at
        // 48 KiB (R = 7 with 32-row blocks needs 52 KiB: NVRTC refuses it).
        let tile = if self.tile_ring == 1 { 0 } else { self.static_tile_bytes(radius) };
        ensure!(
            tile <= 48 << 10 && tile + self.dynamic_shared_bytes(radius, false) <= 227 << 10,
            "the fused kernel's tile needs {tile} B of static shared memory (at most 48 KiB, and 227 KiB with the ring)"
        );
        ensure!(self.halo_ring <= 1, "halo_ring must be 0 or 1, got {}", self.halo_ring);
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
            self.fused_tile_y() * 2 * hv <= self.block_x * self.block_y,
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
    #[cfg_attr(not(any(feature = "cuda", feature = "hip")), allow(dead_code))]
    pub(crate) fn fused_tile_x(&self) -> usize {
        (self.block_x * self.vec) as usize
    }

    /// Rows of the fused kernel's tile (the three-pass kernels keep one row per thread).
    pub(crate) fn fused_tile_y(&self) -> u32 {
        self.block_y * self.rows
    }

    /// "bx32 by6 v4 w64 s2 m2 u9 r2 o1 t0 h1": block columns and rows, vector width, z-window,
    /// asynchronous-copy stages, blocks per multiprocessor, z unrolling, rows of y per thread,
    /// grid-index order, tile ring, halo ring.
    pub fn label(&self) -> String {
        format!(
            "bx{} by{} v{} w{} s{} m{} u{} r{} o{} t{} h{}",
            self.block_x,
            self.block_y,
            self.vec,
            self.window,
            self.stages,
            self.min_blocks,
            self.unroll_z,
            self.rows,
            self.order,
            self.tile_ring,
            self.halo_ring
        )
    }
}

#[cfg(test)]
mod tests;
