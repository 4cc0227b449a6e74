//! Where the CPU fields lie and who sweeps what: the padded layout ([`cpu_layout`]), the y tiles
//! sized to the L2 cache, the z task ranges of equal work, first-touch allocation and the
//! disjoint writable parts ([`Parts`]) the sweep's tasks share.

use super::{FIELD_ALIGN, Field, Real};
use crate::grid::Layout;
use rayon::prelude::*;
use std::sync::OnceLock;

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
pub(super) fn plane_padding(plane_bytes: usize, elem: usize) -> usize {
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
/// left to p^{n-1}, c^2 dt^2 and the CPML arrays streaming through.
fn tile_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| l2_bytes() / 2)
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

/// Row ranges that split 0..ny so that 2R + 1 planes of one range take about [`tile_bytes`] (the
/// z-neighbours a row reads then come from L2), none thinner than the CPML layer `width`. Any
/// split computes the same bits (a layer row reads only p^n and the previous step's psi); the
/// floor is a speed choice: thinner tiles run slower on marmousi.toml (docs/design/cpu.md).
pub(super) fn y_tiles(layout: &Layout, width: usize, elem: usize) -> Vec<(usize, usize)> {
    let window = (2 * layout.halo + 1) * layout.pitch * elem;
    y_split(layout.ny, width, tile_bytes() / window)
}

/// 0..ny in ranges of about `rows` rows, none thinner than `width`.
pub(super) fn y_split(ny: usize, width: usize, rows: usize) -> Vec<(usize, usize)> {
    let tiles = ny.div_ceil(rows.max(1)).min(ny / width.max(1)).max(1);
    (0..tiles).map(|k| (k * ny / tiles, (k + 1) * ny / tiles)).collect()
}

/// Contiguous ranges of 0..nz, at most `tasks` of them, none empty, of about equal total weight.
pub(super) fn partition(nz: usize, tasks: usize, weight: impl Fn(usize) -> f64) -> Vec<(usize, usize)> {
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

/// A zeroed padded field whose pages are first written by the task ranges of `chunks` (halo planes
/// going with the first and last range), as the sweep later writes them: on a NUMA machine the
/// pages then sit in the memory of the socket that sweeps them, and no step pays page faults.
pub(super) fn first_touch<T: Real>(layout: &Layout, chunks: &[(usize, usize)]) -> Field<T> {
    first_touch_in(layout.len(), task_ends(layout, chunks))
}

/// Where each task range of `chunks` but the last ends in a field of `layout` (halo planes going
/// with the first and last range).
pub(super) fn task_ends<'a>(layout: &'a Layout, chunks: &'a [(usize, usize)]) -> impl Iterator<Item = usize> + 'a {
    chunks[..chunks.len() - 1].iter().map(|&(_, z1)| (z1 + layout.halo) * layout.plane)
}

/// `v` cut at `ends` (increasing, within `v`): the pieces in order, covering all of it.
pub(super) fn split_at_ends<U>(v: &mut [U], ends: impl Iterator<Item = usize>) -> Vec<&mut [U]> {
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
pub(super) fn first_touch_in<T: Real>(len: usize, ends: impl Iterator<Item = usize>) -> Field<T> {
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
pub(super) struct Parts<T> {
    pub(super) ptr: *mut T,
    pub(super) len: usize,
}

// SAFETY: Parts hands out element ranges only through its unsafe accessors, whose callers keep
// the ranges of concurrent tasks disjoint.
unsafe impl<T: Send> Send for Parts<T> {}
unsafe impl<T: Send> Sync for Parts<T> {}

impl<T> Parts<T> {
    pub(super) fn new(v: &mut [T]) -> Self {
        Parts { ptr: v.as_mut_ptr(), len: v.len() }
    }

    /// Elements [at, at + n), writable.
    /// SAFETY: nothing else reads or writes them while the slice lives.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn get(&self, at: usize, n: usize) -> &mut [T] {
        assert!(at + n <= self.len);
        // SAFETY: in bounds (checked); exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), n) }
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
