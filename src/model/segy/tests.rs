//! SEG-Y model files made byte by byte: each revision, byte order and sample format, and the
//! errors for files that are no regular grid.

use super::*;
use crate::config::{FileFormat, Units};

/// IBM float bits of `v` (positive, exactly representable: at most 24 significant bits).
fn ibm(v: f32) -> u32 {
    let mut e = 64;
    let mut f = v as f64;
    while f >= 1.0 {
        f /= 16.0;
        e += 1;
    }
    while f < 1.0 / 16.0 {
        f *= 16.0;
        e -= 1;
    }
    ((e as u32) << 24) | (f * (1u32 << 24) as f64) as u32
}

struct Trace {
    inline: i32,
    crossline: i32,
    x: i32,
    y: i32,
    scalar: i16,
    values: Vec<f32>,
}

/// A SEG-Y file: byte order, format code (1 or 5), revision (0, 1, 2), extended textual headers.
fn file(big: bool, format: u16, revision: u8, extended: i16, interval: u16, traces: &[Trace]) -> Vec<u8> {
    let ns = traces[0].values.len();
    let put = |b: &mut Vec<u8>, pos: usize, bytes: &[u8]| {
        let bytes: Vec<u8> = if big { bytes.to_vec() } else { bytes.iter().rev().copied().collect() };
        b[pos - 1..pos - 1 + bytes.len()].copy_from_slice(&bytes);
    };
    let mut out = vec![0x40u8; 3200];
    let mut bin = vec![0u8; 3600];
    put(&mut bin, 3217, &interval.to_be_bytes());
    put(&mut bin, 3221, &(ns as u16).to_be_bytes());
    put(&mut bin, 3225, &format.to_be_bytes());
    match revision {
        1 => put(&mut bin, 3501, &0x0100u16.to_be_bytes()),
        2 => {
            bin[3500] = 2;
            put(&mut bin, 3297, &0x0102_0304u32.to_be_bytes());
        }
        _ => {}
    }
    put(&mut bin, 3505, &extended.to_be_bytes());
    out.extend_from_slice(&bin[3200..]);
    out.extend(std::iter::repeat_n(0x40u8, 3200 * extended.max(0) as usize));
    for t in traces {
        let mut h = vec![0u8; 240];
        put(&mut h, 71, &t.scalar.to_be_bytes());
        put(&mut h, 73, &t.x.to_be_bytes());
        put(&mut h, 77, &t.y.to_be_bytes());
        put(&mut h, 115, &(ns as u16).to_be_bytes());
        put(&mut h, 189, &t.inline.to_be_bytes());
        put(&mut h, 193, &t.crossline.to_be_bytes());
        out.extend(h);
        for &v in &t.values {
            let bits = if format == 1 { ibm(v) } else { v.to_bits() };
            out.extend(if big { bits.to_be_bytes() } else { bits.to_le_bytes() });
        }
    }
    out
}

fn value(line: usize, place: usize, k: usize) -> f32 {
    1500.0 + 100.0 * line as f32 + 10.0 * place as f32 + k as f32
}

/// `lines` x `per_line` traces of `ns` samples, inline-major, 25 m apart in x and 50 m in y.
fn grid(lines: usize, per_line: usize, ns: usize, numbered: bool) -> Vec<Trace> {
    let mut out = Vec::new();
    for i in 0..lines {
        for j in 0..per_line {
            out.push(Trace {
                inline: if numbered { 10 + 2 * i as i32 } else { 0 },
                crossline: if numbered { 100 + j as i32 } else { 0 },
                x: 2500 * j as i32,
                y: 5000 * i as i32,
                scalar: -100,
                values: (0..ns).map(|k| value(i, j, k)).collect(),
            });
        }
    }
    out
}

fn read(bytes: &[u8], name: &str, shape: &[usize], spacing: &[f64], axis_order: &str) -> Result<VelocityVolume> {
    let path = std::env::temp_dir().join(format!("seismic-run-segy-{}-{name}.sgy", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let spec = FileSpec {
        path: &path,
        format: FileFormat::Segy,
        shape,
        spacing,
        units: Units::MetresPerSecond,
        axis_order,
        sha256: None,
        key: "model",
    };
    let r = read_planes(&spec, None);
    std::fs::remove_file(&path).unwrap();
    r
}

fn check_grid(v: &VelocityVolume, lines: usize, per_line: usize, ns: usize) {
    for i in 0..lines {
        for j in 0..per_line {
            for k in 0..ns {
                let at = i * v.strides[1] + j * v.strides[0] + k * v.strides[2];
                assert_eq!(v.values[at], value(i, j, k), "line {i} place {j} sample {k}");
            }
        }
    }
}

#[test]
fn ibm_floats_convert_exactly() {
    assert_eq!(ibm_to_f32(0x4276_A000), 118.625);
    assert_eq!(ibm_to_f32(0xC276_A000), -118.625);
    assert_eq!(ibm_to_f32(ibm(1500.0)), 1500.0);
    assert_eq!(ibm_to_f32(ibm(0.15625)), 0.15625);
}

#[test]
fn every_revision_byte_order_and_float_format_reads_the_same_3d_grid() {
    for (big, format, revision, extended) in
        [(true, 1, 1, 0), (true, 5, 2, 1), (false, 5, 1, 0), (false, 1, 2, 0), (true, 1, 0, 0)]
    {
        // Rev 0 has no inline/crossline fields: the coordinates place the traces.
        let traces = grid(3, 4, 5, revision > 0);
        let bytes = file(big, format, revision, extended, 2000, &traces);
        let v = read(&bytes, "grid", &[], &[], "").unwrap_or_else(|e| panic!("{big} {format} {revision}: {e:#}"));
        assert_eq!(v.extent, [4, 3, 5], "{big} {format} {revision}");
        assert_eq!(v.spacing, [25.0, 50.0, 2.0], "{big} {format} {revision}");
        check_grid(&v, 3, 4, 5);
    }
}

#[test]
fn traces_in_any_order_take_their_place_and_inlines_may_run_along_x() {
    let mut traces = grid(2, 3, 4, true);
    traces.reverse();
    let bytes = file(true, 1, 1, 0, 1250, &traces);
    let v = read(&bytes, "reversed", &[], &[], "").unwrap();
    assert_eq!((v.extent, v.spacing), ([3, 2, 4], [25.0, 50.0, 1.25]));
    check_grid(&v, 2, 3, 4);
    let v = read(&bytes, "xyz", &[2, 3, 4], &[10.0, 20.0, 5.0], "xyz").unwrap();
    assert_eq!((v.extent, v.spacing), ([2, 3, 4], [10.0, 20.0, 5.0]));
}

#[test]
fn a_line_without_headers_takes_the_input_geometry() {
    let traces = grid(1, 6, 3, false).into_iter().map(|t| Trace { x: 0, y: 0, ..t }).collect::<Vec<_>>();
    let bytes = file(true, 5, 1, 0, 0, &traces);
    let e = read(&bytes, "bare", &[], &[], "").unwrap_err();
    assert!(format!("{e:#}").contains("give model.spacing"), "{e:#}");
    let v = read(&bytes, "bare", &[6, 3], &[12.5, 4.0], "").unwrap();
    assert_eq!((v.extent, v.spacing), ([6, 1, 3], [12.5, 1.0, 4.0]));
    check_grid(&v, 1, 6, 3);
}

#[test]
fn missing_duplicate_and_irregular_traces_are_refused() {
    let mut traces = grid(3, 3, 2, true);
    traces.remove(4);
    let e = format!("{:#}", read(&file(true, 1, 1, 0, 1000, &traces), "missing", &[], &[], "").unwrap_err());
    assert!(e.contains("1 missing, the first at inline numbers 12 / crossline numbers 101"), "{e}");
    let mut traces = grid(2, 2, 2, true);
    traces[3].crossline = 100;
    let e = format!("{:#}", read(&file(true, 1, 1, 0, 1000, &traces), "twice", &[], &[], "").unwrap_err());
    assert!(e.contains("traces 3 and 4 both sit at"), "{e}");
    let mut traces = grid(1, 4, 2, true);
    traces[3].crossline = 110;
    let e = format!("{:#}", read(&file(true, 1, 1, 0, 1000, &traces), "irregular", &[], &[], "").unwrap_err());
    assert!(e.contains("not evenly spaced"), "{e}");
    let mut bytes = file(true, 1, 1, 0, 1000, &grid(1, 2, 2, true));
    bytes.pop();
    let e = format!("{:#}", read(&bytes, "short", &[], &[], "").unwrap_err());
    assert!(e.contains("not a whole number of traces"), "{e}");
}

#[test]
fn a_written_model_reads_back_the_same() {
    let (nx, ny, nz) = (5, 3, 4);
    let values: Vec<f32> = (0..nx * ny * nz).map(|i| 1500.0 + i as f32 * 1.5).collect();
    let v = VelocityVolume::new(values, &[1, 0, 2], &[ny, nx, nz], &[20.0, 12.5, 7.5]);
    let mut bytes = Vec::new();
    write_model(&v, &["test".into()], &mut bytes).unwrap();
    assert_eq!(bytes.len(), 3600 + nx * ny * (240 + 4 * nz));
    assert_eq!(read(&bytes, "written", &[], &[], "").unwrap(), v);
    let line = VelocityVolume::new((0..12).map(|i| 2000.0 + i as f32).collect(), &[0, 2], &[4, 3], &[7.5, 7.5]);
    let mut bytes = Vec::new();
    write_model(&line, &[], &mut bytes).unwrap();
    assert_eq!(read(&bytes, "line", &[], &[], "").unwrap(), line);
}
