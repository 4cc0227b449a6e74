//! The GPU side of `seismic-bench`: measures the copy and 3-read-1-write ceilings (on 1 GiB arrays,
//! and again on arrays of each grid's field size), then times every (grid, radius, operator) of a
//! [`SweepSpec`] on one device through any [`GpuRuntime`], with the autotuner's choice (searched
//! in this run with `tune`, for the full step and the Laplacian-only operator apart, else the
//! device's cached winner, else the default). The two steps of a (grid, radius) share one solver;
//! the Laplacian-only operator gets its own, with its own launch shape. A case that does not fit
//! or fails is reported as skipped and the sweep goes on.

use super::{Ceilings, OperatorKind, Report, Row, Skipped, SweepSpec, TuneSummary};
use crate::backend::gpu::autotune::{self, ShapeClass};
use crate::backend::gpu::{self, GpuRuntime, GpuSolver, Operator, Tuning, TuningOverride};
use crate::config::{KernelChoice, Precision};
use anyhow::Result;
use std::time::{Duration, Instant};

/// How a sweep chooses each case's launch shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TuningMode {
    /// Tuning::for_radius (the cache is not read).
    Default,
    /// The device's cached winner when there is one, else the default.
    Cached,
    /// Search each (radius, shape class) once in this run (within `budget`), cache and use it.
    Search { budget: Duration },
}

/// Sweep settings beside the spec.
#[derive(Clone, Debug)]
pub struct Settings {
    pub tuning: TuningMode,
    /// Bytes per array of the ceiling measurement.
    pub ceiling_bytes: usize,
    pub ceiling_reps: usize,
    /// Timed steps per autotuner candidate.
    pub tune_reps: usize,
    /// Whether the backend's default launch shape has the asynchronous ring (true on CUDA,
    /// false on HIP: `Tuning::for_radius_without_ring`).
    pub ring: bool,
}

impl Settings {
    /// The backend's default launch shape of `op` for a radius (the Laplacian-only operator has
    /// its own, `Tuning::default_for`), with the shape set by hand applied
    /// (`TuningOverride::from_environment`, which [`run`] checks first).
    pub fn default_tuning(&self, op: Operator, radius: usize) -> Tuning {
        let laplacian = op == Operator::Laplacian;
        match TuningOverride::from_environment().ok().flatten() {
            Some(o) => o.tuning(radius, self.ring, laplacian),
            None => Tuning::default_for(radius, self.ring, laplacian),
        }
    }
}

fn operator(op: OperatorKind) -> Operator {
    match op {
        OperatorKind::FusedStep => Operator::Fused,
        OperatorKind::ThreePassStep => Operator::ThreePass,
        OperatorKind::LaplacianOnly => Operator::Laplacian,
        OperatorKind::RealStep
        | OperatorKind::FusedStepF16
        | OperatorKind::RealStepF16
        | OperatorKind::RealStepDensity
        | OperatorKind::RealStepDefaultBoundary => Operator::Fused,
    }
}

/// The [`OperatorKind::RealStep`] problem on `shape`: 10 m spacing, 2000 m/s, CPML of
/// [`super::REAL_STEP_CPML`] points on every face, a 10 Hz source in the middle and
/// [`super::REAL_STEP_RECEIVERS`] receivers on a line 50 m deep, `steps` steps; with `density`, a
/// density of 1000 kg/m^3 above the middle plane and 2000 below; with `width`, CPML of that many
/// points; built through the input file's path, as a run builds it. A 2D `shape` ([`super::is_2d`])
/// is the 2D problem: `grid.shape = [nx, nz]`, positions [x, z], layers on the x and z faces.
pub fn real_step_problem(
    shape: [usize; 3],
    radius: usize,
    steps: usize,
    density: bool,
    width: usize,
) -> Result<crate::problem::Problem> {
    let cfg = crate::config::Config::from_toml(&real_step_input(shape, radius, steps, density, width))?;
    let model = crate::model::sample(&cfg, std::path::Path::new("."))?;
    crate::problem::Problem::build_with_density(&cfg, model.vp, model.rho)
}

/// The input file of [`real_step_problem`].
pub fn real_step_input(shape: [usize; 3], radius: usize, steps: usize, density: bool, width: usize) -> String {
    let h = 10.0;
    let [nx, ny, nz] = shape;
    let mid = |n: usize| (n / 2) as f64 * h;
    // A point [x, y, z], or [x, z] on a 2D grid (y is the grid's only one).
    let point = |x: f64, z: f64| {
        if super::is_2d(shape) { format!("[{x:?}, {z:?}]") } else { format!("[{x:?}, {:?}, {z:?}]", mid(ny)) }
    };
    let (grid, spacing) = if super::is_2d(shape) {
        (format!("[{nx}, {nz}]"), format!("[{h:?}, {h:?}]"))
    } else {
        (format!("[{nx}, {ny}, {nz}]"), format!("[{h:?}, {h:?}, {h:?}]"))
    };
    format!(
        "[grid]\nshape = {grid}\nspacing = {spacing}\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n{}[stencil]\nradius = {radius}\n[time]\nsteps = {steps}\n\
         [source]\nposition = {}\nfrequency = 10.0\n\
         [[receivers]]\nline = {{ start = {}, end = {}, count = {} }}\n\
         [boundary]\nkind = \"cpml\"\nwidth = {width}\nplacement = \"inside\"\n",
        if density {
            format!("density = {{ depths = [{:?}], values = [1000.0, 2000.0] }}\n", mid(nz) + 0.5 * h)
        } else {
            String::new()
        },
        point(mid(nx), mid(nz)),
        point(0.1 * nx as f64 * h, 50.0),
        point(0.9 * nx as f64 * h, 50.0),
        super::REAL_STEP_RECEIVERS,
    )
}

/// Median device seconds of the real step `op` (3 untimed steps, then `reps`) on the solver
/// [`gpu::open_solver`] picks for its problem (the 2D one on a 2D grid), opened with `tuning`:
/// its fields in f16 for [`OperatorKind::RealStepF16`], a varying density for
/// [`OperatorKind::RealStepDensity`], the default CPML width for
/// [`OperatorKind::RealStepDefaultBoundary`].
fn time_real_step<Rt: GpuRuntime + 'static>(
    open: &mut impl FnMut() -> Result<Rt>,
    shape: [usize; 3],
    radius: usize,
    tuning: Tuning,
    reps: usize,
    op: OperatorKind,
) -> Result<f64> {
    let density = op == OperatorKind::RealStepDensity;
    let width = if op == OperatorKind::RealStepDefaultBoundary {
        crate::boundary::default_width(radius)
    } else {
        super::REAL_STEP_CPML
    };
    let mut problem = real_step_problem(shape, radius, reps + 3, density, width)?;
    problem.precision = if op == OperatorKind::RealStepF16 { Precision::F16 } else { Precision::F32 };
    let mut s = gpu::open_solver(open()?, &problem, KernelChoice::Fused, tuning)?;
    for n in 0..problem.steps {
        s.step(n)?;
    }
    let seconds = s.step_seconds()?;
    Ok(median(seconds[3..].to_vec()))
}

/// A solver for the synthetic problem of this grid and radius, its wavefields filled with noise.
fn open_solver<Rt: GpuRuntime>(
    open: &mut impl FnMut() -> Result<Rt>,
    shape: [usize; 3],
    radius: usize,
    kernel: KernelChoice,
    tuning: Tuning,
    precision: Precision,
) -> Result<GpuSolver<Rt>> {
    let mut problem = crate::problem::Problem::homogeneous_interior(shape, radius);
    problem.precision = precision;
    let mut s = GpuSolver::new(open()?, &problem, kernel, tuning)?;
    let points = problem.layout.points();
    s.set_state(&crate::numerics::noise(points, 1), &crate::numerics::noise(points, 2))?;
    Ok(s)
}

/// Median seconds of the Laplacian-only operator on a fresh solver with `tuning` (its window: the
/// operator's own z-window, 0 for the automatic one), and the launch shape it ran with.
fn time_laplacian<Rt: GpuRuntime>(
    open: &mut impl FnMut() -> Result<Rt>,
    shape: [usize; 3],
    radius: usize,
    tuning: Tuning,
    reps: usize,
) -> Result<(Tuning, f64)> {
    let mut s = open_solver(open, shape, radius, KernelChoice::Fused, tuning, Precision::F32)?;
    s.set_operator_window(Operator::Laplacian, tuning.window);
    let seconds = median(s.time_interior(Operator::Laplacian, reps)?);
    Ok((s.operator_tuning(Operator::Laplacian), seconds))
}

/// The ceilings on arrays of `shape`'s field size, measured once per size (kept in `measured`);
/// None where four such arrays do not fit on the device or the measurement fails.
fn same_size_ceiling<Rt: GpuRuntime>(
    open: &mut impl FnMut() -> Result<Rt>,
    shape: [usize; 3],
    set: &Settings,
    measured: &mut Vec<Ceilings>,
) -> Option<Ceilings> {
    let bytes = shape.iter().product::<usize>() * 4;
    if let Some(c) = measured.iter().find(|c| c.array_bytes as usize == bytes / 16 * 16) {
        return Some(c.clone());
    }
    match open().and_then(|rt| gpu::measure_ceiling(&rt, bytes, set.ceiling_reps)).map(Ceilings::from) {
        Ok(c) => {
            eprintln!(
                "ceilings on {} MiB arrays: copy {:.0} GB/s, 3R1W {:.0} GB/s",
                c.array_bytes >> 20,
                c.copy_gbs,
                c.three_read_one_write_gbs
            );
            measured.push(c.clone());
            Some(c)
        }
        Err(e) => {
            eprintln!("ceilings on {} MiB arrays: {e:#}", bytes >> 20);
            None
        }
    }
}

/// Searches `op`'s tuning for this case's (radius, shape class) and stores the winner.
fn tune<Rt: GpuRuntime>(
    open: &mut impl FnMut() -> Result<Rt>,
    op: Operator,
    radius: usize,
    shape: [usize; 3],
    default: Tuning,
    budget: Duration,
    reps: usize,
) -> Result<TuneSummary> {
    let t0 = Instant::now();
    let found = autotune::tune_and_store(open, op, radius, shape, default, budget, reps)?;
    let e = &found.entry;
    let search_seconds = t0.elapsed().as_secs_f64();
    eprintln!(
        "tuned {op:?} R={radius} {} on {}: {} {:.3} ms (default {:.3} ms), {}/{} candidates in {search_seconds:.1} s",
        e.class,
        super::shape_label(e.shape),
        e.tuning.label(),
        e.seconds * 1e3,
        e.default_seconds * 1e3,
        e.tried,
        e.candidates,
    );
    for f in &found.failures {
        eprintln!("  candidate failed: {f}");
    }
    Ok(TuneSummary {
        operator: if op == Operator::Laplacian { OperatorKind::LaplacianOnly } else { OperatorKind::FusedStep },
        radius,
        class: e.class.to_string(),
        shape: e.shape,
        launch: e.tuning(),
        seconds: e.seconds,
        default_seconds: e.default_seconds,
        tried: e.tried,
        candidates: e.candidates,
        search_seconds,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Runs the sweep on the device `open` opens (called once per solver: a solver owns its runtime).
/// Progress goes to stderr. On a 2D grid only the operators with a 2D form are timed
/// ([`OperatorKind::has_2d_form`]; the others are listed as not measured), with the default launch
/// shape (no search: the autotuner times the 3D kernels).
pub fn run<Rt: GpuRuntime + 'static>(
    mut open: impl FnMut() -> Result<Rt>,
    spec: &SweepSpec,
    set: &Settings,
) -> Result<Report> {
    spec.validate()?;
    let by_hand = TuningOverride::from_environment()?.is_some();
    let rt = open()?;
    let (device, vendor, arch) = (rt.device_name(), rt.vendor().to_string(), rt.arch());
    eprintln!("seismic-bench: {device} ({vendor}, {arch}), {} multiprocessors", rt.multiprocessors());
    let c = gpu::measure_ceiling(&rt, set.ceiling_bytes, set.ceiling_reps)?;
    drop(rt);
    let ceilings = Ceilings::from(c);
    eprintln!("ceilings: copy {:.0} GB/s, 3R1W {:.0} GB/s", ceilings.copy_gbs, ceilings.three_read_one_write_gbs);
    let mut rows = Vec::new();
    let mut tuning = Vec::new();
    let mut skipped = Vec::new();
    let mut searched: Vec<(usize, ShapeClass)> = Vec::new();
    // The searches that found a winner: only their entries are labelled "tuned" (a failed search
    // leaves an older cached entry in place).
    let mut found: Vec<(Operator, usize, ShapeClass)> = Vec::new();
    let mut same_size_ceilings: Vec<Ceilings> = Vec::new();
    let want_three_pass = spec.operators.contains(&OperatorKind::ThreePassStep);
    let want_lap = spec.operators.contains(&OperatorKind::LaplacianOnly);
    for (shape, radius) in spec.cases() {
        let label = super::shape_label(shape);
        let class = ShapeClass::of(shape);
        let two_d = super::is_2d(shape);
        if two_d {
            for &op in spec.operators.iter().filter(|o| !o.has_2d_form()) {
                let error = format!("{label} is a 2D grid, and {} has no 2D form (only the real steps do)", op.label());
                eprintln!("{label} R={radius} {}: skipped: {error}", op.label());
                skipped.push(Skipped { shape, radius, operator: Some(op), error });
            }
        }
        if let TuningMode::Search { budget } = set.tuning
            && !two_d
            && !searched.contains(&(radius, class))
        {
            searched.push((radius, class));
            // The Laplacian-only operator gets a search of its own (its best shape and window differ
            // from the full step's: 256^3 on an H100, 64-plane windows of one row per thread), on
            // half the budget, since its likeliest winners come first.
            let mut ops = vec![(Operator::Fused, budget)];
            if want_lap {
                ops.push((Operator::Laplacian, budget / 2));
            }
            for (op, budget) in ops {
                match tune(&mut open, op, radius, shape, set.default_tuning(op, radius), budget, set.tune_reps) {
                    Ok(t) => {
                        found.push((op, radius, class));
                        tuning.push(t);
                    }
                    Err(e) => {
                        eprintln!("tuning {op:?} R={radius} {label} failed: {e:#}");
                        skipped.push(Skipped {
                            shape,
                            radius,
                            operator: (op == Operator::Laplacian).then_some(OperatorKind::LaplacianOnly),
                            error: format!("autotuning: {e:#}"),
                        });
                    }
                }
            }
        }
        let same_size = same_size_ceiling(&mut open, shape, set, &mut same_size_ceilings);
        let choose = |op: Operator| -> (Tuning, &'static str) {
            if set.tuning == TuningMode::Default || by_hand || two_d {
                return (set.default_tuning(op, radius), "default");
            }
            let (t, entry) = autotune::tuning_or(&device, op, radius, shape, set.ring);
            let source = match entry {
                Some(e) if found.contains(&(op, radius, e.class)) => "tuned",
                Some(_) => "cached",
                None => "default",
            };
            (t, source)
        };
        let mut time_row = |op: OperatorKind, tuning: Tuning, source: &str, seconds: f64, setup: f64| {
            let row =
                Row::new(shape, radius, op, tuning, source, seconds, &ceilings).with_same_size(same_size.as_ref());
            eprintln!(
                "{label} R={radius} {:16} {} ({source}): {:8.3} ms {:6.0} GB/s {:5.1}% of {} (set-up {setup:.1} s)",
                op.label(),
                row.launch_label(),
                row.seconds * 1e3,
                row.gbs,
                row.percent,
                row.ceiling.label()
            );
            rows.push(row);
        };
        // The steps share one solver; the Laplacian-only operator has its own launch shape.
        let steps: Vec<OperatorKind> = spec
            .operators
            .iter()
            .copied()
            .filter(|&o| matches!(o, OperatorKind::FusedStep | OperatorKind::ThreePassStep) && !two_d)
            .collect();
        if !steps.is_empty() {
            let (launch, source) = choose(Operator::Fused);
            let kernel = if want_three_pass { KernelChoice::ThreePass } else { KernelChoice::Fused };
            let t0 = Instant::now();
            match open_solver(&mut open, shape, radius, kernel, launch, Precision::F32) {
                Ok(mut s) => {
                    let setup = t0.elapsed().as_secs_f64();
                    for op in steps {
                        match s.time_interior(operator(op), spec.reps) {
                            Ok(times) => time_row(op, s.operator_tuning(operator(op)), source, median(times), setup),
                            Err(e) => {
                                eprintln!("{label} R={radius} {}: {e:#}", op.label());
                                skipped.push(Skipped { shape, radius, operator: Some(op), error: format!("{e:#}") });
                            }
                        }
                    }
                }
                Err(e) => {
                    eprintln!("{label} R={radius}: {e:#}");
                    skipped.push(Skipped { shape, radius, operator: None, error: format!("{e:#}") });
                }
            }
        }
        // The real steps and the f16 interior each on a solver of their own.
        for op in [
            OperatorKind::RealStep,
            OperatorKind::FusedStepF16,
            OperatorKind::RealStepF16,
            OperatorKind::RealStepDensity,
            OperatorKind::RealStepDefaultBoundary,
        ] {
            if !spec.operators.contains(&op) || (two_d && !op.has_2d_form()) {
                continue;
            }
            let (launch, source) = choose(Operator::Fused);
            let t0 = Instant::now();
            let timed = match op {
                OperatorKind::RealStep
                | OperatorKind::RealStepF16
                | OperatorKind::RealStepDensity
                | OperatorKind::RealStepDefaultBoundary => {
                    time_real_step(&mut open, shape, radius, launch, spec.reps, op).map(|seconds| (launch, seconds))
                }
                _ => open_solver(&mut open, shape, radius, KernelChoice::Fused, launch, Precision::F16)
                    .and_then(|mut s| Ok((s.tuning(), median(s.time_interior(Operator::Fused, spec.reps)?)))),
            };
            match timed {
                Ok((t, seconds)) => time_row(op, t, source, seconds, t0.elapsed().as_secs_f64()),
                Err(e) => {
                    eprintln!("{label} R={radius} {}: {e:#}", op.label());
                    skipped.push(Skipped { shape, radius, operator: Some(op), error: format!("{e:#}") });
                }
            }
        }
        if want_lap && !two_d {
            let (launch, source) = choose(Operator::Laplacian);
            let t0 = Instant::now();
            match time_laplacian(&mut open, shape, radius, launch, spec.reps) {
                Ok((t, seconds)) => {
                    time_row(OperatorKind::LaplacianOnly, t, source, seconds, t0.elapsed().as_secs_f64())
                }
                Err(e) => {
                    eprintln!("{label} R={radius} {}: {e:#}", OperatorKind::LaplacianOnly.label());
                    skipped.push(Skipped {
                        shape,
                        radius,
                        operator: Some(OperatorKind::LaplacianOnly),
                        error: format!("{e:#}"),
                    });
                }
            }
        }
    }
    same_size_ceilings.sort_by_key(|c| c.array_bytes);
    Ok(Report {
        device,
        vendor,
        arch,
        date: autotune::utc_date(),
        ceilings,
        same_size_ceilings,
        spec: spec.clone(),
        rows,
        tuning,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real step's problem is what its bound counts: CPML of 20 points, no free surface, 1000
    /// receivers, a source.
    #[test]
    fn real_step_problem_matches_its_bound() {
        let p = real_step_problem([64, 48, 56], 4, 5, false, super::super::REAL_STEP_CPML).unwrap();
        assert_eq!(p.receivers.len(), super::super::REAL_STEP_RECEIVERS);
        assert_eq!((p.boundary.width, p.boundary.free_surface, p.steps), (super::super::REAL_STEP_CPML, false, 5));
        assert_eq!(p.full_step_bytes(), crate::problem::full_step_bytes([64, 48, 56], 4, 20, false));
        assert!(!p.source().taps.is_empty());
        assert_eq!(p.full_step_bytes(), OperatorKind::RealStep.bytes([64, 48, 56], 4));
        // With a density: the buoyancy read too, 4 B a point more.
        let d = real_step_problem([64, 48, 56], 4, 5, true, super::super::REAL_STEP_CPML).unwrap();
        assert!(d.variable_density());
        assert_eq!(d.full_step_bytes(), OperatorKind::RealStepDensity.bytes([64, 48, 56], 4));
        assert_eq!(d.full_step_bytes() - p.full_step_bytes(), 4 * 64 * 48 * 56);
        // With the default boundary.
        let w = crate::boundary::default_width(4);
        let b = real_step_problem([64, 48, 56], 4, 5, false, w).unwrap();
        assert_eq!(b.boundary.width, w);
        assert_eq!(b.full_step_bytes(), OperatorKind::RealStepDefaultBoundary.bytes([64, 48, 56], 4));
    }

    /// The 2D real step's problem is a 2D run's (one point in y, no y layers) and its bytes are
    /// the bound the bench counts; the input parses as `seismic-run` reads it.
    #[test]
    fn two_d_real_step_problem_matches_its_bound() {
        let shape = [96, 1, 72];
        let p = real_step_problem(shape, 4, 5, false, super::super::REAL_STEP_CPML).unwrap();
        assert!(p.is_2d(), "{:?}", p.layout);
        assert_eq!(p.shape(), shape);
        assert_eq!(p.receivers.len(), super::super::REAL_STEP_RECEIVERS);
        assert_eq!(p.boundary.layer_faces, [[true; 2], [false; 2], [true; 2]]);
        assert_eq!(p.full_step_bytes(), OperatorKind::RealStep.bytes(shape, 4));
        assert!(!p.source().taps.is_empty());
        let d = real_step_problem(shape, 4, 5, true, super::super::REAL_STEP_CPML).unwrap();
        assert!(d.variable_density() && d.is_2d());
        assert_eq!(d.full_step_bytes(), OperatorKind::RealStepDensity.bytes(shape, 4));
        let w = crate::boundary::default_width(4);
        let b = real_step_problem(shape, 4, 5, false, w).unwrap();
        assert_eq!(b.full_step_bytes(), OperatorKind::RealStepDefaultBoundary.bytes(shape, 4));
        let text = real_step_input(shape, 4, 5, false, 20);
        assert!(text.contains("shape = [96, 72]") && text.contains("position = [480.0, 360.0]"), "{text}");
    }

    /// bench/inputs/step-2d-8192.toml is the bench's 2D real step at 8192 x 8192 (besides its dt
    /// of 0.5 ms, the Deepwave peer's, and its output path), and checks as a run's input.
    #[test]
    fn two_d_input_file_is_the_bench_problem() {
        use crate::config::Config;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/inputs/step-2d-8192.toml");
        let mut file = Config::from_file(&path).unwrap();
        file.check_values().unwrap();
        assert_eq!(file.time.dt, Some(0.0005));
        let bench = Config::from_toml(&real_step_input([8192, 1, 8192], 4, 1000, false, 20)).unwrap();
        (file.time.dt, file.output) = (bench.time.dt, bench.output.clone());
        assert_eq!(format!("{file:?}"), format!("{bench:?}"));
    }

    /// A tiny sweep with a search: every case timed, numbers plausible, the winner cached and found.
    #[cfg(feature = "cuda")]
    #[test]
    #[ignore = "needs a GPU"]
    fn tiny_sweep_with_tuning_on_cuda() {
        use crate::backend::gpu::cuda::CudaRuntime;
        let dir = std::env::temp_dir().join(format!("seismic-sweep-test-{}", std::process::id()));
        // SAFETY: the only test of this binary that sets the variable; GPU tests run one at a time.
        unsafe { std::env::set_var("SEISMIC_CACHE_DIR", &dir) };
        let spec = SweepSpec {
            sizes: vec![[96, 80, 72]],
            size_radius: 4,
            radii: vec![2],
            radius_shape: [64, 64, 64],
            operators: OperatorKind::ALL.to_vec(),
            reps: 5,
        };
        let set = Settings {
            tuning: TuningMode::Search { budget: Duration::from_millis(1) },
            ceiling_bytes: 64 << 20,
            ceiling_reps: 5,
            tune_reps: 3,
            ring: true,
        };
        let rep = run(|| CudaRuntime::new(0), &spec, &set).unwrap();
        assert!(rep.skipped.is_empty(), "{:?}", rep.skipped);
        assert_eq!(rep.rows.len(), 2 * OperatorKind::ALL.len());
        assert_eq!(rep.rows.iter().filter(|r| r.operator == OperatorKind::RealStep).count(), 2);
        // The full step and the Laplacian-only operator, for each of the two cases.
        assert_eq!(rep.tuning.len(), 4);
        assert_eq!(rep.tuning.iter().filter(|t| t.operator == OperatorKind::LaplacianOnly).count(), 2);
        assert_eq!(rep.same_size_ceilings.len(), 2);
        for r in &rep.rows {
            assert!(r.seconds > 0.0 && r.gbs > 0.0 && r.percent < 200.0, "{r:?}");
            assert!(r.percent_same_size.is_some_and(|p| p > 0.0), "{r:?}");
            assert_eq!(r.tuning, "tuned");
        }
        let cache = autotune::TuningCache::load(&rep.device);
        for op in [Operator::Fused, Operator::Laplacian] {
            assert!(cache.lookup(op, 4, [96, 80, 72], &autotune::kernels_hash()).is_some());
            assert!(cache.lookup(op, 2, [64, 64, 64], &autotune::kernels_hash()).is_some());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }
}
