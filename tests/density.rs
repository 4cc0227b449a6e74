//! A variable density on the CPU reference (`[model] density`, `problem::Density` has the scheme):
//! the reflection coefficient at a plane interface against (Z2 - Z1) / (Z2 + Z1), reciprocity
//! across a density interface, a uniform density bit for bit the run without one, decomposed runs
//! bit for bit the single-domain one, density files read as the velocity's are, and bad input.
//!
//! The reflection cases are tests/common/impedance.rs's (the GPU runs them too).

use seismic_run::backend::Backend;
use seismic_run::backend::cpu::{CpuSolver, Real};
use seismic_run::config::Config;
use seismic_run::decomposition::{self, Decomposition, Domain, InProcess};
use seismic_run::output::plan::OutputPlan;
use seismic_run::problem::{Density, Problem};
use seismic_run::solver::{self, SnapshotSink};
use std::path::Path;

mod common;
mod process;

use common::impedance::{self, problem, problem_in};

/// Every trace of the CPU run of `problem`, in f64.
fn run<T: Real>(problem: &Problem) -> Vec<Vec<f64>> {
    let mut solver = CpuSolver::<T>::new(problem).expect("CPU solver");
    for n in 0..problem.steps {
        solver.advance(n);
    }
    solver.traces_native().iter().map(|t| t.iter().map(|v| v.f64()).collect()).collect()
}

#[test]
fn a_density_contrast_reflects_with_the_impedance_coefficient() {
    impedance::a_density_contrast_reflects_with_the_impedance_coefficient(&run::<f32>);
}

#[test]
fn both_contrasts_reflect_a_plane_wave_with_the_impedance_coefficient() {
    impedance::both_contrasts_reflect_a_plane_wave_with_the_impedance_coefficient(&run::<f32>);
}

/// A smooth heterogeneous velocity on an n^3 grid (three layers and a few random plane waves).
fn heterogeneous(n: usize, base: [f32; 3], wiggle: f32, seed: u64) -> Vec<f32> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let waves: Vec<([f64; 3], f64)> =
        (0..5).map(|_| ([next() * 0.4, next() * 0.4, next() * 0.4], next() * 3.0)).collect();
    let mut v = Vec::with_capacity(n * n * n);
    for iz in 0..n {
        for iy in 0..n {
            for ix in 0..n {
                let layer = base[(3 * iz / n).min(2)];
                let x = [ix as f64, iy as f64, iz as f64];
                let w: f64 = waves.iter().map(|(k, ph)| (k[0] * x[0] + k[1] * x[1] + k[2] * x[2] + ph).sin()).sum();
                v.push(layer + wiggle * w as f32);
            }
        }
    }
    v
}

/// An n^3 model, heterogeneous in velocity and density, with `boundary`, a sinc source and receiver.
fn reciprocity_problem(n: usize, src: [f64; 3], rec: [f64; 3], boundary: &str) -> Problem {
    let toml = format!(
        "[grid]\nshape = [{n}, {n}, {n}]\nspacing = [10.0, 10.0, 10.0]\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n[stencil]\nradius = 4\n[time]\nduration = 0.3\n\
         [source]\nposition = {src:?}\nfrequency = 12.0\ndelay = 0.1\ninjection = \"sinc\"\n\
         [boundary]\n{boundary}\n\
         [[receivers]]\nposition = {rec:?}\ninterpolation = \"sinc\"\n"
    );
    let cfg = Config::from_toml(&toml).unwrap();
    let vp = heterogeneous(n, [1800.0, 2600.0, 3200.0], 60.0, 7);
    let rho = heterogeneous(n, [1200.0, 2300.0, 2500.0], 80.0, 11);
    Problem::build_with_density(&cfg, vp, Some(rho)).unwrap()
}

/// Source and receiver in different densities (1200 and 2500 kg/m3, across two interfaces), off
/// the grid on every axis: swapped, the same trace. Without absorbing layers the scheme is exactly
/// reciprocal (the f64 traces agree to rounding); with CPML layers outside the model (the model's
/// edge values extended along each layer's normal) to what the layers' own asymmetry leaves.
#[test]
fn swapping_source_and_receiver_across_a_density_interface_gives_the_same_trace() {
    let n = 40;
    let (a, b) = ([123.4, 201.7, 104.6], [247.2, 183.9, 296.1]);
    for (boundary, width, tolerances) in [
        ("kind = \"none\"", 0, vec![("f64", 1e-13)]),
        ("kind = \"cpml\"\nwidth = 10", 10, vec![("f32", 4e-6), ("f64", 2e-6)]),
    ] {
        let (pa, pb) = (reciprocity_problem(n, a, b, boundary), reciprocity_problem(n, b, a, boundary));
        let at = |p: [f64; 3]| p.map(|x| (x / 10.0).round() as usize + width);
        let (rho_a, rho_b) = (1.0 / pa.buoyancy_at(at(a)), 1.0 / pa.buoyancy_at(at(b)));
        assert!(rho_b > 1.8 * rho_a, "a and b in different densities: {rho_a} and {rho_b} (relative)");
        for (label, tol) in tolerances {
            let (ab, ba) =
                if label == "f32" { (run::<f32>(&pa), run::<f32>(&pb)) } else { (run::<f64>(&pa), run::<f64>(&pb)) };
            let scale = ab[0].iter().fold(0.0f64, |m, x| m.max(x.abs()));
            let diff = ab[0].iter().zip(&ba[0]).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale;
            eprintln!(
                "reciprocity across density interfaces ({label}, {boundary}): max |G(b,a) - G(a,b)| / max |G| = {diff:.2e}"
            );
            assert!(scale > 0.0 && diff <= tol, "{label}, {boundary}: reciprocity error {diff}");
        }
    }
}

/// A 16 x 14 x 20 layered model (CPML of 5 points outside it) with `density`, a sinc source and
/// two receivers, radius 4.
fn small_input(density: &str, extra: &str) -> String {
    format!(
        "[grid]\nshape = [16, 14, 20]\nspacing = [10.0, 10.0, 10.0]\n\
         [model]\nkind = \"layered\"\ndepths = [95.0]\nvelocities = [1800.0, 2400.0]\n{density}\n\
         [stencil]\nradius = 4\n[time]\nduration = 0.12\n\
         [source]\nposition = [72.5, 61.0, 43.0]\nfrequency = 25.0\ndelay = 0.04\n\
         [boundary]\nkind = \"cpml\"\nwidth = 5\n\
         [[receivers]]\nposition = [101.0, 77.0, 151.0]\n\
         [[receivers]]\nposition = [33.0, 40.0, 22.0]\n{extra}"
    )
}

fn bits(traces: &[Vec<f64>]) -> Vec<u64> {
    traces.iter().flatten().map(|v| v.to_bits()).collect()
}

/// A scratch folder of this test binary's own.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("seismic-run-density-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The model grid's density of `small_input` as its layered form gives it, z slowest.
fn layered_density(rho: [f32; 2]) -> Vec<f32> {
    (0..20).flat_map(|z| std::iter::repeat_n(if z * 10 < 95 { rho[0] } else { rho[1] }, 16 * 14)).collect()
}

fn write_npy(dir: &Path, name: &str, values: &[f32]) {
    std::fs::write(dir.join(name), seismic_run::model::npy::to_bytes(&[20, 14, 16], values)).unwrap();
}

/// A uniform density, a number or a file of equal values, is the run without a density, bit for
/// bit; so are all of its stiffness values.
#[test]
fn a_uniform_density_is_the_run_without_one_bit_for_bit() {
    let none = problem(&small_input("", ""));
    let want = run::<f32>(&none);
    assert!(want[0].iter().any(|&v| v != 0.0), "the receiver recorded the wave");
    let dir = scratch("uniform");
    write_npy(&dir, "rho.npy", &vec![2150.0; 20 * 14 * 16]);
    for density in [
        "density = 2150.0",
        "density = [2150.0, 2150.0]",
        "density = { file = \"rho.npy\", format = \"npy\", shape = [20, 14, 16], spacing = [10.0, 10.0, 10.0] }",
    ] {
        let p = problem_in(&small_input(density, ""), &dir).unwrap();
        assert!(p.density.is_none(), "{density}: the constant-density path");
        assert_eq!(p.stiffness(), none.vel2dt2(), "{density}");
        assert_eq!(bits(&run::<f32>(&p)), bits(&want), "{density}: the traces bit for bit");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A density file in each format (npy, raw f32 in g/cm3, SEG-Y) sampled onto the grid gives the
/// layered density it holds (npy and SEG-Y: exactly, and the same run bit for bit).
#[test]
fn density_files_are_read_as_velocity_files_are() {
    let rho = [1900.0f32, 2350.0];
    let layered = problem(&small_input(&format!("density = [{}, {}]", rho[0], rho[1]), ""));
    let want = run::<f32>(&layered);
    let dir = scratch("files");
    let values = layered_density(rho);
    write_npy(&dir, "rho.npy", &values);
    let grams: Vec<u8> = values.iter().flat_map(|v| (v / 1000.0).to_le_bytes()).collect();
    std::fs::write(dir.join("rho.bin"), grams).unwrap();
    let volume = seismic_run::model::volume::VelocityVolume::new(values.clone(), &[2, 1, 0], &[20, 14, 16], &[10.0; 3]);
    let mut segy = Vec::new();
    seismic_run::model::segy::write_model(&volume, &["density".into()], &mut segy).unwrap();
    std::fs::write(dir.join("rho.sgy"), segy).unwrap();
    let grid = "shape = [20, 14, 16], spacing = [10.0, 10.0, 10.0]";
    // The g/cm3 file's values are the layers' to f32 rounding of the division and the scaling.
    for (density, exact) in [
        (format!("density = {{ file = \"rho.npy\", format = \"npy\", {grid} }}"), true),
        (format!("density = {{ file = \"rho.bin\", units = \"g/cm3\", {grid} }}"), false),
        ("density = { file = \"rho.sgy\", format = \"segy\" }".to_string(), true),
    ] {
        let p = problem_in(&small_input(&density, ""), &dir).unwrap_or_else(|e| panic!("{density}: {e:#}"));
        let (d, want_d) = (p.density.as_ref().unwrap(), layered.density.as_ref().unwrap());
        assert_eq!((d.first, d.rho_ref), (want_d.first, want_d.rho_ref), "{density}");
        let close = d.rho.iter().zip(&want_d.rho).all(|(a, b)| (a - b).abs() <= 1e-6 * b);
        assert!(close, "{density}: the layered density");
        if exact {
            assert_eq!(d.rho, want_d.rho, "{density}");
            assert_eq!(bits(&run::<f32>(&p)), bits(&want), "{density}: the traces bit for bit");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Zero, negative, NaN and out-of-range densities in a file are refused naming the file; a
/// variable density in f16 storage is refused naming the keys.
#[test]
fn bad_densities_are_refused() {
    let dir = scratch("bad");
    let grid = "shape = [20, 14, 16], spacing = [10.0, 10.0, 10.0]";
    for (name, value, want) in [
        ("zero.npy", 0.0, "densities must be finite and positive"),
        ("negative.npy", -1000.0, "densities must be finite and positive"),
        ("nan.npy", f32::NAN, "densities must be finite and positive"),
        ("heavy.npy", 2e5, "outside 1e-3 to 1e5 kg/m3"),
    ] {
        let mut values = layered_density([2000.0, 2200.0]);
        values[777] = value;
        write_npy(&dir, name, &values);
        let density = format!("density = {{ file = \"{name}\", format = \"npy\", {grid} }}");
        let e = format!("{:#}", problem_in(&small_input(&density, ""), &dir).unwrap_err());
        assert!(e.contains(want) && e.contains(name), "{name}: {e}");
    }
    assert!(problem_in(&small_input("density = \"gardner\"", ""), &dir).is_ok(), "Gardner's relation is valid");
    let missing = format!("density = {{ file = \"nowhere.npy\", format = \"npy\", {grid} }}");
    let e = format!("{:#}", problem_in(&small_input(&missing, ""), &dir).unwrap_err());
    assert!(e.contains("model.density.file") && e.contains("does not exist"), "{e}");
    for density in ["density = \"gardner\"", "density = [2000.0, 2300.0]"] {
        let e = format!("{:#}", problem_in(&small_input(density, "[run]\nprecision = \"f16\"\n"), &dir).unwrap_err());
        assert!(e.contains("run.precision = \"f16\"") && e.contains("model.density"), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// (traces, snapshots) of the single-domain run, as seismic-run runs it (subnormals flushed).
fn single(cfg: &Config, problem: &Problem) -> (Vec<f32>, Vec<Vec<f32>>) {
    let plan = OutputPlan::from_config(cfg, problem).unwrap();
    let mut backend = CpuSolver::<f32>::new(problem).unwrap().flushing_subnormals(true);
    let mut sink = Keep(Vec::new(), plan.snapshot_len(problem.shape()));
    let record = solver::run(problem, &mut backend, &plan, &mut sink, &mut |_| {}).unwrap();
    (record.traces, sink.0)
}

/// The same through `d`, every subdomain in this process.
fn decomposed(cfg: &Config, problem: &Problem, d: &Decomposition) -> (Vec<f32>, Vec<Vec<f32>>) {
    let plan = OutputPlan::from_config(cfg, problem).unwrap();
    let mut domains: Vec<Domain> = (0..d.ranks())
        .map(|r| {
            let sub = d.subdomain(problem, r).unwrap();
            let backend: Box<dyn Backend> = sub.cpu_backend().unwrap();
            Domain { sub, backend }
        })
        .collect();
    let mut sink = Keep(Vec::new(), plan.snapshot_len(problem.shape()));
    let out =
        decomposition::run(problem, d, &mut domains, &mut InProcess::default(), &plan, Some(&mut sink), &mut |_| {})
            .unwrap()
            .expect("in-process runs are rank 0");
    (out.traces, sink.0)
}

/// Snapshots in the order taken.
struct Keep(Vec<Vec<f32>>, usize);

impl SnapshotSink for Keep {
    fn buffer(&mut self) -> anyhow::Result<Vec<f32>> {
        Ok(vec![f32::NAN; self.1])
    }
    fn submit(&mut self, _index: usize, _step: usize, field: Vec<f32>) -> anyhow::Result<()> {
        self.0.push(field);
        Ok(())
    }
}

/// A 12 x 12 x 48 model, velocity and density both varying with depth and along x, CPML under
/// a free surface (layers inside the grid), a sinc source near a cut and receivers along z.
fn decomposition_input(radius: usize) -> String {
    format!(
        "[grid]\nshape = [12, 12, 48]\nspacing = [10.0, 10.0, 10.0]\n\
         [model]\nkind = \"layered\"\ndepths = [95.0, 205.0, 315.0]\nvelocities = [1500.0, 1900.0, 2300.0, 2100.0]\n\
         density = {{ depths = [145.0, 255.0], values = [1100.0, 2400.0, 1700.0] }}\n\
         [stencil]\nradius = {radius}\n[time]\nduration = 0.05\ncfl_safety = 0.8\n\
         [source]\nposition = [55.0, 62.0, 145.0]\nfrequency = 30.0\ndelay = 0.02\ninjection = \"sinc\"\nsinc_half_width = 2\n\
         [boundary]\nkind = \"cpml\"\nwidth = 4\nfree_surface = true\nplacement = \"inside\"\n\
         [[receivers]]\nline = {{ start = [43.0, 57.0, 15.0], end = [43.0, 57.0, 455.0], count = 23 }}\n\
         interpolation = \"sinc\"\nsinc_half_width = 2\n\
         [output]\nsnapshot_every = 7\n[[output.snapshot]]\nkind = \"volume\"\n"
    )
}

/// Two and three z-slabs (the cuts through the density's interfaces and beside the source) give
/// the single-domain run's traces and snapshots bit for bit, for radii 1, 4 and 8; and a rank's
/// problem built from its part of the model alone (its density R planes beyond its planes, as
/// the decomposed driver samples it) has the whole problem's stiffness and buoyancy.
#[test]
fn decomposed_runs_with_a_variable_density_equal_one_bit_for_bit() {
    for radius in [1, 4, 8] {
        let toml = decomposition_input(radius);
        let cfg = Config::from_toml(&toml).unwrap();
        let problem = problem(&toml);
        assert!(problem.density.is_some());
        let want = single(&cfg, &problem);
        assert!(want.0.iter().any(|&v| v != 0.0), "the traces recorded the wave");
        for counts in [vec![15, 33], vec![15, 14, 19]] {
            let d = Decomposition::with_planes(&problem, &counts).unwrap();
            let got = decomposed(&cfg, &problem, &d);
            let same = |a: &[f32], b: &[f32]| a.iter().map(|v| v.to_bits()).eq(b.iter().map(|v| v.to_bits()));
            assert!(same(&got.0, &want.0), "R = {radius}, slabs {counts:?}: the traces");
            assert_eq!(got.1.len(), want.1.len());
            assert!(
                got.1.iter().zip(&want.1).all(|(a, b)| same(a, b)),
                "R = {radius}, slabs {counts:?}: the snapshots"
            );
            for rank in 0..d.ranks() {
                let held = d.planes_held(rank);
                let sampled = held.start.saturating_sub(radius)..(held.end + radius).min(48);
                let part = seismic_run::model::sample_run_planes(&cfg, Path::new("."), sampled.clone()).unwrap();
                let plane = 144;
                let vp = part.vp[(held.start - sampled.start) * plane..(held.end - sampled.start) * plane].to_vec();
                let whole = problem.density.as_ref().unwrap();
                let density = Density {
                    rho: part.rho.unwrap(),
                    first: sampled.start,
                    rho_ref: whole.rho_ref,
                    rho_max: whole.rho_max,
                };
                let built = Problem::build_part(&cfg, vp, held.start, problem.vp_range, Some(density)).unwrap();
                let (a, b) = (d.subdomain(&problem, rank).unwrap().problem, d.subdomain(&built, rank).unwrap().problem);
                assert_eq!(a.stiffness(), b.stiffness(), "rank {rank}");
                assert_eq!(a.density, b.density, "rank {rank}");
            }
        }
    }
}

/// The result file of a run with a variable density holds /model/rho beside /model/vp, cropped
/// to the model as vp is, its checksum listed and right.
#[test]
fn the_result_file_holds_the_density() {
    let dir = process::scratch("density", "result");
    let path = dir.join("input.toml");
    std::fs::write(&path, small_input("density = [1900.0, 2350.0]", "[output]\npath = \"out.h5\"\n")).unwrap();
    let out = process::seismic_run().current_dir(&*dir).args(["run", "--backend", "cpu"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let f = rust_hdf5::H5File::open(dir.join("out.h5")).unwrap();
    let rho = f.dataset("model/rho").unwrap();
    assert_eq!(rho.shape(), f.dataset("model/vp").unwrap().shape());
    assert_eq!(rho.read_raw::<f32>().unwrap(), layered_density([1900.0, 2350.0]));
    let listed = seismic_run::output::checksum::verify(&f).unwrap();
    let no_density = {
        std::fs::write(&path, small_input("", "[output]\npath = \"plain.h5\"\n")).unwrap();
        let out =
            process::seismic_run().current_dir(&*dir).args(["run", "--backend", "cpu"]).arg(&path).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let f = rust_hdf5::H5File::open(dir.join("plain.h5")).unwrap();
        assert!(f.dataset("model/rho").is_err(), "no /model/rho for a constant density");
        seismic_run::output::checksum::verify(&f).unwrap()
    };
    assert_eq!(listed, no_density + 1, "/model/rho's checksum listed and checked");
}
