//! The shot gather as a SEG-Y file (SEG-Y rev 2.0, SEG Technical Standards Committee, 2017):
//! one trace per receiver, 4-byte IEEE float samples (format code 5), big-endian throughout.
//!
//! Layout written (byte positions are 1-based, as the standard numbers them):
//! - 3200-byte textual header, 40 lines of 80 EBCDIC characters, describing the run; line 39
//!   reads "SEG-Y_REV2.0" and line 40 "END TEXTUAL HEADER";
//! - 400-byte binary header: 3213-3214 traces per ensemble, 3217-3218 sample interval (µs,
//!   rounded), 3221-3222 samples per trace, 3225-3226 format code 5, 3229-3230 sorting code 1 (as
//!   recorded), 3255-3256 measurement system 1 (metres), 3261-3264 and 3269-3272 the extended
//!   trace and sample counts, 3273-3280 the exact sample interval (µs, IEEE double; it overrides
//!   3217-3218), 3297-3300 the byte-order constant 16909060, 3501-3502 revision 2.0 (0x02, 0x00),
//!   3503-3504 fixed-length traces (1), 3505-3506 no extended textual headers (0), 3513-3520 the
//!   number of traces and 3521-3528 the byte offset of the first trace (3600);
//! - per receiver a 240-byte trace header (see `trace_header`) and its samples.
//!
//! Sample counts above 65535 do not fit bytes 3221-3222 and 115-116: those then hold 0 and the
//! count is in the binary header's extended field 3269-3272 (rev 2 readers use it; older ones
//! cannot read such a file).

use crate::output::result::ResultFile;
use anyhow::{Context, Result, ensure};
use std::io::Write;
use std::path::Path;

/// Textual header lines (each at most 76 characters after the "Cnn " prefix).
const TEXT_LINES: usize = 40;
/// Largest power of ten a coordinate scalar divides by.
const MAX_DIVISOR: i64 = 10_000;

/// What goes into the file: traces (nreceivers, samples) row-major and their geometry.
pub struct Gather<'a> {
    pub traces: &'a [f32],
    pub samples: usize,
    /// Sample interval and time of the first sample, s.
    pub dt: f64,
    pub t0: f64,
    /// Positions (x, y, z) in metres, z positive downwards (depth).
    pub source: [f64; 3],
    pub receivers: &'a [[f64; 3]],
    /// Textual header lines, without the "Cnn " prefix; lines 39 and 40 are the standard's own.
    pub text: Vec<String>,
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

/// The 3200-byte textual header: "Cnn " and the line, padded to 80 characters, in EBCDIC.
pub fn textual_header(lines: &[String]) -> [u8; 3200] {
    let mut out = [0x40u8; 3200];
    for n in 1..=TEXT_LINES {
        let body = match n {
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

/// Sample interval in whole microseconds for the 16-bit fields (0 where it does not fit).
fn interval_us(dt: f64) -> u16 {
    let us = (dt * 1e6).round();
    if us >= 1.0 && us <= u16::MAX as f64 { us as u16 } else { 0 }
}

/// The 400-byte binary header (positions 3201-3600 of the file).
pub fn binary_header(g: &Gather) -> [u8; 400] {
    let mut b = [0u8; 400];
    // Positions below are the standard's file byte positions; the buffer starts at 3201.
    let at = |p: usize| p - 3200;
    let ntr = g.receivers.len();
    let small = g.samples <= u16::MAX as usize;
    put_i32(&mut b, at(3201), 1); // job identification number
    put_i32(&mut b, at(3205), 1); // line number
    put_i32(&mut b, at(3209), 1); // reel number
    put_u16(&mut b, at(3213), ntr.min(u16::MAX as usize) as u16); // data traces per ensemble
    put_u16(&mut b, at(3217), interval_us(g.dt));
    put_u16(&mut b, at(3219), interval_us(g.dt));
    put_u16(&mut b, at(3221), if small { g.samples as u16 } else { 0 });
    put_u16(&mut b, at(3223), if small { g.samples as u16 } else { 0 });
    put_i16(&mut b, at(3225), 5); // 4-byte IEEE floating point
    put_i16(&mut b, at(3227), 1); // ensemble fold
    put_i16(&mut b, at(3229), 1); // trace sorting: as recorded
    put_i16(&mut b, at(3255), 1); // measurement system: metres
    put_i32(&mut b, at(3261), ntr as i32); // extended data traces per ensemble
    put_i32(&mut b, at(3269), g.samples as i32); // extended samples per data trace
    put_f64(&mut b, at(3273), g.dt * 1e6); // extended sample interval, µs
    put_f64(&mut b, at(3281), g.dt * 1e6); // the same, of the original recording
    put_i32(&mut b, at(3289), g.samples as i32);
    put_i32(&mut b, at(3293), 1); // extended ensemble fold
    put_i32(&mut b, at(3297), 16_909_060); // 0x01020304: byte order
    b[at(3501) - 1] = 2; // major revision
    b[at(3502) - 1] = 0; // minor revision
    put_i16(&mut b, at(3503), 1); // fixed-length traces
    put_i16(&mut b, at(3505), 0); // extended textual headers
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

/// Per-file scalars and scaled values shared by every trace header.
struct Geometry {
    coord_scalar: i16,
    /// Source x, y, then receivers' x, y, in scaled integers.
    coords: Vec<i32>,
    elev_scalar: i16,
    /// Source depth, then receivers' elevations (-z), in scaled integers.
    elevs: Vec<i32>,
    delay_scalar: i16,
    delay: i16,
}

fn geometry(g: &Gather) -> Geometry {
    let mut xy = vec![g.source[0], g.source[1]];
    let mut z = vec![g.source[2]];
    for r in g.receivers {
        xy.extend([r[0], r[1]]);
        z.push(-r[2]);
    }
    let (coord_scalar, coords) = scaled(&xy);
    let (elev_scalar, elevs) = scaled(&z);
    // The delay (time of the first sample) in ms, with the time scalar of bytes 215-216.
    let ms = g.t0 * 1e3;
    let mut d = 1i64;
    while d < MAX_DIVISOR && (ms * (d * 10) as f64).abs() <= i16::MAX as f64 {
        d *= 10;
    }
    Geometry {
        coord_scalar,
        coords,
        elev_scalar,
        elevs,
        delay_scalar: if d == 1 { 1 } else { -(d as i16) },
        delay: (ms * d as f64).round().clamp(i16::MIN as f64, i16::MAX as f64) as i16,
    }
}

/// The 240-byte header of trace `i` (0-based).
fn trace_header(g: &Gather, geo: &Geometry, i: usize) -> [u8; 240] {
    let mut h = [0u8; 240];
    let n = (i + 1) as i32;
    put_i32(&mut h, 1, n); // trace sequence number within line
    put_i32(&mut h, 5, n); // trace sequence number within file
    put_i32(&mut h, 9, 1); // field record number: the shot
    put_i32(&mut h, 13, n); // trace number within the field record
    put_i32(&mut h, 17, 1); // energy source point number
    put_i32(&mut h, 21, 1); // ensemble number
    put_i32(&mut h, 25, n); // trace number within the ensemble
    put_i16(&mut h, 29, 1); // trace identification: time-domain seismic data
    put_i16(&mut h, 31, 1); // vertically summed traces
    put_i16(&mut h, 33, 1); // horizontally stacked traces
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
    put_i16(&mut h, 109, geo.delay); // delay recording time (ms, times the scalar of 215-216)
    let small = g.samples <= u16::MAX as usize;
    put_u16(&mut h, 115, if small { g.samples as u16 } else { 0 });
    put_u16(&mut h, 117, interval_us(g.dt));
    put_i16(&mut h, 167, 1); // time basis: local
    put_i16(&mut h, 215, geo.delay_scalar);
    h
}

/// Writes the whole file to `out`.
pub fn encode(g: &Gather, out: &mut impl Write) -> Result<()> {
    ensure!(!g.receivers.is_empty(), "SEG-Y: no receivers, so no traces to write");
    ensure!(g.traces.len() == g.receivers.len() * g.samples, "SEG-Y: traces do not match receivers x samples");
    ensure!(g.samples <= i32::MAX as usize, "SEG-Y: {} samples per trace exceed the standard's limit", g.samples);
    out.write_all(&textual_header(&g.text))?;
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

/// Textual header lines describing the run in `r`.
pub fn describe(r: &ResultFile) -> Vec<String> {
    let c = &r.config;
    let [nx, ny, nz] = r.shape;
    let [dx, dy, dz] = r.spacing;
    let [ox, oy, oz] = r.origin;
    let s = r.source_position();
    let name = r.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let model = match &c.model {
        crate::config::ModelConfig::Constant { vp } => format!("constant vp = {vp} m/s"),
        crate::config::ModelConfig::Layered { velocities, .. } => format!("{} layers", velocities.len()),
        crate::config::ModelConfig::File { path, .. } => format!("file {}", path.display()),
        crate::config::ModelConfig::Marmousi { x_offset } => format!("marmousi, x offset {x_offset} m"),
    };
    let mut lines = vec![
        format!("seismic-run {}: synthetic shot gather, 3D acoustic finite differences", r.version),
        format!("result {name}"),
        format!("grid {nx} x {ny} x {nz} points, spacing {dx} x {dy} x {dz} m"),
        format!("origin x {ox} y {oy} z {oz} m; z is depth, positive down"),
        format!("model {model}; stencil radius {}", c.stencil.radius),
        format!("time step {:.6e} s, {} samples, first sample at t = {:.6e} s", r.dt, r.steps, r.trace_t0),
        "exact interval in binary header bytes 3273-3280 (microseconds, IEEE double)".into(),
        source_line(&c.source),
        format!("source at x {} y {} z {} m", s[0], s[1], s[2]),
        format!("receivers {}, one trace each, in input order", r.receivers.len()),
        format!(
            "boundary {:?}, {} points{}",
            c.boundary.kind,
            c.boundary.width,
            if c.boundary.free_surface { ", free surface at z = 0" } else { "" }
        ),
        format!("backend {}: {}", r.backend, r.device),
        "samples: pressure, 4-byte IEEE float (format 5), big-endian".into(),
        "coordinates m, scalar bytes 71-72; elevation = -z, scalar bytes 69-70".into(),
        "offset bytes 37-40: horizontal distance in m, negative where x < source x".into(),
    ];
    lines.truncate(38);
    lines
}

/// Writes the receiver traces of `r` as SEG-Y to `path` (through [`crate::output::safe::write_file`]).
/// Returns a notice when the sample count needed the extended fields.
pub fn write(r: &ResultFile, path: &Path) -> Result<Option<String>> {
    let traces = r.traces()?;
    let g = Gather {
        traces: &traces,
        samples: r.steps,
        dt: r.dt,
        t0: r.trace_t0,
        source: r.source_position(),
        receivers: &r.receivers,
        text: describe(r),
    };
    let mut bytes = Vec::with_capacity(3600 + traces.len() * 4 + r.receivers.len() * 240);
    encode(&g, &mut bytes)?;
    crate::output::safe::write_file(path, &bytes).context("SEG-Y")?;
    Ok((r.steps > u16::MAX as usize).then(|| {
        format!(
            "{}: {} samples per trace exceed 65535; the count is only in the binary header's extended \
             field (bytes 3269-3272), which SEG-Y readers before rev 2 ignore",
            path.display(),
            r.steps
        )
    }))
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
mod tests {
    use super::*;

    fn i16_at(b: &[u8], pos: usize) -> i16 {
        i16::from_be_bytes([b[pos - 1], b[pos]])
    }
    fn u16_at(b: &[u8], pos: usize) -> u16 {
        u16::from_be_bytes([b[pos - 1], b[pos]])
    }
    fn i32_at(b: &[u8], pos: usize) -> i32 {
        i32::from_be_bytes(b[pos - 1..pos + 3].try_into().unwrap())
    }
    fn f64_at(b: &[u8], pos: usize) -> f64 {
        f64::from_be_bytes(b[pos - 1..pos + 7].try_into().unwrap())
    }
    fn u64_at(b: &[u8], pos: usize) -> u64 {
        u64::from_be_bytes(b[pos - 1..pos + 7].try_into().unwrap())
    }

    #[test]
    fn scalars_keep_coordinates_exact() {
        assert_eq!(scaled(&[460.0, 360.0]), (1, vec![460, 360]));
        assert_eq!(scaled(&[12.5, -3.25]), (-100, vec![1250, -325]));
        // 1e6 m with a 0.1 m part: a divisor of 10 still fits an i32, 1000 would not.
        assert_eq!(scaled(&[1_000_000.1]), (-10, vec![10_000_001]));
        // Not exact at any divisor: the largest that fits.
        assert_eq!(scaled(&[1.0 / 3.0]).0, -10_000);
    }

    #[test]
    fn ebcdic_matches_code_page_037() {
        let t = textual_header(&["Az09 .=,[]".to_string()]);
        assert_eq!(&t[..14], &[0xC3, 0x40, 0xF1, 0x40, 0xC1, 0xA9, 0xF0, 0xF9, 0x40, 0x4B, 0x7E, 0x6B, 0xBA, 0xBB]);
        assert_eq!(t[80 * 38], 0xC3); // "C39 ..."
        assert_eq!(&t[80 * 39 + 4..80 * 39 + 7], &[0xC5, 0xD5, 0xC4]); // "END"
    }

    /// Writes a 3-trace gather and reads every field back at the standard's byte positions.
    #[test]
    fn headers_read_back_at_their_byte_positions() {
        let samples = 5;
        let traces: Vec<f32> = (0..15).map(|i| i as f32 * 0.5 - 2.0).collect();
        let receivers = [[460.0, 360.0, 360.0], [210.5, 360.0, 20.25], [360.0, 360.0, 210.0]];
        let g = Gather {
            traces: &traces,
            samples,
            dt: 1.23456e-3,
            t0: 1.23456e-3,
            source: [360.0, 360.0, 360.0],
            receivers: &receivers,
            text: vec!["test".into()],
        };
        let mut b = Vec::new();
        encode(&g, &mut b).unwrap();
        assert_eq!(b.len(), 3600 + 3 * (240 + 4 * samples));
        assert_eq!(u16_at(&b, 3213), 3);
        assert_eq!(u16_at(&b, 3217), 1235);
        assert_eq!(u16_at(&b, 3221), 5);
        assert_eq!(i16_at(&b, 3225), 5);
        assert_eq!(i16_at(&b, 3255), 1);
        assert_eq!(i32_at(&b, 3269), 5);
        assert_eq!(f64_at(&b, 3273), 1234.56);
        assert_eq!(i32_at(&b, 3297), 0x0102_0304);
        assert_eq!(u16_at(&b, 3501), 0x0200);
        assert_eq!(i16_at(&b, 3503), 1);
        assert_eq!(i16_at(&b, 3505), 0);
        assert_eq!(u64_at(&b, 3513), 3);
        assert_eq!(u64_at(&b, 3521), 3600);
        for (i, r) in receivers.iter().enumerate() {
            let h = &b[3600 + i * (240 + 4 * samples)..];
            assert_eq!(i32_at(h, 1), i as i32 + 1);
            assert_eq!(i32_at(h, 5), i as i32 + 1);
            assert_eq!(i32_at(h, 9), 1);
            assert_eq!(i32_at(h, 13), i as i32 + 1);
            // x has 210.5: coordinates are scaled by -10.
            assert_eq!(i16_at(h, 71), -10);
            assert_eq!((i32_at(h, 73), i32_at(h, 77)), (3600, 3600));
            assert_eq!((i32_at(h, 81), i32_at(h, 85)), ((r[0] * 10.0) as i32, (r[1] * 10.0) as i32));
            // Elevations -z with 20.25: scaled by -100; source depth 360 m.
            assert_eq!(i16_at(h, 69), -100);
            assert_eq!(i32_at(h, 41), (-r[2] * 100.0) as i32);
            assert_eq!(i32_at(h, 49), 36000);
            assert_eq!(i16_at(h, 89), 1);
            assert_eq!(u16_at(h, 115), 5);
            assert_eq!(u16_at(h, 117), 1235);
            // 1.23456 ms as 12346 / 10000.
            assert_eq!((i16_at(h, 109), i16_at(h, 215)), (12346, -10_000));
            let s: Vec<f32> =
                (0..samples).map(|k| f32::from_be_bytes(h[240 + 4 * k..244 + 4 * k].try_into().unwrap())).collect();
            assert_eq!(s, &traces[i * samples..(i + 1) * samples]);
        }
        let offsets: Vec<i32> = (0..3).map(|i| i32_at(&b[3600 + i * (240 + 4 * samples)..], 37)).collect();
        assert_eq!(offsets, [100, -150, 0]);
    }

    #[test]
    fn long_traces_use_the_extended_count() {
        let samples = 70_000;
        let traces = vec![0.0f32; samples];
        let g = Gather {
            traces: &traces,
            samples,
            dt: 1e-4,
            t0: 1e-4,
            source: [0.0; 3],
            receivers: &[[1.0, 0.0, 0.0]],
            text: Vec::new(),
        };
        let mut b = Vec::new();
        encode(&g, &mut b).unwrap();
        assert_eq!(u16_at(&b, 3221), 0);
        assert_eq!(i32_at(&b, 3269), 70_000);
        assert_eq!(u16_at(&b[3600..], 115), 0);
        assert_eq!(b.len(), 3600 + 240 + 4 * samples);
    }
}
