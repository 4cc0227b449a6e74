//! The `seismic-run` binary end to end: bad inputs fail with a message naming the key or file, a
//! non-zero exit and no output file; a tiny run writes a complete result file; SIGINT, SIGTERM and
//! SIGHUP stop a run with exit code 128 + the signal and remove its temporary file; special files
//! and links at the output path are refused and left as they were.

use rust_hdf5::H5File;
use std::path::Path;
use std::process::{Command, Output};

mod process;
use process::{Scratch, seismic_run};

fn scratch(name: &str) -> Scratch {
    process::scratch("cli", name)
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
    for opt in [
        "--backend",
        "--kernel",
        "--precision",
        "--output",
        "--steps",
        "--quiet",
        "--plot",
        "INPUT.toml",
        "auto",
        "three-pass",
        "f16",
    ] {
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

/// `--precision f16` runs the CPU reference's f16 mode: its traces within 0.1% of the f32 run's
/// (measured 3.6e-4), and the summary says the storage; an unknown precision names the key.
#[test]
fn f16_precision_on_the_cpu() {
    let traces = |precision: &str| {
        let dir = scratch(&format!("precision-{precision}"));
        let out = run(&dir, &tiny_input("steps = 60", CONSTANT), &["--backend", "cpu", "--precision", precision]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(&format!("{precision} storage")), "{stdout}");
        let f = H5File::open(dir.join("output.h5")).unwrap();
        f.dataset("receivers/pressure").unwrap().read_raw::<f32>().unwrap()
    };
    let (a, b) = (traces("f16"), traces("f32"));
    let num: f64 = a.iter().zip(&b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    let err = (num / den).sqrt();
    eprintln!("f16 vs f32, tiny run: relative L2 {err:.2e}");
    assert!(den > 0.0 && err < 1e-3, "relative L2 {err}");

    let dir = scratch("precision-bad");
    let input = tiny_input("steps = 2", CONSTANT) + "\n[run]\nprecision = \"f64\"\n";
    let out = run(&dir, &input, &["--backend", "cpu"]);
    assert_fails_naming(&out, &dir, &["precision", "f64"]);
}

/// Whether `dir` holds the run's temporary result file (`.out.h5.<random>.partial`).
fn has_temporary(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().any(|e| {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        n.starts_with(".out.h5.") && n.ends_with(".partial")
    })
}

/// Starts a long run, sends `signal` once it is stepping, and checks the exit status, the message
/// and that no file, temporary or not, is left.
fn signal_stops_the_run(signal: &str, status: i32) {
    let dir = scratch(&format!("signal-{signal}"));
    let input = tiny_input("steps = 200000", CONSTANT).replace("snapshot_every = 5", "snapshot_every = 0");
    // Snapshots off: no section list (a list with snapshot_every = 0 is refused).
    let input = input.lines().filter(|l| !l.starts_with("snapshot = ")).collect::<Vec<_>>().join("\n");
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
    // The temporary file exists once the writer has started, i.e. the loop is running.
    let started = std::time::Instant::now();
    while !has_temporary(&dir) {
        assert!(started.elapsed().as_secs() < 60, "the run never started");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be interrupted");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let kill = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().expect("kill runs");
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "stderr:\n{stderr}");
    assert!(stderr.contains("interrupted after") && stderr.contains("of 200000 steps"), "{stderr}");
    assert!(stderr.contains(&format!("(SIG{signal})")), "{stderr}");
    assert_eq!(outputs(&dir), Vec::<String>::new(), "an interrupted run leaves no file, temporary or not");
}

#[test]
fn ctrl_c_stops_between_steps_and_leaves_no_output() {
    signal_stops_the_run("INT", 130);
}

#[test]
fn sigterm_and_sighup_stop_like_ctrl_c_with_128_plus_the_signal() {
    signal_stops_the_run("TERM", 143);
    signal_stops_the_run("HUP", 129);
}

/// Runs with a deadline (a FIFO opened for writing would block for ever); kills the run and fails
/// the test when it is passed.
fn run_with_deadline(dir: &Path, input: &str, args: &[&str], seconds: u64) -> Output {
    let path = dir.join("input.toml");
    std::fs::write(&path, input).unwrap();
    let mut child = seismic_run()
        .current_dir(dir)
        .args(args)
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() >= seconds {
            child.kill().unwrap();
            panic!("the run did not end within {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn file_type(p: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(p).unwrap().file_type()
}

#[test]
fn dev_null_as_output_is_refused_and_left_a_device() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("dev-null");
    let out = run(&dir, &tiny_input("steps = 4", CONSTANT), &["--backend", "cpu", "-o", "/dev/null"]);
    assert_fails_naming(&out, &dir, &["--output = /dev/null is a character device", "not a regular file"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(file_type(Path::new("/dev/null")).is_char_device());
}

#[test]
fn device_node_fifo_and_socket_outputs_are_refused_without_hanging() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("special");
    let fifo = dir.join("fifo.h5");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
    let _socket = std::os::unix::net::UnixListener::bind(dir.join("socket.h5")).unwrap();
    let mut cases = vec![("fifo.h5", "a FIFO"), ("socket.h5", "a socket")];
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let node = Command::new("mknod").arg(dir.join("node.h5")).args(["c", "1", "3"]).status().unwrap();
        assert!(node.success(), "mknod as root");
        cases.push(("node.h5", "a character device"));
    } else {
        println!("SKIPPED the device-node case: creating a device node needs root (mknod)");
    }
    let before = outputs(&dir);
    for (name, kind) in cases {
        let out = run_with_deadline(&dir, &tiny_input("steps = 4", CONSTANT), &["--backend", "cpu", "-o", name], 60);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(&format!("--output = {name} is {kind}")), "{stderr}");
        assert!(stderr.contains("not a regular file: refusing to replace it"), "{stderr}");
        assert_eq!(outputs(&dir), before, "{name}: nothing created or replaced");
    }
    assert!(file_type(&fifo).is_fifo());
    assert!(file_type(&dir.join("socket.h5")).is_socket());
    if dir.join("node.h5").exists() {
        assert!(file_type(&dir.join("node.h5")).is_char_device());
    }
}

#[test]
fn a_link_at_the_old_temporary_name_is_not_followed() {
    let dir = scratch("link");
    std::fs::write(dir.join("victim"), b"precious").unwrap();
    std::os::unix::fs::symlink(dir.join("victim"), dir.join("out.h5.partial")).unwrap();
    let out = run(&dir, &tiny_input("steps = 6", CONSTANT), &["--backend", "cpu", "-q", "-o", "out.h5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(file_type(&dir.join("out.h5.partial")).is_symlink(), "the planted link is left alone");
    assert_eq!(std::fs::read(dir.join("victim")).unwrap(), b"precious", "its target is unchanged");
    H5File::open(dir.join("out.h5")).expect("the result is a whole HDF5 file");
    assert_eq!(outputs(&dir), ["out.h5", "out.h5.partial", "out.xdmf", "victim"], "no temporary file left");
    // A link at the output path itself is refused, its target untouched.
    std::os::unix::fs::symlink(dir.join("victim"), dir.join("linked.h5")).unwrap();
    let out = run(&dir, &tiny_input("steps = 6", CONSTANT), &["--backend", "cpu", "-q", "-o", "linked.h5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("linked.h5 is a symbolic link"));
    assert_eq!(std::fs::read(dir.join("victim")).unwrap(), b"precious");
}

#[test]
fn non_finite_absurd_and_huge_values_are_refused() {
    let base = tiny_input("steps = 6", CONSTANT);
    let cases: Vec<(String, Vec<&str>, Vec<&str>)> = vec![
        (base.replace("frequency = 20.0", "frequency = 20.0\namplitude = nan"), vec![], vec!["source.amplitude = NaN"]),
        (
            base.replace("frequency = 20.0", "frequency = 20.0\namplitude = 1e42"),
            vec![],
            vec!["source.amplitude = 1e42"],
        ),
        (base.replace("frequency = 20.0", "frequency = inf"), vec![], vec!["source.frequency = inf"]),
        (base.replace("frequency = 20.0", "frequency = 20.0\ndelay = -1e300"), vec![], vec!["source.delay = -1e300"]),
        (
            base.replace("spacing = [10.0, 10.0, 10.0]", "spacing = [1e300, 10.0, 10.0]"),
            vec![],
            vec!["grid.spacing[0] = 1e300"],
        ),
        (base.replace("steps = 6", "duration = inf"), vec![], vec!["time.duration = inf"]),
        (base.replace("steps = 6", "duration = 1e30"), vec![], vec!["time.duration = 1e30"]),
        (
            base.clone(),
            vec!["--steps", "18446744073709551615"],
            vec!["18446744073709551615", "more than the 1e8 steps"],
        ),
        (base.replace("vp = 2000.0", "vp = 1e300"), vec![], vec!["model.vp = 1e300"]),
        (
            base.replace("count = 5", "count = 100000000000"),
            vec![],
            vec!["100000000000 receivers", "GiB of host memory"],
        ),
        (
            base.replace(
                "line = { start = [40.0, 100.0, 110.0], end = [200.0, 100.0, 110.0], count = 5 }",
                "grid = { origin = [40.0, 100.0, 110.0], step_a = [1.0, 0, 0], count_a = 4294967296, \
                 step_b = [0, 1.0, 0], count_b = 4294967296 }",
            ),
            vec![],
            vec!["receivers[0]", "overflow"],
        ),
        (
            base.replace("shape = [24, 20, 22]", "shape = [24, 20, 22, 24]"),
            vec![],
            vec!["line 3", "[x, y, z], or [x, z] for a 2D grid"],
        ),
        (
            base.replace("position = [120.0, 100.0, 110.0]", "position = [120.0, 100.0, 110.0, 1.0, 2.0]"),
            vec![],
            vec!["position", "invalid length 5, expected [x, y, z], or [x, z] on a 2D grid"],
        ),
    ];
    for (i, (input, extra, needles)) in cases.iter().enumerate() {
        let dir = scratch(&format!("values-{i}"));
        let mut args = vec!["--backend", "cpu", "-q"];
        args.extend(extra);
        let out = run_with_deadline(&dir, input, &args, 60);
        assert_eq!(out.status.code(), Some(1), "case {i}: {}", String::from_utf8_lossy(&out.stderr));
        assert_fails_naming(&out, &dir, needles);
    }
}

#[test]
fn usage_errors_exit_2() {
    let out = seismic_run().args(["--no-such-option", "x.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "clap's usage errors exit 2, as docs/getting-started.md says");
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
