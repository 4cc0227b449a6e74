//! Launch geometry of the fused kernel: how many z-planes a block marches (the z-window) and how
//! blocks are laid out over the grid, from the tuning and the blocks the device runs at once.

use crate::backend::tuning::Tuning;
use crate::grid::Layout;

/// How an operator's automatic z-window is chosen ([`LaunchGeometry::auto_window`]).
#[derive(Clone, Copy, Debug)]
pub struct WindowRule {
    /// The shortest window of the banded order, whose chunks prime from L2.
    pub shortest_banded: usize,
    /// The largest radius at which that priming is free. Beyond it the 2R planes a chunk primes
    /// with cost as much as its window's own, from L2 or not, and windows are chosen as for the
    /// other orders.
    pub free_priming_upto: usize,
    /// The longest primed window at a radius (beyond `free_priming_upto`).
    pub longest_primed: fn(usize) -> usize,
}

/// The full step. (R = 4, with the L2 hints) 512^3 runs at 92.0 / 93.0 / 92.4% of 3R1W with 4 /
/// 6 / 8 planes and 1024^3 at 90.1 / 90.1 / 89.7%, while on an H200 4 planes lose 17% against 12
/// at 512^3. 8 planes are within 0.6 points of the best on the H100; the autotuner finds each
/// GPU's own. From R = 6 the banded 8-plane windows lose to primed ones (H200, 512^3, R = 6 / 7 /
/// 8: 77.6 / 67.4 / 63.0% of 3R1W against 84.5 / 75.8 / 71.2% with 40-43 planes; R = 5 91.4%
/// against 87.6%).
/// At R = 6 (16 x 8 blocks of two rows, two a multiprocessor) primed windows of at most 24 planes,
/// which the wave model alone would not choose: H200, 512^3 89.6 -> 90.2% of 3R1W (47 planes ->
/// 24), 1024^3 83.2 -> 86.4%; at R = 7 and 8, 24 planes lost 1.6-3.7 points.
pub const FUSED_WINDOWS: WindowRule =
    WindowRule { shortest_banded: 8, free_priming_upto: 5, longest_primed: fused_longest_primed };
const fn fused_longest_primed(radius: usize) -> usize {
    if radius == 6 { 24 } else { LONGEST_WINDOW }
}
/// The Laplacian-only operator moves half the bytes per point and gains from longer windows
/// (H100, R = 4: 76.8% of copy at 12 planes, 74.9% at 8, 71.1% at 4; 1024^3 76.3 / 72.9 / 69.9);
/// from R = 4 primed windows beat the banded 16 planes (H200, R = 4, 512^3 / 1024^3: 78.7 / 76.9%
/// of copy against 83.2 / 85.3% with 43 / 45 planes; 512^3, R = 5 / 6 / 7 / 8: 65.9 / 54.8 / 44.6
/// / 41.4% against 70.8 / 58.6 / 47.0 / 43.9% with 40-43).
/// Its primed windows may be as long as 256 planes (the wave model picks the
/// length) except at R = 5: at 512^3 on an H200 forced windows of 128 / 256 planes ran R = 4 at
/// 90.0-90.3 / 90.6% of copy against 85.2% with the 43 planes of the 48-plane limit
/// (1024^3: 86.1 / 85.6% against 85.5%), R = 6..8 1.0-1.9 points faster, R = 5 65.1 / 49.4%
/// against 70.7%; with the model's 256 planes, 88.7-90.8% at 512^3 (two cards), 84.5-84.7% at
/// 1024^3. The H100 prefers the short windows at R = 4 (512^3:
/// 87.6 / 85.8-86.2 / 81.6-82.9% with 43 / 128 / 256 planes), where `--tune` finds
/// its own; the limit follows the H200, which issue 19's targets are on.
pub const LAPLACIAN_WINDOWS: WindowRule =
    WindowRule { shortest_banded: 12, free_priming_upto: 3, longest_primed: laplacian_longest_primed };
const fn laplacian_longest_primed(radius: usize) -> usize {
    if radius == 5 { LONGEST_WINDOW } else { LAPLACIAN_LONGEST_WINDOW }
}
/// The longest automatic z-window of the Laplacian-only operator's primed windows.
const LAPLACIAN_LONGEST_WINDOW: usize = 256;

/// The longest automatic z-window ([`best_window`]).
const LONGEST_WINDOW: usize = 48;

/// z-planes per block of the fused kernel for `tiles` xy tiles over `nz` planes when `slots` blocks
/// run at once. Blocks all take about the same time, so a launch runs in waves of `slots` blocks;
/// the window minimises waves x (window + priming), `priming` standing for the queue's 2R planes
/// every block loads first, among windows of `shortest` to 48 planes (ties: the shortest).
/// Measured on an H200: filling the last wave is what counts on small grids
/// (256^3: 77% of 3R1W with 6 chunks in one wave, 63-71% with 1.3-2.7 waves), while windows past
/// ~48 planes lose on every grid (1024^3: 81.5% at 40 planes, 79.4% at 128, 77% at 342), as
/// neighbouring blocks drift apart and stop sharing their halo rows in L2.
pub fn best_window(tiles: usize, nz: usize, slots: usize, priming: usize, shortest: usize) -> u32 {
    best_window_upto(tiles, nz, slots, priming, shortest, LONGEST_WINDOW)
}

/// [`best_window`] among windows of `shortest` to `longest` planes.
pub fn best_window_upto(tiles: usize, nz: usize, slots: usize, priming: usize, shortest: usize, longest: usize) -> u32 {
    let (tiles, nz, slots) = (tiles.max(1), nz.max(1), slots.max(1));
    let longest = longest.max(shortest);
    let mut best = (usize::MAX, nz.min(longest));
    for chunks in (1..=nz).rev() {
        let w = nz.div_ceil(chunks);
        if w < shortest.min(nz) || w > longest || (chunks < nz && nz.div_ceil(chunks + 1) == w) {
            continue; // out of range, or a window already costed
        }
        let cost = (tiles * nz.div_ceil(w)).div_ceil(slots) * (w + priming);
        if cost < best.0 {
            best = (cost, w);
        }
    }
    best.1 as u32
}

/// Elements added after each field beyond `Layout::len`, so that tiles of up to 32 rows overhanging
/// the last plane still read inside the allocation.
pub fn field_extra(layout: &Layout) -> usize {
    64 * layout.pitch + 4096
}

/// The fused kernel's launch geometry on one device for one grid.
#[derive(Clone, Copy, Debug)]
pub struct LaunchGeometry {
    pub shape: [usize; 3],
    pub radius: usize,
    pub tuning: Tuning,
    /// Fused blocks the device runs at once.
    pub resident_blocks: u32,
    /// Blocks per band of the banded grid-index order: half the resident blocks.
    pub band_blocks: u32,
}

impl LaunchGeometry {
    pub fn new(shape: [usize; 3], radius: usize, tuning: Tuning, resident_blocks: u32) -> Self {
        let resident_blocks = resident_blocks.max(1);
        LaunchGeometry { shape, radius, tuning, resident_blocks, band_blocks: (resident_blocks / 2).max(1) }
    }

    /// The automatic z-window: [`best_window`] for the blocks that fit on the device at once;
    /// with banded order (3), up to `rule`'s radius, the planes a chunk primes with come from L2
    /// (its band's previous chunk ran alongside), so priming costs nothing and windows down to
    /// the rule's shortest are allowed ([`FUSED_WINDOWS`], [`LAPLACIAN_WINDOWS`]).
    pub fn auto_window(&self, rule: WindowRule) -> u32 {
        let t = &self.tuning;
        let [nx, ny, _] = self.shape;
        let tiles = nx.div_ceil(t.fused_tile_x()) * ny.div_ceil(t.fused_tile_y() as usize);
        self.window_over(tiles, rule)
    }

    /// [`auto_window`](Self::auto_window) for a launch over `tiles` of the xy tiles.
    pub fn window_over(&self, tiles: usize, rule: WindowRule) -> u32 {
        let t = &self.tuning;
        let nz = self.shape[2];
        // The tile ring copies R + stages whole tiles (halos included) before a chunk's first plane,
        // through the ring's few slots, so its chunks must be longer (H100, R = 7, 512^3: 48.9% of
        // 3R1W with 4-plane windows, 86.7% with the tuner's 64).
        let shortest = rule.shortest_banded;
        let shortest_banded = if t.tile_ring == 1 { shortest.max(4 * self.radius) } else { shortest };
        if t.order == 3 && self.radius <= rule.free_priming_upto {
            best_window(tiles, nz, self.resident_blocks as usize, 0, shortest_banded)
        } else {
            let longest = (rule.longest_primed)(self.radius);
            best_window_upto(tiles, nz, self.resident_blocks as usize, self.radius, 16, longest)
        }
    }

    /// `window`, lengthened where needed to keep the grid's z dimension within the 65535 blocks
    /// every GPU allows (only extremely deep grids need it; past the whole depth a longer window
    /// changes nothing, so the search stops there).
    pub fn guarded_window(&self, window: u32) -> u32 {
        self.guarded_window_rows(window, self.tile_rows())
    }

    /// [`guarded_window`](Self::guarded_window) for a launch over `rows` of the tile rows
    /// ([`fused_grid_rows`](Self::fused_grid_rows)).
    pub fn guarded_window_rows(&self, window: u32, rows: u32) -> u32 {
        let nz = self.shape[2] as u32;
        let mut w = window.max(1);
        while self.fused_grid_rows(w, nz as usize, rows)[2] > 65535 && w < nz {
            w = w.saturating_mul(2).min(nz);
        }
        w
    }

    /// The fused kernel's grid: x tiles, y tiles (swapped with grid-index order 2), z-chunks; with
    /// order 3, x tiles, tile rows per band, z-chunks x bands (bands of about half the blocks that
    /// fit on the device at once, so that two chunks of a band run together).
    pub fn fused_grid(&self, window: u32) -> [u32; 3] {
        self.fused_grid_planes(window, self.shape[2])
    }

    /// [`fused_grid`](Self::fused_grid) for a launch over `nz` of the grid's z-planes.
    pub fn fused_grid_planes(&self, window: u32, nz: usize) -> [u32; 3] {
        self.fused_grid_rows(window, nz, self.tile_rows())
    }

    /// Tile rows of the fused step's grid.
    pub fn tile_rows(&self) -> u32 {
        self.shape[1].div_ceil(self.tuning.fused_tile_y() as usize) as u32
    }

    /// Tiles in x of the fused step's grid.
    pub fn tile_columns(&self) -> u32 {
        self.shape[0].div_ceil(self.tuning.fused_tile_x()) as u32
    }

    /// [`fused_grid_planes`](Self::fused_grid_planes) for a launch over `ty` of the tile rows (the
    /// y-layer pass's two launches, each over its own rows: fused.cu, band_tile).
    pub fn fused_grid_rows(&self, window: u32, nz: usize, ty: u32) -> [u32; 3] {
        let tx = self.tile_columns();
        let ty = ty.max(1);
        let tz = (nz as u32).div_ceil(window);
        match self.tuning.order {
            2 => [ty, tx, tz],
            3 => {
                // One band when the whole plane's tiles fit at once (then order 3 is order 0).
                let band = if tx * ty <= self.resident_blocks { ty } else { (self.band_blocks / tx).clamp(1, ty) };
                [tx, band, tz * ty.div_ceil(band)]
            }
            _ => [tx, ty, tz],
        }
    }

    /// Blocks in x and y of the three-pass kernels (32 x block_y threads, VEC points each in x).
    pub fn grid_xy(&self) -> (u32, u32) {
        let [nx, ny, _] = self.shape;
        (nx.div_ceil(self.tuning.tile_x()) as u32, ny.div_ceil(self.tuning.block_y as usize) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::{FUSED_WINDOWS, LAPLACIAN_WINDOWS, LaunchGeometry, best_window, best_window_upto};
    use crate::backend::tuning::Tuning;

    #[test]
    fn high_radii_count_the_planes_they_prime_with() {
        // 512^3 on an H200's 132 multiprocessors at the default shapes' blocks a multiprocessor.
        let at = |r: usize| {
            let t = Tuning::for_radius(r).effective(r);
            LaunchGeometry::new([512; 3], r, t, 132 * t.min_blocks)
        };
        let fused: Vec<u32> = (4..=8).map(|r| at(r).auto_window(FUSED_WINDOWS)).collect();
        assert_eq!(fused, [8, 8, 24, 47, 47]);
        // The Laplacian-only operator in its own shapes (R = 4: tiles of 128 x 32 points, one block a
        // multiprocessor): two chunks of 256 planes fill one wave; R = 5 keeps windows of at most 48.
        let laplacian_at = |shape: [usize; 3], r: usize| {
            let t = Tuning::default_for(r, true, true).effective(r);
            LaunchGeometry::new(shape, r, t, 132 * t.min_blocks).auto_window(LAPLACIAN_WINDOWS)
        };
        let laplacian: Vec<u32> = (4..=8).map(|r| laplacian_at([512; 3], r)).collect();
        assert_eq!(laplacian, [256, 43, 256, 256, 256]);
        assert_eq!([[1024; 3], [256; 3], [2400, 200, 600]].map(|s| laplacian_at(s, 4)), [256, 32, 50]);
    }

    #[test]
    fn windows_fill_whole_waves() {
        // 256^3 in 128 x 12 tiles: 44 tiles, 264 resident blocks: 6 chunks of 43 planes, one wave.
        assert_eq!(best_window(44, 256, 264, 4, 16), 43);
        assert_eq!(best_window(44, 256, 264, 0, 8), 43);
        // 512^3: 172 tiles; 12 chunks of 43 planes fill 7.8 of 8 waves.
        assert_eq!(best_window(172, 512, 264, 4, 16), 43);
        // Free priming (banded order): the shortest window that fills its waves as well.
        assert_eq!(best_window(172, 512, 264, 0, 8), 8);
        assert_eq!(best_window(688, 1024, 264, 0, 8), 8);
        // 2048 x 2048 x 64: 2736 tiles, 2 chunks of 32 (21 waves of 36) beat 1 of 64 (11 of 68).
        assert_eq!(best_window(2736, 64, 264, 4, 16), 32);
        // Shallow grids: the whole depth.
        assert_eq!(best_window(1, 8, 1000, 4, 16), 8);
        assert_eq!(best_window(10, 12, 1, 4, 16), 12);
        // Deep columns on one slot: the longest window allowed.
        assert_eq!(best_window(10, 100, 1, 4, 16), 34);
        for nz in 1..200 {
            for (priming, shortest) in [(4, 16), (0, 8)] {
                let w = best_window(100, nz, 264, priming, shortest) as usize;
                assert!(w >= shortest.min(nz) && w <= 48.min(nz), "nz {nz}: {w}");
            }
        }
    }

    #[test]
    fn a_capped_window_stays_within_its_range() {
        // marmousi-large's y-layer launch (R = 4, 8 x 16 blocks): 300 tiles, 396 resident blocks.
        assert_eq!(best_window(300, 600, 396, 8, 8), 47);
        assert_eq!(best_window_upto(300, 600, 396, 8, 8, 16), 16);
        for nz in 1..200 {
            let w = best_window_upto(64, nz, 396, 8, 8, 16) as usize;
            assert!(w >= 8.min(nz) && w <= 16.min(nz), "nz {nz}: {w}");
        }
    }
}
