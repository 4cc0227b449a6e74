//! Surveys through the binary on the CPU backend: a survey's shots equal single runs of the same
//! shots bit for bit; a survey whose process is killed mid-way is finished by `--resume` with the
//! results of an uninterrupted one; with the `mpi` feature, two MPI ranks share the shots
//! dynamically and give the same results, and a rank killed mid-survey fails the job, which
//! `--resume` completes.

mod process;

use process::{Scratch, scratch, seismic_run};
use seismic_run::config::Config;
use seismic_run::output::result::ResultFile;
use seismic_run::survey::{self, SurveyFiles};
use std::path::Path;
use std::process::Output;

/// Four shots on a moving spread over a layered model with CPML and a free surface; `extra` adds
/// keys to `[survey]`.
fn input(shots: usize) -> String {
    format!(
        "[grid]\nshape = [40, 24, 30]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"layered\"\ndepths = [150.0]\n\
         velocities = [1500.0, 2500.0]\n[time]\nsteps = 60\n[source]\nposition = [100.0, 120.0, 40.0]\n\
         frequency = 10.0\n[[receivers]]\nline = {{ start = [50.0, 120.0, 20.0], end = [250.0, 120.0, 20.0], count = 5 }}\n\
         [boundary]\nkind = \"cpml\"\nwidth = 6\nfree_surface = true\n[output]\npath = \"s.h5\"\n[survey]\n\
         line = {{ start = [100.0, 120.0, 40.0], end = [220.0, 130.0, 45.0], count = {shots} }}\nspread = \"moving\"\n"
    )
}

fn run(dir: &Path, args: &[&str]) -> Output {
    seismic_run().current_dir(dir).args(args).args(["--backend", "cpu", "--quiet"]).output().unwrap()
}

fn ok(out: &Output) {
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

fn traces(path: &Path) -> Vec<u32> {
    ResultFile::open(path).unwrap().traces().unwrap().iter().map(|v| v.to_bits()).collect()
}

/// Each shot's traces, from a survey run in `dir`.
fn survey_traces(dir: &Path, shots: usize) -> Vec<Vec<u32>> {
    let files = SurveyFiles::new(&dir.join("s.h5")).unwrap();
    (0..shots).map(|i| traces(&files.shot(i))).collect()
}

fn survey_dir(name: &str, shots: usize) -> Scratch {
    let dir = scratch("survey", name);
    std::fs::write(dir.join("s.toml"), input(shots)).unwrap();
    dir
}

#[test]
fn a_survey_equals_its_shots_run_one_by_one() {
    let dir = survey_dir("equal", 4);
    ok(&run(&dir, &["s.toml"]));
    let got = survey_traces(&dir, 4);
    let text = input(4);
    let cfg = Config::from_toml(&text).unwrap();
    let shots = survey::shots(&cfg).unwrap();
    for (s, got) in shots.iter().zip(&got) {
        let single = dir.join(format!("single{}.toml", s.index));
        let shot_text = survey::shot_input(&text, s).unwrap().replace("\"s.h5\"", &format!("\"single{}.h5\"", s.index));
        std::fs::write(&single, shot_text).unwrap();
        ok(&run(&dir, &[single.file_name().unwrap().to_str().unwrap()]));
        assert_eq!(&traces(&dir.join(format!("single{}.h5", s.index))), got, "shot {}", s.index);
    }
    // The shots differ (the source and the spread move).
    assert_ne!(got[0], got[1]);
    let index = survey::read_index(&dir.join("s_survey.json")).unwrap();
    assert_eq!(index.len(), 4);
    assert!(index.iter().all(|e| e.status == "complete"), "{index:?}");
    assert_eq!(index[3].receiver_shift, [120.0, 10.0, 5.0]);
}

#[test]
fn a_killed_survey_resumes_to_the_uninterrupted_results() {
    let whole = survey_dir("whole", 4);
    ok(&run(&whole, &["s.toml"]));
    let want = survey_traces(&whole, 4);

    let dir = survey_dir("killed", 4);
    let out = seismic_run()
        .current_dir(&*dir)
        .args(["s.toml", "--backend", "cpu", "--quiet"])
        .env("SEISMIC_TEST_KILL_AFTER_SHOTS", "2")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the killed process must not report success");
    let files = SurveyFiles::new(&dir.join("s.h5")).unwrap();
    assert!(files.shot(1).exists() && !files.shot(2).exists(), "two shots were done before the kill");

    let out = run(&dir, &["s.toml", "--resume"]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("resume: 2 of 4 shots complete"), "{err}");
    assert!(err.contains("shots [2] had been started but not finished"), "the lost shot is named: {err}");
    assert_eq!(survey_traces(&dir, 4), want);
    // The shots kept are the ones of the killed run, not rerun.
    let index = survey::read_index(&dir.join("s_survey.json")).unwrap();
    assert!(index.iter().all(|e| e.status == "complete"));
}

#[test]
fn bad_surveys_are_refused_before_anything_runs() {
    let dir = survey_dir("bad", 4);
    let text = input(4).replace("end = [220.0, 130.0, 45.0]", "end = [300.0, 130.0, 45.0]");
    std::fs::write(dir.join("s.toml"), text).unwrap();
    let out = run(&dir, &["s.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("survey shot 3") && err.contains("receivers[0]") && err.contains("outside the grid"), "{err}");
    assert!(!dir.join("s_shot00000.h5").exists(), "nothing written");
    let single = input(4).split("[survey]").next().unwrap().to_string();
    std::fs::write(dir.join("one.toml"), single).unwrap();
    let err = String::from_utf8_lossy(&run(&dir, &["one.toml", "--resume"]).stderr).into_owned();
    assert!(err.contains("--resume") && err.contains("no [survey]"), "{err}");
}

/// Runs the binary under `mpirun` with `ranks` processes on the CPU backend.
#[cfg(feature = "mpi")]
fn mpirun(dir: &Path, ranks: usize, args: &[&str], env: &[(&str, &str)]) -> Output {
    mpirun_on("cpu", dir, ranks, args, env)
}

/// [`mpirun`] on `backend`.
#[cfg(feature = "mpi")]
fn mpirun_on(backend: &str, dir: &Path, ranks: usize, args: &[&str], env: &[(&str, &str)]) -> Output {
    let bin = seismic_run().get_program().to_owned();
    let mut c = std::process::Command::new("mpirun");
    c.current_dir(dir).args(["--allow-run-as-root", "--oversubscribe", "-np", &ranks.to_string()]);
    for (k, v) in env {
        c.args(["-x", &format!("{k}={v}")]);
    }
    c.arg(bin).args(args).args(["--backend", backend, "--quiet"]).env("OMP_NUM_THREADS", "1");
    c.output().expect("mpirun (Debian: openmpi-bin)")
}

#[cfg(feature = "mpi")]
#[test]
fn two_mpi_ranks_share_the_shots_and_give_the_same_results() {
    let one = survey_dir("mpi-one", 6);
    ok(&run(&one, &["s.toml"]));
    let dir = survey_dir("mpi-two", 6);
    ok(&mpirun(&dir, 2, &["s.toml"], &[]));
    assert_eq!(survey_traces(&dir, 6), survey_traces(&one, 6));
    let index = survey::read_index(&dir.join("s_survey.json")).unwrap();
    for rank in ["rank 0 of 2", "rank 1 of 2"] {
        assert!(
            index.iter().any(|e| e.ran_by.as_deref().unwrap_or("").starts_with(rank)),
            "{rank} ran no shot: {index:?}"
        );
    }
}

#[cfg(feature = "mpi")]
#[test]
fn a_killed_rank_fails_the_job_and_resume_completes_it() {
    let one = survey_dir("mpi-whole", 6);
    ok(&run(&one, &["s.toml"]));
    let dir = survey_dir("mpi-killed", 6);
    let out = mpirun(&dir, 2, &["s.toml"], &[("SEISMIC_TEST_KILL_AFTER_SHOTS", "1")]);
    assert!(!out.status.success(), "a job with a killed rank must fail");
    ok(&mpirun(&dir, 2, &["s.toml", "--resume"], &[]));
    assert_eq!(survey_traces(&dir, 6), survey_traces(&one, 6));
}

/// `--ranks-per-shot 2` under `mpirun -np 4`: two groups of two ranks, each shot split into two
/// z-slabs over its group (each rank sampling only its planes of the model), give the whole-shot
/// survey's traces and model bit for bit, and both groups run shots; a process count the group
/// size does not divide is refused, naming the key.
#[cfg(feature = "mpi")]
#[test]
fn groups_of_two_ranks_run_decomposed_shots_equal_to_whole_shots() {
    let one = survey_dir("groups-one", 5);
    ok(&run(&one, &["s.toml"]));
    let dir = survey_dir("groups-two", 5);
    ok(&mpirun(&dir, 4, &["s.toml", "--ranks-per-shot", "2"], &[]));
    assert_eq!(survey_traces(&dir, 5), survey_traces(&one, 5));
    let (a, b) = (SurveyFiles::new(&one.join("s.h5")).unwrap(), SurveyFiles::new(&dir.join("s.h5")).unwrap());
    for i in 0..5 {
        let vp = |f: &SurveyFiles| -> Vec<u32> {
            let file = rust_hdf5::H5File::open(f.shot(i)).unwrap();
            file.dataset("model/vp").unwrap().read_raw::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()
        };
        assert_eq!(vp(&a), vp(&b), "shot {i}: /model/vp");
    }
    let index = survey::read_index(&dir.join("s_survey.json")).unwrap();
    for group in ["group 0 of 2", "group 1 of 2"] {
        assert!(
            index.iter().any(|e| e.ran_by.as_deref().unwrap_or("").starts_with(group)),
            "{group} ran no shot: {index:?}"
        );
    }
    let out = mpirun(&survey_dir("groups-three", 2), 3, &["s.toml", "--ranks-per-shot", "2"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("survey.ranks_per_shot = 2 does not divide the job's 3"), "{err}");
}

/// A group of 4 ranks running each shot in y-z blocks (`[run] decomposition = "yz"`: 2 x 2 on this
/// 40 x 24 x 30 grid) gives the whole-shot survey's traces bit for bit.
#[cfg(feature = "mpi")]
#[test]
fn a_group_of_four_ranks_in_y_z_blocks_equals_whole_shots() {
    let one = survey_dir("blocks-one", 3);
    ok(&run(&one, &["s.toml"]));
    let dir = survey_dir("blocks-four", 3);
    std::fs::write(dir.join("s.toml"), format!("{}[run]\ndecomposition = \"yz\"\n", input(3))).unwrap();
    // The split the group makes of this grid (R = 4 by default: blocks at least 8 thick).
    assert_eq!(seismic_run::decomposition::Decomposition::block_counts([40, 24, 30], 4, 8), (2, 2));
    ok(&mpirun(&dir, 4, &["s.toml", "--ranks-per-shot", "4"], &[]));
    assert_eq!(survey_traces(&dir, 3), survey_traces(&one, 3));
}

/// The same on one GPU: two ranks sharing it (host-staged halos) run every shot split in two and
/// write the single-process GPU survey's traces bit for bit, in each of three runs (a race between
/// the halo upload and the next step showed in only some runs).
#[cfg(all(feature = "mpi", feature = "cuda"))]
#[test]
#[ignore = "needs a GPU"]
fn a_group_of_two_ranks_on_one_gpu_equals_the_whole_shot_gpu_survey() {
    let gpu = |dir: &Path, ranks: usize, extra: &[&str]| {
        let args: Vec<&str> = ["s.toml"].into_iter().chain(extra.iter().copied()).collect();
        mpirun_on("cuda", dir, ranks, &args, &[])
    };
    // On a GPU the CPML layer must be no wider than the halo (R = 4 planes).
    let narrow = |d: &Path| std::fs::write(d.join("s.toml"), input(3).replace("width = 6", "width = 4")).unwrap();
    let one = survey_dir("gpu-groups-one", 3);
    narrow(&one);
    ok(&gpu(&one, 1, &[]));
    for run in 0..3 {
        let dir = survey_dir(&format!("gpu-groups-two-{run}"), 3);
        narrow(&dir);
        ok(&gpu(&dir, 2, &["--ranks-per-shot", "2"]));
        assert_eq!(survey_traces(&dir, 3), survey_traces(&one, 3), "run {run}");
    }
}
