//! Mutated inputs through the library's whole input path, in process: `Config::from_toml`,
//! `Config::check_values`, `model::sample_with_data_dirs`, `Problem::build` (which runs the
//! budget check) and `OutputPlan::from_config`. Each case must return (accepted or refused with a
//! message), never panic, and within a bounded time; a sample of accepted inputs runs a few CPU
//! steps and must give finite traces or a clear error.
//!
//! 50,000 cases by default (about 5 s on 2 cores); SEISMIC_FUZZ_CASES=1000000 runs longer and
//! SEISMIC_FUZZ_SEED picks another sequence.
//!
//! Outside CI (ignored), [`mutated_inputs_through_the_binary`] runs the `seismic-run` binary on
//! 10,000 mutated inputs (SEISMIC_FUZZ_RUNS=N for another count) on the CPU backend, paths and
//! survey lines among the mutations: each ends with status 0 or 1 within its time limit, never a
//! panic or a signal; a result it writes holds finite traces; a refused input leaves no result; no
//! run leaves a temporary file behind. Cases too large to run here go through the validation pass
//! in process (`driver::validate`) instead.

use seismic_run::backend::Backend;
use seismic_run::backend::cpu::CpuSolver;
use seismic_run::config::{Config, ModelConfig};
use seismic_run::model;
use seismic_run::numerics::stencil::Stencil;
use seismic_run::output::plan::OutputPlan;
use seismic_run::problem::Problem;
use seismic_run::solver::{self, SnapshotSink};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod process;

/// xorshift64*: a small seeded generator, enough to pick mutations reproducibly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len())]
    }
}

const BASES: [&str; 2] = [
    r#"[grid]
shape = [20, 16, 18]
spacing = [10.0, 10.0, 10.0]
origin = [0.0, 0.0, 0.0]

[model]
kind = "constant"
vp = 2000.0

[stencil]
radius = 2

[time]
steps = 5
cfl_safety = 0.8

[source]
position = [100.0, 80.0, 90.0]
frequency = 15.0
amplitude = 1.0
delay = 0.07

[[receivers]]
line = { start = [20.0, 80.0, 20.0], end = [180.0, 80.0, 20.0], count = 5 }

[[receivers]]
grid = { origin = [20.0, 20.0, 40.0], step_a = [20.0, 0.0, 0.0], count_a = 3, step_b = [0.0, 20.0, 0.0], count_b = 2 }

[boundary]
kind = "cpml"
width = 4

[output]
snapshot_every = 2
snapshot = [{ kind = "xz", at = 80.0 }]
"#,
    r#"[grid]
shape = [16, 12, 20]
spacing = [12.5, 12.5, 10.0]

[model]
kind = "layered"
depths = [60.0, 120.0]
velocities = [1500.0, 2200.0, 3000.0]

[time]
duration = 0.02
dt = 0.001

[source]
position = [90.0, 60.0, 30.0]
frequency = 20.0
injection = "nearest"

[[receivers]]
position = [40.0, 60.0, 10.0]

[boundary]
kind = "sponge"
width = 3
free_surface = true

[output]
snapshot_every = 3
"#,
];

const NUMBERS: [&str; 34] = [
    "nan",
    "inf",
    "-inf",
    "0",
    "0.0",
    "-0.0",
    "-1",
    "-1.0",
    "1",
    "2",
    "3",
    "1e300",
    "-1e300",
    "1e-300",
    "1e42",
    "1e30",
    "1e15",
    "1e9",
    "100001",
    "1e5",
    "5e-324",
    "18446744073709551615",
    "9223372036854775807",
    "4294967296",
    "4294967295",
    "65536",
    "1000000",
    "100000000",
    "0.5",
    "7.5",
    "1e-7",
    "2.5e-3",
    "\"x\"",
    "[1.0, 2.0, 3.0, 4.0]",
];

const LINES: [&str; 12] = [
    "steps = 18446744073709551615",
    "duration = inf",
    "dt = 1e-300",
    "amplitude = 1e42",
    "count = 100000000000",
    "shape = [24, 24, 24, 24]",
    "position = [1.0, 2.0, 3.0, 4.0, 5.0]",
    "[[receivers]]\nposition = [50.0, 50.0, 50.0]",
    "[[receivers]]\ngrid = { origin = [0.0, 0.0, 0.0], step_a = [1.0, 0, 0], count_a = 4294967296, step_b = [0, 1.0, 0], count_b = 4294967296 }",
    "snapshot = [{ kind = \"volume\" }, { kind = \"xy\", at = 1e300 }]",
    "radius = 9",
    "width = 18446744073709551615",
];

/// Byte ranges of the numbers in `text` (a maximal run of digits, signs, dots, exponents).
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'));
        if starts {
            let s = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
            let mut e = i;
            while e < b.len() && (b[e].is_ascii_digit() || b"._eE+-".contains(&b[e])) {
                e += 1;
            }
            spans.push((s, e));
            i = e;
        } else {
            i += 1;
        }
    }
    spans
}

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut s = text.to_string();
    for _ in 0..1 + rng.below(3) {
        match rng.below(6) {
            0..=2 => {
                let spans = number_spans(&s);
                if !spans.is_empty() {
                    let (a, b) = spans[rng.below(spans.len())];
                    s.replace_range(a..b, rng.pick(&NUMBERS));
                }
            }
            3 => {
                // An array one longer or shorter.
                let opens: Vec<usize> = s.match_indices("= [").map(|(i, _)| i + 3).collect();
                if !opens.is_empty() {
                    let at = opens[rng.below(opens.len())];
                    if rng.below(2) == 0 {
                        s.insert_str(at, "1.0, ");
                    } else if let Some(comma) = s[at..].find(", ") {
                        s.replace_range(at..at + comma + 2, "");
                    }
                }
            }
            4 => {
                let mut lines: Vec<&str> = s.lines().collect();
                let i = rng.below(lines.len());
                lines.remove(i);
                s = lines.join("\n");
            }
            _ => {
                // A line from the list at a random place.
                let mut lines: Vec<&str> = s.lines().collect();
                let i = rng.below(lines.len() + 1);
                lines.insert(i, rng.pick(&LINES));
                s = lines.join("\n");
            }
        }
    }
    s
}

/// Host bytes (approximately) a case would take to build, from the parsed input alone; cases
/// above the test's budget are parsed and checked but not built, so that the test stays fast.
fn approximate_bytes(cfg: &Config) -> Option<f64> {
    let points = cfg.grid.shape.iter().map(|&n| n as f64).product::<f64>();
    let steps = approximate_steps(cfg)?;
    let receivers = cfg.receiver_count().ok()? as f64;
    let every = cfg.output.snapshot_every.max(1) as f64;
    Some(
        points * 40.0 + steps * (receivers + 10.0) * 16.0 + receivers * 400.0 + points * 8.0 * (steps / every).min(4.0),
    )
}

/// The steps a case would take, from the parsed input alone (None for models from files).
fn approximate_steps(cfg: &Config) -> Option<f64> {
    let vmax = match &cfg.model.velocity {
        ModelConfig::Constant { vp } => *vp,
        ModelConfig::Layered { velocities, .. } => velocities.iter().cloned().fold(0.0, f64::max),
        _ => return None,
    };
    let radius = cfg.stencil.radius.clamp(1, 8);
    let limit = Stencil::new(radius).cfl_limit(cfg.grid.spacing, vmax);
    let dt = cfg.time.dt.unwrap_or(limit * cfg.time.cfl_safety);
    Some(match (cfg.time.steps, cfg.time.duration) {
        (Some(n), _) => n as f64,
        (None, Some(d)) => d / dt,
        _ => 1.0,
    })
}

/// Most bytes a built case may take in this test.
const CASE_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

#[derive(Default, Debug)]
struct Tally {
    parse_errors: usize,
    value_errors: usize,
    build_errors: usize,
    too_big_for_the_test: usize,
    accepted: usize,
    ran: usize,
    blew_up: usize,
}

struct Discard(usize);

impl SnapshotSink for Discard {
    fn buffer(&mut self) -> anyhow::Result<Vec<f32>> {
        Ok(vec![0.0; self.0])
    }
    fn submit(&mut self, _: usize, _: usize, _: Vec<f32>) -> anyhow::Result<()> {
        Ok(())
    }
}

/// One case through the library; accepted inputs small enough run a few CPU steps when `run_it`.
fn one_case(text: &str, tally: &mut Tally, run_it: bool) {
    let cfg = match Config::from_toml(text) {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            tally.parse_errors += 1;
            return;
        }
    };
    if let Err(e) = cfg.check_values() {
        assert!(!format!("{e:#}").is_empty());
        tally.value_errors += 1;
        return;
    }
    match approximate_bytes(&cfg) {
        Some(b) if b <= CASE_BYTES => {}
        _ => {
            tally.too_big_for_the_test += 1;
            return;
        }
    }
    let built = model::sample_with_data_dirs(&cfg, Path::new("."), &[])
        .and_then(|m| Problem::build(&cfg, m.vp))
        .and_then(|p| OutputPlan::from_config(&cfg, &p).map(|plan| (p, plan)));
    let (problem, plan) = match built {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(!msg.is_empty() && msg.len() < 4000, "an unreadable message: {msg}");
            tally.build_errors += 1;
            return;
        }
    };
    tally.accepted += 1;
    let _ = seismic_run::resources::output_file_bytes(&problem, &plan, text.len());
    if !run_it || problem.steps > 50 || problem.layout.points() > 20_000 {
        return;
    }
    tally.ran += 1;
    let mut backend = CpuSolver::<f32>::new(&problem).expect("an accepted problem opens on the CPU");
    let mut sink = Discard(plan.snapshot_len(problem.shape()));
    match solver::run(&problem, &mut backend, &plan, &mut sink, &mut |_| {}) {
        Ok(record) => {
            assert!(record.traces.iter().all(|v| v.is_finite()), "finite traces after a run that passed its check");
            assert!(backend.field_is_finite().unwrap());
        }
        Err(e) => {
            assert!(e.blow_up().is_some(), "a run fails only by blowing up: {e:#}");
            tally.blew_up += 1;
        }
    }
}

#[test]
fn mutated_inputs_never_panic_hang_or_run_silently_wrong() {
    let cases: usize = std::env::var("SEISMIC_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(50_000);
    let seed: u64 = std::env::var("SEISMIC_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5e15_3c0d);
    let mut rng = Rng(seed | 1);
    let mut tally = Tally::default();
    let start = Instant::now();
    let mut slowest = (Duration::ZERO, String::new());
    // The 50 first accepted inputs also run on the CPU.
    let mut runs_left = 50;
    for i in 0..cases {
        let text = mutate(&mut rng, BASES[i % BASES.len()]);
        let t0 = Instant::now();
        let ran_before = tally.ran;
        let result = catch_unwind(AssertUnwindSafe(|| one_case(&text, &mut tally, runs_left > 0)));
        if tally.ran > ran_before {
            runs_left -= 1;
        }
        if let Err(p) = result {
            let what = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            panic!("case {i} (seed {seed}) panicked: {what:?}\ninput:\n{text}");
        }
        let took = t0.elapsed();
        if took > slowest.0 {
            slowest = (took, text.clone());
        }
        assert!(took < Duration::from_secs(10), "case {i} took {took:?}:\n{text}");
    }
    println!(
        "{cases} cases in {:.1} s, slowest {:.1} ms: {tally:?}\nslowest input:\n{}",
        start.elapsed().as_secs_f64(),
        slowest.0.as_secs_f64() * 1e3,
        slowest.1
    );
    assert!(tally.accepted > cases / 20, "the mutations keep enough inputs valid to reach the solver: {tally:?}");
    assert!(tally.ran >= 50.min(tally.accepted), "{tally:?}");
}

/// Lines the binary's cases add besides [`LINES`]: output paths (a directory, a nested new one),
/// derived files, a survey, the units check off, receivers outside the grid.
const RUN_LINES: [&str; 10] = [
    "path = \"results/\"",
    "path = \"a/b/out.h5\"",
    "segy = true",
    "compression = 4",
    "[survey]\nshots = [[100.0, 80.0, 90.0], [60.0, 60.0, 60.0]]",
    "[survey]\nline = { start = [60.0, 60.0, 60.0], end = [120.0, 60.0, 60.0], count = 3 }\nspread = \"moving\"",
    "[run]\ncheck_units = false",
    "check_units = false",
    "snapshot_every = 0",
    "[[receivers]]\nposition = [1e3, 0.0, 0.0]",
];

/// Points x steps above which a case runs with `--steps 3` (its checks all the same), so that
/// 10,000 cases take minutes.
const RUN_WORK: f64 = 2e7;
/// Approximate host bytes above which a case goes through the validation pass in process only.
const RUN_BYTES: f64 = 256.0 * 1024.0 * 1024.0;
/// Longest a case may take: far beyond the slowest accepted case, far below a hang.
const RUN_LIMIT: Duration = Duration::from_secs(60);

#[derive(Default, Debug)]
struct RunTally {
    ran_ok: usize,
    refused: usize,
    kept_after_derived_failure: usize,
    steps_capped: usize,
    validated_in_process: usize,
    validated_ok: usize,
    result_files_read: usize,
    /// Refusals by the start of their message (the key or limit at fault), for the summary.
    reasons: std::collections::BTreeMap<String, usize>,
}

/// Every file under `dir`, recursively, relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out
}

/// Runs `seismic-run` in `dir` on `run.toml` with `args`, killed after [`RUN_LIMIT`]: the exit
/// status (None: killed by a signal) and stderr.
fn run_binary(dir: &Path, args: &[&str]) -> (Option<i32>, String, Duration) {
    use std::io::Read;
    let t0 = Instant::now();
    let mut child = process::seismic_run()
        .current_dir(dir)
        .args(["run.toml", "--backend", "cpu", "--quiet"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "seismic-run hung (killed after {RUN_LIMIT:?}) on:\n{}",
                std::fs::read_to_string(dir.join("run.toml")).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    (status.code(), reader.join().unwrap(), t0.elapsed())
}

/// One case through the binary (or, too large to run here, through the validation pass).
fn one_run(dir: &Path, text: &str, tally: &mut RunTally) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("run.toml"), text).unwrap();
    let parsed = Config::from_toml(text).ok();
    let bytes = parsed.as_ref().and_then(approximate_bytes);
    if let (Some(cfg), Some(b)) = (&parsed, bytes)
        && b > RUN_BYTES
    {
        // Too large to run beside other work: the validation pass alone, in process.
        tally.validated_in_process += 1;
        let job = seismic_run::driver::Job {
            input: dir.join("run.toml"),
            input_dir: dir.to_path_buf(),
            text: text.to_string(),
            cfg: cfg.clone(),
            output: dir.join(&cfg.output.path),
            output_key: "output.path",
            plot: false,
            quiet: true,
            resume: None,
            started: Instant::now(),
        };
        if let Ok(derived) = seismic_run::driver::validate(&job) {
            drop(derived);
            tally.validated_ok += 1;
        }
    } else {
        let points = parsed.as_ref().map_or(0.0, |c| c.grid.shape.iter().map(|&n| n as f64).product::<f64>());
        let steps = parsed.as_ref().and_then(approximate_steps);
        // NaN (a nonsense duration or dt) caps too.
        let capped = !steps.is_some_and(|n| points * n <= RUN_WORK);
        let args: &[&str] = if capped { &["--steps", "3"] } else { &[] };
        tally.steps_capped += capped as usize;
        let (code, stderr, _) = run_binary(dir, args);
        assert!(!stderr.contains("panicked"), "seismic-run panicked:\n{stderr}\ninput:\n{text}");
        match code {
            Some(0) => tally.ran_ok += 1,
            Some(1) if stderr.contains("is complete and kept") => tally.kept_after_derived_failure += 1,
            Some(1) => {
                assert!(stderr.contains("error: "), "an error message: {stderr}");
                tally.refused += 1;
                let line = stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_default();
                // A parse error's reason is its last line (serde's message), else the first.
                let line = if line.contains("TOML parse error") {
                    stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or_default()
                } else {
                    line.trim_start_matches("error: ").trim_start_matches("run.toml: ")
                };
                let reason: String = line.chars().take(48).collect();
                *tally.reasons.entry(reason).or_default() += 1;
                let results: Vec<_> =
                    files_under(dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "h5")).collect();
                assert!(
                    results.is_empty() || text.contains("[survey]"),
                    "a refused run left {results:?}:\n{stderr}\n{text}"
                );
            }
            other => panic!("seismic-run ended with {other:?}:\n{stderr}\ninput:\n{text}"),
        }
    }
    let files = files_under(dir);
    let temporary: Vec<_> = files
        .iter()
        .filter(|p| p.to_string_lossy().contains(".partial") || p.to_string_lossy().contains("write-probe"))
        .collect();
    assert!(temporary.is_empty(), "temporary files left: {temporary:?}\ninput:\n{text}");
    for h5 in files.iter().filter(|p| p.extension().is_some_and(|e| e == "h5")) {
        let r = seismic_run::output::result::ResultFile::open(&dir.join(h5))
            .unwrap_or_else(|e| panic!("{} does not open: {e:#}\ninput:\n{text}", h5.display()));
        let traces = r.traces().unwrap();
        assert!(traces.iter().all(|v| v.is_finite()), "non-finite traces in {}:\n{text}", h5.display());
        tally.result_files_read += 1;
    }
}

/// `text` with one of its numbers replaced by one of [`NUMBERS`].
fn replace_one_number(rng: &mut Rng, text: &str) -> String {
    let spans = number_spans(text);
    let (a, b) = spans[rng.below(spans.len())];
    let mut s = text.to_string();
    s.replace_range(a..b, rng.pick(&NUMBERS));
    s
}

#[test]
#[ignore = "10,000 runs of the binary: minutes; run by hand (SEISMIC_FUZZ_RUNS=N)"]
fn mutated_inputs_through_the_binary() {
    let cases: usize = std::env::var("SEISMIC_FUZZ_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let seed: u64 = std::env::var("SEISMIC_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5e15_3c0d);
    let mut rng = Rng(seed | 1);
    let scratch = process::scratch("fuzz", "binary");
    let dir = scratch.join("case");
    let mut tally = RunTally::default();
    let start = Instant::now();
    for i in 0..cases {
        // Every third case: one number replaced, which parses more often and so reaches the
        // validation pass and the run.
        let base = BASES[i % BASES.len()];
        let mut text = if i % 3 == 0 { replace_one_number(&mut rng, base) } else { mutate(&mut rng, base) };
        if rng.below(3) == 0 {
            let mut lines: Vec<&str> = text.lines().collect();
            let at = rng.below(lines.len() + 1);
            lines.insert(at, rng.pick(&RUN_LINES));
            text = lines.join("\n");
        }
        let result = catch_unwind(AssertUnwindSafe(|| one_run(&dir, &text, &mut tally)));
        if let Err(p) = result {
            let what = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            panic!("case {i} (seed {seed}): {}", what.unwrap_or_default());
        }
        if (i + 1) % 1000 == 0 {
            eprintln!(
                "{} cases in {:.0} s: {} run, {} refused",
                i + 1,
                start.elapsed().as_secs_f64(),
                tally.ran_ok,
                tally.refused
            );
        }
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let mut reasons: Vec<_> = std::mem::take(&mut tally.reasons).into_iter().collect();
    reasons.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (reason, n) in reasons.iter().take(15) {
        println!("{n:6} refused: {reason}");
    }
    println!(
        "{cases} cases through the binary in {:.1} s on {} ({} threads): {tally:?}",
        start.elapsed().as_secs_f64(),
        cpu,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    assert!(tally.ran_ok > cases / 20, "enough cases run to the end: {tally:?}");
}
