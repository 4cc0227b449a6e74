//! The step's plan, without a device: which launches a step makes over which planes, rows, bands
//! and windows. Where a fused step computes the CPML layers ([`LayerPass`]), the y mode's band of
//! tile rows and its two launches' tiles, the z layers' planes and windows, the CPML marches'
//! segments, and a decomposed run's step in two parts ([`StepSplit`]). Unit tests check these
//! against the kernels' own rules, without a GPU.

use anyhow::{Result, ensure};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Which interior operator to time (see [`GpuSolver::time_interior`](super::GpuSolver::time_interior)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operator {
    /// The fused leapfrog step (one pass).
    #[default]
    Fused,
    /// x, y, z passes into a scratch Laplacian, then the update.
    ThreePass,
    /// out = L p only, by the fused kernel compiled with LAPLACIAN_ONLY.
    Laplacian,
}

impl Operator {
    /// Theoretical bytes per application (the effective-bandwidth numerator).
    pub fn bytes(&self, shape: [usize; 3], radius: usize) -> u64 {
        crate::problem::step_bytes(shape, radius, *self != Operator::Laplacian)
    }
}

/// Segments each y or z layer's march is split into along its axis (cpml.cu, cpml_march), for a
/// launch of `blocks` unsplit blocks on `multiprocessors` holding 5 blocks each. A block's time is
/// its march: about `width / S + radius` points (the R points of p^n before a segment are loaded
/// first, partly in parallel), and the launch takes as many of those as it has waves, so the count
/// minimising waves x march wins, with segments no shorter than 4 points. A launch that fills its
/// last wave is not split; one whose last wave is short or that does not fill the GPU once is (H200,
/// R = 4, every march forced to S segments: 512^3 real step 0.935 ms at S = 1, 0.942-0.963 at 2-5;
/// 960 x 64 x 240, 0.240 at S = 1, 0.226 at 2). The bits are the same for any count.
pub(super) fn march_segments(blocks: u64, multiprocessors: u64, width: u64, radius: u64) -> u64 {
    let resident = (5 * multiprocessors).max(1);
    let cost = |s: u64| (blocks.max(1) * s).div_ceil(resident) * (width.div_ceil(s) + radius);
    (1..=(width / 4).max(1)).min_by_key(|&s| (cost(s), s)).unwrap_or(1)
}

/// Planes a fused_step_ylayers chunk primes its rings with, per unit of the radius, as
/// the y mode's window choice costs them.
pub(super) const Y_PASS_PRIMING: usize = 2;

/// The longest z-window of the y-layer launch. H200, R = 4, 8 x 16 blocks (three a
/// multiprocessor): marmousi-large 1.705 ms a step with the cost
/// model's choice among windows up to 48 (47 planes), 1.68 / 1.67 / 1.685 / 1.695 at 12 / 16 / 24 /
/// 32; the real step 1.702 -> 1.694 ms at 2400 x 200 x 600, 5.459 -> 5.436 at 1024^3, 0.163 ->
/// 0.160 at 960 x 64 x 240 with 16. Shorter windows keep neighbouring blocks on nearby planes,
/// where they share their halo rows of p^n and phi in L2.
pub(super) const Y_PASS_LONGEST: usize = 16;

/// The rows of the fused step's tiles of `tile_rows` rows that hold y-layer rows (`width` a
/// layer) on `ny` rows: those below the first value and from the second on.
pub(super) fn y_band(ny: i32, width: i32, tile_rows: i32) -> (i32, i32) {
    let tile_rows = tile_rows.max(1);
    let lo = ((width - 1).max(0) / tile_rows + 1) * tile_rows;
    let hi = (ny - width).max(0) / tile_rows * tile_rows;
    (lo.min(ny), hi)
}

/// The y mode's band (fused.cu, band_tile): rows below the first value and from the second on go
/// to fused_step_ylayers in tiles of `band_tile` rows, those between to fused_step in tiles of
/// `gap_tile` rows. [`y_band`] for the y-layer tiles, its gap shortened to a whole number of both
/// tile heights, so that either launch's tiles end where the other's begin (the y-layer kernel
/// then computes up to lcm - 1 rows of the gap's as well).
pub(super) fn y_mode_band(ny: i32, width: i32, band_tile: i32, gap_tile: i32) -> (i32, i32) {
    let (band_tile, gap_tile) = (band_tile.max(1), gap_tile.max(1));
    let (lo, hi) = y_band(ny, width, band_tile);
    let both = band_tile / gcd(band_tile, gap_tile) * gap_tile;
    if hi <= lo { (lo, hi) } else { (lo, lo + (hi - lo) / both * both) }
}

fn gcd(a: i32, b: i32) -> i32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Tiles of each of the y mode's launches over the band `(lo, hi)` ([`y_mode_band`]) of `ny` rows:
/// fused_step's between (tiles of `gap_tile` rows), fused_step_ylayers's outside (`band_tile`).
pub(super) fn y_mode_tiles(ny: i32, (lo, hi): (i32, i32), band_tile: i32, gap_tile: i32) -> (u32, u32) {
    let (band_tile, gap_tile) = (band_tile.max(1), gap_tile.max(1));
    let gap = (hi - lo).max(0);
    ((gap / gap_tile) as u32, ((ny.max(0) + band_tile - 1) / band_tile - gap / band_tile) as u32)
}

/// The planes of `nz` in the low z layer, between the layers and in the high one, each `width`
/// planes where its face holds one (`[low, high]`: not under a free surface, nor at a cut), as
/// layers.h's layer_of assigns them (the low layer wins where both would claim a plane).
pub(super) fn z_layer_planes(nz: usize, width: usize, [low, high]: [bool; 2]) -> [Range<usize>; 3] {
    let low_end = if low { width.min(nz) } else { 0 };
    let high = if high { nz.saturating_sub(width).max(low_end) } else { nz };
    [0..low_end, low_end..high, high..nz]
}

/// The planes of `part` among `planes` (an empty range at the later start where they do not meet).
pub(super) fn overlap(part: &Range<usize>, planes: &Range<usize>) -> Range<usize> {
    let start = part.start.max(planes.start);
    start..part.end.min(planes.end).max(start)
}

/// z-planes per block of a fused_step_zlayers launch over `planes` planes: chunks of at most 16
/// (the y-layer launch's longest, `Y_PASS_LONGEST`) of equal length.
pub(super) fn z_layer_window(planes: usize) -> u32 {
    planes.div_ceil(planes.div_ceil(Y_PASS_LONGEST).max(1)).max(1) as u32
}

/// Whether the interior's tiles of `gap_tile` rows take the y mode's gap: where the gap that a whole
/// number of them and of the y-layer tiles fills ([`y_mode_band`]) keeps at least 3/4 of its rows
/// (H200: the 16-row gap of survey-marmousi.toml's 960 x 64 x 240 grid, lost whole to the
/// y-layer kernel's tiles, ran 0.62 s against 0.60 in the y-layer module's shape).
pub(super) fn gap_in_interior_shape(ny: i32, width: i32, band_tile: i32, gap_tile: i32) -> bool {
    let (lo, hi) = y_band(ny, width, band_tile);
    let (slo, shi) = y_mode_band(ny, width, band_tile, gap_tile);
    shi > slo && 4 * (shi - slo) >= 3 * (hi - lo)
}

/// Where a fused step computes the CPML layers (on NVIDIA; AMD always computes them after).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayerPass {
    /// By cpml.cu after the interior.
    #[default]
    After,
    /// The y layers inside the pass (fused_step_ylayers, in the launch shape of
    /// [`Tuning::for_ylayers`](crate::backend::tuning::Tuning::for_ylayers), on the tiles that hold y-layer rows; fused_step on the others,
    /// `YPass`), and the z layers of those others too (fused_step_zlayers on the z layers'
    /// planes, in the same shape); the x layers and the y-layer rows' z layers by cpml.cu after
    /// it: the y layers' points and the other rows' z-layer points are read and written once a
    /// step. The default ([`LayerPass::for_grid`]). Where it cannot run (f16, AMD,
    /// nx not a multiple of 4, y layers that overlap) the step computes the layers after the
    /// interior.
    YLayers,
}

impl LayerPass {
    /// The default for a grid with CPML layers `width` points wide: the y layers in the pass
    /// (faster than after it on an H200 from 3.9% of the points in the y layers, 1024^3, to 62%,
    /// survey-marmousi.toml, since each of the y mode's launches has its own tiles, shape and window).
    pub fn for_grid(width: usize) -> LayerPass {
        if width > 0 { LayerPass::YLayers } else { LayerPass::After }
    }
}

/// Planes a thread of cpml.cu's x_rows takes, the next one's lines asked for while it works on
/// one (H200, R = 4, CPML 20: 1024^3 5.444 -> 5.413 ms a step with two; four and eight lost).
pub(super) const X_PLANES: u64 = 2;

/// Whether fused_step_ylayers can take a grid's y layers: it moves whole vectors along x and
/// needs the two y layers apart (layers.h, add_layers), both of them (a y-z block cut along y
/// has its layers computed after the pass).
pub(super) fn y_layers_fit(shape: [usize; 3], width: usize, vec: u32, y_faces: [bool; 2]) -> bool {
    shape[0].is_multiple_of(vec as usize) && shape[1] >= 2 * width && y_faces == [true; 2]
}

/// Whether cpml.cu takes the x layers by rows of vectors (its `x_rows`, which the launch matches):
/// nx and the width multiples of VEC, the two layers apart.
pub(super) fn x_layers_by_rows(nx: u64, width: u64, vec: u64) -> bool {
    nx.is_multiple_of(vec) && width.is_multiple_of(vec) && 2 * width <= nx
}

/// A step in two parts: the z-ranges computed first and the rest, and whether a step is open.
pub(super) struct StepSplit {
    pub first: Vec<Range<usize>>,
    pub leave: Vec<Range<usize>>,
    /// What neither `first` nor `leave` holds, in order.
    pub rest: Vec<Range<usize>>,
    pub open: bool,
}

impl StepSplit {
    /// The split of a step's `nz` planes into `first`, `leave` and the rest, closed; errors
    /// unless both are sorted disjoint ranges of the planes.
    pub fn new(first: &[Range<usize>], leave: &[Range<usize>], nz: usize) -> Result<StepSplit> {
        for ranges in [first, leave] {
            ensure!(
                ranges.windows(2).all(|w| w[0].end <= w[1].start)
                    && ranges.iter().all(|r| r.start <= r.end && r.end <= nz),
                "planes {ranges:?} of a step in two parts are not sorted disjoint ranges of 0..{nz}"
            );
        }
        let mut taken: Vec<Range<usize>> = first.iter().chain(leave).cloned().collect();
        taken.sort_by_key(|r| r.start);
        let mut rest = Vec::with_capacity(taken.len() + 1);
        let mut z = 0;
        for r in &taken {
            if r.start > z {
                rest.push(z..r.start);
            }
            z = z.max(r.end);
        }
        if z < nz {
            rest.push(z..nz);
        }
        Ok(StepSplit { first: first.to_vec(), leave: leave.to_vec(), rest, open: false })
    }
}

#[cfg(test)]
mod tests {
    use super::{
        LayerPass, StepSplit, gap_in_interior_shape, march_segments, overlap, y_band, y_layers_fit, y_mode_band,
        y_mode_tiles, z_layer_planes, z_layer_window,
    };

    #[test]
    fn a_step_in_two_parts_leaves_the_rest_in_order() {
        let s = StepSplit::new(&[0..4, 60..64], &[30..34, 40..41], 64).expect("valid split");
        assert_eq!(s.rest, vec![4..30, 34..40, 41..60]);
        assert!(!s.open);
        assert_eq!(StepSplit::new(&[], &[], 10).expect("nothing first").rest, vec![0..10]);
        assert!(StepSplit::new(&[4..8, 0..2], &[], 10).is_err(), "unsorted");
        assert!(StepSplit::new(&[0..4, 5..11], &[], 10).is_err(), "past the grid");
    }

    #[test]
    fn the_y_band_is_the_rows_of_the_tiles_that_hold_y_layer_rows() {
        for ny in 1..70 {
            for width in 1..=ny.min(24) {
                for tile_rows in 1..=16 {
                    let (lo, hi) = y_band(ny, width, tile_rows);
                    for y in 0..ny {
                        let y0 = y / tile_rows * tile_rows;
                        let holds = y0 < width || y0 + tile_rows > ny - width;
                        assert_eq!(y < lo || y >= hi, holds, "ny {ny} width {width} tiles {tile_rows} row {y}");
                    }
                }
            }
        }
        // marmousi-large (200 rows, 24-point layers) in 8-row tiles: rows 0-23 and 176-199.
        assert_eq!(y_band(200, 24, 8), (24, 176));
    }

    /// fused.cu's band_tile and the stores it guards, as the y mode's two launches map their
    /// tiles (fused_step_ylayers's of `band_tile` rows, fused_step's of `gap_tile` rows): every
    /// grid row is stored once, and every y-layer row by the y-layer kernel.
    #[test]
    fn the_y_mode_launches_store_every_row_once() {
        for ny in 1..80 {
            for width in 1..=ny.min(24) {
                for band_tile in 1..=16 {
                    for gap_tile in [1, 4, 6, 8, 12, 16, 24] {
                        let (lo, hi) = y_mode_band(ny, width, band_tile, gap_tile);
                        let hi_row = hi.max(lo);
                        let in_band = |y: i32| y < lo || y >= hi;
                        let (gap_tiles, band_tiles) = y_mode_tiles(ny, (lo, hi), band_tile, gap_tile);
                        let mut stored = vec![0; ny as usize];
                        // Launch tiles past the launch's own (a banded grid's overhang) store nothing;
                        // fused_step stores every row of its tiles.
                        for t in 0..gap_tiles as i32 + 3 {
                            let row0 = lo + t * gap_tile;
                            assert_eq!(row0 < hi_row, t < gap_tiles as i32, "ny {ny} width {width} {gap_tile}");
                            if row0 < hi_row {
                                assert!(row0 + gap_tile <= hi_row, "ny {ny} width {width}: a gap tile overhangs");
                                for y in row0..row0 + gap_tile {
                                    stored[y as usize] += 1;
                                }
                            }
                        }
                        let rows = (ny + band_tile - 1) / band_tile;
                        let (lo_t, hi_t) = (lo / band_tile, hi_row / band_tile);
                        for t in 0..band_tiles as i32 + 3 {
                            let owns = t < rows - (hi_t - lo_t);
                            assert_eq!(owns, t < band_tiles as i32, "ny {ny} width {width} tiles {band_tile}");
                            if owns {
                                let row0 = if t < lo_t { t } else { t - lo_t + hi_t } * band_tile;
                                for y in (row0..row0 + band_tile).filter(|&y| y < ny && in_band(y)) {
                                    stored[y as usize] += 1;
                                }
                            }
                        }
                        assert!(
                            stored.iter().all(|&n| n == 1),
                            "ny {ny} width {width} tiles {band_tile}/{gap_tile}: {stored:?}"
                        );
                        for y in (0..ny).filter(|&y| y < width || y >= ny - width) {
                            assert!(in_band(y), "ny {ny} width {width}: layer row {y} outside the band");
                        }
                    }
                }
            }
        }
        // marmousi-large (200 rows, 24-point layers), y-layer tiles of 8 rows, the interior's of 12:
        // the gap 24..176 shortened to 24..168 (6 tiles of 12), 7 y-layer tiles.
        assert_eq!(y_mode_band(200, 24, 8, 12), (24, 168));
        assert_eq!(y_mode_tiles(200, (24, 168), 8, 12), (12, 7));
        // The interior's 12-row tiles take marmousi-large's and 512^3's gaps; survey-marmousi.toml's
        // (64 rows, 20-point layers: rows 24..40) would be lost whole, so the y-layer module's
        // 8-row fused_step takes it.
        assert!(gap_in_interior_shape(200, 24, 8, 12));
        assert!(gap_in_interior_shape(512, 20, 8, 12));
        assert!(!gap_in_interior_shape(64, 20, 8, 12));
        assert_eq!(y_mode_band(64, 20, 8, 8), y_band(64, 20, 8));
    }

    #[test]
    fn the_y_layers_go_in_the_pass_by_default() {
        for width in [1, 20, 24] {
            assert_eq!(LayerPass::for_grid(width), LayerPass::YLayers, "width {width}");
        }
        assert_eq!(LayerPass::for_grid(0), LayerPass::After, "no layers");
        assert!(y_layers_fit([960, 64, 240], 20, 4, [true; 2]));
        assert!(!y_layers_fit([67, 45, 39], 3, 4, [true; 2]), "rows of whole vectors only");
        assert!(!y_layers_fit([68, 33, 39], 17, 4, [true; 2]), "the two layers overlap");
        assert!(!y_layers_fit([960, 64, 240], 20, 4, [true, false]), "a block cut along y");
    }

    #[test]
    fn marches_split_where_the_last_wave_is_short() {
        // H200: 132 multiprocessors, 660 resident blocks; R = 4.
        // 512^3, 20-point layers: 1024 blocks, 1.55 waves; splitting adds a wave per segment.
        assert_eq!(march_segments(1024, 132, 20, 4), 1);
        // 960 x 64 x 240 (survey-marmousi.toml): the y layers' 960 blocks (1.45 waves) into 2
        // (2.9 waves).
        assert_eq!(march_segments(960, 132, 20, 4), 2);
        // Its z layer under a free surface: 128 blocks, split as far as 4-point segments allow.
        assert_eq!(march_segments(128, 132, 20, 4), 5);
        // marmousi-large's y layers: 6000 blocks, 9.1 waves.
        assert_eq!(march_segments(6000, 132, 24, 4), 1);
        // Its z layer under a free surface: 600 vectors a row x 200 rows, 938 blocks (1.42 waves)
        // into 2 (2.84 waves of 16-point marches against 2 of 28).
        assert_eq!(march_segments(938, 132, 24, 4), 2);
        // Layers thinner than 8 points are never split.
        assert_eq!(march_segments(10, 132, 7, 4), 1);
    }

    /// layers.h's layer_of along z: 0 the low layer (where its face holds one), 1 the high one,
    /// None neither; the low one wins where they overlap.
    fn layer_of(z: usize, nz: usize, w: usize, faces: [bool; 2]) -> Option<usize> {
        layer_at(z, nz, w, faces).map(|(half, _)| half)
    }

    /// layers.h's layer_of: the layer of grid index `i` of `n` and the index `t` within it.
    fn layer_at(i: usize, n: usize, w: usize, [low, high]: [bool; 2]) -> Option<(usize, usize)> {
        if low && i < w {
            Some((0, i))
        } else if high && i + w >= n {
            Some((1, i + w - n))
        } else {
            None
        }
    }

    /// Subdomains on GPUs, cut clear of the layers by the planner: every owned plane and row lies
    /// in the layer, at the index within it, and has the coefficients it has in the whole grid,
    /// for z-slabs and y-z blocks whose CPML is wider than the halo (the kernels' layer_of on the
    /// subdomain's grid and its faces against the whole grid's).
    #[test]
    fn subdomains_hold_the_whole_grids_layers_on_their_owned_points() {
        use crate::config::Config;
        use crate::decomposition::Decomposition;
        use crate::problem::Problem;
        for (shape, width, free_surface, slabs, rows) in [
            ([48, 48, 64], 12, true, 2, 1),
            ([48, 48, 64], 12, false, 3, 1),
            // Layers as wide as a quarter of the grid: the balanced cuts fall inside them and move
            // to their edges.
            ([48, 48, 64], 20, false, 4, 1),
            ([48, 64, 48], 12, true, 2, 2),
            ([48, 64, 48], 8, false, 3, 3),
        ] {
            let [nx, ny, nz] = shape;
            let toml = format!(
                "[grid]\nshape = [{nx}, {ny}, {nz}]\nspacing = [10.0, 10.0, 10.0]\n\
                 [model]\nkind = \"constant\"\nvp = 2000.0\n[stencil]\nradius = 3\n[time]\nduration = 0.01\n\
                 [source]\nposition = [80.0, 200.0, 240.0]\nfrequency = 10.0\n\
                 [boundary]\nkind = \"cpml\"\nwidth = {width}\nfree_surface = {free_surface}\nplacement = \"inside\"\n"
            );
            let p = Problem::build(&Config::from_toml(&toml).unwrap(), vec![2000.0; nx * ny * nz]).unwrap();
            let d = Decomposition::for_gpus(&p, slabs, rows).unwrap();
            d.check_gpu(&p).unwrap();
            assert!(d.halo < width, "{shape:?}: layers wider than the halo");
            if width == 20 {
                assert_eq!(d.slabs, vec![(0, 20), (20, 32), (32, 44), (44, 64)]);
            }
            let whole = &p.boundary;
            for rank in 0..d.ranks() {
                let sub = d.subdomain(&p, rank).unwrap();
                let (b, l) = (&sub.problem.boundary, sub.problem.layout);
                for (axis, owned, first, n, local) in
                    [(2, d.planes_of(rank), sub.first, nz, l.nz), (1, d.rows_of(rank), sub.first_row, ny, l.ny)]
                {
                    for g in owned.0..owned.1 {
                        let want = layer_at(g, n, width, whole.layer_faces[axis]);
                        let got = layer_at(g - first, local, width, b.layer_faces[axis]);
                        assert_eq!(got, want, "{shape:?} width {width}: rank {rank}, axis {axis}, point {g}");
                        let (pw, pg) = (&whole.profiles[axis], &b.profiles[axis]);
                        assert_eq!((pg.a[g - first], pg.b[g - first]), (pw.a[g], pw.b[g]));
                    }
                }
            }
        }
    }

    #[test]
    fn the_z_layer_launches_cover_each_layer_as_the_kernels_assign_it() {
        for nz in [1, 5, 30, 39, 40, 41, 512, 600] {
            for w in [0, 1, 3, 17, 20, 24] {
                for faces in [[true, true], [false, true], [true, false], [false, false]] {
                    let [lo, between, hi] = z_layer_planes(nz, w, faces);
                    assert_eq!((lo.start, lo.end, between.end, hi.end), (0, between.start, hi.start, nz));
                    for z in 0..nz {
                        let expected = layer_of(z, nz, w, faces);
                        let got = [&lo, &between, &hi].iter().position(|p| p.contains(&z));
                        assert_eq!(got, Some(expected.map_or(1, |h| 2 * h)), "nz {nz} w {w} {faces:?} z {z}");
                    }
                }
            }
        }
        // Equal chunks of at most 16 planes: 20 -> 10 + 10, 24 -> 12 + 12, 40 -> 14 + 14 + 12.
        assert_eq!([20, 24, 40, 16, 3].map(z_layer_window), [10, 12, 14, 16, 3]);
    }

    #[test]
    fn a_launch_meets_a_layer_on_the_planes_both_hold() {
        for (part, planes, expected) in [
            (0..20, 0..512, 0..20),
            (492..512, 0..300, 492..492),
            (492..512, 480..500, 492..500),
            (20..492, 100..200, 100..200),
            (0..0, 5..9, 5..5),
        ] {
            let got = overlap(&part, &planes);
            assert_eq!(got, expected, "{part:?} among {planes:?}");
            assert!(got.clone().all(|z| part.contains(&z) && planes.contains(&z)));
        }
    }
}
