//! The fault suite: runs stopped by signals and errors end within a time limit (a hang fails the
//! test), with the exit status of the signal (143, 129, 131, 138) or 1 for an error, each process
//! naming why, and no temporary file left. One process: SIGTERM during the animation, SIGQUIT
//! and SIGUSR1 during the time loop. With the `mpi` feature, surveys under `mpirun -np 2` and
//! `-np 3`: SIGTERM to one rank, to every rank, to mpirun while a rank waits at the final
//! barrier, an error in rank 0's preparation, SIGKILL of one rank then `--resume`; SIGTERM to
//! one rank of a survey in groups of 2 ranks (`-np 4`); and a decomposed run stopped by SIGHUP
//! to one rank.

mod process;

use process::{Scratch, scratch, seismic_run};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Longest a stopped run may take to end: longer is a hang.
const LIMIT: Duration = Duration::from_secs(40);
/// Longest a whole run (a `--resume`) may take on a loaded machine.
#[cfg(feature = "mpi")]
const WHOLE_RUN: Duration = Duration::from_secs(240);

/// A survey of `shots` shots of `steps` steps each on a 40 x 24 x 30 grid.
#[cfg(feature = "mpi")]
fn survey_input(shots: usize, steps: usize) -> String {
    format!(
        "[grid]\nshape = [40, 24, 30]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"layered\"\ndepths = [150.0]\n\
         velocities = [1500.0, 2500.0]\n[time]\nsteps = {steps}\n[source]\nposition = [100.0, 120.0, 40.0]\n\
         frequency = 10.0\n[[receivers]]\nline = {{ start = [50.0, 120.0, 20.0], end = [250.0, 120.0, 20.0], count = 5 }}\n\
         [boundary]\nkind = \"cpml\"\nwidth = 6\n[output]\npath = \"s.h5\"\n[survey]\n\
         line = {{ start = [100.0, 120.0, 40.0], end = [220.0, 130.0, 45.0], count = {shots} }}\n"
    )
}

/// A single run of `steps` steps on an `n` x `n` x `n` grid with an xz snapshot every `every`
/// steps.
fn single_input(n: usize, steps: usize, every: usize) -> String {
    let c = 5.0 * n as f64;
    // A snapshot list without snapshots is refused.
    let snapshot = if every > 0 { format!("snapshot = [{{ kind = \"xz\", at = {c} }}]\n") } else { String::new() };
    format!(
        "[grid]\nshape = [{n}, {n}, {n}]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
         [time]\nsteps = {steps}\n[source]\nposition = [{c}, {c}, {c}]\nfrequency = 10.0\n[[receivers]]\n\
         position = [{c}, {c}, 20.0]\n[boundary]\nkind = \"none\"\n[output]\npath = \"r.h5\"\nsnapshot_every = {every}\n{snapshot}"
    )
}

/// A started run, its output in files (no pipe to fill and block it).
struct Run {
    child: Child,
    dir: std::path::PathBuf,
}

impl Run {
    /// The binary in `dir` with `args`, on the CPU backend, under `mpirun -np ranks` (0: alone).
    fn start(dir: &Path, ranks: usize, args: &[&str]) -> Run {
        let out = std::fs::File::create(dir.join("stdout.txt")).unwrap();
        let err = std::fs::File::create(dir.join("stderr.txt")).unwrap();
        let bin = seismic_run().get_program().to_owned();
        let mut c = if ranks == 0 {
            Command::new(bin)
        } else {
            let mut c = Command::new("mpirun");
            c.args(["--allow-run-as-root", "--oversubscribe", "-np", &ranks.to_string()]).arg(bin);
            c
        };
        c.current_dir(dir).args(args).args(["--backend", "cpu", "--quiet"]);
        c.env("OMP_NUM_THREADS", "1").env("RAYON_NUM_THREADS", "1").stdout(out).stderr(err);
        Run { child: c.spawn().expect("mpirun (Debian: openmpi-bin)"), dir: dir.to_path_buf() }
    }

    /// The processes mpirun started, by rank (the one process itself when alone).
    fn ranks(&self, ranks: usize) -> Vec<i32> {
        let me = self.child.id() as i32;
        if ranks == 0 {
            return vec![me];
        }
        wait_until("every rank started", || rank_pids(me, ranks).iter().all(|p| *p > 0));
        rank_pids(me, ranks)
    }

    /// The exit status, or a failed test (and every process killed) past [`LIMIT`].
    fn end(self, ranks: &[i32]) -> (ExitStatus, String) {
        self.end_within(ranks, LIMIT)
    }

    /// [`end`](Self::end) with the time limit `limit`.
    fn end_within(mut self, ranks: &[i32], limit: Duration) -> (ExitStatus, String) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let err = std::fs::read_to_string(self.dir.join("stderr.txt")).unwrap();
                return (status, err);
            }
            if start.elapsed() > limit {
                for &p in ranks {
                    signal(p, libc::SIGKILL);
                }
                let _ = self.child.kill();
                let _ = self.child.wait();
                let err = std::fs::read_to_string(self.dir.join("stderr.txt")).unwrap();
                panic!("the run did not end within {limit:?} (a hang): {err}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The pids of mpirun `parent`'s children by their rank (0 where not found yet).
fn rank_pids(parent: i32, ranks: usize) -> Vec<i32> {
    let mut pids = vec![0; ranks];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // "pid (comm) state ppid ...": the fields after the last ')'.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
        if ppid != Some(parent) {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        for var in env.split(|&b| b == 0) {
            if let Some(r) = String::from_utf8_lossy(var).strip_prefix("OMPI_COMM_WORLD_RANK=")
                && let Ok(r) = r.parse::<usize>()
                && r < ranks
            {
                pids[r] = pid;
            }
        }
    }
    pids
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory preconditions; the pid is a process this test started.
    unsafe { libc::kill(pid, sig) };
}

/// Waits (at most [`LIMIT`]) until `cond` holds.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < LIMIT, "waited {LIMIT:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The temporary files (`.<name>.<random>.partial*`) in `dir`.
fn partial_files(dir: &Path) -> Vec<String> {
    let names = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned());
    names.filter(|n| n.starts_with('.') && n.contains(".partial")).collect()
}

#[cfg(feature = "mpi")]
fn claims(dir: &Path) -> usize {
    let names = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned());
    names.filter(|n| n.ends_with(".claim")).count()
}

fn dir_with(name: &str, file: &str, text: &str) -> Scratch {
    let dir = scratch("faults", name);
    std::fs::write(dir.join(file), text).unwrap();
    dir
}

/// SIGTERM while the animation of `--plot` is drawn ends the run within seconds with 143, no
/// temporary file left (the result file is complete and kept).
#[test]
fn sigterm_during_the_animation_stops_it() {
    let dir = dir_with("gif", "r.toml", &single_input(96, 80, 1));
    let run = Run::start(&dir, 0, &["r.toml", "--plot"]);
    let pids = run.ranks(0);
    // The still picture is written (under its temporary name: the result and its side files are
    // renamed together at the end) before the animation starts.
    wait_until("the snapshot picture", || partial_files(&dir).iter().any(|n| n.starts_with(".r.snapshot.png.")));
    signal(pids[0], libc::SIGTERM);
    let stopped = Instant::now();
    let (status, err) = run.end(&pids);
    assert!(stopped.elapsed() < Duration::from_secs(5), "took {:?} after SIGTERM: {err}", stopped.elapsed());
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("SIGTERM"), "{err}");
    assert_eq!(partial_files(&dir), Vec::<String>::new(), "{err}");
}

/// SIGQUIT and SIGUSR1 during the time loop end the run with 131 and 138, naming the signal,
/// and remove the partial result file.
#[test]
fn sigquit_and_sigusr1_remove_the_partial_file() {
    for (sig, name, code) in [(libc::SIGQUIT, "SIGQUIT", 131), (libc::SIGUSR1, "SIGUSR1", 138)] {
        let dir = dir_with(&format!("sig{sig}"), "r.toml", &single_input(64, 100_000, 0));
        let run = Run::start(&dir, 0, &["r.toml"]);
        let pids = run.ranks(0);
        wait_until("the partial result file", || !partial_files(&dir).is_empty());
        signal(pids[0], sig);
        let (status, err) = run.end(&pids);
        assert_eq!(status.code(), Some(code), "{name}: {err}");
        assert!(err.contains(&format!("({name})")), "{name}: {err}");
        assert_eq!(partial_files(&dir), Vec::<String>::new(), "{name}: {err}");
    }
}

/// SIGTERM to one rank of a survey over 2 ranks, mid-shot: both ranks stop within seconds, each
/// naming the signal (the other rank as rank 1's), the job exits 143, no temporary file is left,
/// and `--resume` completes the survey.
#[cfg(feature = "mpi")]
#[test]
fn sigterm_to_one_rank_stops_every_rank() {
    let dir = dir_with("one-rank", "s.toml", &survey_input(4, 6000));
    let run = Run::start(&dir, 2, &["s.toml"]);
    let pids = run.ranks(2);
    wait_until("both ranks in a shot", || partial_files(&dir).len() >= 2);
    signal(pids[1], libc::SIGTERM);
    let (status, err) = run.end(&pids);
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("rank 1 of 2") && err.contains("(SIGTERM)"), "rank 1 names the signal: {err}");
    assert!(err.contains("rank 0 of 2") && err.contains("(stopping: rank 1 received SIGTERM)"), "rank 0: {err}");
    assert_eq!(partial_files(&dir), Vec::<String>::new(), "{err}");
    let resumed = Run::start(&dir, 2, &["s.toml", "--resume"]);
    let pids = resumed.ranks(2);
    let (status, err) = resumed.end_within(&pids, WHOLE_RUN);
    assert!(status.success(), "{err}");
    assert_eq!(claims(&dir), 4);
}

/// SIGTERM to every rank of a survey over 3 ranks (as a batch system's cancel sends it): every
/// rank stops naming it, the job exits 143, no temporary file is left.
#[cfg(feature = "mpi")]
#[test]
fn sigterm_to_every_rank_of_three_stops_the_survey() {
    let dir = dir_with("all-ranks", "s.toml", &survey_input(6, 6000));
    let run = Run::start(&dir, 3, &["s.toml"]);
    let pids = run.ranks(3);
    wait_until("the ranks in their shots", || partial_files(&dir).len() >= 2);
    for &p in &pids {
        signal(p, libc::SIGTERM);
    }
    let (status, err) = run.end(&pids);
    assert_eq!(status.code(), Some(143), "{err}");
    for r in 0..3 {
        assert!(err.contains(&format!("rank {r} of 3")), "rank {r} says why it stopped: {err}");
    }
    assert!(!err.contains("SIGINT"), "{err}");
    assert_eq!(partial_files(&dir), Vec::<String>::new(), "{err}");
}

/// SIGTERM to one rank of a survey of 4 ranks in groups of 2 (each shot decomposed over its
/// group): its group stops at the same step, the other group by its message; every rank names
/// the signalled rank by its rank in the job, the job exits 143, no temporary file is left.
#[cfg(feature = "mpi")]
#[test]
fn sigterm_to_one_rank_of_a_group_stops_every_group() {
    let dir = dir_with("groups", "s.toml", &survey_input(4, 6000));
    let run = Run::start(&dir, 4, &["s.toml", "--ranks-per-shot", "2"]);
    let pids = run.ranks(4);
    wait_until("both groups in a shot", || partial_files(&dir).len() >= 2);
    signal(pids[3], libc::SIGTERM);
    let (status, err) = run.end(&pids);
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("rank 3 of 4") && err.contains("(SIGTERM)"), "{err}");
    for r in 0..3 {
        let line = err.lines().find(|l| l.starts_with(&format!("rank {r} of 4"))).unwrap_or_default();
        assert!(line.ends_with("(stopping: rank 3 received SIGTERM)"), "rank {r}: {err}");
    }
    assert_eq!(partial_files(&dir), Vec::<String>::new(), "{err}");
}

/// SIGTERM to mpirun (which forwards it to every rank) while one rank already waits at the
/// survey's final barrier and the other runs the last shot: the job ends, each rank naming the
/// signal.
#[cfg(feature = "mpi")]
#[test]
fn sigterm_to_mpirun_while_a_rank_waits_at_the_final_barrier() {
    let dir = dir_with("barrier", "s.toml", &survey_input(3, 6000));
    let run = Run::start(&dir, 2, &["s.toml"]);
    let pids = run.ranks(2);
    let shot = |i: usize| dir.join(format!("s_shot{i:05}.h5"));
    wait_until("shots 0 and 1 done and shot 2 taken", || shot(0).exists() && shot(1).exists() && claims(&dir) == 3);
    std::thread::sleep(Duration::from_millis(300));
    signal(run.child.id() as i32, libc::SIGTERM);
    let (status, err) = run.end(&pids);
    assert!(!status.success(), "{err}");
    assert!(err.contains("SIGTERM") && !err.contains("SIGINT"), "{err}");
}

/// An error in rank 0's preparation (a directory where a claim file goes): every rank stops
/// within seconds with exit status 1, rank 0 printing the error, rank 1 that rank 0 failed.
#[cfg(feature = "mpi")]
#[test]
fn an_error_in_rank_0s_preparation_stops_every_rank() {
    let dir = dir_with("prepare", "s.toml", &survey_input(4, 40));
    std::fs::create_dir(dir.join(".s_shot00001.claim")).unwrap();
    std::fs::write(dir.join(".s_shot00001.claim").join("x"), b"x").unwrap();
    let run = Run::start(&dir, 2, &["s.toml"]);
    let pids = run.ranks(2);
    let (status, err) = run.end(&pids);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("error: rank 0 of 2") && err.contains(".s_shot00001.claim"), "rank 0's error: {err}");
    assert!(err.contains("rank 1 of 2") && err.contains("(stopping: rank 0 failed)"), "rank 1: {err}");
}

/// SIGKILL of one rank mid-shot fails the job; its temporary file stays, and `--resume` removes
/// it and completes the survey.
#[cfg(feature = "mpi")]
#[test]
fn sigkill_of_one_rank_then_resume_removes_its_temporary_file() {
    let dir = dir_with("sigkill", "s.toml", &survey_input(4, 6000));
    let run = Run::start(&dir, 2, &["s.toml"]);
    let pids = run.ranks(2);
    wait_until("both ranks in a shot", || partial_files(&dir).len() >= 2);
    signal(pids[1], libc::SIGKILL);
    let (status, err) = run.end(&pids);
    assert!(!status.success(), "{err}");
    assert!(!partial_files(&dir).is_empty(), "the killed rank left its temporary file: {err}");
    let resumed = Run::start(&dir, 2, &["s.toml", "--resume"]);
    let pids = resumed.ranks(2);
    let (status, err) = resumed.end_within(&pids, WHOLE_RUN);
    assert!(status.success(), "{err}");
    assert!(err.contains("removed") && err.contains("temporary file"), "{err}");
    assert_eq!(partial_files(&dir), Vec::<String>::new(), "{err}");
}

/// SIGHUP to one rank of a decomposed run over 2 ranks: both stop at the same step, exit 129 and
/// name SIGHUP (rank 0 as rank 1's), none SIGINT.
#[cfg(feature = "mpi")]
#[test]
fn a_decomposed_run_stopped_by_sighup_on_one_rank_names_it() {
    let text = single_input(48, 100_000, 0) + "[run]\ndecomposition = \"z\"\n";
    let dir = dir_with("decomposed", "r.toml", &text);
    let run = Run::start(&dir, 2, &["r.toml"]);
    let pids = run.ranks(2);
    wait_until("the partial result file", || !partial_files(&dir).is_empty());
    std::thread::sleep(Duration::from_millis(500));
    signal(pids[1], libc::SIGHUP);
    let (status, err) = run.end(&pids);
    assert_eq!(status.code(), Some(129), "{err}");
    assert!(err.contains("(SIGHUP)") && err.contains("(stopping: rank 1 received SIGHUP)"), "{err}");
    assert!(!err.contains("SIGINT"), "{err}");
    assert_eq!(partial_files(&dir), Vec::<String>::new(), "{err}");
}
