//! The shot gather as a SEG-Y file (SEG-Y rev 1, SEG Technical Standards Committee, 2002; rev 2.0,
//! 2017, where a count does not fit rev 1's 16-bit fields): one trace per receiver, 4-byte IEEE
//! float samples (format code 5), big-endian throughout, as processing tools read it.
//!
//! Layout written (byte positions are 1-based, as the standard numbers them):
//! - 3200-byte textual header, 40 lines of 80 EBCDIC characters, describing the run; line 39
//!   reads "SEG Y REV1" (or "SEG-Y_REV2.0") and line 40 "END TEXTUAL HEADER";
//! - 400-byte binary header: 3213-3214 traces per ensemble (the shot), 3217-3218 the sample
//!   interval in whole microseconds (exact: see [`resample`]), 3221-3222 samples per trace,
//!   3225-3226 format code 5, 3229-3230 sorting code 1 (as recorded), 3255-3256 measurement
//!   system 1 (metres), 3501-3502 the revision (0x0100 for rev 1), 3503-3504 fixed-length traces
//!   (1), 3505-3506 no extended textual headers (0);
//! - per receiver a 240-byte trace header (see `trace_header`) and its samples, the first at t = 0.
//!
//! Rev 1 is what `obspy.read()` recognises without a format argument. Sample counts or intervals
//! above 65535 do not fit rev 1: such a file is rev 2.0, the counts in the binary header's extended
//! fields (3261-3264, 3269-3272, 3273-3280 the interval as an IEEE double, 3297-3300 the
//! byte-order constant, 3513-3520 the trace count, 3521-3528 the first trace's byte offset).
//!
//! Numbering, so that the shots of a survey stack into one line: field record (9-12), energy
//! source point (17-20) and shotpoint (197-200) are the shot's number in the survey (1 for a single
//! run); the trace sequence number within the line (1-4) continues across the survey's files;
//! inline (189-192) and crossline (193-196) place each receiver in its line or grid (receivers
//! that form no rectangular grid are one line, crossline = trace number), the ensemble number
//! (21-24) is the receiver's bin in that grid and bytes 181-188 hold the source-receiver midpoint.
//!
//! A 2D run's file (grid.shape = [nx, nz]) is a 2D line: its textual header says 2D and gives the
//! grid, origin and source in x and z; its trace headers hold no y coordinates (source, group and
//! midpoint y are 0) and no inline or crossline numbers (189-196 are 3D data's, left 0): the
//! ensemble (CDP) number places each receiver on the line.

pub mod resample;

use crate::config::ShotNumber;
use crate::output::result::ResultFile;
use anyhow::{Context, Result, ensure};
use std::io::Write;
use std::path::Path;

/// Textual header lines (each at most 76 characters after the "Cnn " prefix).
const TEXT_LINES: usize = 40;
/// Largest power of ten a coordinate scalar divides by.
const MAX_DIVISOR: i64 = 10_000;

/// What goes into the file: traces (nreceivers, samples) row-major, sample k at t = k interval,
/// and their geometry.
pub struct Gather<'a> {
    pub traces: &'a [f32],
    pub samples: usize,
    /// Sample interval, whole microseconds.
    pub interval_us: u32,
    /// Positions (x, y, z) in metres, z positive downwards (depth).
    pub source: [f64; 3],
    pub receivers: &'a [[f64; 3]],
    /// Inline and crossline number of each receiver (see [`lines`]).
    pub lines: &'a [(i32, i32)],
    pub numbering: ShotNumber,
    /// Textual header lines, without the "Cnn " prefix; lines 39 and 40 are the standard's own.
    pub text: Vec<String>,
    /// A 2D run's line (x and z): no y coordinates, no inline or crossline numbers.
    pub two_d: bool,
}

impl Gather<'_> {
    /// Rev 1 holds counts and intervals up to 65535; beyond, the file is rev 2.0.
    fn rev1(&self) -> bool {
        self.samples <= u16::MAX as usize && self.interval_us <= u16::MAX as u32
    }
}

/// The SEG-Y scalar (bytes 69-70 or 71-72) for a set of values in metres, and the integers it
/// turns them into: the smallest power-of-ten divisor that keeps every value exact (up to
/// `MAX_DIVISOR`) and still fits an i32, else the largest that fits. Returns (scalar, ints);
/// the scalar is 1 or a negative divisor, as the standard reads it (negative: divide by |s|).
pub fn scaled(values: &[f64]) -> (i16, Vec<i32>) {
    let max = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut best = 1i64;
    let mut d = 1i64;
    while d <= MAX_DIVISOR && max * d as f64 <= i32::MAX as f64 {
        best = d;
        let exact = values.iter().all(|v| {
            let s = v * d as f64;
            (s - s.round()).abs() <= 1e-9 * s.abs().max(1.0)
        });
        if exact {
            break;
        }
        d *= 10;
    }
    let ints = values.iter().map(|v| (v * best as f64).round() as i32).collect();
    (if best == 1 { 1 } else { -(best as i16) }, ints)
}

fn put_i16(buf: &mut [u8], pos: usize, v: i16) {
    buf[pos - 1..pos + 1].copy_from_slice(&v.to_be_bytes());
}

fn put_u16(buf: &mut [u8], pos: usize, v: u16) {
    buf[pos - 1..pos + 1].copy_from_slice(&v.to_be_bytes());
}

fn put_i32(buf: &mut [u8], pos: usize, v: i32) {
    buf[pos - 1..pos + 3].copy_from_slice(&v.to_be_bytes());
}

fn put_u64(buf: &mut [u8], pos: usize, v: u64) {
    buf[pos - 1..pos + 7].copy_from_slice(&v.to_be_bytes());
}

fn put_f64(buf: &mut [u8], pos: usize, v: f64) {
    buf[pos - 1..pos + 7].copy_from_slice(&v.to_be_bytes());
}

/// EBCDIC (code page 037) of a printable ASCII character; anything else becomes a space.
fn ebcdic(c: char) -> u8 {
    match c {
        'a'..='i' => 0x81 + (c as u8 - b'a'),
        'j'..='r' => 0x91 + (c as u8 - b'j'),
        's'..='z' => 0xA2 + (c as u8 - b's'),
        'A'..='I' => 0xC1 + (c as u8 - b'A'),
        'J'..='R' => 0xD1 + (c as u8 - b'J'),
        'S'..='Z' => 0xE2 + (c as u8 - b'S'),
        '0'..='9' => 0xF0 + (c as u8 - b'0'),
        '.' => 0x4B,
        '<' => 0x4C,
        '(' => 0x4D,
        '+' => 0x4E,
        '|' => 0x4F,
        '&' => 0x50,
        '!' => 0x5A,
        '$' => 0x5B,
        '*' => 0x5C,
        ')' => 0x5D,
        ';' => 0x5E,
        '-' => 0x60,
        '/' => 0x61,
        ',' => 0x6B,
        '%' => 0x6C,
        '_' => 0x6D,
        '>' => 0x6E,
        '?' => 0x6F,
        ':' => 0x7A,
        '#' => 0x7B,
        '@' => 0x7C,
        '\'' => 0x7D,
        '=' => 0x7E,
        '"' => 0x7F,
        '[' => 0xBA,
        ']' => 0xBB,
        _ => 0x40,
    }
}

/// The 40 lines of a textual header (EBCDIC, code page 037) in ASCII, each without its trailing
/// blanks; bytes outside the writer's code table read as blanks.
pub fn textual_header_lines(header: &[u8]) -> Vec<String> {
    // 0x40 is the blank, and every character outside the table.
    let ascii = |b: u8| (' '..='~').find(|&c| b != 0x40 && ebcdic(c) == b).unwrap_or(' ');
    header
        .chunks(80)
        .take(TEXT_LINES)
        .map(|l| l.iter().map(|&b| ascii(b)).collect::<String>().trim_end().to_string())
        .collect()
}

/// The 3200-byte textual header: "Cnn " and the line, padded to 80 characters, in EBCDIC; line
/// 39 names the revision (`rev1`: "SEG Y REV1", else "SEG-Y_REV2.0").
pub fn textual_header(lines: &[String], rev1: bool) -> [u8; 3200] {
    let mut out = [0x40u8; 3200];
    for n in 1..=TEXT_LINES {
        let body = match n {
            39 if rev1 => "SEG Y REV1",
            39 => "SEG-Y_REV2.0",
            40 => "END TEXTUAL HEADER",
            _ => lines.get(n - 1).map(String::as_str).unwrap_or(""),
        };
        let line: String = format!("C{n:2} {body}").chars().take(80).collect();
        for (i, c) in line.chars().enumerate() {
            out[(n - 1) * 80 + i] = ebcdic(c);
        }
    }
    out
}

/// A count for a 16-bit field: itself, or 0 where it does not fit (the extended field holds it).
fn short(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(0)
}

/// The 400-byte binary header (positions 3201-3600 of the file).
pub fn binary_header(g: &Gather) -> [u8; 400] {
    let mut b = [0u8; 400];
    // Positions below are the standard's file byte positions; the buffer starts at 3201.
    let at = |p: usize| p - 3200;
    let ntr = g.receivers.len();
    let interval = g.interval_us as usize;
    put_i32(&mut b, at(3201), 1); // job identification number
    put_i32(&mut b, at(3205), 1); // line number
    put_i32(&mut b, at(3209), 1); // reel number
    put_u16(&mut b, at(3213), short(ntr)); // data traces per ensemble (the shot)
    put_u16(&mut b, at(3217), short(interval));
    put_u16(&mut b, at(3219), short(interval));
    put_u16(&mut b, at(3221), short(g.samples));
    put_u16(&mut b, at(3223), short(g.samples));
    put_i16(&mut b, at(3225), 5); // 4-byte IEEE floating point
    put_i16(&mut b, at(3227), 1); // ensemble fold
    put_i16(&mut b, at(3229), 1); // trace sorting: as recorded
    put_i16(&mut b, at(3255), 1); // measurement system: metres
    put_i16(&mut b, at(3503), 1); // fixed-length traces
    put_i16(&mut b, at(3505), 0); // extended textual headers
    if g.rev1() {
        put_u16(&mut b, at(3501), 0x0100);
        return b;
    }
    put_i32(&mut b, at(3261), ntr as i32); // extended data traces per ensemble
    put_i32(&mut b, at(3269), g.samples as i32); // extended samples per data trace
    put_f64(&mut b, at(3273), g.interval_us as f64); // extended sample interval, µs
    put_f64(&mut b, at(3281), g.interval_us as f64); // the same, of the original recording
    put_i32(&mut b, at(3289), g.samples as i32);
    put_i32(&mut b, at(3293), 1); // extended ensemble fold
    put_i32(&mut b, at(3297), 16_909_060); // 0x01020304: byte order
    b[at(3501) - 1] = 2; // major revision
    b[at(3502) - 1] = 0; // minor revision
    put_i16(&mut b, at(3511), 1); // time basis: local
    put_u64(&mut b, at(3513), ntr as u64); // traces in this file
    put_u64(&mut b, at(3521), 3600); // byte offset of the first trace
    b
}

/// Offset (bytes 37-40): horizontal source-receiver distance in whole metres, negative where
/// the receiver lies at a smaller x than the source.
pub fn offset(source: [f64; 3], receiver: [f64; 3]) -> i32 {
    let (dx, dy) = (receiver[0] - source[0], receiver[1] - source[1]);
    let d = dx.hypot(dy).round() as i32;
    if dx < 0.0 { -d } else { d }
}

/// Inline and crossline numbers of the receivers of `entries` (the `[[receivers]]` tables, in
/// the order they give receivers): a line's receivers are one inline, crossline 1, 2, ...; a
/// grid's are inline j + 1 (k count_b + j + 1 for 3D grids), crossline i + 1 (its `a` index);
/// a single position is an inline of one. The entries' inlines follow one another. Where the
/// inlines do not all hold the same number of receivers (no rectangular grid), every receiver is
/// on inline 1, crossline = its trace number.
pub fn lines(entries: &[crate::config::ReceiverConfig]) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    let mut per_line = Vec::new();
    let mut next = 1i32;
    for e in entries {
        let (width, rows) = match (&e.line, &e.grid) {
            (Some(l), _) => (l.count, 1),
            (_, Some(g)) => (g.count_a, g.count_b.saturating_mul(g.count_c)),
            _ => (e.position.is_some() as usize, 1),
        };
        for r in 0..rows {
            per_line.push(width);
            out.extend((0..width).map(|c| (next + r as i32, c as i32 + 1)));
        }
        next += rows as i32;
    }
    if per_line.windows(2).any(|w| w[0] != w[1]) {
        return (0..out.len()).map(|i| (1, i as i32 + 1)).collect();
    }
    out
}

/// Per-file scalars and scaled values shared by every trace header.
struct Geometry {
    coord_scalar: i16,
    /// Source x, y, then receivers' x, y, then midpoints' x, y, in scaled integers.
    coords: Vec<i32>,
    elev_scalar: i16,
    /// Source depth, then receivers' elevations (-z), in scaled integers.
    elevs: Vec<i32>,
    /// Receivers per inline (for the ensemble number).
    per_line: i32,
}

fn geometry(g: &Gather) -> Geometry {
    let n = g.receivers.len();
    // A 2D line has no y: 0 in every y field, and out of the scalar's choice.
    let y = |v: f64| if g.two_d { 0.0 } else { v };
    let mut xy = Vec::with_capacity(2 + 4 * n);
    xy.extend([g.source[0], y(g.source[1])]);
    xy.extend(g.receivers.iter().flat_map(|r| [r[0], y(r[1])]));
    xy.extend(g.receivers.iter().flat_map(|r| [0.5 * (r[0] + g.source[0]), y(0.5 * (r[1] + g.source[1]))]));
    let mut z = vec![g.source[2]];
    z.extend(g.receivers.iter().map(|r| -r[2]));
    let (coord_scalar, coords) = scaled(&xy);
    let (elev_scalar, elevs) = scaled(&z);
    let per_line = g.lines.iter().map(|l| l.1).max().unwrap_or(1);
    Geometry { coord_scalar, coords, elev_scalar, elevs, per_line }
}

/// The 240-byte header of trace `i` (0-based).
fn trace_header(g: &Gather, geo: &Geometry, i: usize) -> [u8; 240] {
    let mut h = [0u8; 240];
    let n = (i + 1) as i32;
    let shot = g.numbering.shot as i32;
    let (inline, crossline) = g.lines[i];
    let m = 2 + 2 * g.receivers.len() + 2 * i;
    put_i32(&mut h, 1, (g.numbering.first_trace + i as u64) as i32); // trace sequence number within line
    put_i32(&mut h, 5, n); // trace sequence number within file
    put_i32(&mut h, 9, shot); // field record number
    put_i32(&mut h, 13, n); // trace number within the field record
    put_i32(&mut h, 17, shot); // energy source point number
    put_i32(&mut h, 21, (inline - 1) * geo.per_line + crossline); // ensemble: the receiver's bin
    put_i32(&mut h, 25, 1); // trace number within the ensemble
    put_i16(&mut h, 29, 1); // trace identification: time-domain seismic data
    put_i16(&mut h, 31, 1); // vertically summed traces
    put_i16(&mut h, 33, 1); // horizontally stacked traces
    put_i16(&mut h, 35, 1); // data use: production
    put_i32(&mut h, 37, offset(g.source, g.receivers[i]));
    put_i32(&mut h, 41, geo.elevs[1 + i]); // receiver group elevation
    put_i32(&mut h, 49, geo.elevs[0]); // source depth below surface
    put_i16(&mut h, 69, geo.elev_scalar);
    put_i16(&mut h, 71, geo.coord_scalar);
    put_i32(&mut h, 73, geo.coords[0]);
    put_i32(&mut h, 77, geo.coords[1]);
    put_i32(&mut h, 81, geo.coords[2 + 2 * i]);
    put_i32(&mut h, 85, geo.coords[3 + 2 * i]);
    put_i16(&mut h, 89, 1); // coordinate units: length
    put_i16(&mut h, 109, 0); // delay recording time: the first sample is at t = 0
    put_u16(&mut h, 115, short(g.samples));
    put_u16(&mut h, 117, short(g.interval_us as usize));
    put_i16(&mut h, 167, 1); // time basis: local
    put_i32(&mut h, 181, geo.coords[m]); // midpoint x
    put_i32(&mut h, 185, geo.coords[m + 1]); // midpoint y
    if !g.two_d {
        put_i32(&mut h, 189, inline);
        put_i32(&mut h, 193, crossline);
    }
    put_i32(&mut h, 197, shot); // shotpoint number
    put_i16(&mut h, 201, 1); // shotpoint scalar
    put_i16(&mut h, 215, 1); // time scalar
    h
}

/// Writes the whole file to `out`.
pub fn encode(g: &Gather, out: &mut impl Write) -> Result<()> {
    ensure!(!g.receivers.is_empty(), "SEG-Y: no receivers, so no traces to write");
    ensure!(g.traces.len() == g.receivers.len() * g.samples, "SEG-Y: traces do not match receivers x samples");
    ensure!(g.lines.len() == g.receivers.len(), "SEG-Y: line numbers do not match receivers");
    ensure!(g.samples <= i32::MAX as usize, "SEG-Y: {} samples per trace exceed the standard's limit", g.samples);
    out.write_all(&textual_header(&g.text, g.rev1()))?;
    out.write_all(&binary_header(g))?;
    let geo = geometry(g);
    let mut samples = Vec::with_capacity(g.samples * 4);
    for (i, trace) in g.traces.chunks_exact(g.samples).enumerate() {
        out.write_all(&trace_header(g, &geo, i))?;
        samples.clear();
        samples.extend(trace.iter().flat_map(|v| v.to_be_bytes()));
        out.write_all(&samples)?;
    }
    Ok(())
}

/// Textual header lines describing the run in `r`, whose traces `t` holds on the file's axis.
pub fn describe(r: &ResultFile, t: &resample::OnIntegerInterval) -> Vec<String> {
    let c = &r.config;
    let [nx, ny, nz] = r.shape;
    let [dx, dy, dz] = r.spacing;
    let [ox, oy, oz] = r.origin;
    let s = r.source_position();
    let name = r.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let model = match &c.model.velocity {
        crate::config::ModelConfig::Constant { vp } => format!("constant vp = {vp} m/s"),
        crate::config::ModelConfig::Layered { velocities, .. } => format!("{} layers", velocities.len()),
        crate::config::ModelConfig::File { path, .. } => format!("file {}", path.display()),
        crate::config::ModelConfig::Marmousi { x_offset } => format!("marmousi, x offset {x_offset} m"),
    };
    let sampling = if t.resampled {
        format!("resampled from dt to {} us: 8-point Lagrange interpolation; HDF5 holds the dt samples", t.interval_us)
    } else {
        "samples as computed, after a leading zero: the field is zero at t = 0".to_string()
    };
    let two_d = c.grid.is_2d();
    let (grid, origin, source) = if two_d {
        (
            format!("grid {nx} x {nz} points (x, z), spacing {dx} x {dz} m"),
            format!("origin x {ox} z {oz} m; z is depth, positive down"),
            format!("source at x {} z {} m", s[0], s[2]),
        )
    } else {
        (
            format!("grid {nx} x {ny} x {nz} points, spacing {dx} x {dy} x {dz} m"),
            format!("origin x {ox} y {oy} z {oz} m; z is depth, positive down"),
            format!("source at x {} y {} z {} m", s[0], s[1], s[2]),
        )
    };
    let mut lines = vec![
        format!(
            "seismic-run {}: synthetic shot gather, {} acoustic finite differences",
            r.version,
            if two_d { "2D" } else { "3D" }
        ),
        format!("result {name}"),
        grid,
        origin,
        format!("model {model}; stencil radius {}", c.stencil.radius),
        format!("time step dt {:.6e} s, {} steps", r.dt, r.steps),
        format!("sample interval {} us, {} samples, first sample at t = 0", t.interval_us, t.samples),
        sampling,
        source_line(&c.source),
        source,
        format!(
            "shot {}: record, source point and shotpoint numbers; traces from {}",
            r.numbering.shot, r.numbering.first_trace
        ),
        format!("receivers {}, one trace each, in input order", r.receivers.len()),
        format!(
            "boundary {:?}, {} points{}",
            c.boundary.kind,
            c.boundary_width(),
            if c.boundary.free_surface { ", free surface at z = 0" } else { "" }
        ),
        format!("backend {}: {}", r.backend, r.device),
        "samples: pressure, 4-byte IEEE float (format 5), big-endian".into(),
    ];
    if two_d {
        lines.extend([
            "coordinates m, x only (y 0), scalar 71-72; elevation = -z, scalar 69-70".to_string(),
            "offset bytes 37-40: distance along x in m, negative where x < source x".into(),
            "ensemble 21-24: place on the line; cdp x: midpoint; no inline or crossline".into(),
        ]);
    } else {
        lines.extend([
            "coordinates m, scalar bytes 71-72; elevation = -z, scalar bytes 69-70".to_string(),
            "offset bytes 37-40: horizontal distance in m, negative where x < source x".into(),
            "inline 189-192, crossline 193-196: receiver line and place; cdp x, y: midpoint".into(),
        ]);
    }
    lines.truncate(38);
    lines
}

/// Writes the receiver traces of `r` as SEG-Y to `path` (through [`crate::output::safe::write_file`]).
/// Returns notices: the traces resampled onto whole microseconds, a file that needs rev 2.
pub fn write(r: &ResultFile, path: &Path) -> Result<Vec<String>> {
    let computed = r.traces()?;
    let t = resample::on_integer_interval(&computed, r.steps, r.dt, r.trace_t0);
    drop(computed);
    // A file whose stored input gives other receivers than it holds: one line, in trace order.
    let mut lines = lines(&r.config.receivers);
    if lines.len() != r.receivers.len() {
        lines = (0..r.receivers.len()).map(|i| (1, i as i32 + 1)).collect();
    }
    let g = Gather {
        traces: &t.traces,
        samples: t.samples,
        interval_us: t.interval_us,
        source: r.source_position(),
        receivers: &r.receivers,
        lines: &lines,
        numbering: r.numbering,
        text: describe(r, &t),
        two_d: r.config.grid.is_2d(),
    };
    let mut bytes = Vec::with_capacity(3600 + t.traces.len() * 4 + r.receivers.len() * 240);
    encode(&g, &mut bytes)?;
    crate::output::safe::write_file(path, &bytes).context("SEG-Y")?;
    let mut notices = Vec::new();
    if t.resampled {
        notices.push(format!(
            "{}: dt = {:.4} us is not a whole number of microseconds: the traces are resampled to {} us \
             (8-point Lagrange interpolation) so that the header's interval is exact; the HDF5 file holds them at dt",
            path.display(),
            r.dt * 1e6,
            t.interval_us
        ));
    }
    if !g.rev1() {
        notices.push(format!(
            "{}: {} samples of {} us do not fit SEG-Y rev 1's 16-bit fields: the file is rev 2.0, its counts in \
             the binary header's extended fields, which readers before rev 2 ignore",
            path.display(),
            t.samples,
            t.interval_us
        ));
    }
    Ok(notices)
}

/// The text header's line for the first source's wavelet (and the number of sources beside it).
fn source_line(sources: &crate::config::Sources) -> String {
    let s = sources.first();
    let wavelet = match &s.wavelet {
        crate::config::WaveletConfig::Ricker => format!("ricker {} Hz", s.frequency.unwrap_or(0.0)),
        crate::config::WaveletConfig::File(w) => format!("from {}", w.file.display()),
    };
    let more = if sources.len() > 1 { format!(" (first of {} sources)", sources.len()) } else { String::new() };
    format!("source {wavelet}, amplitude {}{more}", s.amplitude)
}

#[cfg(test)]
mod tests;
