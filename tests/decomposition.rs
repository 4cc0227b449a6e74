//! Domain decomposition on the CPU: N subdomains in one process (the in-process exchange) give
//! the single-domain run's traces and snapshots bit for bit, for every stencil radius, with CPML
//! and a free surface, a source on a cut, receivers and snapshot planes straddling cuts.

mod process;

use seismic_run::backend::Backend;
use seismic_run::backend::cpu::CpuSolver;
use seismic_run::config::Config;
use seismic_run::decomposition::{self, Decomposition, Domain, InProcess};
use seismic_run::output::plan::OutputPlan;
use seismic_run::problem::Problem;
use seismic_run::solver::{self, SnapshotSink};

const SHAPE: [usize; 3] = [12, 12, 48];
/// A grid wide enough in x and y for CPML layers of up to 13 points.
#[cfg(feature = "cuda")]
const WIDE: [usize; 3] = [28, 28, 48];

/// Traces, and (index, step, values) of each snapshot.
type Output = (Vec<f32>, Vec<(usize, usize, Vec<f32>)>);

/// Snapshots in the order taken.
#[derive(Default)]
struct Keep(Vec<(usize, usize, Vec<f32>)>, usize);

impl SnapshotSink for Keep {
    fn buffer(&mut self) -> anyhow::Result<Vec<f32>> {
        Ok(vec![f32::NAN; self.1])
    }
    fn submit(&mut self, index: usize, step: usize, field: Vec<f32>) -> anyhow::Result<()> {
        self.0.push((index, step, field));
        Ok(())
    }
}

/// A layered model, CPML of `width` points, a sinc source between planes `cut - 1` and `cut`, sinc and
/// trilinear receivers along z across every plane, and volume, xz, yz and two xy snapshots (one on
/// `cut`).
fn cfg_text(radius: usize, free_surface: bool, cut: usize, width: usize) -> String {
    cfg_text_on(SHAPE, radius, free_surface, cut, width)
}

/// [`cfg_text`] on a grid of `shape` (x and y wider than two layers of `width`).
fn cfg_text_on(shape: [usize; 3], radius: usize, free_surface: bool, cut: usize, width: usize) -> String {
    let h = 10.0;
    format!(
        "[grid]\nshape = [{}, {}, {}]\nspacing = [{h}, {h}, {h}]\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\
         [stencil]\nradius = {radius}\n\
         [time]\nduration = 0.05\ncfl_safety = 0.8\n\
         [source]\nposition = [55.0, 62.0, {}]\nfrequency = 30.0\ndelay = 0.02\ninjection = \"sinc\"\nsinc_half_width = 2\n\
         [boundary]\nkind = \"cpml\"\nwidth = {width}\nfree_surface = {free_surface}\nplacement = \"inside\"\n\
         [[receivers]]\nline = {{ start = [43.0, 57.0, 15.0], end = [43.0, 57.0, 455.0], count = 23 }}\n\
         interpolation = \"sinc\"\nsinc_half_width = 2\n\
         [[receivers]]\nline = {{ start = [71.0, 33.0, 5.0], end = [71.0, 33.0, 465.0], count = 47 }}\n\
         interpolation = \"trilinear\"\n\
         [output]\nsnapshot_every = 7\n\
         [[output.snapshot]]\nkind = \"volume\"\n\
         [[output.snapshot]]\nkind = \"xz\"\nat = 40.0\n\
         [[output.snapshot]]\nkind = \"yz\"\nat = 70.0\n\
         [[output.snapshot]]\nkind = \"xy\"\nat = {}\n\
         [[output.snapshot]]\nkind = \"xy\"\nat = 300.0\n",
        shape[0],
        shape[1],
        shape[2],
        (cut as f64 - 0.5) * h,
        cut as f64 * h,
    )
}

fn setup(radius: usize, free_surface: bool, cut: usize, width: usize) -> (Config, Problem) {
    problem_of(&cfg_text(radius, free_surface, cut, width))
}

/// [`setup`] on the [`WIDE`] grid, for CPML layers wider than the halo (up to 13 points).
#[cfg(feature = "cuda")]
fn setup_wide(radius: usize, free_surface: bool, cut: usize, width: usize) -> (Config, Problem) {
    problem_on(WIDE, &cfg_text_on(WIDE, radius, free_surface, cut, width))
}

/// The configuration `toml` and its problem on the layered model of [`setup`].
fn problem_of(toml: &str) -> (Config, Problem) {
    problem_on(SHAPE, toml)
}

/// [`problem_of`] on a grid of `shape`.
fn problem_on(shape: [usize; 3], toml: &str) -> (Config, Problem) {
    let cfg = Config::from_toml(toml).expect("test configuration parses");
    let plane = shape[0] * shape[1];
    let vp = (0..shape[2] * plane).map(|i| 1500.0 + 20.0 * (i / plane) as f32 + (i % 7) as f32).collect();
    let problem = Problem::build(&cfg, vp).expect("test problem builds");
    (cfg, problem)
}

/// (traces, snapshots) of the single-domain CPU run, as seismic-run runs it (subnormals flushed).
fn single(cfg: &Config, problem: &Problem) -> Output {
    let plan = OutputPlan::from_config(cfg, problem).unwrap();
    let mut backend = CpuSolver::<f32>::new(problem).unwrap().flushing_subnormals(true);
    let mut sink = Keep(Vec::new(), plan.snapshot_len(problem.shape()));
    let record = solver::run(problem, &mut backend, &plan, &mut sink, &mut |_| {}).unwrap();
    (record.traces, sink.0)
}

/// The same through `d`, every subdomain in this process; with `overlap`, each step's edge planes
/// computed first and copied out before the rest is computed (the overlapping exchange's order).
fn decomposed(cfg: &Config, problem: &Problem, d: &Decomposition, overlap: bool) -> Output {
    let plan = OutputPlan::from_config(cfg, problem).unwrap();
    let mut domains: Vec<Domain> = (0..d.ranks())
        .map(|r| {
            let sub = d.subdomain(problem, r).unwrap();
            let backend: Box<dyn Backend> = sub.cpu_backend().unwrap();
            Domain { sub, backend }
        })
        .collect();
    let mut sink = Keep(Vec::new(), plan.snapshot_len(problem.shape()));
    let mut exchange = if overlap { InProcess::overlapping() } else { InProcess::default() };
    let out = decomposition::run(problem, d, &mut domains, &mut exchange, &plan, Some(&mut sink), &mut |_| {})
        .unwrap()
        .expect("in-process runs are rank 0");
    assert_eq!(out.exchange_seconds.map(|e| e.len()), Some(problem.steps));
    (out.traces, sink.0)
}

fn assert_same(what: &str, a: &Output, b: &Output) {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(a.0.iter().any(|&v| v != 0.0), "{what}: the traces recorded the wave");
    if let Some(i) = (0..a.0.len()).find(|&i| a.0[i].to_bits() != b.0[i].to_bits()) {
        panic!("{what}: trace sample {i} differs: {} vs {}", a.0[i], b.0[i]);
    }
    assert_eq!(a.0.len(), b.0.len(), "{what}: trace length");
    assert_eq!(a.1.len(), b.1.len(), "{what}: snapshot count");
    for (s, t) in a.1.iter().zip(&b.1) {
        assert_eq!((s.0, s.1), (t.0, t.1), "{what}: snapshot order");
        if let Some(i) = (0..s.2.len()).find(|&i| s.2[i].to_bits() != t.2[i].to_bits()) {
            panic!("{what}: snapshot {} value {i} differs: {} vs {}", s.0, s.2[i], t.2[i]);
        }
        assert_eq!(bits(&s.2), bits(&t.2));
    }
}

/// Every radius 1..=8, 2 ranks (23 + 25 planes) and 3 uneven ranks (15 + 14 + 19 planes), CPML
/// under a free surface, the source straddling the cut at plane 15 and an xy snapshot on it; the
/// exchange after the step and overlapping it (edge planes first, the source's taps split between
/// the two parts).
#[test]
fn two_and_three_subdomains_equal_one_bit_for_bit_for_every_radius() {
    for radius in 1..=8 {
        let (cfg, problem) = setup(radius, true, 15, 4);
        let want = single(&cfg, &problem);
        assert!(problem.steps >= 20, "{} steps", problem.steps);
        for counts in [vec![23, 25], vec![15, 14, 19]] {
            let d = Decomposition::with_planes(&problem, &counts).unwrap();
            for overlap in [false, true] {
                let got = decomposed(&cfg, &problem, &d, overlap);
                assert_same(
                    &format!("R = {radius}, slabs {counts:?} (halo {}), overlap {overlap}", d.halo),
                    &want,
                    &got,
                );
            }
        }
    }
}

/// y-z blocks: 2 x 2 and 3 row blocks x 2 slabs (uneven), every radius, CPML under a free
/// surface, the source on a z cut, receivers and snapshot planes across every cut: the single run
/// bit for bit (the rows exchanged first, over every held plane, so the z exchange carries the
/// corners).
#[test]
fn y_z_blocks_equal_one_bit_for_bit_for_every_radius() {
    let mut ran = 0;
    for radius in 1..=8 {
        let (cfg, problem) = setup(radius, true, 15, 3);
        let want = single(&cfg, &problem);
        for (planes, rows) in [(vec![23, 25], vec![6, 6]), (vec![15, 33], vec![4, 5, 3])] {
            let Ok(d) = Decomposition::with_blocks(&problem, &planes, &rows) else {
                // Row blocks thinner than the halo: refused, as they must be.
                assert!(rows.iter().any(|&r| r < 2 * radius), "R = {radius}, rows {rows:?}");
                continue;
            };
            assert_eq!(d.ranks(), planes.len() * rows.len());
            let got = decomposed(&cfg, &problem, &d, false);
            assert_same(&format!("R = {radius}, blocks {planes:?} x {rows:?} (halo {})", d.halo), &want, &got);
            ran += 1;
        }
    }
    println!("{ran} block layouts");
    assert!(ran >= 9, "{ran} block layouts ran");
}

/// y cuts through the CPML y layers (rows 0..3 and 9..12 of 12): the halo is 2R, phi_y of the ghost
/// rows recomputed, and the run is the single one's bits.
#[test]
fn y_cuts_through_the_cpml_y_layers_stay_exact() {
    let (cfg, problem) = setup(1, false, 24, 3);
    let d = Decomposition::with_blocks(&problem, &[24, 24], &[2, 8, 2]).unwrap();
    assert_eq!(d.halo, 2, "2R");
    assert_same("R = 1, rows [2, 8, 2]", &single(&cfg, &problem), &decomposed(&cfg, &problem, &d, false));
    let e = d.check_gpu(&problem).unwrap_err().to_string();
    assert!(e.contains("boundary.width = 3: the cut at row 2 of 12 runs through a CPML layer"), "{e}");
}

/// Cuts through the CPML z layers of 5 planes (no free surface): the halo is 2R, phi_z of the
/// ghost planes being recomputed, and the run is still the single one's bits.
#[test]
fn cuts_through_the_cpml_z_layers_take_2r_halo_planes_and_stay_exact() {
    for radius in [1, 2] {
        let (cfg, problem) = setup(radius, false, 24, 5);
        let d = Decomposition::with_planes(&problem, &[4, 40, 4]).unwrap();
        let e = d.check_gpu(&problem).unwrap_err().to_string();
        assert!(e.contains("the cut at plane 4 of 48 runs through a CPML layer"), "{e}");
        assert_eq!(d.halo, 2 * radius, "R = {radius}");
        assert_same(
            &format!("R = {radius}, cuts in the z layers"),
            &single(&cfg, &problem),
            &decomposed(&cfg, &problem, &d, radius == 2),
        );
    }
    let (cfg, problem) = setup(3, false, 24, 4);
    let d = Decomposition::even(&problem, 2).unwrap();
    assert_same("R = 3, even split", &single(&cfg, &problem), &decomposed(&cfg, &problem, &d, true));
}

/// The single-GPU run of `problem`, then the same over 2 and 3 subdomains on that GPU through the
/// exchange `make` opens, checked bit for bit; returns the exchange seconds of each split.
#[cfg(feature = "cuda")]
fn gpu_splits_equal_one_gpu(make: &dyn Fn() -> Box<dyn decomposition::Exchange>) -> Vec<Vec<f64>> {
    let (cfg, problem) = setup_wide(4, true, 15, 12);
    gpu_splits_of(&cfg, &problem, &[vec![23, 25], vec![15, 14, 19]], make)
}

/// [`gpu_splits_equal_one_gpu`] for any problem and slab counts.
#[cfg(feature = "cuda")]
fn gpu_splits_of(
    cfg: &Config,
    problem: &Problem,
    splits: &[Vec<usize>],
    make: &dyn Fn() -> Box<dyn decomposition::Exchange>,
) -> Vec<Vec<f64>> {
    let ny = problem.layout.ny;
    let blocks: Vec<(Vec<usize>, Vec<usize>)> = splits.iter().map(|z| (z.clone(), vec![ny])).collect();
    gpu_blocks_of(cfg, problem, &blocks, make)
}

/// [`gpu_splits_of`] for y-z blocks: (plane counts, row counts) of each split.
#[cfg(feature = "cuda")]
fn gpu_blocks_of(
    cfg: &Config,
    problem: &Problem,
    splits: &[(Vec<usize>, Vec<usize>)],
    make: &dyn Fn() -> Box<dyn decomposition::Exchange>,
) -> Vec<Vec<f64>> {
    use seismic_run::backend::gpu;
    use seismic_run::config::KernelChoice;
    let plan = OutputPlan::from_config(cfg, problem).unwrap();
    let mut single = gpu::open_cuda(problem, KernelChoice::Fused).unwrap();
    let mut sink = Keep(Vec::new(), plan.snapshot_len(problem.shape()));
    let record = solver::run(problem, single.as_mut(), &plan, &mut sink, &mut |_| {}).unwrap();
    let want = (record.traces, sink.0);
    let mut seconds = Vec::new();
    for (counts, rows) in splits {
        let d = Decomposition::with_blocks(problem, counts, rows).unwrap();
        d.check_gpu(problem).unwrap();
        let mut domains: Vec<Domain> = (0..d.ranks())
            .map(|r| {
                let sub = d.subdomain(problem, r).unwrap();
                let backend = gpu::open_cuda(&sub.problem, KernelChoice::Fused).unwrap();
                Domain { sub, backend }
            })
            .collect();
        let mut sink = Keep(Vec::new(), plan.snapshot_len(problem.shape()));
        let mut exchange = make();
        let out = decomposition::run(problem, &d, &mut domains, exchange.as_mut(), &plan, Some(&mut sink), &mut |_| {})
            .unwrap()
            .unwrap();
        let what = format!("GPU, R = {}, slabs {counts:?} x rows {rows:?} (halo {})", problem.stencil.radius, d.halo);
        let exchange_seconds = out.exchange_seconds.expect("a decomposed run's exchange seconds");
        assert_same(&what, &want, &(out.traces, sink.0));
        assert_eq!(exchange_seconds.len(), problem.steps);
        seconds.push(exchange_seconds);
    }
    seconds
}

/// The step in two parts on the GPU (the planes next to each cut first, then the rest, each part
/// with its own launches of the fused step, the CPML layers and the source taps), with the planes
/// copied out between the parts: the single-GPU run bit for bit for R = 1..8 (CPML of 12 points,
/// wider than the halo, under a free surface, the source on a cut), with cuts on a CPML z layer's
/// last plane (the first part then holds layer planes), and with the sponge (its z factors offset
/// with the planes).
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a GPU"]
fn a_gpu_step_in_two_parts_equals_the_single_gpu_run_bit_for_bit() {
    let overlapping = || Box::new(InProcess::overlapping()) as Box<dyn decomposition::Exchange>;
    for radius in 1..=8 {
        let (cfg, problem) = setup_wide(radius, true, 15, 12);
        gpu_splits_of(&cfg, &problem, &[vec![23, 25], vec![15, 14, 19]], &overlapping);
    }
    // Cuts at planes 4 and 44 (12 and 36): the first and last ranks own a z layer's 4 (12) planes
    // each, all of them in the first part.
    let (cfg, problem) = setup(4, false, 24, 4);
    gpu_splits_of(&cfg, &problem, &[vec![4, 40, 4]], &overlapping);
    let (cfg, problem) = setup_wide(3, false, 24, 12);
    gpu_splits_of(&cfg, &problem, &[vec![12, 24, 12]], &overlapping);
    let (cfg, problem) = problem_of(&cfg_text(4, true, 15, 4).replace("kind = \"cpml\"", "kind = \"sponge\""));
    gpu_splits_of(&cfg, &problem, &[vec![23, 25]], &overlapping);
}

/// Two and three subdomains on one GPU through the host-staged planes (the in-process exchange)
/// equal the single-GPU run bit for bit: R = 4 under a free surface, CPML layers of 12 points
/// (three times the halo), each subdomain holding the layers of the grid's faces it has.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a GPU"]
fn two_subdomains_on_one_gpu_equal_the_single_gpu_run_bit_for_bit() {
    gpu_splits_equal_one_gpu(&|| Box::new(InProcess::default()));
}

/// The same through NCCL: the planes go device to device on the solvers' streams (a one-rank
/// communicator sending to itself), with the exchange timed there by events.
#[cfg(feature = "nccl")]
#[test]
#[ignore = "needs a GPU"]
fn two_and_three_subdomains_on_one_gpu_through_nccl_equal_the_single_gpu_run_bit_for_bit() {
    use seismic_run::decomposition::nccl::{NcclExchange, version};
    println!("NCCL {}", version().unwrap());
    for split in
        gpu_splits_equal_one_gpu(&|| Box::new(NcclExchange::in_process(0, Box::new(InProcess::default())).unwrap()))
    {
        let mean = split.iter().sum::<f64>() / split.len() as f64;
        assert!(split.iter().all(|&s| s > 0.0 && s < 0.1), "exchange seconds timed on the device: {split:?}");
        println!("{} steps, exchange {:.1} us a step on the device", split.len(), mean * 1e6);
    }
}

/// y-z blocks on one GPU (the rows of every plane gathered and written back on the device, the
/// host in between): 2 x 2 and 2 slabs x 3 uneven row blocks, R = 1..3 (rows of 3 to 6 must hold
/// the halo), CPML under a free surface of R points; and on a wider grid, CPML of 12 points (wider
/// than the halo, a y cut on a layer's edge, the blocks' y layers after the pass): the single-GPU
/// run bit for bit.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a GPU"]
fn y_z_blocks_on_one_gpu_equal_the_single_gpu_run_bit_for_bit() {
    let host = || Box::new(InProcess::default()) as Box<dyn decomposition::Exchange>;
    for radius in 1..=3 {
        let (cfg, problem) = setup(radius, true, 15, radius);
        gpu_blocks_of(&cfg, &problem, &[(vec![23, 25], vec![6, 6]), (vec![15, 33], vec![4, 5, 3])], &host);
        let (cfg, problem) = setup_wide(radius, true, 15, 12);
        gpu_blocks_of(&cfg, &problem, &[(vec![23, 25], vec![14, 14]), (vec![15, 14, 19], vec![12, 16])], &host);
    }
}

/// The NCCL exchange overlapping the step: each subdomain's edge planes first, the transfers on a
/// side stream of its own while its solver's stream computes the rest of its owned planes (its
/// ghost planes left to the transfers), the solver's stream waiting for them before the step ends:
/// the single-GPU run bit for bit for R = 1..8 and with cuts at the z layers' edges.
#[cfg(feature = "nccl")]
#[test]
#[ignore = "needs a GPU"]
fn nccl_overlapping_the_step_equals_the_single_gpu_run_bit_for_bit() {
    use seismic_run::decomposition::nccl::NcclExchange;
    let nccl = || Box::new(NcclExchange::in_process(0, Box::new(InProcess::default())).unwrap().overlapping()) as _;
    for radius in 1..=8 {
        let (cfg, problem) = setup_wide(radius, true, 15, 12);
        for split in gpu_splits_of(&cfg, &problem, &[vec![23, 25], vec![15, 14, 19]], &nccl) {
            assert!(split.iter().all(|&s| s > 0.0 && s < 0.1), "exchange seconds timed on the device: {split:?}");
        }
    }
    let (cfg, problem) = setup(4, false, 24, 4);
    gpu_splits_of(&cfg, &problem, &[vec![4, 40, 4]], &nccl);
}

/// Without the `mpi` feature, `[run] decomposition = "z"` is an error that names the build option,
/// and no file is written.
#[cfg(not(feature = "mpi"))]
#[test]
fn decomposition_without_the_mpi_feature_is_a_clear_error() {
    let dir = process::scratch("decomposition", "no_mpi");
    let input = dir.join("in.toml");
    let toml = "[grid]\nshape = [12, 12, 12]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
                [time]\nsteps = 3\n[source]\nposition = [60.0, 60.0, 60.0]\nfrequency = 10.0\n\
                [boundary]\nkind = \"none\"\n[run]\nbackend = \"cpu\"\ndecomposition = \"z\"\n";
    std::fs::write(&input, toml).unwrap();
    let out = process::seismic_run().arg(&input).arg("-o").arg(dir.join("out.h5")).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("run.decomposition = \"z\" needs a build with `--features mpi`"), "{err}");
    assert!(!dir.join("out.h5").exists());
}
