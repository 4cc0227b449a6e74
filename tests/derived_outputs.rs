//! The files derived from a result file, end to end through the binary: the SEG-Y read back at
//! the standard's byte positions against the HDF5 traces and positions, `seismic-run export`
//! writing the same bytes, the XDMF sidecar's grids, origins, spacings, times and hyperslabs, and
//! the pictures' sizes, frame count and text. (validation/check_formats.py reads the same files
//! with segyio, VTK and Pillow.)

use rust_hdf5::H5File;
use std::path::Path;

mod process;
use process::{Scratch, seismic_run};

fn scratch(name: &str) -> Scratch {
    process::scratch("derived", name)
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
    let (nrec, steps) = (4, 20);
    // The SEG-Y time axis: from t = 0 on whole microseconds (resampled where dt is not).
    let t = seismic_run::output::segy::resample::on_integer_interval(&traces, steps, dt, dt);
    let ns = t.samples;
    assert_eq!(t.interval_us as f64, if t.resampled { (dt * 1e6).floor() } else { (dt * 1e6).round() });
    let b = std::fs::read(dir.0.join("r.sgy")).unwrap();
    assert_eq!(b.len(), 3600 + nrec * (240 + 4 * ns));
    assert_eq!(i16_at(&b, 3221), ns as i16);
    assert_eq!(i16_at(&b, 3225), 5);
    assert_eq!(i16_at(&b, 3217), t.interval_us as i16);
    assert_eq!((b[3500], b[3501]), (1, 0));
    for i in 0..nrec {
        let h = &b[3600 + i * (240 + 4 * ns)..];
        assert_eq!((i32_at(h, 1), i32_at(h, 9), i32_at(h, 13)), (i as i32 + 1, 1, i as i32 + 1));
        assert_eq!((i32_at(h, 189), i32_at(h, 193), i16_at(h, 109)), (1, i as i32 + 1, 0));
        let (cs, es) = (i16_at(h, 71), i16_at(h, 69));
        assert_eq!(scaled(i32_at(h, 73), cs), 220.0);
        assert_eq!(scaled(i32_at(h, 77), cs), 25.0);
        // Receivers 60 m apart from x = 130.5 and their midpoints with x = 220: exact with -100.
        assert_eq!(cs, -100);
        assert_eq!(scaled(i32_at(h, 81), cs), pos[3 * i]);
        assert_eq!(scaled(i32_at(h, 85), cs), pos[3 * i + 1]);
        assert_eq!(scaled(i32_at(h, 181), cs), (pos[3 * i] + 220.0) / 2.0);
        assert_eq!(es, -100);
        assert_eq!(scaled(i32_at(h, 41), es), -pos[3 * i + 2]);
        assert_eq!(scaled(i32_at(h, 49), es), 60.0);
        let offset = (pos[3 * i] - 220.0).abs().round() as i32 * if pos[3 * i] < 220.0 { -1 } else { 1 };
        assert_eq!(i32_at(h, 37), offset);
        assert_eq!(i16_at(h, 115), ns as i16);
        let samples: Vec<f32> =
            (0..ns).map(|k| f32::from_be_bytes(h[240 + 4 * k..244 + 4 * k].try_into().unwrap())).collect();
        assert_eq!(samples[0], 0.0, "the field is zero at t = 0");
        assert_eq!(samples, &t.traces[i * ns..(i + 1) * ns]);
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
fn without_the_model_the_result_keeps_its_grid_traces_and_derived_files() {
    let dir = scratch("no-model");
    run_once(&dir.0);
    let input = INPUT.replace("segy = true", "segy = true\nmodel = false").replace("\"r.h5\"", "\"n.h5\"");
    std::fs::write(dir.0.join("n.toml"), input).unwrap();
    let out = seismic_run().current_dir(&dir.0).args(["--backend", "cpu", "--plot", "-q", "n.toml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (with, without) = (H5File::open(dir.0.join("r.h5")).unwrap(), H5File::open(dir.0.join("n.h5")).unwrap());
    assert!(with.dataset("model/vp").is_ok() && without.dataset("model/vp").is_err(), "no /model/vp");
    for name in ["receivers/pressure", "snapshots/pressure", "snapshots/pressure_xz"] {
        let [a, b] = [&with, &without].map(|f| f.dataset(name).unwrap().read_raw::<f32>().unwrap());
        assert_eq!(a, b, "{name}");
    }
    // The reader takes the grid from the input; the derived files are the same but for the model.
    let [r, n] = ["r.h5", "n.h5"].map(|f| seismic_run::output::result::ResultFile::open(&dir.0.join(f)).unwrap());
    assert_eq!((n.shape, n.spacing, n.origin), (r.shape, r.spacing, r.origin));
    // The SEG-Y's binary header and traces (its text header names the input).
    let [r_sgy, n_sgy] = ["r.sgy", "n.sgy"].map(|f| std::fs::read(dir.0.join(f)).unwrap());
    assert!(r_sgy.len() == n_sgy.len() && r_sgy[3200..] == n_sgy[3200..], "the SEG-Y traces differ");
    let x = std::fs::read_to_string(dir.0.join("n.xdmf")).unwrap();
    assert!(!x.contains("/model/vp") && x.matches("/snapshots/pressure_xz").count() == 4, "{x}");
    assert_eq!(png_size(&dir.0.join("n.snapshot.png")), png_size(&dir.0.join("r.snapshot.png")));
    assert!(dir.0.join("n.snapshots.gif").exists() && dir.0.join("n.gather.png").exists());
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

/// Files in `dir` besides the input, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "in.toml")
        .collect();
    v.sort();
    v
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", path.display());
}

/// Runs `seismic-run` in `dir` with `args`, killing it (and failing) after 60 s: a FIFO opened
/// for writing or reading would block for ever.
fn run_with_deadline(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut child = seismic_run()
        .current_dir(dir)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() >= 60 {
            child.kill().unwrap();
            panic!("seismic-run {args:?} did not end within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn special_files_and_the_result_itself_at_derived_paths_are_refused_before_the_run() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("derived-special");
    std::fs::write(dir.0.join("in.toml"), INPUT).unwrap();
    std::fs::write(dir.0.join("victim"), b"precious").unwrap();
    // The sidecar (always written), the SEG-Y (output.segy) and a picture (--plot).
    mkfifo(&dir.0.join("r.xdmf"));
    let cases: [(&[&str], &str); 3] = [
        (&["-o", "r.h5"], "the XDMF sidecar = r.xdmf is a FIFO (named pipe)"),
        (&["-o", "q.h5"], "the SEG-Y file (output.segy) = q.sgy is a socket"),
        (&["-o", "s.h5", "--plot"], "the picture (--plot) = s.snapshots.gif is a symbolic link"),
    ];
    std::os::unix::net::UnixListener::bind(dir.0.join("q.sgy")).map(drop).unwrap();
    std::os::unix::fs::symlink(dir.0.join("victim"), dir.0.join("s.snapshots.gif")).unwrap();
    let before = listing(&dir.0);
    for (args, message) in cases {
        let mut all = vec!["--backend", "cpu", "-q"];
        all.extend(args);
        all.push("in.toml");
        let out = run_with_deadline(&dir.0, &all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message) && stderr.contains("refusing to replace it"), "{args:?}: {stderr}");
        assert_eq!(listing(&dir.0), before, "{args:?}: nothing written, not even the result");
    }
    assert!(std::fs::symlink_metadata(dir.0.join("r.xdmf")).unwrap().file_type().is_fifo());
    assert_eq!(std::fs::read(dir.0.join("victim")).unwrap(), b"precious");

    // A result named like one of its derived files would be replaced by it.
    let out = run_with_deadline(&dir.0, &["--backend", "cpu", "-q", "-o", "t.sgy", "in.toml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the SEG-Y file (output.segy) would replace --output = t.sgy itself"), "{stderr}");
    assert_eq!(listing(&dir.0), before);
}

#[test]
fn a_derived_file_failing_after_the_run_keeps_the_result_and_exits_1() {
    let dir = scratch("derived-late");
    // Long enough (about 0.2 s even on 16 fast cores) to plant a directory while it steps.
    let input = INPUT.replace("steps = 20", "steps = 5000").replace("snapshot_every = 5", "snapshot_every = 0");
    let input = input.lines().filter(|l| !l.starts_with("snapshot = ")).collect::<Vec<_>>().join("\n");
    std::fs::write(dir.0.join("in.toml"), input).unwrap();
    let mut child = seismic_run()
        .current_dir(&dir.0)
        .args(["--backend", "cpu", "-q", "in.toml"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The result's temporary file exists once the writer has started, before the first step.
    let started = std::time::Instant::now();
    while !listing(&dir.0).iter().any(|n| n.starts_with(".r.h5.") && n.ends_with(".partial")) {
        assert!(started.elapsed().as_secs() < 60, "the run never started");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before a directory could be planted");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    std::fs::create_dir(dir.0.join("r.xdmf")).unwrap();
    assert!(child.try_wait().unwrap().is_none(), "the run ended before the directory was planted");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the result file r.h5 is complete and kept, but a file derived from it failed"),
        "{stderr}"
    );
    assert!(stderr.contains("r.xdmf is a directory, not a regular file"), "{stderr}");
    let f = H5File::open(dir.0.join("r.h5")).expect("the result is kept");
    assert_eq!(f.dataset("stats/seconds").unwrap().shape(), [5000], "and complete");
    assert!(dir.0.join("r.xdmf").is_dir(), "the planted directory is left alone");
    // r.sgy comes after the sidecar, which failed; no temporary file is left.
    assert_eq!(listing(&dir.0), ["r.h5", "r.xdmf"]);
}

#[test]
fn export_refuses_what_is_not_a_result_and_unsafe_outputs() {
    let dir = scratch("export-bad");
    run_once(&dir.0);
    let result = std::fs::read(dir.0.join("r.h5")).unwrap();
    std::fs::write(dir.0.join("text.h5"), "not HDF5\n").unwrap();
    std::fs::write(dir.0.join("empty.h5"), b"").unwrap();
    std::fs::write(dir.0.join("cut.h5"), &result[..result.len() / 3]).unwrap();
    std::fs::create_dir(dir.0.join("folder.h5")).unwrap();
    mkfifo(&dir.0.join("fifo.h5"));
    {
        let other = H5File::create(dir.0.join("other.h5")).unwrap();
        other.new_dataset::<f64>().shape([3]).create("x").unwrap().write_raw(&[1.0, 2.0, 3.0]).unwrap();
        other.close().unwrap();
    }
    let before = listing(&dir.0);
    for (name, message) in [
        ("text.h5", "text.h5 is not a readable seismic-run result file: cannot open text.h5 as HDF5"),
        ("empty.h5", "empty.h5 is not a readable seismic-run result file"),
        ("cut.h5", "cut.h5 is not a readable seismic-run result file"),
        ("other.h5", "other.h5 is not a readable seismic-run result file: other.h5: root attribute input"),
        ("folder.h5", "folder.h5 is not a regular file"),
        ("fifo.h5", "fifo.h5 is not a regular file"),
        ("missing.h5", "cannot read missing.h5"),
    ] {
        let out = run_with_deadline(&dir.0, &["export", name, "--xdmf", "--plot", "--segy", "out.sgy"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(message), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert_eq!(listing(&dir.0), before, "{name}: nothing written");
    }
    // Outputs: the result itself under another name, a FIFO, a link.
    mkfifo(&dir.0.join("fifo.sgy"));
    std::fs::remove_file(dir.0.join("r.xdmf")).unwrap();
    std::os::unix::fs::symlink(dir.0.join("r.h5"), dir.0.join("r.xdmf")).unwrap();
    let before = listing(&dir.0);
    for (args, message) in [
        (&["export", "r.h5", "--segy", "./r.h5"][..], "--segy would replace RESULT.h5 = r.h5 itself (./r.h5)"),
        (&["export", "r.h5", "--segy", "fifo.sgy"][..], "--segy = fifo.sgy is a FIFO (named pipe)"),
        (&["export", "r.h5", "--xdmf"][..], "the XDMF sidecar (--xdmf) = r.xdmf is a symbolic link"),
    ] {
        let out = run_with_deadline(&dir.0, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert_eq!(listing(&dir.0), before, "{args:?}: nothing written");
    }
    assert_eq!(std::fs::read(dir.0.join("r.h5")).unwrap(), result, "the result is untouched");
}

/// Writes `values` into `ds` (an empty dataset stays unwritten: rust-hdf5 allocates no data for it).
fn fill<T: rust_hdf5::H5Type>(ds: &rust_hdf5::H5Dataset, values: &[T]) {
    if !values.is_empty() {
        ds.write_raw(values).unwrap();
    }
}

/// A result-like file: the datasets and attributes `ResultFile::open` reads, each of which a case
/// may spoil.
#[derive(Clone)]
struct Fake {
    vp_shape: Vec<usize>,
    spacing: Vec<f64>,
    steps: usize,
    dt: Vec<f64>,
    t0: f64,
    positions: Vec<usize>,
    xz_axes: &'static str,
    xz_shape: Vec<usize>,
    xz_index: u64,
}

impl Fake {
    fn good() -> Fake {
        Fake {
            vp_shape: vec![6, 5, 4],
            spacing: vec![10.0, 10.0, 10.0],
            steps: 8,
            dt: vec![1e-3],
            t0: 1e-3,
            positions: vec![2, 3],
            xz_axes: "zx",
            xz_shape: vec![2, 6, 4],
            xz_index: 2,
        }
    }

    fn write(&self, path: &Path) {
        let f = H5File::create(path).unwrap();
        let input = INPUT.replace("shape = [24, 14, 18]", "shape = [4, 5, 6]");
        f.root_group().set_attr_string("input", &input).unwrap();
        for name in ["version", "backend", "device"] {
            f.root_group().set_attr_string(name, "test").unwrap();
        }
        let model = f.create_group("model").unwrap();
        let n: usize = self.vp_shape.iter().product();
        let vp = model.new_dataset::<f32>().shape(&self.vp_shape).create("vp").unwrap();
        fill(&vp, &vec![2000.0f32; n]);
        vp.new_attr::<f64>().shape([self.spacing.len()]).create("spacing").unwrap().write_array(&self.spacing).unwrap();
        vp.new_attr::<f64>().shape([3]).create("origin").unwrap().write_array(&[0.0, 0.0, 0.0]).unwrap();
        let stats = f.create_group("stats").unwrap();
        let s = stats.new_dataset::<f64>().shape([self.steps]).create("seconds").unwrap();
        fill(&s, &vec![1e-3; self.steps]);
        let rec = f.create_group("receivers").unwrap();
        let nrec = self.positions[0];
        let p = rec.new_dataset::<f32>().shape([nrec, self.steps]).create("pressure").unwrap();
        fill(&p, &vec![0.5f32; nrec * self.steps]);
        p.new_attr::<f64>().shape([self.dt.len()]).create("dt").unwrap().write_array(&self.dt).unwrap();
        p.new_attr::<f64>().shape(()).create("t0").unwrap().write_numeric(&self.t0).unwrap();
        let m: usize = self.positions.iter().product();
        let pos = rec.new_dataset::<f64>().shape(&self.positions).create("position").unwrap();
        fill(&pos, &vec![15.0; m]);
        let snaps = f.create_group("snapshots").unwrap();
        let t = snaps.new_dataset::<f64>().shape([2]).create("time").unwrap();
        t.write_raw(&[4e-3, 8e-3]).unwrap();
        let st = snaps.new_dataset::<u64>().shape([2]).create("step").unwrap();
        st.write_raw(&[4u64, 8]).unwrap();
        let m: usize = self.xz_shape.iter().product();
        let xz = snaps.new_dataset::<f32>().shape(&self.xz_shape).create("pressure_xz").unwrap();
        fill(&xz, &vec![0.25f32; m]);
        xz.new_attr::<rust_hdf5::VarLenUnicode>().shape(()).create("axes").unwrap().write_string(self.xz_axes).unwrap();
        xz.new_attr::<f64>().shape(()).create("at").unwrap().write_numeric(&20.0).unwrap();
        xz.new_attr::<u64>().shape(()).create("index").unwrap().write_numeric(&self.xz_index).unwrap();
        f.close().unwrap();
    }
}

/// Opens `path` and reads everything the derived files read, catching panics.
fn read_all(path: &Path, out: &Path) -> std::thread::Result<anyhow::Result<()>> {
    use seismic_run::output::{result::ResultFile, segy, xdmf};
    std::panic::catch_unwind(|| {
        let r = ResultFile::open(path)?;
        xdmf::document(&r);
        if !r.receivers.is_empty() {
            segy::write(&r, out)?;
        }
        if let Some((series, iy)) = r.xz_view() {
            r.model_xz(iy)?;
            for k in 0..r.snapshot_times.len() {
                r.xz_frame(series, iy, k)?;
            }
        }
        Ok(())
    })
}

#[test]
fn result_files_with_inconsistent_metadata_are_refused_naming_what() {
    let dir = scratch("fake");
    let path = dir.0.join("fake.h5");
    let out = dir.0.join("fake.sgy");
    Fake::good().write(&path);
    read_all(&path, &out).unwrap().expect("the good fake reads");
    let g = Fake::good;
    let cases: Vec<(Fake, &str)> = vec![
        (Fake { spacing: vec![10.0, f64::NAN, 10.0], ..g() }, "/model/vp spacing[1] = NaN"),
        (Fake { spacing: vec![10.0, 10.0], ..g() }, "attribute spacing has 2 values, expected 3"),
        (Fake { vp_shape: vec![6, 0, 4], xz_shape: vec![2, 6, 4], ..g() }, "expected positive dimensions"),
        (Fake { vp_shape: vec![6, 4], ..g() }, "/model/vp has 2 dimensions"),
        (Fake { steps: 0, ..g() }, "/stats/seconds is empty"),
        (Fake { dt: vec![], ..g() }, "attribute dt has 0 values, expected 1"),
        (Fake { dt: vec![-1e-3], ..g() }, "/receivers/pressure dt = -0.001"),
        (Fake { t0: f64::INFINITY, ..g() }, "/receivers/pressure t0 = inf"),
        (Fake { positions: vec![2, 2], ..g() }, "/receivers/position has shape [2, 2], expected [receivers, 3]"),
        (Fake { xz_axes: "zq", ..g() }, "has axes \"zq\", expected zyx, zx, yx or zy"),
        (
            Fake { xz_shape: vec![2, 3, 4], ..g() },
            "/snapshots/pressure_xz has shape [2, 3, 4], expected 2 snapshots of [6, 4]",
        ),
        (Fake { xz_index: 5, ..g() }, "attribute index = 5, outside the grid's 5 points"),
    ];
    for (fake, message) in cases {
        fake.write(&path);
        let e = read_all(&path, &out).unwrap_or_else(|_| panic!("{message}: panicked")).expect_err(message);
        let e = format!("{e:#}");
        assert!(e.contains("fake.h5 is not a readable seismic-run result file") && e.contains(message), "{e}");
    }
}

#[test]
fn mutated_result_files_read_or_fail_without_panicking() {
    let dir = scratch("mutated");
    run_once(&dir.0);
    let good = std::fs::read(dir.0.join("r.h5")).unwrap();
    let (path, out) = (dir.0.join("m.h5"), dir.0.join("m.sgy"));
    // A fixed xorshift sequence: 1..16 bytes per case flipped, set to extremes or overwritten.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut failed, cases) = (0, 300);
    for case in 0..cases {
        let mut b = good.clone();
        for _ in 0..[1, 1, 2, 4, 16][(next() % 5) as usize] {
            let at = (next() % b.len() as u64) as usize;
            b[at] = match next() % 3 {
                0 => b[at] ^ (1 << (next() % 8)),
                1 => [0, 0xff, 0x7f, 0x80][(next() % 4) as usize],
                _ => next() as u8,
            };
        }
        std::fs::write(&path, &b).unwrap();
        match read_all(&path, &out) {
            Ok(Ok(())) => {}
            Ok(Err(_)) => failed += 1,
            Err(_) => panic!("case {case}: reading a mutated result file panicked"),
        }
    }
    // Most single-byte changes land in data (read as other values); some in the structure.
    println!("{failed} of {cases} mutated files refused with an error, none panicked");
    assert!(failed > 0, "some mutations hit the file's structure and were refused");
}
