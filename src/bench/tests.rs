use super::*;

const LAUNCH: Launch = Launch {
    block_x: 32,
    block_y: 8,
    vec: 4,
    window: 64,
    stages: 2,
    min_blocks: 2,
    unroll_z: 9,
    rows: 1,
    order: 0,
    tile_ring: 0,
    halo_ring: 0,
};

fn ceilings() -> Ceilings {
    Ceilings { copy_gbs: 3000.0, three_read_one_write_gbs: 3200.0, array_bytes: 1 << 30, repetitions: 20 }
}

pub(super) fn sample_report() -> Report {
    let c = ceilings();
    let spec = SweepSpec::quick();
    let mut rows = Vec::new();
    for (shape, r) in spec.cases() {
        for (i, op) in OperatorKind::ALL.into_iter().enumerate() {
            let bytes = op.bytes(shape, r) as f64;
            let gbs = [2950.0, 1500.0, 2800.0, 2000.0][i] - 10.0 * r as f64;
            rows.push(Row::new(shape, r, op, LAUNCH, "default", bytes / (gbs * 1e9), &c));
        }
    }
    // The 256^3 cases measured against ceilings on 64 MiB arrays at 80% of the 1 GiB ones.
    let small = Ceilings { copy_gbs: 2400.0, three_read_one_write_gbs: 2560.0, array_bytes: 64 << 20, ..c.clone() };
    for row in rows.iter_mut().filter(|r| r.shape == [256; 3]) {
        *row = row.clone().with_same_size(Some(&small));
    }
    Report {
        device: "Test GPU, rev \"A\"".into(),
        vendor: "cuda".into(),
        arch: "sm_90".into(),
        date: "2026-11-22".into(),
        ceilings: c,
        same_size_ceilings: vec![small],
        spec,
        rows,
        tuning: vec![TuneSummary {
            operator: OperatorKind::FusedStep,
            radius: 4,
            class: "xy~2^18 z~2^9".into(),
            shape: [512, 512, 512],
            launch: Launch { block_y: 16, window: 32, ..LAUNCH },
            seconds: 1.0e-3,
            default_seconds: 1.1e-3,
            tried: 15,
            candidates: 40,
            search_seconds: 9.5,
        }],
        skipped: vec![Skipped { shape: [4096, 4096, 4096], radius: 4, operator: None, error: "needs 768 GiB".into() }],
    }
}

#[test]
fn rows_use_step_bytes_and_the_operator_ceiling() {
    let c = ceilings();
    let shape = [512, 512, 512];
    let bytes = crate::problem::step_bytes(shape, 4, true) as f64;
    let r = Row::new(shape, 4, OperatorKind::FusedStep, LAUNCH, "tuned", bytes / 2.88e12, &c);
    assert!((r.gbs - 2880.0).abs() < 1e-6);
    assert!((r.percent - 90.0).abs() < 1e-9);
    assert_eq!(r.ceiling, CeilingKind::ThreeReadOneWrite);
    assert!((r.gpts - 512.0f64.powi(3) / r.seconds / 1e9).abs() < 1e-9);
    let lap_bytes = crate::problem::step_bytes(shape, 4, false) as f64;
    let l = Row::new(shape, 4, OperatorKind::LaplacianOnly, LAUNCH, "tuned", lap_bytes / 2.7e12, &c);
    assert_eq!(l.ceiling, CeilingKind::Copy);
    assert!((l.percent - 90.0).abs() < 1e-9);
}

#[test]
fn shapes_and_lists_parse_with_clear_errors() {
    assert_eq!(parse_shape("512").unwrap(), [512; 3]);
    assert_eq!(parse_shape("2048x1024X64").unwrap(), [2048, 1024, 64]);
    assert_eq!(parse_shape("8192x4096").unwrap(), [8192, 1, 4096], "two numbers: a 2D grid, nx x nz");
    assert_eq!(shape_label([8192, 1, 4096]), "8192x4096 2D");
    assert_eq!(shape_label([64, 2, 64]), "64x2x64");
    for bad in ["", "0", "12x0", "axbxc", "1x2x3x4", "-5"] {
        let e = parse_shape(bad).unwrap_err().to_string();
        assert!(e.contains("grid size"), "{bad}: {e}");
    }
    assert_eq!(parse_list("1, 4,8", |s| Ok(s.trim().parse::<usize>()?)).unwrap(), vec![1, 4, 8]);
    let ops = parse_list("fused,laplacian", OperatorKind::parse).unwrap();
    assert_eq!(ops, vec![OperatorKind::FusedStep, OperatorKind::LaplacianOnly]);
    assert!(OperatorKind::parse("twopass").unwrap_err().to_string().contains("--operators"));
}

#[test]
fn cases_cover_sizes_then_radii_without_repeats() {
    let s = SweepSpec::full();
    let c = s.cases();
    assert_eq!(c.len(), 6 + 7, "R=4 at 512^3 is shared");
    assert_eq!(c[0], ([256; 3], 4));
    assert!(c.contains(&([512; 3], 1)) && c.contains(&([512; 3], 8)));
    s.validate().unwrap();
    SweepSpec::quick().validate().unwrap();
    let bad = SweepSpec { radii: vec![9], ..SweepSpec::quick() };
    assert!(bad.validate().unwrap_err().to_string().contains("radius 9"));
    let small = SweepSpec { sizes: vec![[8, 8, 8]], size_radius: 4, ..SweepSpec::quick() };
    assert!(small.validate().unwrap_err().to_string().contains("8x8x8"));
}

#[test]
fn markdown_has_every_row_and_the_ceilings() {
    let rep = sample_report();
    let md = rep.markdown();
    assert!(md.contains("copy **3000 GB/s**") && md.contains("3-read-1-write **3200 GB/s**"), "{md}");
    let table_rows = md.lines().filter(|l| l.contains("% of 3R1W |") || l.contains("% of copy |")).count();
    assert_eq!(table_rows, rep.rows.len());
    assert!(md.contains("64 MiB: copy 2400 GB/s (80.0%), 3R1W 2560 GB/s (80.0%)."), "{md}");
    // 256^3, R = 4, Laplacian-only: 2800 - 40 GB/s is 92.0% of 3000 and 115.0% of 2400.
    assert!(md.contains("| 92.0% of copy | 115.0% |"), "{md}");
    assert!(md.contains("% of 3R1W | - |"), "{md}");
    // The real step's time against the interior-only step's, from the same rows.
    let (real, fused) = (
        rep.find([512; 3], 4, OperatorKind::RealStep).unwrap(),
        rep.find([512; 3], 4, OperatorKind::FusedStep).unwrap(),
    );
    let ratio = format!("512x512x512 R=4: {:.2}x the interior-only step's time", real.seconds / fused.seconds);
    assert!(md.contains(&ratio), "{md}");
    assert!(!md.contains("issue"), "{md}");
    assert!(md.contains("| 512x512x512 | 4 | fused step | bx32 by8 v4 w64 s2 m2 u9 r1 o0 t0 h0 (default) |"), "{md}");
    // 2950 - 40 GB/s of 3200.
    assert!(md.contains("| 2910 |") && md.contains("90.9% of 3R1W"), "{md}");
    assert!(
        md.contains(
            "| fused step | 4 | xy~2^18 z~2^9 | 512x512x512 | bx32 by16 v4 w32 s2 m2 u9 r1 o0 t0 h0 | 1.000 | 1.100 | +10.0% | 15/40 |"
        ),
        "{md}"
    );
    assert!(md.contains("4096x4096x4096 R=4: needs 768 GiB"));
}

#[test]
fn targets_follow_the_rows() {
    let rep = sample_report();
    let t = rep.targets();
    // The quick sweep has 512^3 at R=4 but not 1024^3.
    assert_eq!(t[0].verdict(), "met", "{t:?}");
    assert_eq!(t[2].verdict(), "not measured");
    let (fused, laplacian) = (&t[4], &t[5]);
    assert_eq!(fused.verdict(), "met");
    assert!((fused.percent.unwrap() - 100.0 * 2910.0 / 3200.0).abs() < 1e-6, "{fused:?}");
    assert!((laplacian.percent.unwrap() - 100.0 * 2760.0 / 3000.0).abs() < 1e-6, "{laplacian:?}");
    let mut worse = rep.clone();
    worse.rows[0].percent = 50.0; // the fused step at 256^3
    assert_eq!(worse.targets()[4].verdict(), "MISSED");
    assert_eq!(worse.targets()[5].verdict(), "met");
}

#[test]
fn csv_has_a_header_and_one_line_per_row_and_quotes_the_device() {
    let rep = sample_report();
    let csv = rep.csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), rep.rows.len() + 1);
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header.len(), 26);
    assert!(
        lines[1]
            .starts_with("\"Test GPU, rev \"\"A\"\"\",2026-11-22,256,256,256,4,fused,32,8,4,64,2,2,9,1,0,0,0,default,")
    );
    // After the quoted device, every line has the header's other 25 fields; the same-size
    // percentage is empty where it was not measured.
    for l in &lines[1..] {
        assert_eq!(l.split_once("\",").unwrap().1.split(',').count(), 25, "{l}");
    }
    assert!(lines[1].ends_with(",90.94,113.67"), "{}", lines[1]);
    let l512 = lines.iter().find(|l| l.contains(",512,512,512,")).unwrap();
    assert!(l512.ends_with(','), "{l512}");
    assert_eq!(csv_field("plain"), "plain");
}

#[test]
fn report_round_trips_and_writes_its_files() {
    let rep = sample_report();
    let json = serde_json::to_string(&rep).unwrap();
    assert!(json.contains("\"operator\":\"fused-step\""));
    // serde_json may round the last bit of a float: compare the text of a second round.
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back.rows.len(), rep.rows.len());
    assert_eq!(back.markdown(), rep.markdown());
    let dir = std::env::temp_dir().join(format!("seismic-bench-test-{}", std::process::id()));
    check_writable(&dir).unwrap();
    let files = rep.write(&dir, false).unwrap();
    assert_eq!(files.len(), 3);
    assert_eq!(std::fs::read_to_string(dir.join("results.csv")).unwrap(), rep.csv());
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 3, "no temporary files left: {names:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A 2D size validates with a real step and is refused, by name, without one; its axes are
/// checked against 2R but y, its one point, is not.
#[test]
fn two_d_sizes_need_a_real_step() {
    let two_d = SweepSpec {
        sizes: vec![[8192, 1, 8192]],
        radii: vec![4],
        operators: vec![OperatorKind::RealStep],
        ..SweepSpec::quick()
    };
    two_d.validate().unwrap();
    let fused = SweepSpec { operators: vec![OperatorKind::FusedStep, OperatorKind::LaplacianOnly], ..two_d.clone() };
    let e = fused.validate().unwrap_err().to_string();
    assert!(e.contains("8192x8192 2D is 2D") && e.contains("--operators"), "{e}");
    let small = SweepSpec { sizes: vec![[8, 1, 64]], ..two_d.clone() };
    assert!(small.validate().unwrap_err().to_string().contains("8x64 2D is too small"));
    assert!(OperatorKind::RealStep.has_2d_form() && OperatorKind::RealStepDensity.has_2d_form());
    assert!(!OperatorKind::FusedStep.has_2d_form() && !OperatorKind::RealStepF16.has_2d_form());
}

/// The 2D real step's bound: 16 B a point plus the stencil's x and z halos, and 16 B a point of
/// each of the four layers (x and z, 20 points wide); a row of it says 2D and counts nx * nz points.
#[test]
fn two_d_real_step_bytes_and_row() {
    let shape = [8192, 1, 8192];
    let (n, r, w) = (8192u64, 4u64, REAL_STEP_CPML as u64);
    let interior = 16 * n * n + 4 * 2 * r * (n + n);
    let layers = 16 * (2 * w * n + 2 * w * n);
    assert_eq!(OperatorKind::RealStep.bytes(shape, 4), interior + layers);
    assert_eq!(OperatorKind::RealStepDensity.bytes(shape, 4), interior + 4 * n * n + layers);
    let dw = crate::boundary::default_width(4) as u64;
    assert_eq!(OperatorKind::RealStepDefaultBoundary.bytes(shape, 4), interior + 16 * 4 * dw * n);
    // At 80% of a 3200 GB/s 3R1W ceiling.
    let bytes = (interior + layers) as f64;
    let row = Row::new(shape, 4, OperatorKind::RealStep, LAUNCH, "default", bytes / 2.56e12, &ceilings());
    assert!((row.percent - 80.0).abs() < 1e-9 && row.ceiling == CeilingKind::ThreeReadOneWrite, "{row:?}");
    assert!((row.gpts - (n * n) as f64 / row.seconds / 1e9).abs() < 1e-9);
    let rep = Report { rows: vec![row], skipped: vec![], tuning: vec![], ..sample_report() };
    let md = rep.markdown();
    assert!(md.contains("| 8192x8192 2D | 4 | real step |") && md.contains("80.0% of 3R1W"), "{md}");
    assert!(md.contains("A 2D grid (nx x nz, one point along y) runs the 2D real step"), "{md}");
    assert!(rep.csv().lines().nth(1).unwrap().contains(",8192,1,8192,4,step,"));
}
