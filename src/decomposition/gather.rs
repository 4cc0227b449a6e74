//! Bringing a decomposed run's results to rank 0 in the single-domain layout: the owned blocks of
//! volumes joined into whole planes ([`SlabJoin`]), and every rank's points of the plane sections
//! laid out as one snapshot.

use super::{Decomposition, Domain};
use crate::grid::Section;
use anyhow::{Result, ensure};

/// Joins the owned blocks of y-z blocks into whole planes: the ranks of a z-slab come one after
/// the other (rank order), and once the slab's last one has, its planes go on whole. With z-slabs
/// alone each block is its slab's planes.
pub struct SlabJoin<'a> {
    d: &'a Decomposition,
    nx: usize,
    planes: Vec<f32>,
}

impl<'a> SlabJoin<'a> {
    pub fn new(d: &'a Decomposition, nx: usize) -> SlabJoin<'a> {
        SlabJoin { d, nx, planes: Vec::new() }
    }

    /// Rank `rank`'s owned block (planes, rows, nx); the slab's first plane and its planes once
    /// the slab is complete.
    pub fn push(&mut self, rank: usize, block: Vec<f32>) -> Result<Option<(usize, Vec<f32>)>> {
        let d = self.d;
        let ((z0, z1), (y0, y1)) = (d.planes_of(rank), d.rows_of(rank));
        let (planes, rows) = (z1 - z0, y1 - y0);
        ensure!(block.len() == planes * rows * self.nx, "rank {rank} sent {} values for its block", block.len());
        if !d.blocks() {
            return Ok(Some((z0, block)));
        }
        let line = d.ny * self.nx;
        self.planes.resize(planes * line, 0.0);
        for (k, part) in block.chunks_exact(rows * self.nx).enumerate() {
            self.planes[k * line + y0 * self.nx..k * line + y1 * self.nx].copy_from_slice(part);
        }
        if d.y_neighbours(rank).1.is_some() {
            return Ok(None);
        }
        Ok(Some((z0, std::mem::take(&mut self.planes))))
    }
}

/// The owned planes and rows of `section` a rank contributes to the gathered parts ((z range, y
/// range) of the section's points, whose x extent is the section's own): the plane sections it
/// crosses, none of a volume (which comes by itself).
fn part_extent(section: &Section, d: &Decomposition, rank: usize) -> Option<((usize, usize), (usize, usize))> {
    let ((z0, z1), (y0, y1)) = (d.planes_of(rank), d.rows_of(rank));
    match *section {
        Section::Volume => None,
        Section::Xz { iy } => (y0..y1).contains(&iy).then_some(((z0, z1), (iy, iy + 1))),
        Section::Yz { .. } => Some(((z0, z1), (y0, y1))),
        Section::Xy { iz } => (z0..z1).contains(&iz).then_some(((iz, iz + 1), (y0, y1))),
    }
}

/// This subdomain's owned block of p^n, dense (planes, rows, nx).
pub(super) fn owned_block(dom: &mut Domain) -> Result<Vec<f32>> {
    let l = dom.sub.problem.layout;
    let planes = dom.sub.owned.1 - dom.sub.owned.0;
    let mut out = vec![0.0; planes * l.nx * l.ny];
    dom.backend.planes_out(dom.sub.owned_local(), planes, &mut out)?;
    let (y0, rows) = (dom.sub.owned_rows_local(), dom.sub.owned_rows.1 - dom.sub.owned_rows.0);
    if rows == l.ny {
        return Ok(out);
    }
    let mut block = Vec::with_capacity(planes * rows * l.nx);
    for plane in out.chunks_exact(l.ny * l.nx) {
        block.extend_from_slice(&plane[y0 * l.nx..(y0 + rows) * l.nx]);
    }
    Ok(block)
}

/// This subdomain's owned points of every plane section (volumes go by [`owned_block`]), one
/// section after the other, each (planes, rows, points along x or 1).
pub(super) fn snapshot_part(dom: &mut Domain, sections: &[Section]) -> Result<Vec<f32>> {
    let sub = &dom.sub;
    let l = sub.problem.layout;
    let grid = [l.nx, l.ny, l.nz];
    let (own, planes) = (sub.owned_local(), sub.owned.1 - sub.owned.0);
    let (own_y, rows) = (sub.owned_rows_local(), sub.owned_rows.1 - sub.owned_rows.0);
    let mut out = Vec::new();
    let mut local = Vec::new();
    for s in sections {
        // The local section (None where this rank has none of it) and its rows per plane.
        let (local_section, per_row) = match *s {
            Section::Volume => continue,
            Section::Xz { iy } if (sub.owned_rows.0..sub.owned_rows.1).contains(&iy) => {
                (Section::Xz { iy: iy - sub.first_row }, l.nx)
            }
            Section::Yz { ix } => (Section::Yz { ix }, 1),
            Section::Xy { iz } if (sub.owned.0..sub.owned.1).contains(&iz) => {
                (Section::Xy { iz: iz - sub.first }, l.nx)
            }
            _ => continue,
        };
        local.resize(local_section.len(grid), 0.0);
        dom.backend.snapshot_sections(std::slice::from_ref(&local_section), &mut local)?;
        match local_section {
            Section::Xz { .. } => out.extend_from_slice(&local[own * l.nx..(own + planes) * l.nx]),
            Section::Yz { .. } => {
                for z in own..own + planes {
                    out.extend_from_slice(&local[z * l.ny + own_y..z * l.ny + own_y + rows]);
                }
            }
            _ => out.extend_from_slice(&local[own_y * per_row..(own_y + rows) * per_row]),
        }
    }
    Ok(out)
}

/// Every rank's parts (from [`snapshot_part`], rank order) laid out as one single-domain snapshot,
/// stepping over the volumes' places in `out` where it has them (`volumes_in_out`).
pub(super) fn assemble(
    d: &Decomposition,
    sections: &[Section],
    grid: [usize; 3],
    parts: &[Vec<f32>],
    out: &mut [f32],
    volumes_in_out: bool,
) -> Result<()> {
    ensure!(parts.len() == d.ranks(), "{} snapshot parts for {} ranks", parts.len(), d.ranks());
    let mut offsets = vec![0usize; parts.len()];
    let mut at = 0;
    for s in sections {
        if *s == Section::Volume {
            at += if volumes_in_out { s.len(grid) } else { 0 };
            continue;
        }
        // The section's layout: (z or y, then y or x), `line` points along its second axis.
        let line = if matches!(s, Section::Yz { .. }) { grid[1] } else { grid[0] };
        for (rank, part) in parts.iter().enumerate() {
            let Some(((z0, z1), (y0, y1))) = part_extent(s, d, rank) else { continue };
            let (planes, rows) = (z1 - z0, y1 - y0);
            let n = planes * rows * if matches!(s, Section::Yz { .. }) { 1 } else { grid[0] };
            ensure!(offsets[rank] + n <= part.len(), "snapshot part of rank {rank} too short");
            let part = &part[offsets[rank]..offsets[rank] + n];
            offsets[rank] += n;
            match *s {
                Section::Xz { .. } => out[at + z0 * line..at + z1 * line].copy_from_slice(part),
                Section::Yz { .. } => {
                    for (k, p) in part.chunks_exact(rows).enumerate() {
                        let o = at + (z0 + k) * line + y0;
                        out[o..o + rows].copy_from_slice(p);
                    }
                }
                _ => out[at + y0 * line..at + y1 * line].copy_from_slice(part),
            }
        }
        at += s.len(grid);
    }
    ensure!(at == out.len(), "snapshot of {} values assembled from {at}", out.len());
    Ok(())
}
