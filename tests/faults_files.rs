//! Faults of a run's files, through the binary on the CPU backend (part of the fault suite):
//! `--resume` runs again the shots computed from another input (frequency, velocity, steps, free
//! surface) and those whose file is damaged, and `--resume=strict` refuses them; two processes
//! resuming one survey run every shot once and both end well; two runs writing one result path at
//! once leave the result and its side files of one run; a rerun without `segy` or `--plot` removes
//! the earlier run's SEG-Y and pictures with a notice; with `mpi`, decomposed runs and decomposed
//! survey shots write their XDMF, SEG-Y and pictures. Every process has a time limit: a hang fails.

mod process;

use process::{Scratch, scratch, seismic_run};
use seismic_run::output::result::ResultFile;
use seismic_run::survey::{self, SurveyFiles};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Seconds any one process of these tests may take.
const LIMIT: Duration = Duration::from_secs(60);

/// A survey of `shots` shots along x over a layered model with CPML; `source` and `extra` are
/// spliced into `[source]` and the end.
fn input(shots: usize, source: &str, extra: &str) -> String {
    format!(
        "[grid]\nshape = [30, 16, 24]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"layered\"\ndepths = [120.0]\n\
         velocities = [1500.0, 2500.0]\n[time]\nsteps = 40\n[source]\nposition = [80.0, 80.0, 40.0]\n{source}\n\
         [[receivers]]\nline = {{ start = [40.0, 80.0, 20.0], end = [240.0, 80.0, 20.0], count = 6 }}\n\
         [boundary]\nkind = \"cpml\"\nwidth = 5\n[output]\npath = \"s.h5\"\n{extra}\n[survey]\n\
         line = {{ start = [80.0, 80.0, 40.0], end = [200.0, 80.0, 40.0], count = {shots} }}\n"
    )
}

/// Starts the binary in `dir` with `args` (CPU backend), its output into files.
fn start(dir: &Path, tag: &str, args: &[&str]) -> (std::process::Child, [std::path::PathBuf; 2]) {
    let logs = [dir.join(format!("{tag}.out")), dir.join(format!("{tag}.err"))];
    let child = seismic_run()
        .current_dir(dir)
        .args(args)
        .args(["--backend", "cpu"])
        .stdout(Stdio::from(std::fs::File::create(&logs[0]).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&logs[1]).unwrap()))
        .spawn()
        .unwrap();
    (child, logs)
}

/// Waits for a process within [`LIMIT`] (killed and failed past it).
fn finish(mut child: std::process::Child, logs: [std::path::PathBuf; 2], what: &str) -> Output {
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {LIMIT:?}\n{}", std::fs::read_to_string(&logs[1]).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let [out, err] = logs.map(|p| std::fs::read(p).unwrap());
    Output { status, stdout: out, stderr: err }
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let (c, logs) = start(dir, "run", args);
    finish(c, logs, &format!("seismic-run {args:?}"))
}

fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{}\n{err}", String::from_utf8_lossy(&out.stdout));
    err
}

fn survey_dir(name: &str, text: &str) -> Scratch {
    let dir = scratch("faults_files", name);
    std::fs::write(dir.join("s.toml"), text).unwrap();
    dir
}

fn traces(path: &Path) -> Vec<u32> {
    ResultFile::open(path).unwrap().traces().unwrap().iter().map(|v| v.to_bits()).collect()
}

/// The SEG-Y file that `seismic-run export` writes from the result file `h5`: the one a run
/// writes beside that result, byte for byte (CI checks the same with `cmp`).
fn segy_of(h5: &Path) -> Vec<u8> {
    let out = h5.with_file_name(format!("{}.export-check.sgy", h5.file_stem().unwrap().to_string_lossy()));
    let status = seismic_run().arg("export").arg(h5).arg("--segy").arg(&out).output().unwrap();
    ok(&status);
    let bytes = std::fs::read(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    bytes
}

#[test]
fn a_resume_runs_again_the_shots_of_a_changed_input_and_strict_refuses_them() {
    let base = input(2, "frequency = 10.0", "");
    let dir = survey_dir("changed", &base);
    ok(&run(&dir, &["s.toml", "--quiet"]));
    let files = SurveyFiles::new(&dir.join("s.h5")).unwrap();
    // What changes, the input, extra arguments, and how the result file shows the change.
    type Case<'a> = (&'a str, String, &'a [&'a str], fn(&ResultFile) -> bool);
    let cases: [Case; 4] = [
        ("frequency", base.replace("frequency = 10.0", "frequency = 14.0"), &[], |r| {
            r.config.source.first().frequency == Some(14.0)
        }),
        (
            "velocity",
            base.replace("1500.0, 2500.0", "1600.0, 2500.0"),
            &[],
            |r| matches!(&r.config.model.velocity, seismic_run::config::ModelConfig::Layered { velocities, .. } if velocities[0] == 1600.0),
        ),
        ("steps", base.clone(), &["--steps", "30"], |r| r.steps == 30),
        ("free surface", base.replace("width = 5\n", "width = 5\nfree_surface = true\n"), &[], |r| {
            r.config.boundary.free_surface
        }),
    ];
    for (what, text, args, changed) in cases {
        std::fs::write(dir.join("s.toml"), &text).unwrap();
        let err = ok(&run(&dir, &[&["s.toml", "--quiet", "--resume"], args].concat()));
        assert!(err.contains("resume: 0 of 2 shots complete"), "{what}: {err}");
        assert!(err.contains("2 shots [0, 1] were computed from another input"), "{what}: {err}");
        for i in 0..2 {
            let r = ResultFile::open(&files.shot(i)).unwrap();
            assert!(changed(&r), "{what}: shot {i} holds the changed input's result");
            r.verify().unwrap();
        }
        // Now they are this input's: kept.
        let err = ok(&run(&dir, &[&["s.toml", "--quiet", "--resume=strict"], args].concat()));
        assert!(err.contains("resume: 2 of 2 shots complete"), "{what}: {err}");
    }
    // Strict refuses a changed input and leaves the files as they were.
    std::fs::write(dir.join("s.toml"), &base).unwrap();
    let before: Vec<Vec<u8>> = (0..2).map(|i| std::fs::read(files.shot(i)).unwrap()).collect();
    let strict = run(&dir, &["s.toml", "--quiet", "--resume=strict"]);
    assert_eq!(strict.status.code(), Some(1), "strict refuses");
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(err.contains("--resume=strict: survey shots [0, 1] were computed from another input"), "{err}");
    let after: Vec<Vec<u8>> = (0..2).map(|i| std::fs::read(files.shot(i)).unwrap()).collect();
    assert!(before == after, "strict changes nothing");
}

#[test]
fn a_shot_file_with_64_zeroed_bytes_runs_again() {
    let dir = survey_dir("damaged", &input(2, "frequency = 10.0", ""));
    ok(&run(&dir, &["s.toml", "--quiet"]));
    let files = SurveyFiles::new(&dir.join("s.h5")).unwrap();
    let want = traces(&files.shot(1));
    let mut bytes = std::fs::read(files.shot(1)).unwrap();
    let mid = bytes.len() / 2;
    assert!(bytes[mid..mid + 64].iter().any(|&b| b != 0), "the middle of the file holds data");
    bytes[mid..mid + 64].fill(0);
    std::fs::write(files.shot(1), &bytes).unwrap();
    assert!(ResultFile::open(&files.shot(1)).unwrap().verify().is_err(), "the damage is seen");

    let err = ok(&run(&dir, &["s.toml", "--quiet", "--resume"]));
    assert!(err.contains("resume: 1 of 2 shots complete"), "{err}");
    assert!(err.contains("resume: shot 1 is not kept") && err.contains("does not verify"), "{err}");
    ResultFile::open(&files.shot(1)).unwrap().verify().unwrap();
    assert_eq!(traces(&files.shot(1)), want, "run again to the same result");
}

#[test]
fn two_processes_resuming_one_survey_run_every_shot_once() {
    let shots = 8;
    let dir = survey_dir("resumers", &input(shots, "frequency = 10.0", ""));
    // Shots long enough that the second process starts while the first is running one.
    ok(&run(&dir, &["s.toml", "--quiet", "--steps", "240"]));
    let files = SurveyFiles::new(&dir.join("s.h5")).unwrap();
    let want: Vec<Vec<u32>> = (0..shots).map(|i| traces(&files.shot(i))).collect();
    // Two shots kept; the other six to run, by two processes started at once.
    for i in 2..shots {
        std::fs::remove_file(files.shot(i)).unwrap();
    }
    let a = start(&dir, "a", &["s.toml", "--resume", "--steps", "240"]);
    // The second starts once the first has finished a shot (and holds the next).
    let t = Instant::now();
    while !std::fs::read_to_string(&a.1[0]).unwrap_or_default().contains(" done (") && t.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    let b = start(&dir, "b", &["s.toml", "--resume", "--steps", "240"]);
    let (a, b) = (finish(a.0, a.1, "first resume"), finish(b.0, b.1, "second resume"));
    ok(&a);
    ok(&b);
    let out = format!("{}{}", String::from_utf8_lossy(&a.stdout), String::from_utf8_lossy(&b.stdout));
    for i in 0..shots {
        let runs = out.matches(&format!("shot {i} done (")).count();
        assert_eq!(runs, usize::from(i >= 2), "shot {i} run {runs} times:\n{out}");
    }
    for (name, o) in [("first", &a), ("second", &b)] {
        let err = String::from_utf8_lossy(&o.stderr);
        let line = err.lines().find(|l| l.starts_with("resume: ")).unwrap_or_else(|| panic!("{name}: {err}"));
        // "resume: K of N shots complete, L run by another process now, running the other M"
        let n: Vec<usize> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
        assert_eq!(n.len(), 4, "{line}");
        assert_eq!((n[1], n[0] + n[2] + n[3]), (shots, shots), "{name} counts every shot once: {line}");
    }
    for (i, want) in want.iter().enumerate() {
        assert_eq!(&traces(&files.shot(i)), want, "shot {i}");
    }
    let index = survey::read_index(&dir.join("s_survey.json")).unwrap();
    assert!(index.iter().all(|e| e.status == "complete"), "{index:?}");
}

/// The frames of a GIF animation.
fn gif_frames(path: &Path) -> usize {
    let mut d = gif::DecodeOptions::new().read_info(std::fs::File::open(path).unwrap()).unwrap();
    let mut n = 0;
    while d.read_next_frame().unwrap().is_some() {
        n += 1;
    }
    n
}

#[test]
fn two_runs_writing_one_result_leave_the_files_of_one() {
    // Two inputs that differ in every file of the set: traces (frequency), snapshots (XDMF grids,
    // animation frames); the one with more frames takes longer over its pictures.
    let single = |f: &str, every: usize| {
        input(1, &format!("frequency = {f}"), &format!("segy = true\nsnapshot_every = {every}\n"))
            .split("[survey]")
            .next()
            .unwrap()
            .to_string()
    };
    let dir = scratch("faults_files", "writers");
    std::fs::write(dir.join("a.toml"), single("10.0", 8)).unwrap();
    std::fs::write(dir.join("b.toml"), single("14.0", 40)).unwrap();
    let (h5, sgy, xdmf, gif) =
        (dir.join("same.h5"), dir.join("same.sgy"), dir.join("same.xdmf"), dir.join("same.snapshots.gif"));
    for pair in 0..4 {
        let a = start(&dir, "a", &["a.toml", "--quiet", "--plot", "--output", "same.h5"]);
        // B starts a little later each pair, so that its result lands at every point of A's
        // pictures.
        std::thread::sleep(Duration::from_millis(150 * pair));
        let b = start(&dir, "b", &["b.toml", "--quiet", "--plot", "--output", "same.h5"]);
        ok(&finish(a.0, a.1, "writer a"));
        ok(&finish(b.0, b.1, "writer b"));
        let r = ResultFile::open(&h5).unwrap();
        assert!(std::fs::read(&sgy).unwrap() == segy_of(&h5), "pair {pair}: the SEG-Y is the result's run's");
        let frames = std::fs::read_to_string(&xdmf).unwrap().matches("<Time ").count();
        assert_eq!(frames, r.snapshot_times.len() * r.snapshots.len(), "pair {pair}: the XDMF is the result's run's");
        assert_eq!(gif_frames(&gif), r.snapshot_times.len(), "pair {pair}: the animation is the result's run's");
        let names: Vec<String> =
            std::fs::read_dir(&*dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(!names.iter().any(|n| n.contains(".partial")), "no temporary file left: {names:?}");
    }
}

#[test]
fn a_rerun_without_segy_or_plot_removes_the_earlier_side_files() {
    let text = input(1, "frequency = 10.0", "snapshot_every = 10\n").split("[survey]").next().unwrap().to_string();
    let dir = scratch("faults_files", "stale");
    std::fs::write(dir.join("r.toml"), text.replace("path = \"s.h5\"", "path = \"r.h5\"\nsegy = true")).unwrap();
    ok(&run(&dir, &["r.toml", "--quiet", "--plot"]));
    let side = ["r.sgy", "r.snapshot.png", "r.snapshots.gif", "r.gather.png"];
    let side: Vec<_> = side.iter().map(|n| dir.join(n)).collect();
    let missing: Vec<_> = side.iter().filter(|p| !p.exists()).collect();
    assert!(missing.is_empty(), "the first run writes them: {missing:?}");
    std::fs::write(dir.join("r.toml"), text.replace("path = \"s.h5\"", "path = \"r.h5\"")).unwrap();
    let err = ok(&run(&dir, &["r.toml", "--quiet"]));
    for p in &side {
        assert!(!p.exists(), "{} left beside the new result", p.display());
        let name = p.file_name().unwrap().to_string_lossy();
        assert!(err.contains(&format!("notice: removed {name}: an earlier run's file")), "a notice for {name}: {err}");
    }
    assert!(dir.join("r.xdmf").exists() && dir.join("r.h5").exists());
}

/// Runs the binary under `mpirun` with `ranks` processes on the CPU backend, within [`LIMIT`].
#[cfg(feature = "mpi")]
fn mpirun(dir: &Path, ranks: usize, args: &[&str]) -> Output {
    let bin = seismic_run().get_program().to_owned();
    let logs = [dir.join("mpi.out"), dir.join("mpi.err")];
    let child = std::process::Command::new("mpirun")
        .current_dir(dir)
        .args(["--allow-run-as-root", "--oversubscribe", "-np", &ranks.to_string()])
        .arg(bin)
        .args(args)
        .args(["--backend", "cpu", "--quiet"])
        .env("OMP_NUM_THREADS", "1")
        .stdout(Stdio::from(std::fs::File::create(&logs[0]).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&logs[1]).unwrap()))
        .spawn()
        .expect("mpirun (Debian: openmpi-bin)");
    finish(child, logs, &format!("mpirun -np {ranks} {args:?}"))
}

#[cfg(feature = "mpi")]
#[test]
fn decomposed_runs_write_their_xdmf_segy_and_pictures() {
    let text = input(2, "frequency = 10.0", "segy = true\nsnapshot_every = 10\n");
    let dir = survey_dir("decomposed", &text);
    let single = text.split("[survey]").next().unwrap().replace("path = \"s.h5\"", "path = \"d.h5\"");
    std::fs::write(dir.join("d.toml"), format!("{single}[run]\ndecomposition = \"z\"\n")).unwrap();
    ok(&mpirun(&dir, 2, &["d.toml", "--plot"]));
    for name in ["d.xdmf", "d.sgy", "d.snapshot.png", "d.snapshots.gif", "d.gather.png"] {
        assert!(dir.join(name).exists(), "the decomposed run wrote {name}");
    }
    assert!(std::fs::read(dir.join("d.sgy")).unwrap() == segy_of(&dir.join("d.h5")), "the SEG-Y is the result's");

    // A survey whose shots run decomposed over groups of two ranks.
    std::fs::write(dir.join("s.toml"), format!("{text}ranks_per_shot = 2\n")).unwrap();
    ok(&mpirun(&dir, 2, &["s.toml", "--plot"]));
    let files = SurveyFiles::new(&dir.join("s.h5")).unwrap();
    for i in 0..2 {
        let h5 = files.shot(i);
        let stem = h5.file_stem().unwrap().to_string_lossy().into_owned();
        for name in [format!("{stem}.xdmf"), format!("{stem}.sgy"), format!("{stem}.gather.png")] {
            assert!(dir.join(&name).exists(), "shot {i} wrote {name}");
        }
        assert!(
            std::fs::read(h5.with_extension("sgy")).unwrap() == segy_of(&h5),
            "shot {i}: the SEG-Y is the result's"
        );
    }
}
