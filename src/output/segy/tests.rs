//! The SEG-Y writer's tests: every header field read back at its byte position.

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
    let t = textual_header(&["Az09 .=,[]".to_string()], true);
    assert_eq!(&t[..14], &[0xC3, 0x40, 0xF1, 0x40, 0xC1, 0xA9, 0xF0, 0xF9, 0x40, 0x4B, 0x7E, 0x6B, 0xBA, 0xBB]);
    assert_eq!(t[80 * 38], 0xC3); // "C39 ..."
    assert_eq!(&t[80 * 38 + 4..80 * 38 + 8], &[0xE2, 0xC5, 0xC7, 0x40]); // "SEG "
    assert_eq!(&t[80 * 39 + 4..80 * 39 + 7], &[0xC5, 0xD5, 0xC4]); // "END"
}

fn gather<'a>(traces: &'a [f32], samples: usize, receivers: &'a [[f64; 3]], lines: &'a [(i32, i32)]) -> Gather<'a> {
    Gather {
        traces,
        samples,
        interval_us: 1234,
        source: [360.0, 360.0, 360.0],
        receivers,
        lines,
        numbering: ShotNumber { shot: 7, first_trace: 31 },
        text: vec!["test".into()],
        two_d: false,
    }
}

/// Writes a 3-trace gather and reads every field back at the standard's byte positions.
#[test]
fn headers_read_back_at_their_byte_positions() {
    let samples = 5;
    let traces: Vec<f32> = (0..15).map(|i| i as f32 * 0.5 - 2.0).collect();
    let receivers = [[460.0, 360.0, 360.0], [210.5, 360.0, 20.25], [360.0, 360.0, 210.0]];
    let lines = [(1, 1), (1, 2), (1, 3)];
    let g = gather(&traces, samples, &receivers, &lines);
    let mut b = Vec::new();
    encode(&g, &mut b).unwrap();
    assert_eq!(b.len(), 3600 + 3 * (240 + 4 * samples));
    assert_eq!(u16_at(&b, 3213), 3);
    assert_eq!(u16_at(&b, 3217), 1234);
    assert_eq!(u16_at(&b, 3221), 5);
    assert_eq!(i16_at(&b, 3225), 5);
    assert_eq!(i16_at(&b, 3255), 1);
    assert_eq!(u16_at(&b, 3501), 0x0100);
    assert_eq!(i16_at(&b, 3503), 1);
    assert_eq!(i16_at(&b, 3505), 0);
    // Rev 1: the rev-2 fields stay empty.
    assert_eq!((i32_at(&b, 3269), f64_at(&b, 3273), u64_at(&b, 3521)), (0, 0.0, 0));
    for (i, r) in receivers.iter().enumerate() {
        let h = &b[3600 + i * (240 + 4 * samples)..];
        assert_eq!(i32_at(h, 1), 31 + i as i32);
        assert_eq!(i32_at(h, 5), i as i32 + 1);
        assert_eq!((i32_at(h, 9), i32_at(h, 17), i32_at(h, 197)), (7, 7, 7));
        assert_eq!(i32_at(h, 13), i as i32 + 1);
        assert_eq!((i32_at(h, 21), i32_at(h, 25)), (i as i32 + 1, 1));
        assert_eq!((i32_at(h, 189), i32_at(h, 193)), (1, i as i32 + 1));
        // x has 210.5 and the midpoint 285.25: coordinates are scaled by -100.
        assert_eq!(i16_at(h, 71), -100);
        assert_eq!((i32_at(h, 73), i32_at(h, 77)), (36000, 36000));
        assert_eq!((i32_at(h, 81), i32_at(h, 85)), ((r[0] * 100.0) as i32, (r[1] * 100.0) as i32));
        assert_eq!(i32_at(h, 181), ((r[0] + 360.0) * 50.0) as i32);
        assert_eq!(i32_at(h, 185), 36000);
        // Elevations -z with 20.25: scaled by -100; source depth 360 m.
        assert_eq!(i16_at(h, 69), -100);
        assert_eq!(i32_at(h, 41), (-r[2] * 100.0) as i32);
        assert_eq!(i32_at(h, 49), 36000);
        assert_eq!(i16_at(h, 89), 1);
        assert_eq!(u16_at(h, 115), 5);
        assert_eq!(u16_at(h, 117), 1234);
        assert_eq!(i16_at(h, 109), 0);
        let s: Vec<f32> =
            (0..samples).map(|k| f32::from_be_bytes(h[240 + 4 * k..244 + 4 * k].try_into().unwrap())).collect();
        assert_eq!(s, &traces[i * samples..(i + 1) * samples]);
    }
    let offsets: Vec<i32> = (0..3).map(|i| i32_at(&b[3600 + i * (240 + 4 * samples)..], 37)).collect();
    assert_eq!(offsets, [100, -150, 0]);
}

#[test]
fn receiver_grids_are_numbered_by_line_and_place() {
    let entries: Vec<crate::config::ReceiverConfig> = toml::from_str::<toml::Table>(
        "r = [{ grid = { origin = [0.0, 0.0, 0.0], step_a = [1.0, 0.0, 0.0], count_a = 3, \
         step_b = [0.0, 1.0, 0.0], count_b = 2 } }, { line = { start = [0.0, 5.0, 0.0], end = [2.0, 5.0, 0.0], count = 3 } }]",
    )
    .unwrap()["r"]
        .clone()
        .try_into()
        .unwrap();
    assert_eq!(lines(&entries), [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3), (3, 1), (3, 2), (3, 3)]);
    // A line of 3 and one position: no rectangle, so one line.
    let mixed: Vec<crate::config::ReceiverConfig> = toml::from_str::<toml::Table>(
        "r = [{ line = { start = [0.0, 5.0, 0.0], end = [2.0, 5.0, 0.0], count = 3 } }, { position = [1.0, 1.0, 1.0] }]",
    )
    .unwrap()["r"]
        .clone()
        .try_into()
        .unwrap();
    assert_eq!(lines(&mixed), [(1, 1), (1, 2), (1, 3), (1, 4)]);
}

#[test]
fn long_traces_make_a_rev2_file_with_the_extended_count() {
    let samples = 70_000;
    let traces = vec![0.0f32; samples];
    let receivers = [[1.0, 0.0, 0.0]];
    let g = gather(&traces, samples, &receivers, &[(1, 1)]);
    let mut b = Vec::new();
    encode(&g, &mut b).unwrap();
    assert_eq!(u16_at(&b, 3221), 0);
    assert_eq!(i32_at(&b, 3269), 70_000);
    assert_eq!(f64_at(&b, 3273), 1234.0);
    assert_eq!(i32_at(&b, 3297), 0x0102_0304);
    assert_eq!(u16_at(&b, 3501), 0x0200);
    assert_eq!(u64_at(&b, 3513), 1);
    assert_eq!(u64_at(&b, 3521), 3600);
    assert_eq!(u16_at(&b[3600..], 115), 0);
    assert_eq!(b.len(), 3600 + 240 + 4 * samples);
}

/// A 2D line: no y in any coordinate (a y of 0.5 would otherwise set the scalar), no inline or
/// crossline numbers; x, the elevations, the offsets and the ensemble numbers as in 3D.
#[test]
fn a_2d_line_has_no_y_coordinates_and_no_inline_or_crossline() {
    let samples = 2;
    let traces = vec![1.0f32; 6];
    let receivers = [[100.0, 0.5, 20.0], [200.0, 0.5, 20.0], [300.0, 0.5, 20.0]];
    let lines = [(1, 1), (1, 2), (1, 3)];
    let g = Gather { source: [250.0, 0.5, 10.0], two_d: true, ..gather(&traces, samples, &receivers, &lines) };
    let mut b = Vec::new();
    encode(&g, &mut b).unwrap();
    for i in 0..3 {
        let h = &b[3600 + i * (240 + 4 * samples)..];
        assert_eq!(i16_at(h, 71), 1, "x alone is whole metres");
        assert_eq!(
            (i32_at(h, 73), i32_at(h, 81), i32_at(h, 181)),
            (250, 100 * (i as i32 + 1), (250 + 100 * (i as i32 + 1)) / 2)
        );
        assert_eq!((i32_at(h, 77), i32_at(h, 85), i32_at(h, 185)), (0, 0, 0), "no y");
        assert_eq!((i32_at(h, 189), i32_at(h, 193)), (0, 0), "no inline or crossline");
        assert_eq!(i32_at(h, 21), i as i32 + 1, "the ensemble places the receiver on the line");
        assert_eq!((i32_at(h, 41), i32_at(h, 49)), (-20, 10));
        assert_eq!(i32_at(h, 37), [-150, -50, 50][i]);
    }
}

#[test]
fn textual_header_reads_back_as_ascii() {
    let text = vec![
        "seismic-run 1.0: synthetic shot gather, 2D acoustic finite differences".to_string(),
        "".into(),
        "x = [1.5, -2]; ok?".into(),
    ];
    let lines = textual_header_lines(&textual_header(&text, true));
    assert_eq!(lines.len(), 40);
    assert_eq!(lines[0], format!("C 1 {}", text[0]));
    assert_eq!(lines[1], "C 2");
    assert_eq!(lines[2], "C 3 x = [1.5, -2]; ok?");
    assert_eq!((lines[38].as_str(), lines[39].as_str()), ("C39 SEG Y REV1", "C40 END TEXTUAL HEADER"));
}
