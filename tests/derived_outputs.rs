//! The files derived from a result file, end to end through the binary: the SEG-Y read back at
//! the standard's byte positions against the HDF5 traces and positions, `seismic-run export`
//! writing the same bytes, the XDMF sidecar's grids, origins, spacings, times and hyperslabs, and
//! the pictures' sizes, frame count and text. (validation/check_formats.py reads the same files
//! with segyio, VTK and Pillow.)

use rust_hdf5::H5File;
use std::path::{Path, PathBuf};
use std::process::Command;

fn seismic_run() -> Command {
    let built = Path::new(env!("CARGO_BIN_EXE_seismic-run"));
    let staged = std::env::current_exe().ok().and_then(|t| Some(t.parent()?.parent()?.join("bin").join("seismic-run")));
    match staged {
        Some(s) if !built.exists() && s.exists() => Command::new(s),
        _ => Command::new(built),
    }
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("seismic-run-derived-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// Axes that differ in length, spacing and origin; receivers off the grid points.
const INPUT: &str = r#"
[grid]
shape = [24, 14, 18]
spacing = [10.0, 12.5, 8.0]
origin = [100.0, -50.0, 4.0]

[model]
kind = "layered"
depths = [80.0]
velocities = [1800.0, 2400.0]

[stencil]
radius = 2

[time]
steps = 20

[source]
position = [220.0, 25.0, 60.0]
frequency = 10.0

[[receivers]]
line = { start = [130.5, 25.0, 20.25], end = [310.5, 25.0, 20.25], count = 4 }

[boundary]
kind = "cpml"
width = 4

[output]
path = "r.h5"
snapshot_every = 5
segy = true
snapshot = [{ kind = "volume" }, { kind = "xz", at = 25.0 }, { kind = "yz", at = 200.0 }]
"#;

fn i16_at(b: &[u8], pos: usize) -> i16 {
    i16::from_be_bytes([b[pos - 1], b[pos]])
}
fn i32_at(b: &[u8], pos: usize) -> i32 {
    i32::from_be_bytes(b[pos - 1..pos + 3].try_into().unwrap())
}
fn f64_at(b: &[u8], pos: usize) -> f64 {
    f64::from_be_bytes(b[pos - 1..pos + 7].try_into().unwrap())
}
/// A SEG-Y integer with its scalar applied (negative: divide).
fn scaled(v: i32, s: i16) -> f64 {
    if s < 0 { v as f64 / -(s as f64) } else { v as f64 * s.max(1) as f64 }
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[1..4], b"PNG", "{}", path.display());
    (u32::from_be_bytes(b[16..20].try_into().unwrap()), u32::from_be_bytes(b[20..24].try_into().unwrap()))
}

fn run_once(dir: &Path) {
    std::fs::write(dir.join("in.toml"), INPUT).unwrap();
    let out = seismic_run().current_dir(dir).args(["--backend", "cpu", "--plot", "-q", "in.toml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn segy_holds_the_traces_and_geometry_and_export_writes_the_same_bytes() {
    let dir = scratch("segy");
    run_once(&dir.0);
    let f = H5File::open(dir.0.join("r.h5")).unwrap();
    let traces = f.dataset("receivers/pressure").unwrap().read_raw::<f32>().unwrap();
    let pos = f.dataset("receivers/position").unwrap().read_raw::<f64>().unwrap();
    let dt = f.dataset("receivers/pressure").unwrap().attr("dt").unwrap().read_numeric::<f64>().unwrap();
    let (nrec, ns) = (4, 20);
    let b = std::fs::read(dir.0.join("r.sgy")).unwrap();
    assert_eq!(b.len(), 3600 + nrec * (240 + 4 * ns));
    assert_eq!(i16_at(&b, 3221), ns as i16);
    assert_eq!(i16_at(&b, 3225), 5);
    assert_eq!(i16_at(&b, 3217) as f64, (dt * 1e6).round());
    assert!((f64_at(&b, 3273) - dt * 1e6).abs() < 1e-9);
    assert_eq!((b[3500], b[3501]), (2, 0));
    for i in 0..nrec {
        let h = &b[3600 + i * (240 + 4 * ns)..];
        assert_eq!((i32_at(h, 1), i32_at(h, 9), i32_at(h, 13)), (i as i32 + 1, 1, i as i32 + 1));
        let (cs, es) = (i16_at(h, 71), i16_at(h, 69));
        assert_eq!(scaled(i32_at(h, 73), cs), 220.0);
        assert_eq!(scaled(i32_at(h, 77), cs), 25.0);
        // Receivers 60 m apart from x = 130.5: exact with a scalar of -10.
        assert_eq!(cs, -10);
        assert_eq!(scaled(i32_at(h, 81), cs), pos[3 * i]);
        assert_eq!(scaled(i32_at(h, 85), cs), pos[3 * i + 1]);
        assert_eq!(es, -100);
        assert_eq!(scaled(i32_at(h, 41), es), -pos[3 * i + 2]);
        assert_eq!(scaled(i32_at(h, 49), es), 60.0);
        let offset = (pos[3 * i] - 220.0).abs().round() as i32 * if pos[3 * i] < 220.0 { -1 } else { 1 };
        assert_eq!(i32_at(h, 37), offset);
        assert_eq!(i16_at(h, 115), ns as i16);
        let samples: Vec<f32> =
            (0..ns).map(|k| f32::from_be_bytes(h[240 + 4 * k..244 + 4 * k].try_into().unwrap())).collect();
        assert_eq!(samples, &traces[i * ns..(i + 1) * ns]);
    }

    let out = seismic_run().current_dir(&dir.0).args(["export", "r.h5", "--segy", "again.sgy"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(dir.0.join("again.sgy")).unwrap(), b, "export writes the run's SEG-Y");
}

#[test]
fn xdmf_describes_the_model_and_every_series() {
    let dir = scratch("xdmf");
    run_once(&dir.0);
    let x = std::fs::read_to_string(dir.0.join("r.xdmf")).unwrap();
    let f = H5File::open(dir.0.join("r.h5")).unwrap();
    let times = f.dataset("snapshots/time").unwrap().read_raw::<f64>().unwrap();
    assert_eq!(times.len(), 4);
    // Slowest first: (nz, ny, nx), origin and spacing as (z, y, x).
    // The model grid: topology, slab, dataset; each volume grid: topology, two slabs, /model/vp;
    // each plane grid: /model/vp.
    assert_eq!(x.matches("Dimensions=\"18 14 24\"").count(), 3 + 4 * 4 + 2 * 4);
    assert!(x.contains(">4.0 -50.0 100.0</DataItem>"), "model origin z y x");
    assert_eq!(x.matches(">8.0 12.5 10.0</DataItem>").count(), 1 + 3 * 4, "every grid's spacing z y x");
    // The xz plane one point thick at y = 25 m (index 6), the yz plane at x = 200 m (index 10).
    assert_eq!(x.matches("Dimensions=\"18 1 24\"").count(), 4 * 3);
    assert_eq!(x.matches(">4.0 25.0 100.0</DataItem>").count(), 4);
    assert_eq!(x.matches("Dimensions=\"18 14 1\"").count(), 4 * 3);
    assert_eq!(x.matches(">4.0 -50.0 200.0</DataItem>").count(), 4);
    for (k, t) in times.iter().enumerate() {
        assert_eq!(x.matches(&format!("<Time Value=\"{t:?}\"/>")).count(), 3, "time {t} in each series");
        assert!(x.contains(&format!(">{k} 0 0 0 1 1 1 1 1 18 14 24</DataItem>")), "volume slab {k}");
        assert!(x.contains(&format!(">{k} 0 0 1 1 1 1 18 24</DataItem>")), "xz slab {k}");
    }
    assert!(x.contains(">0 6 0 1 1 1 18 1 24</DataItem>"), "the model's plane under the xz series");
    assert!(x.contains(">0 0 10 1 1 1 18 14 1</DataItem>"), "the model's plane under the yz series");
    assert!(x.contains("r.h5:/snapshots/pressure_yz"));
}

#[test]
fn pictures_have_the_grid_aspect_text_and_one_frame_per_snapshot() {
    let dir = scratch("plot");
    run_once(&dir.0);
    let (w, h) = png_size(&dir.0.join("r.snapshot.png"));
    // Image area 900 x 540 px for 240 m x 144 m (x, z), inside 240 + 130 px of margins.
    assert_eq!((w, h), (900 + 240, 540 + 130));
    assert_eq!(png_size(&dir.0.join("r.gather.png")), (800 + 240, 600 + 130));
    let mut opts = gif::DecodeOptions::new();
    opts.set_color_output(gif::ColorOutput::RGBA);
    let mut d = opts.read_info(std::fs::File::open(dir.0.join("r.snapshots.gif")).unwrap()).unwrap();
    assert_eq!((d.width() as u32, d.height() as u32), (w, h));
    let mut frames = 0;
    while let Some(frame) = d.read_next_frame().unwrap() {
        frames += 1;
        assert_eq!((frame.width as u32, frame.height as u32), (w, h));
        // The title rows (above the image area) hold dark text pixels.
        let dark = frame.buffer[..(w * 60 * 4) as usize].chunks_exact(4).filter(|p| p[0] < 100 && p[1] < 100).count();
        assert!(dark > 200, "frame {frames}: {dark} dark pixels in the title rows");
    }
    assert_eq!(frames, 4);
}
