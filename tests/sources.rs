//! Sources on the CPU: a wavelet read from a file (npy, two-column text, a SEG-Y trace in IEEE or
//! IBM floats) gives the built-in Ricker run when it holds the Ricker's samples; several sources
//! a shot (`[[source]]`) give the sum of their one-source runs (the scheme is linear), on one
//! domain, decomposed and in f16; surveys move every source with the first; and the inputs these
//! keys refuse say why.

mod common;

use common::{max_abs, run};
use seismic_run::backend::Backend;
use seismic_run::backend::cpu_half::CpuHalfSolver;
use seismic_run::config::{Config, Precision};
use seismic_run::decomposition::{self, Decomposition, Domain, InProcess};
use seismic_run::numerics::Ricker;
use seismic_run::output::plan::OutputPlan;
use seismic_run::problem::Problem;
use seismic_run::solver::{self, SnapshotSink};
use std::path::{Path, PathBuf};

const N: usize = 36;
const DT: f64 = 1e-3;
const STEPS: usize = 220;

/// A 36^3 box, 10 m spacing, 2000 m/s, CPML, dt = 1 ms for 220 steps, four receivers, and the
/// source tables `sources` (TOML).
fn input(sources: &str) -> String {
    format!(
        "[grid]\nshape = [{N}, {N}, {N}]\nspacing = [10.0, 10.0, 10.0]\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\
         [time]\ndt = {DT}\nsteps = {STEPS}\n\
         [boundary]\nkind = \"cpml\"\nwidth = 6\nplacement = \"inside\"\n\
         {sources}\n\
         [[receivers]]\nposition = [100.0, 120.0, 90.0]\n\
         [[receivers]]\nposition = [250.0, 260.0, 240.0]\n\
         [[receivers]]\nposition = [173.0, 91.5, 262.0]\ninterpolation = \"trilinear\"\n\
         [[receivers]]\nposition = [182.0, 178.0, 176.0]\n"
    )
}

fn problem(text: &str) -> Problem {
    let cfg = Config::from_toml(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Problem::build(&cfg, vec![2000.0; N * N * N]).unwrap_or_else(|e| panic!("{e:#}\n{text}"))
}

/// The CPU f32 traces of `text`.
fn traces(text: &str) -> Vec<Vec<f64>> {
    run::<f32>(&problem(text))
}

/// max |a - b| / max |b| over every trace.
fn relative_difference(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    let scale = b.iter().map(|t| max_abs(t)).fold(0.0, f64::max);
    assert!(scale > 0.0, "the traces recorded the wave");
    let diff = a.iter().zip(b).flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs())).fold(0.0, f64::max);
    diff / scale
}

/// A fresh directory for this test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seismic-run-sources-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const RICKER: &str = "position = [183.0, 171.0, 167.0]\nfrequency = 15.0\namplitude = 2.5\ndelay = 0.08";

/// The Ricker of [`RICKER`] at its unit amplitude, sampled every `interval` s (f32, as files hold
/// it), its peak `early` s before [`RICKER`]'s.
fn ricker_samples(interval: f64, count: usize, early: f64) -> Vec<f32> {
    let w = Ricker::new(15.0, 1.0, Some(0.08 - early));
    (0..count).map(|j| w.at(j as f64 * interval) as f32).collect()
}

fn npy(path: &Path, values: &[f32]) {
    std::fs::write(path, seismic_run::model::npy::to_bytes(&[values.len()], values)).unwrap();
}

/// An IBM System/360 float's bits (round to nearest on the 24-bit fraction).
fn ibm_bits(v: f64) -> u32 {
    if v == 0.0 {
        return 0;
    }
    let sign = if v < 0.0 { 1u32 << 31 } else { 0 };
    let mut exponent = 64i32;
    let mut f = v.abs();
    while f >= 1.0 {
        f /= 16.0;
        exponent += 1;
    }
    while f < 1.0 / 16.0 {
        f *= 16.0;
        exponent -= 1;
    }
    let mut fraction = (f * (1u64 << 24) as f64).round() as u32;
    if fraction == 1 << 24 {
        fraction >>= 4;
        exponent += 1;
    }
    sign | (exponent as u32) << 24 | fraction
}

/// A SEG-Y file of `traces` traces of `values` (the wanted one at `at`, zeros elsewhere), format 1
/// (IBM) or 5 (IEEE), `interval_us` in the binary header and the trace headers.
fn segy(path: &Path, values: &[f32], traces: usize, at: usize, format: u16, interval_us: u16) {
    let mut b = vec![0u8; 3600];
    b[3216..3218].copy_from_slice(&interval_us.to_be_bytes());
    b[3220..3222].copy_from_slice(&(values.len() as u16).to_be_bytes());
    b[3224..3226].copy_from_slice(&format.to_be_bytes());
    for i in 0..traces {
        let mut header = [0u8; 240];
        header[114..116].copy_from_slice(&(values.len() as u16).to_be_bytes());
        header[116..118].copy_from_slice(&interval_us.to_be_bytes());
        b.extend(header);
        for &v in values {
            let v = if i == at { v } else { 0.0 };
            let bits = if format == 1 { ibm_bits(v as f64) } else { v.to_bits() };
            b.extend(bits.to_be_bytes());
        }
    }
    std::fs::write(path, b).unwrap();
}

/// Each wavelet file holding the Ricker's samples at the run's dt gives the built-in Ricker's
/// traces to 1e-6 of their peak (the files hold f32 samples; IBM floats keep 21 to 24 bits).
#[test]
fn a_wavelet_file_of_the_ricker_samples_gives_the_ricker_run() {
    let dir = scratch("files");
    let want = traces(&input(&format!("[source]\n{RICKER}\ninjection = \"sinc\"")));
    let samples = ricker_samples(DT, 300, 0.0);
    npy(&dir.join("w.npy"), &samples);
    let text: String = samples.iter().enumerate().map(|(j, v)| format!("{:e} {v:e}\n", j as f64 * DT)).collect();
    std::fs::write(dir.join("w.txt"), format!("# time value\n{text}")).unwrap();
    segy(&dir.join("ieee.sgy"), &samples, 3, 1, 5, 1000);
    segy(&dir.join("ibm.sgy"), &samples, 2, 0, 1, 1000);
    let position = "position = [183.0, 171.0, 167.0]\namplitude = 2.5";
    for (wavelet, tolerance) in [
        (format!("{{ file = {:?}, sample_interval = {DT} }}", dir.join("w.npy")), 1e-6),
        (format!("{{ file = {:?} }}", dir.join("w.txt")), 1e-6),
        (format!("{{ file = {:?}, trace = 1 }}", dir.join("ieee.sgy")), 1e-6),
        (format!("{{ file = {:?} }}", dir.join("ibm.sgy")), 1e-6),
    ] {
        let got = traces(&input(&format!("[source]\n{position}\nwavelet = {wavelet}")));
        let diff = relative_difference(&got, &want);
        eprintln!("{wavelet}: max difference / peak = {diff:.2e}");
        assert!(diff <= tolerance, "{wavelet}: {diff:e}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A wavelet file sampled more finely than the run (0.25 ms) and one sampled more coarsely
/// (2 ms, its peak 20 ms later, shifted back by `delay`) resample to the Ricker run to 2e-6 of
/// its peak.
#[test]
fn a_wavelet_file_at_another_interval_is_resampled_to_the_run() {
    let dir = scratch("resample");
    let want = traces(&input(&format!("[source]\n{RICKER}")));
    npy(&dir.join("fine.npy"), &ricker_samples(2.5e-4, 1200, 0.0));
    npy(&dir.join("coarse.npy"), &ricker_samples(2e-3, 150, -0.02));
    let position = "position = [183.0, 171.0, 167.0]\namplitude = 2.5";
    for (wavelet, delay) in [
        (format!("{{ file = {:?}, sample_interval = 2.5e-4 }}", dir.join("fine.npy")), 0.0),
        (format!("{{ file = {:?}, sample_interval = 2e-3 }}", dir.join("coarse.npy")), -0.02),
    ] {
        let got = traces(&input(&format!("[source]\n{position}\ndelay = {delay}\nwavelet = {wavelet}")));
        let diff = relative_difference(&got, &want);
        eprintln!("{wavelet}: max difference / peak = {diff:.2e}");
        assert!(diff <= 2e-6, "{wavelet}: {diff:e}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Two sources: a sinc one and a trilinear one 1.3 points away (their taps overlap), the second
/// with a wavelet file, another amplitude and delay.
fn two_sources(dir: &Path) -> [String; 2] {
    npy(&dir.join("w.npy"), &ricker_samples(5e-4, 500, 0.0).iter().map(|v| v * v.abs()).collect::<Vec<_>>());
    [
        format!("[[source]]\n{RICKER}\n"),
        format!(
            "[[source]]\nposition = [190.0, 175.5, 160.0]\namplitude = -1.5\ndelay = 0.02\ninjection = \"trilinear\"\n\
             wavelet = {{ file = {:?}, sample_interval = 5e-4 }}\n",
            dir.join("w.npy")
        ),
    ]
}

/// The scheme is linear: the two-source run is the sum of the one-source runs (to 1e-5 of the
/// peak: f32 rounding of the sums).
#[test]
fn two_sources_give_the_sum_of_their_one_source_runs() {
    let dir = scratch("two");
    let [a, b] = two_sources(&dir);
    let both = traces(&input(&format!("{a}{b}")));
    let (ta, tb) = (traces(&input(&a)), traces(&input(&b)));
    let sum: Vec<Vec<f64>> = ta.iter().zip(&tb).map(|(x, y)| x.iter().zip(y).map(|(p, q)| p + q).collect()).collect();
    let diff = relative_difference(&both, &sum);
    eprintln!("two sources vs the sum of one each: {diff:.2e}");
    assert!(diff <= 1e-5, "{diff:e}");
    assert!(relative_difference(&ta, &sum) > 0.1, "the second source adds to the traces");
    std::fs::remove_dir_all(dir).unwrap();
}

/// One `[[source]]` entry is the `[source]` table bit for bit.
#[test]
fn one_listed_source_is_the_source_table() {
    let table = traces(&input(&format!("[source]\n{RICKER}")));
    let list = traces(&input(&format!("[[source]]\n{RICKER}")));
    assert!(table == list);
}

/// Snapshots discarded.
struct Discard;

impl SnapshotSink for Discard {
    fn buffer(&mut self) -> anyhow::Result<Vec<f32>> {
        Ok(Vec::new())
    }
    fn submit(&mut self, _: usize, _: usize, _: Vec<f32>) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Two and three z-slabs with the two sources' taps across the cuts: the single run bit for bit.
#[test]
fn two_sources_decomposed_equal_one_domain_bit_for_bit() {
    let dir = scratch("decomposed");
    let [a, b] = two_sources(&dir);
    let text = input(&format!("{a}{b}"));
    let cfg = Config::from_toml(&text).unwrap();
    let problem = Problem::build(&cfg, vec![2000.0; N * N * N]).unwrap();
    let plan = OutputPlan::from_config(&cfg, &problem).unwrap();
    let single = {
        let mut backend = seismic_run::backend::cpu::CpuSolver::<f32>::new(&problem).unwrap().flushing_subnormals(true);
        solver::run(&problem, &mut backend, &plan, &mut Discard, &mut |_| {}).unwrap().traces
    };
    assert!(single.iter().any(|&v| v != 0.0));
    for counts in [vec![17, 19], vec![12, 5, 19]] {
        let d = Decomposition::with_planes(&problem, &counts).unwrap();
        let mut domains: Vec<Domain> = (0..d.ranks())
            .map(|r| {
                let sub = d.subdomain(&problem, r).unwrap();
                let backend: Box<dyn Backend> = sub.cpu_backend().unwrap();
                Domain { sub, backend }
            })
            .collect();
        let out = decomposition::run(&problem, &d, &mut domains, &mut InProcess::default(), &plan, None, &mut |_| {})
            .unwrap()
            .expect("in-process runs are rank 0");
        assert!(out.traces == single, "slabs {counts:?}: the traces differ");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// f16 storage with two sources: the sum of the one-source f16 runs to f16's rounding (1.5e-3 of
/// the peak), the field scale taken from the summed samples.
#[test]
fn two_sources_in_f16_give_the_sum_of_their_one_source_runs() {
    let dir = scratch("f16");
    let [a, b] = two_sources(&dir);
    let half = |text: &str| {
        let mut p = problem(text);
        p.precision = Precision::F16;
        let mut s = CpuHalfSolver::new(&p).unwrap();
        for n in 0..p.steps {
            s.advance(n);
        }
        s.traces_f64()
    };
    let both = half(&input(&format!("{a}{b}")));
    let (ta, tb) = (half(&input(&a)), half(&input(&b)));
    let sum: Vec<Vec<f64>> = ta.iter().zip(&tb).map(|(x, y)| x.iter().zip(y).map(|(p, q)| p + q).collect()).collect();
    let diff = relative_difference(&both, &sum);
    eprintln!("f16: two sources vs the sum of one each: {diff:.2e}");
    assert!(diff <= 1.5e-3, "{diff:e}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A survey moves the first source to each shot and every other one with it.
#[test]
fn a_survey_moves_every_source_with_the_first() {
    let text = input(&format!(
        "[[source]]\n{RICKER}\n[[source]]\nposition = [100.0, 110.0, 120.0]\nfrequency = 10.0\n\
         [survey]\nshots = [[83.0, 71.0, 67.0]]\n"
    ));
    let cfg = Config::from_toml(&text).unwrap();
    let shot = seismic_run::survey::shots(&cfg).unwrap()[0];
    let shot_cfg = Config::from_toml(&seismic_run::survey::shot_input(&text, &shot).unwrap()).unwrap();
    let p: Vec<[f64; 3]> = shot_cfg.source.iter().map(|s| s.position).collect();
    assert_eq!(p, [[83.0, 71.0, 67.0], [0.0, 10.0, 20.0]]);
}

fn error(text: &str) -> String {
    match Config::from_toml(text) {
        Err(e) => e.to_string(),
        Ok(cfg) => match Problem::build(&cfg, vec![2000.0; N * N * N]) {
            Err(e) => format!("{e:#}"),
            Ok(_) => panic!("accepted:\n{text}"),
        },
    }
}

#[test]
fn refused_source_inputs_say_why() {
    let cases = [
        (format!("[source]\n{RICKER}\n[[source]]\n{RICKER}"), vec!["both [source]", "[[source]]"]),
        (
            "[source]\nposition = [100.0, 100.0, 100.0]\nfrequency = 1e-300".to_string(),
            vec!["source.frequency = 1e-300", "default delay", "source.delay"],
        ),
        ("[source]\nposition = [100.0, 100.0, 100.0]".to_string(), vec!["source.frequency is required"]),
        (
            format!("[[source]]\n{RICKER}\n[[source]]\n{RICKER}\nwavelet = {{ file = \"w.npy\" }}"),
            vec!["source[1].frequency", "Ricker wavelet only"],
        ),
        (
            "[source]\nposition = [100.0, 100.0, 100.0]\nwavelet = { file = \"/nonexistent/w.npy\" }".to_string(),
            vec!["source.wavelet", "sample_interval"],
        ),
        (
            "[source]\nposition = [100.0, 100.0, 100.0]\nwavelet = { file = \"w.wav\" }".to_string(),
            vec!["source.wavelet", "unknown kind"],
        ),
        (
            "[source]\nposition = [100.0, 100.0, 100.0]\nwavelet = \"gabor\"\nfrequency = 10.0".to_string(),
            vec!["wavelet", "ricker"],
        ),
        (
            format!("[[source]]\n{RICKER}\n[[source]]\nposition = [1e4, 0.0, 0.0]\nfrequency = 5.0"),
            vec!["source[1].position", "outside the grid"],
        ),
    ];
    for (sources, want) in cases {
        let msg = error(&input(&sources));
        for w in want {
            assert!(msg.contains(w), "`{w}` missing from: {msg}");
        }
    }
}
