//! The model's part of the run grid's fields: with absorbing layers outside the model
//! ([`crate::config::Placement::Outside`]) the result file covers the model only, so snapshots
//! and the velocity are cut to it on the host, where they are written (the devices keep the
//! whole run grid).

use crate::config::ModelRegion;
use crate::grid::Section;
use anyhow::{Result, ensure};
use std::ops::Range;

/// A plane section's model rows and columns, and its rows' length on the run grid; None for the
/// volume.
fn window(region: &ModelRegion, section: &Section) -> Option<(Range<usize>, Range<usize>, usize)> {
    let [nx, ny, _] = region.run_shape;
    let r = |a| region.run_range(a);
    match section {
        Section::Volume => None,
        Section::Xz { .. } => Some((r(2), r(0), nx)),
        Section::Xy { .. } => Some((r(1), r(0), nx)),
        Section::Yz { .. } => Some((r(2), r(1), ny)),
    }
}

/// The model's part of `part`, one snapshot of `section` on the run grid, into `out` (cleared
/// first): the section's shape on the model's grid.
pub fn section(region: &ModelRegion, section: &Section, part: &[f32], out: &mut Vec<f32>) -> Result<()> {
    ensure!(part.len() == section.len(region.run_shape), "a {section:?} of {} values", part.len());
    match window(region, section) {
        Some((rows, columns, row_len)) => {
            out.clear();
            for r in rows {
                out.extend_from_slice(&part[r * row_len + columns.start..r * row_len + columns.end]);
            }
            Ok(())
        }
        None => planes(region, 0, part, out).map(|_| ()),
    }
}

/// The model's part of the run grid's z-planes from `first` on (`values`, dense (planes, ny,
/// nx)) into `out` (cleared first), and the model's index of its first plane; None when none of
/// the planes is the model's.
pub fn planes(region: &ModelRegion, first: usize, values: &[f32], out: &mut Vec<f32>) -> Result<Option<usize>> {
    let [nx, ny, _] = region.run_shape;
    let plane = nx * ny;
    ensure!(values.len().is_multiple_of(plane.max(1)), "{} values are no whole planes of {nx} x {ny}", values.len());
    let (zs, ys, xs) = (region.run_range(2), region.run_range(1), region.run_range(0));
    let (lo, hi) = (first.max(zs.start), (first + values.len() / plane.max(1)).min(zs.end));
    out.clear();
    if lo >= hi {
        return Ok(None);
    }
    for z in lo..hi {
        for y in ys.clone() {
            let row = ((z - first) * ny + y) * nx;
            out.extend_from_slice(&values[row + xs.start..row + xs.end]);
        }
    }
    Ok(Some(lo - zs.start))
}

/// [`section`] where the model does not fill the run grid (the cut in `out`), else `part` itself.
pub fn model_section<'a>(
    region: &ModelRegion,
    s: &Section,
    part: &'a [f32],
    out: &'a mut Vec<f32>,
) -> Result<&'a [f32]> {
    if region.is_whole() {
        return Ok(part);
    }
    section(region, s, part, out)?;
    Ok(out)
}

/// [`planes`] where the model does not fill the run grid (the cut in `out`), else `first` and
/// `values` themselves: the model's first plane and its planes, None when none is the model's.
pub fn model_planes<'a>(
    region: &ModelRegion,
    first: usize,
    values: &'a [f32],
    out: &'a mut Vec<f32>,
) -> Result<Option<(usize, &'a [f32])>> {
    if region.is_whole() {
        return Ok(Some((first, values)));
    }
    Ok(planes(region, first, values, out)?.map(|first| (first, &out[..])))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2 x 3 x 2 model in a run grid of 5 x 4 x 3 (layers of 1 before x, y and z; 2 after x).
    fn region() -> ModelRegion {
        ModelRegion { first: [1, 1, 1], shape: [2, 3, 2], origin: [0.0; 3], run_shape: [5, 4, 3] }
    }

    /// The run grid's values, each its own (x, y, z) as 100 z + 10 y + x.
    fn field() -> Vec<f32> {
        (0..3).flat_map(|z| (0..4).flat_map(move |y| (0..5).map(move |x| (100 * z + 10 * y + x) as f32))).collect()
    }

    #[test]
    fn sections_keep_the_model_points_only() {
        let (r, f, mut out) = (region(), field(), Vec::new());
        section(&r, &Section::Volume, &f, &mut out).unwrap();
        let model: Vec<f32> =
            (1..3).flat_map(|z| (1..4).flat_map(move |y| (1..3).map(move |x| (100 * z + 10 * y + x) as f32))).collect();
        assert_eq!(out, model);
        let mut plane = Vec::new();
        for (s, expect) in [
            (Section::Xz { iy: 2 }, vec![121.0, 122.0, 221.0, 222.0]),
            (Section::Xy { iz: 1 }, vec![111.0, 112.0, 121.0, 122.0, 131.0, 132.0]),
            (Section::Yz { ix: 1 }, vec![111.0, 121.0, 131.0, 211.0, 221.0, 231.0]),
        ] {
            s.extract(r.run_shape, &f, &mut plane);
            section(&r, &s, &plane, &mut out).unwrap();
            assert_eq!(out, expect, "{s:?}");
            assert_eq!(out.len(), s.len(r.shape));
        }
        assert!(section(&r, &Section::Xz { iy: 0 }, &f[..7], &mut out).is_err());
    }

    #[test]
    fn slabs_keep_their_model_planes() {
        let (r, f, mut out) = (region(), field(), Vec::new());
        // The top layer's plane alone holds none of the model.
        assert_eq!(planes(&r, 0, &f[..20], &mut out).unwrap(), None);
        assert!(out.is_empty());
        // Run planes 1.. are the model's planes 0..
        assert_eq!(planes(&r, 1, &f[20..], &mut out).unwrap(), Some(0));
        assert_eq!(out[..2], [111.0, 112.0]);
        assert_eq!(planes(&r, 2, &f[40..], &mut out).unwrap(), Some(1));
        assert_eq!(out, [211.0, 212.0, 221.0, 222.0, 231.0, 232.0]);
        assert!(planes(&r, 0, &f[..21], &mut out).is_err());
    }
}
