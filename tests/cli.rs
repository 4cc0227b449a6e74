//! The `seismic-run` binary end to end: bad inputs fail with a message naming the key or file, a
//! non-zero exit and no output file; a tiny run writes a complete result file; Ctrl-C stops a run
//! with exit code 130 and removes its partial file.

use rust_hdf5::H5File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test: cargo's build, else (test executables copied elsewhere, as
/// ../shared/tools/gpu-stage stages them in .gpu/tests beside .gpu/bin) `../bin/seismic-run`
/// next to this test executable.
fn seismic_run() -> Command {
    let built = Path::new(env!("CARGO_BIN_EXE_seismic-run"));
    let staged = std::env::current_exe().ok().and_then(|t| Some(t.parent()?.parent()?.join("bin").join("seismic-run")));
    match staged {
        Some(s) if !built.exists() && s.exists() => Command::new(s),
        _ => Command::new(built),
    }
}

/// A fresh, empty directory for one test, removed when the test ends.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("seismic-run-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A small valid input with the given `[time]` and `[model]` bodies.
fn tiny_input(time: &str, model: &str) -> String {
    format!(
        r#"
[grid]
shape = [24, 20, 22]
spacing = [10.0, 10.0, 10.0]

[model]
{model}

[stencil]
radius = 2

[time]
{time}

[source]
position = [120.0, 100.0, 110.0]
frequency = 20.0

[[receivers]]
line = {{ start = [40.0, 100.0, 110.0], end = [200.0, 100.0, 110.0], count = 5 }}

[boundary]
kind = "cpml"
width = 5

[output]
snapshot_every = 5
snapshot = [{{ kind = "xz", at = 100.0 }}, {{ kind = "volume" }}]
"#
    )
}

const CONSTANT: &str = "kind = \"constant\"\nvp = 2000.0";

fn run(dir: &Path, input: &str, args: &[&str]) -> Output {
    let path = dir.join("input.toml");
    std::fs::write(&path, input).unwrap();
    seismic_run().current_dir(dir).args(args).arg(&path).output().expect("the binary runs")
}

/// Files in `dir` other than the input (a failed run must leave none, not even a partial file).
fn outputs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "input.toml")
        .collect();
    v.sort();
    v
}

fn assert_fails_naming(out: &Output, dir: &Path, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, stderr:\n{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "stderr should name {n:?}:\n{stderr}");
    }
    assert_eq!(outputs(dir), Vec::<String>::new(), "no output file after a failure");
}

#[test]
fn unknown_key_is_named() {
    let dir = scratch("unknown-key");
    let input = tiny_input("steps = 10", CONSTANT).replace("frequency = 20.0", "frequency = 20.0\nfrequncy = 3");
    let out = run(&dir, &input, &["--backend", "cpu", "-o", "out.h5"]);
    assert_fails_naming(&out, &dir, &["frequncy", "input.toml"]);
}

#[test]
fn unwritable_output_directory_is_named() {
    let dir = scratch("unwritable");
    // A regular file where the output directory should be: no user, root included, can write there.
    std::fs::write(dir.join("blocker"), b"").unwrap();
    let out = run(&dir, &tiny_input("steps = 10", CONSTANT), &["--backend", "cpu", "-o", "blocker/out.h5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("blocker"), "{stderr}");
    assert!(stderr.contains("--output") || stderr.contains("output.path"), "{stderr}");
    assert_eq!(outputs(&dir), vec!["blocker".to_string()]);
}

#[test]
fn missing_model_file_is_named() {
    let dir = scratch("missing-model");
    let model = "kind = \"file\"\npath = \"no-such-velocity.bin\"\nshape = [24, 20, 22]\nspacing = [10.0, 10.0, 10.0]";
    let out = run(&dir, &tiny_input("steps = 10", model), &["--backend", "cpu", "-o", "out.h5"]);
    assert_fails_naming(&out, &dir, &["no-such-velocity.bin"]);
}

#[test]
fn dt_above_the_cfl_limit_is_named() {
    let dir = scratch("cfl");
    let out = run(&dir, &tiny_input("steps = 10\ndt = 0.01", CONSTANT), &["--backend", "cpu", "-o", "out.h5"]);
    assert_fails_naming(&out, &dir, &["time.dt", "CFL"]);
}

#[test]
fn grid_too_large_for_memory_is_named_before_allocating() {
    let dir = scratch("too-large");
    let input = tiny_input("steps = 10", CONSTANT).replace("shape = [24, 20, 22]", "shape = [40000, 40000, 40000]");
    let out = run(&dir, &input, &["--backend", "cpu", "-o", "out.h5"]);
    assert_fails_naming(&out, &dir, &["grid.shape"]);
}

#[test]
fn help_documents_every_option() {
    let out = seismic_run().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for opt in ["--backend", "--kernel", "--output", "--steps", "--quiet", "--plot", "INPUT.toml", "auto", "three-pass"]
    {
        assert!(help.contains(opt), "--help should mention {opt}:\n{help}");
    }
}

#[test]
fn tiny_run_writes_a_complete_file() {
    let dir = scratch("tiny");
    // `run` subcommand form; the bare form is what the other tests use.
    let path = dir.join("input.toml");
    std::fs::write(&path, tiny_input("steps = 12", CONSTANT)).unwrap();
    let out = seismic_run()
        .current_dir(&*dir)
        .args(["run", "--backend", "cpu", "--plot", "-o", "result.h5"])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("12 steps") && stdout.contains("GB/s") && stdout.contains("result.h5"), "{stdout}");
    assert_eq!(
        outputs(&dir),
        ["result.gather.png", "result.h5", "result.snapshot.png", "result.snapshots.gif", "result.xdmf"]
    );

    let f = H5File::open(dir.join("result.h5")).unwrap();
    let shape = |p: &str| f.dataset(p).unwrap().shape();
    assert_eq!(shape("model/vp"), vec![22, 20, 24]);
    assert_eq!(shape("snapshots/pressure"), vec![2, 22, 20, 24]);
    assert_eq!(shape("snapshots/pressure_xz"), vec![2, 22, 24]);
    assert_eq!(f.dataset("snapshots/step").unwrap().read_raw::<u64>().unwrap(), vec![5, 10]);
    assert_eq!(shape("receivers/pressure"), vec![5, 12]);
    assert_eq!(shape("receivers/position"), vec![5, 3]);
    for s in ["step", "seconds", "effective_gbps", "gpts_per_s"] {
        assert_eq!(shape(&format!("stats/{s}")), vec![12]);
    }
    let traces = f.dataset("receivers/pressure").unwrap().read_raw::<f32>().unwrap();
    assert!(traces.iter().any(|&v| v != 0.0), "the wave reaches the receivers");
    // The xz plane and the volume cut at the same y agree.
    let vol = f.dataset("snapshots/pressure").unwrap().read_raw::<f32>().unwrap();
    let xz = f.dataset("snapshots/pressure_xz").unwrap().read_raw::<f32>().unwrap();
    let (nx, ny, nz) = (24, 20, 22);
    for iz in 0..nz {
        for ix in 0..nx {
            assert_eq!(xz[(nz + iz) * nx + ix], vol[((nz + iz) * ny + 10) * nx + ix]);
        }
    }
    let root = f.root_group();
    assert_eq!(root.attr_names().unwrap().iter().filter(|n| *n == "input" || *n == "backend").count(), 2);
}

#[test]
fn steps_override_and_quiet() {
    let dir = scratch("quiet");
    let out = run(&dir, &tiny_input("duration = 1.0", CONSTANT), &["--backend", "cpu", "--steps", "3", "-q"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "--quiet prints nothing on stdout");
    // Default output path from the input: output.h5 in the current directory.
    let f = H5File::open(dir.join("output.h5")).unwrap();
    assert_eq!(f.dataset("stats/seconds").unwrap().shape(), vec![3]);
}

#[test]
fn ctrl_c_stops_between_steps_and_leaves_no_output() {
    let dir = scratch("interrupt");
    let input = tiny_input("steps = 200000", CONSTANT).replace("snapshot_every = 5", "snapshot_every = 0");
    let path = dir.join("input.toml");
    std::fs::write(&path, input).unwrap();
    let mut child = seismic_run()
        .current_dir(&*dir)
        .args(["--backend", "cpu", "-o", "out.h5"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // The partial file exists once the writer has started, i.e. the loop is running.
    let started = std::time::Instant::now();
    while !dir.join("out.h5.partial").exists() {
        assert!(started.elapsed().as_secs() < 60, "the run never started");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be interrupted");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs");
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "stderr:\n{stderr}");
    assert!(stderr.contains("interrupted after") && stderr.contains("of 200000 steps"), "{stderr}");
    assert_eq!(outputs(&dir), Vec::<String>::new(), "an interrupted run leaves no file, partial or not");
}

#[test]
fn compression_level_out_of_range_is_named() {
    let dir = scratch("bad-compression");
    let input =
        tiny_input("steps = 10", CONSTANT).replace("snapshot_every = 5", "snapshot_every = 5\ncompression = 12");
    let out = run(&dir, &input, &["--backend", "cpu", "-o", "out.h5"]);
    assert_fails_naming(&out, &dir, &["output.compression", "12"]);
}

#[test]
fn compressed_snapshots_hold_the_same_values() {
    let dir = scratch("compression");
    let plain = run(&dir, &tiny_input("steps = 10", CONSTANT), &["--backend", "cpu", "-q", "-o", "plain.h5"]);
    assert!(plain.status.success(), "{}", String::from_utf8_lossy(&plain.stderr));
    let input = tiny_input("steps = 10", CONSTANT).replace("snapshot_every = 5", "snapshot_every = 5\ncompression = 4");
    let packed = run(&dir, &input, &["--backend", "cpu", "-q", "-o", "packed.h5"]);
    assert!(packed.status.success(), "{}", String::from_utf8_lossy(&packed.stderr));
    let (a, b) = (H5File::open(dir.join("plain.h5")).unwrap(), H5File::open(dir.join("packed.h5")).unwrap());
    for name in ["snapshots/pressure", "snapshots/pressure_xz"] {
        let (pa, pb) = (a.dataset(name).unwrap(), b.dataset(name).unwrap());
        assert!(!pa.is_chunked() && pb.is_chunked(), "{name}: only the compressed file is chunked");
        assert_eq!(pb.filters().unwrap().len(), 2, "{name}: shuffle and deflate");
        assert_eq!(pa.read_raw::<f32>().unwrap(), pb.read_raw::<f32>().unwrap(), "{name}");
    }
}

#[test]
fn segy_without_receivers_is_named() {
    let dir = scratch("segy-no-receivers");
    let input = tiny_input("steps = 10", CONSTANT)
        .replace("[[receivers]]\nline = { start = [40.0, 100.0, 110.0], end = [200.0, 100.0, 110.0], count = 5 }", "")
        .replace("snapshot_every = 5", "snapshot_every = 5\nsegy = true");
    assert!(!input.contains("[[receivers]]"));
    let out = run(&dir, &input, &["--backend", "cpu", "-o", "out.h5"]);
    assert_fails_naming(&out, &dir, &["output.segy", "[[receivers]]"]);
}
