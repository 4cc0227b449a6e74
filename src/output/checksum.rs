//! Checksums of a result file's datasets, so that a damaged file is told from a complete one: the
//! CRC-32 (IEEE, as zlib's `crc32`) of each dataset's values as little-endian bytes in the
//! dataset's row-major order. The writer computes them as the values go in (it sees every byte,
//! in whatever order the parts arrive) and lists them in the root attribute `checksums`, one line
//! per dataset: `crc32 <8 hex digits> <bytes> <path>`. [`verify`] reads every listed dataset
//! back and compares.

use anyhow::{Context, Result, anyhow, bail, ensure};
use rust_hdf5::H5File;

/// One dataset's checksum and length, as listed in the root attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Dataset path without the leading slash, e.g. "model/vp".
    pub path: String,
    pub crc32: u32,
    pub bytes: u64,
}

/// The checksum of a dataset written in parts: its values cut into equal units (whole planes of
/// its two fastest axes), each unit's CRC kept until the end and then combined in order, so that
/// parts may come in any order (snapshots, a decomposed run's slabs) and a unit written again
/// counts once, as the file holds it.
pub struct PartsCrc {
    path: String,
    unit_bytes: usize,
    units: Vec<Option<crc32fast::Hasher>>,
}

impl PartsCrc {
    /// A dataset of `units` units of `unit_bytes` bytes each.
    pub fn new(path: &str, units: usize, unit_bytes: usize) -> PartsCrc {
        PartsCrc { path: path.to_string(), unit_bytes, units: vec![None; units] }
    }

    /// Units `first..` of the dataset, as bytes (whole units).
    pub fn add(&mut self, first: usize, bytes: &[u8]) -> Result<()> {
        let unit = self.unit_bytes.max(1);
        ensure!(bytes.len().is_multiple_of(unit), "{}: a part of {} bytes is not whole units", self.path, bytes.len());
        let n = bytes.len() / unit;
        ensure!(first + n <= self.units.len(), "{}: units {first}..{} of {}", self.path, first + n, self.units.len());
        for (k, chunk) in bytes.chunks(unit).enumerate() {
            let mut h = crc32fast::Hasher::new();
            h.update(chunk);
            self.units[first + k] = Some(h);
        }
        Ok(())
    }

    /// The dataset's checksum; an error names the first unit never written.
    pub fn finish(self) -> Result<Entry> {
        let mut all = crc32fast::Hasher::new();
        for (k, u) in self.units.iter().enumerate() {
            let u = u.as_ref().ok_or_else(|| anyhow!("{}: part {k} was never written", self.path))?;
            all.combine(u);
        }
        Ok(Entry { path: self.path, bytes: all.total_len(), crc32: all.finalize() })
    }
}

/// The checksum of a dataset written in one piece.
pub fn whole(path: &str, bytes: &[u8]) -> Entry {
    Entry { path: path.to_string(), crc32: crc32fast::hash(bytes), bytes: bytes.len() as u64 }
}

/// The bytes of numeric values as the file stores them (little-endian: the writer runs on
/// little-endian hosts only, see the compile-time check below).
pub fn bytes_of<T: bytemuck::Pod>(values: &[T]) -> &[u8] {
    bytemuck::cast_slice(values)
}

// The checksums are of the values' little-endian bytes, taken from memory as they are.
const _: () = assert!(cfg!(target_endian = "little"), "result files are written on little-endian hosts");

/// The root attribute's text for `entries`.
pub fn listing(entries: &[Entry]) -> String {
    entries.iter().map(|e| format!("crc32 {:08x} {} {}\n", e.crc32, e.bytes, e.path)).collect()
}

/// Reads a listing written by [`listing`].
pub fn parse(text: &str) -> Result<Vec<Entry>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut w = line.splitn(4, ' ');
            let (kind, crc, bytes, path) = (w.next(), w.next(), w.next(), w.next());
            match (kind, crc, bytes, path) {
                (Some("crc32"), Some(crc), Some(bytes), Some(path)) => Ok(Entry {
                    path: path.to_string(),
                    crc32: u32::from_str_radix(crc, 16).with_context(|| format!("checksum line {line:?}"))?,
                    bytes: bytes.parse().with_context(|| format!("checksum line {line:?}"))?,
                }),
                _ => bail!("checksum line {line:?} is not `crc32 <hex> <bytes> <path>`"),
            }
        })
        .collect()
}

/// Recomputes every checksum listed in `file`'s root attribute `checksums`; an error names the
/// first dataset that differs (or the missing listing: a file not finished, or written before
/// checksums were).
pub fn verify(file: &H5File) -> Result<usize> {
    let text = file.attr_string("checksums").map_err(|e| anyhow!("no dataset checksums (root attribute: {e})"))?;
    let entries = parse(&text)?;
    let model = file.dataset("model/vp").is_ok();
    ensure!(!model || entries.iter().any(|e| e.path == "model/vp"), "the checksum list does not cover /model/vp");
    for e in &entries {
        let ds = file.dataset(&e.path).map_err(|err| anyhow!("/{}: {err}", e.path))?;
        let shape = ds.shape();
        let mut h = crc32fast::Hasher::new();
        if shape.len() >= 3 && ds.element_size() == 4 {
            // Large f32 datasets one leading index at a time, so that no whole series is read at once.
            let mut counts = shape.clone();
            counts[0] = 1;
            for i in 0..shape[0] {
                let mut starts = vec![0; shape.len()];
                starts[0] = i;
                let part: Vec<f32> = ds.read_slice(&starts, &counts).map_err(|err| anyhow!("/{}: {err}", e.path))?;
                h.update(bytes_of(&part));
            }
        } else {
            h.update(&ds.read_raw_bytes().map_err(|err| anyhow!("/{}: {err}", e.path))?);
        }
        let (bytes, crc) = (h.total_len(), h.finalize());
        ensure!(
            bytes == e.bytes && crc == e.crc32,
            "/{}: {bytes} bytes with CRC-32 {crc:08x}, the writer recorded {} bytes with {:08x}",
            e.path,
            e.bytes,
            e.crc32
        );
    }
    Ok(entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_in_any_order_give_the_whole_crc() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(64 * 5).collect();
        let mut parts = PartsCrc::new("x", 5, 64);
        parts.add(3, &bytes[192..320]).unwrap();
        parts.add(0, &bytes[..64]).unwrap();
        parts.add(1, &bytes[64..192]).unwrap();
        assert_eq!(parts.finish().unwrap(), whole("x", &bytes));
        let mut missing = PartsCrc::new("y", 2, 4);
        missing.add(0, &[1, 2, 3, 4]).unwrap();
        assert!(missing.finish().unwrap_err().to_string().contains("part 1"));
        let e = whole("model/vp", b"123456789");
        assert_eq!(e.crc32, 0xcbf4_3926, "the standard CRC-32 check value");
        assert_eq!(parse(&listing(&[e.clone(), whole("a b", b"")])).unwrap(), [e, whole("a b", b"")]);
    }
}
