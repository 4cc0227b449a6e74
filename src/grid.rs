//! The one memory layout every backend shares.
//!
//! A field is stored x fastest, then y, then z. Around the `nx * ny * nz` interior sits a halo of
//! `radius` points on every face, held at zero (or mirrored, for a free surface), so the stencil
//! never needs a bounds test. A 2D grid's layout ([`Layout::planar`]) is one row a plane with no
//! y halo: its operator has no y term, so an 8192^2 grid costs no 2R rows of y padding a plane. Each x-row is padded so that its first interior point starts on a
//! 128-byte boundary (the seeds' "aligned memory"): a warp's vector loads of a row then touch
//! whole cache lines. A little slack after the last plane lets GPU tiles that overhang the grid
//! read (never write) past the end without leaving the allocation.

/// Alignment of each row's first interior point, in elements (128 bytes of f32).
pub const ROW_ALIGN: usize = 32;

/// Shape, halo and padding of a field; `index(ix, iy, iz)` addresses interior point (ix, iy, iz).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub nx: usize,
    pub ny: usize,
    pub nz: usize,
    /// Halo width in points on the x and z faces (the stencil radius), and on the y faces of a 3D
    /// grid.
    pub halo: usize,
    /// Halo rows on each y face: `halo` for a 3D grid, 0 for a 2D one ([`Layout::planar`]).
    pub y_halo: usize,
    /// Elements before the first interior point of a row (>= halo, a multiple of ROW_ALIGN).
    pub x_offset: usize,
    /// Elements per row (a multiple of ROW_ALIGN).
    pub pitch: usize,
    /// Elements per xy-plane, halo rows included.
    pub plane: usize,
}

impl Layout {
    pub fn new(shape: [usize; 3], halo: usize) -> Self {
        let [nx, ny, nz] = shape;
        let x_offset = halo.div_ceil(ROW_ALIGN).max(1) * ROW_ALIGN;
        let pitch = (x_offset + nx + halo).div_ceil(ROW_ALIGN) * ROW_ALIGN;
        let plane = pitch * (ny + 2 * halo);
        Layout { nx, ny, nz, halo, y_halo: halo, x_offset, pitch, plane }
    }

    /// The layout of a 2D grid of `nx` x `nz` points: one row a plane (ny = 1) and no y halo, the
    /// x and z faces keeping their `halo` points.
    pub fn planar(nx: usize, nz: usize, halo: usize) -> Self {
        let l = Layout::new([nx, 1, nz], halo);
        Layout { y_halo: 0, plane: l.pitch, ..l }
    }

    /// Whether this is a 2D grid's layout ([`Layout::planar`]).
    pub fn is_planar(&self) -> bool {
        self.y_halo == 0 && self.halo > 0
    }

    /// The same field with rows of `pitch` elements (at least the rows' own, a multiple of
    /// ROW_ALIGN): a CPU backend spreads its rows over the cache sets with it.
    pub fn with_pitch(self, pitch: usize) -> Self {
        assert!(
            pitch >= self.x_offset + self.nx + self.halo && pitch.is_multiple_of(ROW_ALIGN),
            "pitch {pitch} for {self:?}"
        );
        Layout { pitch, plane: pitch * (self.ny + 2 * self.y_halo), ..self }
    }

    /// The same field with `extra` elements (a multiple of ROW_ALIGN) after each plane's rows.
    pub fn with_plane_padding(self, extra: usize) -> Self {
        assert!(extra.is_multiple_of(ROW_ALIGN), "plane padding {extra}");
        Layout { plane: self.pitch * (self.ny + 2 * self.y_halo) + extra, ..self }
    }

    /// Interior points.
    pub fn points(&self) -> usize {
        self.nx * self.ny * self.nz
    }

    /// Elements to allocate for one field, tail slack included.
    pub fn len(&self) -> usize {
        self.plane * (self.nz + 2 * self.halo) + self.slack()
    }

    pub fn is_empty(&self) -> bool {
        self.points() == 0
    }

    /// Read-only overhang after the last halo plane, for GPU tiles that extend past the grid.
    pub fn slack(&self) -> usize {
        self.plane + 16 * ROW_ALIGN
    }

    /// Offset of interior point (0, 0, 0).
    pub fn origin(&self) -> usize {
        self.halo * self.plane + self.y_halo * self.pitch + self.x_offset
    }

    /// Offset of interior point (ix, iy, iz); signed so halo points (-halo..0) are addressable.
    #[inline(always)]
    pub fn index(&self, ix: isize, iy: isize, iz: isize) -> usize {
        (self.origin() as isize + iz * self.plane as isize + iy * self.pitch as isize + ix) as usize
    }

    /// Offset of the first interior point of row (iy, iz).
    #[inline(always)]
    pub fn row(&self, iy: usize, iz: usize) -> usize {
        self.origin() + iz * self.plane + iy * self.pitch
    }

    /// Copies a dense (nz, ny, nx) array into a padded field (halo and padding left untouched).
    pub fn scatter<T: Copy>(&self, dense: &[T], field: &mut [T]) {
        assert_eq!(dense.len(), self.points());
        assert_eq!(field.len(), self.len());
        for iz in 0..self.nz {
            for iy in 0..self.ny {
                let src = (iz * self.ny + iy) * self.nx;
                let dst = self.row(iy, iz);
                field[dst..dst + self.nx].copy_from_slice(&dense[src..src + self.nx]);
            }
        }
    }

    /// Copies the interior of a padded field into a dense (nz, ny, nx) array.
    pub fn gather<T: Copy>(&self, field: &[T], dense: &mut [T]) {
        assert_eq!(dense.len(), self.points());
        assert!(field.len() >= self.len() - self.slack());
        for iz in 0..self.nz {
            for iy in 0..self.ny {
                let dst = (iz * self.ny + iy) * self.nx;
                let src = self.row(iy, iz);
                dense[dst..dst + self.nx].copy_from_slice(&field[src..src + self.nx]);
            }
        }
    }
}

/// Which part of the wavefield a snapshot keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// The whole interior, (nz, ny, nx).
    Volume,
    /// The xz-plane at y index `iy`, (nz, nx).
    Xz { iy: usize },
    /// The xy-plane at z index `iz`, (ny, nx).
    Xy { iz: usize },
    /// The yz-plane at x index `ix`, (nz, ny).
    Yz { ix: usize },
}

/// Hands each of `sections` its part of `out`, which holds them one after the other, each laid out
/// as its [`Section::shape`] (a snapshot buffer); errors unless `out` has exactly their values.
pub fn for_each_section(
    sections: &[Section],
    grid: [usize; 3],
    out: &mut [f32],
    mut f: impl FnMut(&Section, &mut [f32]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let total: usize = sections.iter().map(|s| s.len(grid)).sum();
    anyhow::ensure!(out.len() == total, "snapshot buffer has {} values, its sections {total}", out.len());
    let mut rest = out;
    for s in sections {
        let (part, tail) = rest.split_at_mut(s.len(grid));
        f(s, part)?;
        rest = tail;
    }
    Ok(())
}

impl Section {
    /// Shape of one snapshot of this section, slowest axis first.
    pub fn shape(&self, grid: [usize; 3]) -> Vec<usize> {
        let [nx, ny, nz] = grid;
        match self {
            Section::Volume => vec![nz, ny, nx],
            Section::Xz { .. } => vec![nz, nx],
            Section::Xy { .. } => vec![ny, nx],
            Section::Yz { .. } => vec![nz, ny],
        }
    }

    /// Values in one snapshot of this section (the product of [`Section::shape`], without its Vec:
    /// snapshots are cut into sections inside the time-step loop).
    pub fn len(&self, grid: [usize; 3]) -> usize {
        let [nx, ny, nz] = grid;
        match self {
            Section::Volume => nx * ny * nz,
            Section::Xz { .. } => nz * nx,
            Section::Xy { .. } => ny * nx,
            Section::Yz { .. } => nz * ny,
        }
    }

    /// A plane as `n1` lines of `n0` interior points: (n0, n1, first point, step between two points
    /// of a line, step between two lines), in `layout`'s elements; row-major (n1, n0) is the
    /// section's [`Section::shape`]. None for the volume.
    pub fn plane_lines(&self, layout: &Layout) -> Option<(usize, usize, usize, usize, usize)> {
        let l = layout;
        match *self {
            Section::Volume => None,
            Section::Xz { iy } => Some((l.nx, l.nz, l.row(iy, 0), 1, l.plane)),
            Section::Xy { iz } => Some((l.nx, l.ny, l.row(0, iz), 1, l.pitch)),
            Section::Yz { ix } => Some((l.ny, l.nz, l.origin() + ix, l.pitch, l.plane)),
        }
    }

    /// Copies this section out of a dense (nz, ny, nx) field into `out` (cleared first).
    pub fn extract(&self, grid: [usize; 3], field: &[f32], out: &mut Vec<f32>) {
        out.clear();
        out.resize(self.len(grid), 0.0);
        let dense = Layout {
            nx: grid[0],
            ny: grid[1],
            nz: grid[2],
            halo: 0,
            y_halo: 0,
            x_offset: 0,
            pitch: grid[0],
            plane: grid[0] * grid[1],
        };
        self.copy_from(&dense, |i| field[i], out);
    }

    /// Fills `out` (this section's [`Section::len`] values) from a field laid out as `layout`,
    /// `at(i)` being the value at element i.
    pub fn copy_from(&self, layout: &Layout, at: impl Fn(usize) -> f32, out: &mut [f32]) {
        let Some((n0, n1, first, s0, s1)) = self.plane_lines(layout) else {
            for iz in 0..layout.nz {
                for iy in 0..layout.ny {
                    let (src, dst) = (layout.row(iy, iz), (iz * layout.ny + iy) * layout.nx);
                    for (ix, o) in out[dst..dst + layout.nx].iter_mut().enumerate() {
                        *o = at(src + ix);
                    }
                }
            }
            return;
        };
        for (i1, line) in out.chunks_exact_mut(n0).take(n1).enumerate() {
            for (i0, o) in line.iter_mut().enumerate() {
                *o = at(first + i1 * s1 + i0 * s0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_of_a_padded_field_match_the_dense_extraction() {
        let grid = [37, 5, 9];
        let l = Layout::new(grid, 3);
        let dense: Vec<f32> = (0..l.points()).map(|i| i as f32).collect();
        let mut field = vec![-1.0; l.len()];
        l.scatter(&dense, &mut field);
        for s in [Section::Volume, Section::Xz { iy: 4 }, Section::Xy { iz: 0 }, Section::Yz { ix: 36 }] {
            let mut from_padded = vec![f32::NAN; s.len(grid)];
            s.copy_from(&l, |i| field[i], &mut from_padded);
            let mut from_dense = Vec::new();
            s.extract(grid, &dense, &mut from_dense);
            assert_eq!(from_padded, from_dense, "{s:?}");
            assert_eq!(from_dense.len(), s.shape(grid).iter().product::<usize>());
        }
        // A snapshot buffer of the wrong length is an error, not a panic or a silent remainder.
        let two = [Section::Xz { iy: 0 }, Section::Xy { iz: 1 }];
        for len in [9 * 37 + 5 * 37 - 1, 9 * 37 + 5 * 37 + 1] {
            let err = for_each_section(&two, grid, &mut vec![0.0; len], |_, _| Ok(())).unwrap_err();
            assert!(err.to_string().contains("snapshot buffer"), "{err}");
        }
        let mut lens = Vec::new();
        for_each_section(&two, grid, &mut [0.0; 9 * 37 + 5 * 37], |s, part| {
            lens.push((*s, part.len()));
            Ok(())
        })
        .unwrap();
        assert_eq!(lens, [(two[0], 9 * 37), (two[1], 5 * 37)]);
        // The yz-plane at x = 36, point (iy = 2, iz = 7): dense index (7 * 5 + 2) * 37 + 36.
        let mut yz = Vec::new();
        Section::Yz { ix: 36 }.extract(grid, &dense, &mut yz);
        assert_eq!(yz[7 * 5 + 2], ((7 * 5 + 2) * 37 + 36) as f32);
    }

    #[test]
    fn rows_start_aligned_and_halo_fits() {
        for halo in 1..=8 {
            for nx in [1, 7, 31, 32, 33, 67, 512] {
                let l = Layout::new([nx, 5, 3], halo);
                assert_eq!(l.row(0, 0) % ROW_ALIGN, 0);
                assert_eq!(l.pitch % ROW_ALIGN, 0);
                assert!(l.x_offset >= halo);
                assert!(l.pitch >= l.x_offset + nx + halo);
                assert_eq!(l.index(-(halo as isize), -(halo as isize), -(halo as isize)), l.x_offset - halo);
            }
        }
    }

    #[test]
    fn scatter_gather_round_trip() {
        let l = Layout::new([5, 4, 3], 2);
        let dense: Vec<f32> = (0..l.points()).map(|i| i as f32).collect();
        let mut field = vec![0.0; l.len()];
        l.scatter(&dense, &mut field);
        assert_eq!(field[l.index(1, 2, 1)], dense[(4 + 2) * 5 + 1]);
        let mut back = vec![0.0; l.points()];
        l.gather(&field, &mut back);
        assert_eq!(back, dense);
    }
}
