//! Gridded velocity models stored as SEG-Y (`format = "segy"`): one trace per horizontal grid
//! point, its samples down in depth, as the public models (Marmousi2, SEAM, BP 2004, Overthrust)
//! ship.
//!
//! Read: revisions 0, 1 and 2; big- or little-endian (told by the binary header's format code and,
//! in rev 2, its byte-order constant); samples as IBM or IEEE floats (format codes 1, 5) or
//! integers (2, 3, 8); extended textual headers skipped. The traces' places come from their
//! headers: inline and crossline numbers (bytes 189-192, 193-196, rev 1 and later), else the
//! coordinates (CDP x, y at 181-188, else source x, y at 73-80, with the scalar of 71-72), else the
//! file order (`shape` in the input then says how traces fill the grid). Inlines run along y and
//! crosslines along x (`axis_order = "yxz"`; `"xyz"` swaps them; `"xz"` for a single line).
//! Horizontal spacings come from the coordinates, the depth step from the sample interval (its
//! microseconds read as millimetres: 1250 is 1.25 m, as depth models store it), unless `spacing`
//! gives them. Every trace must be there once, on an evenly numbered grid; errors say which is not.

use super::file::{FileSpec, sha256_of};
use super::volume::{VelocityVolume, parse_axis_order};
use anyhow::{Context, Result, bail, ensure};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;

/// Converts an IBM System/360 single-precision float (its bits, already in host order).
pub fn ibm_to_f32(bits: u32) -> f32 {
    let sign = if bits >> 31 == 1 { -1.0 } else { 1.0 };
    let exponent = ((bits >> 24) & 0x7f) as i32 - 64;
    let fraction = (bits & 0x00ff_ffff) as f64 / (1u32 << 24) as f64;
    (sign * fraction * 16f64.powi(exponent)) as f32
}

/// What the binary header says about the traces.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub big_endian: bool,
    pub revision: u8,
    /// Data sample format code (1, 2, 3, 5 or 8).
    pub format: u16,
    pub samples: usize,
    /// Sample interval as stored (µs for time data), from the rev-2 double where it is set.
    pub interval: f64,
    /// Byte offset of the first trace header.
    pub first_trace: u64,
    pub traces: usize,
}

impl Layout {
    pub(crate) fn sample_bytes(&self) -> usize {
        match self.format {
            3 => 2,
            8 => 1,
            _ => 4,
        }
    }

    pub(crate) fn trace_bytes(&self) -> u64 {
        240 + (self.samples * self.sample_bytes()) as u64
    }

    pub(crate) fn u16_at(&self, b: &[u8], pos: usize) -> u16 {
        let v = [b[pos - 1], b[pos]];
        if self.big_endian { u16::from_be_bytes(v) } else { u16::from_le_bytes(v) }
    }

    pub(crate) fn i16_at(&self, b: &[u8], pos: usize) -> i16 {
        self.u16_at(b, pos) as i16
    }

    pub(crate) fn u32_at(&self, b: &[u8], pos: usize) -> u32 {
        let v = b[pos - 1..pos + 3].try_into().expect("4 bytes");
        if self.big_endian { u32::from_be_bytes(v) } else { u32::from_le_bytes(v) }
    }

    pub(crate) fn i32_at(&self, b: &[u8], pos: usize) -> i32 {
        self.u32_at(b, pos) as i32
    }

    /// Sample `k` of a trace's data bytes.
    pub(crate) fn sample(&self, data: &[u8], k: usize) -> f32 {
        match self.format {
            1 => ibm_to_f32(self.u32_at(data, 4 * k + 1)),
            2 => self.i32_at(data, 4 * k + 1) as f32,
            3 => self.i16_at(data, 2 * k + 1) as f32,
            8 => data[k] as i8 as f32,
            _ => f32::from_bits(self.u32_at(data, 4 * k + 1)),
        }
    }

    /// Reads the textual and binary headers of `f` (of `len` bytes) and checks the file holds a
    /// whole number of fixed-length traces.
    pub fn read(f: &mut File, len: u64, file: &Path) -> Result<Layout> {
        let name = file.display();
        ensure!(len >= 3600, "{name}: {len} bytes, too short for SEG-Y's 3600 bytes of file headers");
        let mut head = [0u8; 3600];
        f.read_exact(&mut head).with_context(|| format!("cannot read {name}"))?;
        let b = &head[3200..];
        let at = |p: usize| p - 3200;
        // The format code is small in the file's byte order: that order is the file's.
        let code_be = u16::from_be_bytes([b[at(3225) - 1], b[at(3225)]]);
        let code_le = u16::from_le_bytes([b[at(3225) - 1], b[at(3225)]]);
        let order = u32::from_be_bytes(b[at(3297) - 1..at(3297) + 3].try_into().expect("4 bytes"));
        let big_endian = match order {
            0x0102_0304 => true,
            0x0403_0201 => false,
            _ if (1..=16).contains(&code_be) => true,
            _ if (1..=16).contains(&code_le) => false,
            _ => bail!(
                "{name} is not a SEG-Y file: its binary header's format code (bytes 3225-3226) is {code_be} read \
                 big-endian and {code_le} little-endian, expected 1 to 16"
            ),
        };
        let mut l =
            Layout { big_endian, revision: 0, format: 0, samples: 0, interval: 0.0, first_trace: 3600, traces: 0 };
        l.format = l.u16_at(b, at(3225));
        ensure!(
            matches!(l.format, 1 | 2 | 3 | 5 | 8),
            "{name}: SEG-Y sample format code {} is not read here; codes 1 (IBM float), 5 (IEEE float), 2, 3 and 8 \
             (integers) are",
            l.format
        );
        // Rev 2 writes the major revision in byte 3501 whatever the byte order; rev 1 a 16-bit 0x0100.
        l.revision = if big_endian { b[at(3501) - 1] } else { b[at(3501) - 1].max(b[at(3501)]) };
        l.samples = l.u16_at(b, at(3221)) as usize;
        l.interval = l.u16_at(b, at(3217)) as f64;
        if l.revision >= 2 {
            if l.samples == 0 {
                l.samples = l.u32_at(b, at(3269)) as usize;
            }
            let bits = u64::from_be_bytes(b[at(3273) - 1..at(3273) + 7].try_into().expect("8 bytes"));
            let exact = if big_endian { f64::from_bits(bits) } else { f64::from_bits(bits.swap_bytes()) };
            if exact.is_finite() && exact > 0.0 {
                l.interval = exact;
            }
            let offset = u64::from_be_bytes(b[at(3521) - 1..at(3521) + 7].try_into().expect("8 bytes"));
            let offset = if big_endian { offset } else { offset.swap_bytes() };
            if offset >= 3600 {
                l.first_trace = offset;
            }
        }
        if l.revision >= 1 && l.first_trace == 3600 {
            let extended = l.i16_at(b, at(3505));
            ensure!(
                extended >= 0,
                "{name}: a variable number of extended textual headers (bytes 3505-3506 = {extended}) is not read here"
            );
            l.first_trace += 3200 * extended as u64;
        }
        if l.samples == 0 && len >= l.first_trace + 240 {
            // Rev 0 files may give the count in the trace header only (bytes 115-116).
            let mut h = [0u8; 240];
            f.seek(SeekFrom::Start(l.first_trace)).with_context(|| format!("cannot read {name}"))?;
            f.read_exact(&mut h).with_context(|| format!("cannot read {name}"))?;
            l.samples = l.u16_at(&h, 115) as usize;
        }
        ensure!(l.samples > 0, "{name}: the SEG-Y headers give 0 samples per trace");
        let body = len.saturating_sub(l.first_trace);
        ensure!(
            len > l.first_trace && body.is_multiple_of(l.trace_bytes()),
            "{name}: {body} bytes of traces are not a whole number of traces of {} samples ({} bytes each with its \
             header): the file is truncated or its traces differ in length",
            l.samples,
            l.trace_bytes()
        );
        l.traces = (body / l.trace_bytes()) as usize;
        Ok(l)
    }
}

/// Where each trace goes: the model's axes, shape and spacing (slowest first, z last), and per
/// trace (in file order) its index among the horizontal grid points (slowest first).
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub axes: Vec<usize>,
    pub shape: Vec<usize>,
    pub spacing: Vec<f64>,
    pub slot: Vec<usize>,
}

/// A trace header's numbers that place it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TracePlace {
    pub inline: i32,
    pub crossline: i32,
    /// Coordinates (m), scalar applied.
    pub x: f64,
    pub y: f64,
}

fn read_places(f: &mut File, l: &Layout, name: &str) -> Result<Vec<TracePlace>> {
    let mut r = BufReader::new(f);
    r.seek(SeekFrom::Start(l.first_trace)).with_context(|| format!("cannot read {name}"))?;
    let skip = (l.trace_bytes() - 240) as i64;
    let mut places = Vec::with_capacity(l.traces);
    let mut h = [0u8; 240];
    for t in 0..l.traces {
        r.read_exact(&mut h).with_context(|| format!("cannot read {name}"))?;
        let n = l.u16_at(&h, 115) as usize;
        ensure!(
            n == 0 || n == l.samples || l.samples > u16::MAX as usize,
            "{name}: trace {} has {n} samples (bytes 115-116), the binary header {}: traces of different lengths are \
             not read here",
            t + 1,
            l.samples
        );
        // A negative scalar divides (dividing keeps 1250 / 100 exactly 12.5), a positive multiplies.
        let scalar = l.i16_at(&h, 71);
        let scaled = |v: i32| match scalar {
            0 => v as f64,
            s if s < 0 => v as f64 / -(s as f64),
            s => v as f64 * s as f64,
        };
        let (mut x, mut y) = (l.i32_at(&h, 181), l.i32_at(&h, 185));
        if (x, y) == (0, 0) || l.revision == 0 {
            (x, y) = (l.i32_at(&h, 73), l.i32_at(&h, 77));
        }
        let (inline, crossline) = if l.revision >= 1 { (l.i32_at(&h, 189), l.i32_at(&h, 193)) } else { (0, 0) };
        places.push(TracePlace { inline, crossline, x: scaled(x), y: scaled(y) });
        r.seek_relative(skip).with_context(|| format!("cannot read {name}"))?;
    }
    Ok(places)
}

/// The distinct values of `v` in order, checked to be evenly spaced (`what` names them).
fn even(v: impl Iterator<Item = f64>, what: &str, name: &str) -> Result<Vec<f64>> {
    let mut d: Vec<f64> = v.collect();
    d.sort_by(f64::total_cmp);
    let tol = 1e-6 * d.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    d.dedup_by(|a, b| (*a - *b).abs() <= tol);
    if d.len() > 2 {
        let step = d[1] - d[0];
        if let Some(w) = d.windows(2).find(|w| ((w[1] - w[0]) - step).abs() > tol.max(1e-6 * step)) {
            bail!(
                "{name}: the traces' {what} are not evenly spaced ({} then {} after a step of {step}): an irregular \
                 grid or missing lines; SEG-Y models must be regular grids",
                w[0],
                w[1]
            );
        }
    }
    Ok(d)
}

/// Places every trace of the file from its headers (`places`) or the file order, as [`Placement`].
pub fn place(spec: &FileSpec, l: &Layout, places: &[TracePlace]) -> Result<Placement> {
    let (key, name) = (spec.key, spec.path.display().to_string());
    let numbered = places.iter().any(|p| p.inline != 0 || p.crossline != 0);
    let located = places.iter().any(|p| (p.x, p.y) != (places[0].x, places[0].y));
    // (line, place in line) of each trace, as numbers: inline/crossline, else y/x.
    let keys: Option<Vec<(f64, f64)>> = if numbered {
        Some(places.iter().map(|p| (p.inline as f64, p.crossline as f64)).collect())
    } else if located {
        Some(places.iter().map(|p| (p.y, p.x)).collect())
    } else {
        None
    };
    let what = if numbered { ["inline numbers", "crossline numbers"] } else { ["y coordinates", "x coordinates"] };
    let (lines, per_line, slot) = match &keys {
        Some(keys) => {
            let a = even(keys.iter().map(|k| k.0), what[0], &name)?;
            let b = even(keys.iter().map(|k| k.1), what[1], &name)?;
            let index = |v: &[f64], x: f64| v.partition_point(|&u| u < x - 1e-6 * x.abs().max(1.0));
            let mut slot = Vec::with_capacity(keys.len());
            let mut seen = BTreeMap::new();
            for (t, k) in keys.iter().enumerate() {
                let s = index(&a, k.0) * b.len() + index(&b, k.1);
                if let Some(first) = seen.insert(s, t) {
                    bail!(
                        "{name}: traces {} and {} both sit at {} {} / {} {}",
                        first + 1,
                        t + 1,
                        what[0],
                        k.0,
                        what[1],
                        k.1
                    );
                }
                slot.push(s);
            }
            if let Some(missing) = (0..a.len() * b.len()).find(|s| !seen.contains_key(s)) {
                bail!(
                    "{name}: {} traces for {} lines of {} ({} x {}): {} missing, the first at {} {} / {} {}; \
                     SEG-Y models must hold every trace of their grid",
                    keys.len(),
                    a.len(),
                    b.len(),
                    what[0],
                    what[1],
                    a.len() * b.len() - keys.len(),
                    what[0],
                    a[missing / b.len()],
                    what[1],
                    b[missing % b.len()]
                );
            }
            (a.len(), b.len(), slot)
        }
        None => {
            // No positions in the headers: the file order, shaped by `shape` where it is given.
            let (lines, per_line) = match spec.shape.len() {
                3 => (spec.shape[0], spec.shape[1]),
                _ => (1, l.traces),
            };
            ensure!(
                lines * per_line == l.traces,
                "{name}: the trace headers place no trace (no inline/crossline numbers or coordinates), and \
                 {key}.shape = {:?} does not hold its {} traces",
                spec.shape,
                l.traces
            );
            (lines, per_line, (0..l.traces).collect())
        }
    };
    let three = lines > 1 && per_line > 1;
    let order = if !spec.axis_order.is_empty() {
        spec.axis_order.to_string()
    } else if three || spec.shape.len() == 3 {
        "yxz".into()
    } else {
        "xz".into()
    };
    let axes = parse_axis_order(&order, &format!("{key}.axis_order"))?;
    ensure!(
        axes.last() == Some(&2),
        "{key}.axis_order = {order:?}: a SEG-Y model's samples are depth, so z comes last (\"yxz\", \"xyz\" or \"xz\")"
    );
    let mut shape = if axes.len() == 3 { vec![lines, per_line] } else { vec![lines * per_line] };
    ensure!(
        axes.len() == 3 || !three,
        "{name}: {lines} lines of {per_line} traces make a 3D model, but {key}.axis_order = {order:?} is 2D"
    );
    shape.push(l.samples);
    if !spec.shape.is_empty() {
        ensure!(
            spec.shape == shape,
            "{name}: the SEG-Y file holds a model of shape {shape:?} (axes {order:?}), but {key}.shape = {:?}",
            spec.shape
        );
    }
    let spacing = if !spec.spacing.is_empty() {
        ensure!(
            spec.spacing.len() == shape.len(),
            "{key}.spacing = {:?} has {} entries, but the model's axes {order:?} are {}",
            spec.spacing,
            spec.spacing.len(),
            shape.len()
        );
        spec.spacing.to_vec()
    } else {
        ensure!(
            located,
            "{name}: the trace headers hold no coordinates to take the horizontal spacing from: give {key}.spacing \
             (in the axes {order:?}, m)"
        );
        // The distance between the first and last trace of a line (and of a column of lines).
        let at = |s: usize| places[slot.iter().position(|&q| q == s).expect("every slot filled")];
        let dist = |a: TracePlace, b: TracePlace, n: usize| (b.x - a.x).hypot(b.y - a.y) / (n - 1).max(1) as f64;
        let along = dist(at(0), at(per_line - 1), per_line);
        let across = dist(at(0), at((lines - 1) * per_line), lines);
        let mut h = if axes.len() == 3 { vec![across, along] } else { vec![along.max(across)] };
        h.push(l.interval / 1000.0);
        h
    };
    for (k, &h) in spacing.iter().enumerate() {
        ensure!(
            h.is_finite() && h > 0.0 || shape[k] == 1 && k + 1 < shape.len(),
            "{name}: spacing {h} m along axis {} of {order:?} (from the headers; give {key}.spacing)",
            &order[k..k + 1]
        );
    }
    // An axis of one trace has no spacing of its own; any positive value serves.
    let spacing = spacing.iter().map(|&h| if h.is_finite() && h > 0.0 { h } else { 1.0 }).collect();
    Ok(Placement { axes, shape, spacing, slot })
}

/// Opens the file, checks its SHA-256 where given, reads its headers and places its traces.
fn open(spec: &FileSpec) -> Result<(File, Layout, Placement)> {
    let name = spec.path.display().to_string();
    let open = || match File::open(spec.path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{}.path: model file {name} does not exist", spec.key)
        }
        Err(e) => bail!("{}.path: model file {name} cannot be read: {e}", spec.key),
    };
    let mut f = open()?;
    let len = f.metadata().with_context(|| format!("cannot read {name}"))?.len();
    if let Some(expected) = spec.sha256 {
        let actual = sha256_of(&mut f).with_context(|| format!("model file {name} cannot be read"))?;
        ensure!(
            actual.eq_ignore_ascii_case(expected.trim()),
            "model file {name} has SHA-256 {actual}, expected {expected}: the file is corrupt, incomplete or a \
             different one"
        );
        f = open()?;
    }
    let layout = Layout::read(&mut f, len, spec.path)?;
    let places = read_places(&mut f, &layout, &name)?;
    let placement = place(spec, &layout, &places)?;
    Ok((f, layout, placement))
}

/// The model's z-axis: samples per trace and the depth step (m).
pub fn z_axis(spec: &FileSpec) -> Result<(usize, f64)> {
    let (_, _, p) = open(spec)?;
    Ok((p.shape[p.shape.len() - 1], p.spacing[p.spacing.len() - 1]))
}

/// Reads the model, keeping the z-indices (samples) `held_z` of every trace (all where None); every
/// value is checked (finite, positive, in range once in m/s).
pub fn read_planes(spec: &FileSpec, held_z: Option<Range<usize>>) -> Result<VelocityVolume> {
    let (f, l, p) = open(spec)?;
    let name = spec.path.display();
    let held_z = held_z.unwrap_or(0..l.samples);
    ensure!(held_z.end <= l.samples, "{}: model z-indices {held_z:?} of {}", spec.key, l.samples);
    let kept = l.traces * held_z.len();
    let mut values = Vec::new();
    values.try_reserve_exact(kept).map_err(|_| {
        anyhow::anyhow!(
            "model file {name}: {:.1} GiB of its values cannot be held",
            kept as f64 * 4.0 / (1u64 << 30) as f64
        )
    })?;
    values.resize(kept, 0.0);
    let scale = spec.units.to_si();
    let (si, _, max) = spec.units.si_range();
    let what = if spec.units.is_density() { "densities" } else { "velocities" };
    let mut r = BufReader::new(f);
    r.seek(SeekFrom::Start(l.first_trace)).with_context(|| format!("cannot read {name}"))?;
    let mut trace = vec![0u8; l.trace_bytes() as usize];
    for t in 0..l.traces {
        r.read_exact(&mut trace).with_context(|| format!("cannot read {name}"))?;
        let out = &mut values[p.slot[t] * held_z.len()..][..held_z.len()];
        for k in 0..l.samples {
            let raw = l.sample(&trace[240..], k);
            let v = raw * scale;
            ensure!(
                raw.is_finite() && raw > 0.0,
                "model file {name}: value {raw} in trace {} at sample {k}; {what} must be finite and positive",
                t + 1
            );
            ensure!(
                v.is_finite() && v as f64 <= max,
                "model file {name}: value in trace {} at sample {k} is {v:e} {si} ({}), above {max:e} {si}: check {}.units",
                t + 1,
                if scale > 1.0 { format!("{} x {scale}", spec.units.name()) } else { si.to_string() },
                spec.key
            );
            if held_z.contains(&k) {
                out[k - held_z.start] = v;
            }
        }
    }
    Ok(VelocityVolume::part(values, &p.axes, &p.shape, &p.spacing, held_z))
}

/// Writes `v` (a 2D model, or 3D: one trace per (y, x) point, y slowest) as SEG-Y rev 1 to `out`:
/// big-endian IEEE floats in m/s, inline = y index + 1, crossline = x index + 1, CDP x, y the
/// point's coordinates (m, scalar -100), the sample interval the depth step in millimetres, as
/// [`read_planes`] reads it back. `text` goes into the textual header.
pub fn write_model(v: &VelocityVolume, text: &[String], out: &mut impl std::io::Write) -> Result<()> {
    let [nx, ny, nz] = v.extent;
    let step_mm = v.spacing[2] * 1000.0;
    ensure!(
        nz <= u16::MAX as usize && (1.0..=u16::MAX as f64).contains(&step_mm) && step_mm.fract() == 0.0,
        "a SEG-Y rev 1 model holds up to 65535 samples a whole number of millimetres apart (up to 65.535 m): {nz} \
         samples {} m apart do not fit",
        v.spacing[2]
    );
    ensure!(v.held_z == (0..nz), "a model read in part cannot be written whole");
    let mut bin = [0u8; 400];
    let put = |b: &mut [u8], pos: usize, bytes: &[u8]| b[pos - 1..pos - 1 + bytes.len()].copy_from_slice(bytes);
    put(&mut bin, 3213 - 3200, &(nx.min(u16::MAX as usize) as u16).to_be_bytes());
    put(&mut bin, 3217 - 3200, &(step_mm as u16).to_be_bytes());
    put(&mut bin, 3221 - 3200, &(nz as u16).to_be_bytes());
    put(&mut bin, 3225 - 3200, &5u16.to_be_bytes());
    put(&mut bin, 3229 - 3200, &2u16.to_be_bytes()); // sorted by inline
    put(&mut bin, 3255 - 3200, &1u16.to_be_bytes()); // metres
    put(&mut bin, 3501 - 3200, &0x0100u16.to_be_bytes());
    put(&mut bin, 3503 - 3200, &1u16.to_be_bytes()); // fixed-length traces
    out.write_all(&crate::output::segy::textual_header(text, true))?;
    out.write_all(&bin)?;
    let mut trace = vec![0u8; 240 + 4 * nz];
    for iy in 0..ny {
        for ix in 0..nx {
            let h = &mut trace[..240];
            h.fill(0);
            let n = (iy * nx + ix + 1) as i32;
            let cm = |c: f64| (c * 100.0).round() as i32;
            put(h, 1, &n.to_be_bytes());
            put(h, 5, &n.to_be_bytes());
            put(h, 21, &n.to_be_bytes());
            put(h, 29, &1i16.to_be_bytes());
            put(h, 71, &(-100i16).to_be_bytes());
            put(h, 115, &(nz as u16).to_be_bytes());
            put(h, 117, &(step_mm as u16).to_be_bytes());
            put(h, 181, &cm(ix as f64 * v.spacing[0]).to_be_bytes());
            put(h, 185, &cm(iy as f64 * v.spacing[1]).to_be_bytes());
            put(h, 189, &(iy as i32 + 1).to_be_bytes());
            put(h, 193, &(ix as i32 + 1).to_be_bytes());
            for iz in 0..nz {
                let value = v.values[ix * v.strides[0] + iy * v.strides[1] + iz * v.strides[2]];
                trace[240 + 4 * iz..244 + 4 * iz].copy_from_slice(&value.to_be_bytes());
            }
            out.write_all(&trace)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
