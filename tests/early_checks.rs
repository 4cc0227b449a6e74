//! The validation pass (`driver::validate`, run first by `driver::run`): inputs that used to fail
//! only after work (sampling, a whole run) or block, or were silently ignored, are refused before
//! any work with an error naming the key or path; one velocity range for every model kind; the
//! units check (velocities in m/s, spacings in m) and the key that turns it off.

use seismic_run::config::Config;
use seismic_run::driver::{self, Job};
use seismic_run::model;
use seismic_run::problem::Problem;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seismic-run-early-checks-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A valid run on the CPU backend, small enough to run in milliseconds; `{model}` is spliced into
/// `[model]`, `{output}` into `[output]` and `{tail}` after it (further sections).
fn input(model: &str, output: &str, tail: &str) -> String {
    format!(
        "[grid]\nshape = [24, 20, 16]\nspacing = [10.0, 10.0, 10.0]\n\n[model]\n{model}\n\n[time]\nsteps = 10\n\n\
         [source]\nposition = [120.0, 100.0, 40.0]\nfrequency = 15.0\n\n[[receivers]]\n\
         line = {{ start = [20.0, 100.0, 20.0], end = [220.0, 100.0, 20.0], count = 11 }}\n\n\
         [boundary]\nwidth = 4\n\n[output]\npath = \"out.h5\"\n{output}\n\n[run]\nbackend = \"cpu\"\n{tail}"
    )
}

const CONSTANT: &str = "kind = \"constant\"\nvp = 2000.0";

/// A job of `text` in `dir` (the input's folder; the output path taken from the input, in `dir`).
fn job(dir: &Path, text: &str) -> Job {
    let cfg = Config::from_toml(text).unwrap();
    Job {
        input: dir.join("run.toml"),
        input_dir: dir.to_path_buf(),
        text: text.to_string(),
        output: dir.join(&cfg.output.path),
        cfg,
        output_key: "output.path",
        plot: false,
        quiet: true,
        resume: None,
        started: Instant::now(),
    }
}

/// The error of running `job` through the driver, which must come within `limit`.
fn run_error(job: &Job, limit: Duration) -> String {
    let t0 = Instant::now();
    let e = match driver::run(job) {
        Ok(()) => panic!("accepted:\n{}", job.text),
        Err(e) => format!("{e:#}"),
    };
    eprintln!("=====\n{e}");
    assert!(t0.elapsed() < limit, "refused after {:?}, not before the work: {e}", t0.elapsed());
    e
}

fn assert_names(e: &str, parts: &[&str]) {
    for p in parts {
        assert!(e.contains(p), "error does not mention {p:?}:\n{e}");
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn the_valid_input_runs_through_the_driver() {
    let dir = scratch("valid");
    driver::run(&job(&dir, &input(CONSTANT, "", ""))).unwrap();
    assert_eq!(files_in(&dir), ["out.h5", "out.xdmf"]);
}

/// Opening a FIFO blocks until a writer comes: `model.path` naming one is refused before it is
/// opened, in the validation pass and in `model::sample`.
#[test]
fn a_fifo_as_model_path_is_refused_without_blocking() {
    let dir = scratch("fifo");
    let made = std::process::Command::new("mkfifo").arg(dir.join("pipe.bin")).status().unwrap();
    assert!(made.success());
    let text =
        input("kind = \"file\"\npath = \"pipe.bin\"\nshape = [16, 20, 24]\nspacing = [10.0, 10.0, 10.0]", "", "");
    let (tx, rx) = std::sync::mpsc::channel();
    let job = job(&dir, &text);
    let cfg = job.cfg.clone();
    let sample_dir = dir.clone();
    // A blocked open never returns: the test waits on a channel, not on the thread.
    std::thread::spawn(move || {
        let through_driver = driver::run(&job).map_err(|e| format!("{e:#}"));
        let through_sample = model::sample(&cfg, &sample_dir).map(|_| ()).map_err(|e| format!("{e:#}"));
        tx.send((through_driver, through_sample)).unwrap();
    });
    let (a, b) = rx.recv_timeout(Duration::from_secs(20)).expect("refused at once, not blocked on the FIFO");
    for e in [a.unwrap_err(), b.unwrap_err()] {
        assert_names(&e, &["model.path", "pipe.bin", "FIFO"]);
    }
    assert_eq!(files_in(&dir), ["pipe.bin"]);
}

/// An output path ending in `/` names a directory, even one that does not exist yet.
#[test]
fn an_output_path_ending_in_a_slash_is_refused() {
    let dir = scratch("slash");
    for path in ["results/", "sub/results/"] {
        let e = run_error(&job(&dir, &input(CONSTANT, "", "").replace("out.h5", path)), Duration::from_secs(5));
        assert_names(&e, &["output.path", path, "is a directory", "output.h5"]);
        let e = format!("{:#}", seismic_run::config::check_output_writable(&dir.join(path), "--output").unwrap_err());
        assert_names(&e, &["--output", "is a directory"]);
    }
    assert!(files_in(&dir).is_empty(), "{:?}", files_in(&dir));
}

/// A directory where the survey's index goes: refused before the first shot runs (it used to be
/// found when the index was written, after every shot).
#[test]
fn a_directory_at_the_survey_index_is_refused_before_any_shot() {
    let dir = scratch("survey-index");
    std::fs::create_dir_all(dir.join("out_survey.json")).unwrap();
    let text = input(CONSTANT, "", "[survey]\nshots = [[100.0, 100.0, 40.0], [140.0, 100.0, 40.0]]\n");
    let e = run_error(&job(&dir, &text), Duration::from_secs(5));
    assert_names(&e, &["the survey index", "out_survey.json", "a directory"]);
    assert_eq!(files_in(&dir), ["out_survey.json"], "no shot ran");
}

/// A model file of 1e-30 m/s is refused like a constant one: one velocity range for every kind.
#[test]
fn one_velocity_range_for_every_model_kind() {
    let dir = scratch("range");
    let n = 16 * 20 * 24;
    let write = |name: &str, v: f32| {
        let bytes: Vec<u8> = std::iter::repeat_n(v.to_le_bytes(), n).flatten().collect();
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    let file = |name: &str, extra: &str| {
        format!("kind = \"file\"\npath = \"{name}\"\nshape = [16, 20, 24]\nspacing = [10.0, 10.0, 10.0]\n{extra}")
    };
    write("tiny.bin", 1e-30);
    std::fs::write(dir.join("tiny.npy"), model::npy::to_bytes(&[16, 20, 24], &vec![1e-30; n])).unwrap();
    for (name, extra) in [("tiny.bin", ""), ("tiny.npy", "format = \"npy\"")] {
        let e = run_error(&job(&dir, &input(&file(name, extra), "", "")), Duration::from_secs(5));
        assert_names(&e, &[name, "1e-30", "m/s"]);
        // Even with the units check off, the hard range holds.
        let text = input(&file(name, extra), "", "check_units = false\n");
        assert_names(&run_error(&job(&dir, &text), Duration::from_secs(5)), &[name, "1e-30"]);
    }
    let e = run_error(&job(&dir, &input("kind = \"constant\"\nvp = 1e-30", "", "")), Duration::from_secs(5));
    assert_names(&e, &["model.vp = 1e-30"]);
    assert!(!dir.join("out.h5").exists());
}

/// Velocities in km/s or spacings in km: refused with the likely mistake named, unless
/// `[run] check_units = false` (a laboratory or nondimensional model).
#[test]
fn the_units_check_suggests_the_mistake_and_can_be_turned_off() {
    let dir = scratch("units");
    let e = run_error(&job(&dir, &input("kind = \"constant\"\nvp = 2.0", "", "")), Duration::from_secs(5));
    assert_names(&e, &["model.vp = 2", "velocities are in m/s", "did you mean 2000?", "check_units = false"]);
    let layered = "kind = \"layered\"\ndepths = [50.0]\nvelocities = [1500.0, 25000.0]";
    let e = run_error(&job(&dir, &input(layered, "", "")), Duration::from_secs(5));
    assert_names(&e, &["model.velocities[1] = 25000", "did you mean 25?"]);
    let fine = input(CONSTANT, "", "").replace("spacing = [10.0, 10.0, 10.0]", "spacing = [10.0, 0.01, 10.0]");
    let e = run_error(&job(&dir, &fine), Duration::from_secs(5));
    assert_names(&e, &["grid.spacing[1] = 0.01", "spacings are in m", "did you mean 10 m?"]);
    // A file model in km/s read as m/s: its sampled range fails the check.
    let bytes: Vec<u8> = std::iter::repeat_n(2.5f32.to_le_bytes(), 16 * 20 * 24).flatten().collect();
    std::fs::write(dir.join("kms.bin"), bytes).unwrap();
    let file = "kind = \"file\"\npath = \"kms.bin\"\nshape = [16, 20, 24]\nspacing = [10.0, 10.0, 10.0]";
    let e = run_error(&job(&dir, &input(file, "", "")), Duration::from_secs(5));
    assert_names(&e, &["model (its lowest velocity) = 2.5", "did you mean 2500?"]);
    assert!(!dir.join("out.h5").exists());
    // The same inputs, scaled down tenfold from field scale, run with the check off.
    let slow = input("kind = \"constant\"\nvp = 50.0", "", "check_units = false\n")
        .replace("spacing = [10.0, 10.0, 10.0]", "spacing = [0.05, 0.05, 0.05]")
        .replace("[120.0, 100.0, 40.0]", "[0.6, 0.5, 0.2]")
        .replace(
            "start = [20.0, 100.0, 20.0], end = [220.0, 100.0, 20.0]",
            "start = [0.1, 0.5, 0.1], end = [1.1, 0.5, 0.1]",
        );
    let cfg = Config::from_toml(&slow).unwrap();
    cfg.check_values().unwrap();
    let m = model::sample(&cfg, &dir).unwrap();
    Problem::build(&cfg, m.vp).unwrap();
    assert!(Config::from_toml(&input(CONSTANT, "", "")).unwrap().run.check_units, "on by default");
}

/// A snapshot list with snapshots off, and `--resume` on a run that is no survey (decomposed or
/// not): errors, not silently ignored.
#[test]
fn options_that_would_be_ignored_are_refused() {
    let dir = scratch("ignored");
    let text = input(CONSTANT, "snapshot = [{ kind = \"xz\", at = 100.0 }]", "");
    let e = run_error(&job(&dir, &text), Duration::from_secs(5));
    assert_names(&e, &["output.snapshot", "snapshot_every = 0"]);
    for decomposition in ["", "decomposition = \"z\"\n"] {
        let mut j = job(&dir, &input(CONSTANT, "", decomposition));
        j.resume = Some(seismic_run::survey::ResumeMode::Rerun);
        let e = run_error(&j, Duration::from_secs(5));
        assert_names(&e, &["--resume", "no [survey]"]);
    }
    assert!(files_in(&dir).is_empty(), "{:?}", files_in(&dir));
}

/// A grid whose velocity fits the host's memory but whose CPU fields do not is refused before
/// the model is sampled (it used to be sampled, then refused by the backend).
#[test]
fn a_grid_too_large_for_the_cpu_backend_is_refused_before_sampling() {
    let Some(available) = seismic_run::resources::available_host_memory() else { return };
    // A third of the memory for the velocity (8 bytes a point): the fields (about 28 more) exceed it.
    let points = available / 8 / 3;
    let nx = (points as f64).cbrt() as usize;
    let shape = format!("shape = [{nx}, {nx}, {nx}]");
    let dir = scratch("cpu-memory");
    let text = input(CONSTANT, "", "").replace("shape = [24, 20, 16]", &shape);
    let e = run_error(&job(&dir, &text), Duration::from_secs(2));
    assert_names(&e, &[&format!("grid.shape = [{nx}, {nx}, {nx}]"), "CPU fields", "GiB"]);
}

/// A CFL fraction so small that dt rounds to 0 (found by the binary's fuzzing): refused, not run
/// into a result file its own reader refuses.
#[test]
fn a_cfl_safety_whose_time_step_rounds_to_zero_is_refused() {
    let dir = scratch("cfl-safety");
    for value in ["5e-324", "1e-300", "0.0", "1.5"] {
        let text = input(CONSTANT, "", "").replace("steps = 10", &format!("steps = 10\ncfl_safety = {value}"));
        let e = run_error(&job(&dir, &text), Duration::from_secs(5));
        assert_names(&e, &["time.cfl_safety", "CFL"]);
    }
    assert!(files_in(&dir).is_empty(), "{:?}", files_in(&dir));
}
