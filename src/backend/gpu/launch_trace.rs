//! The launch trace of [`GpuSolver`] on the recording runtime ([`FakeRuntime`]), for a set of
//! problems that covers every path a default run takes (boundaries, radii, precisions, kernels,
//! the y-layer and z-layer launches, free surfaces, NVIDIA and AMD), held against the hashes in
//! `testdata/launch_traces.txt`. A trace is everything the solver asks of the device while it
//! opens, steps 40 times (graph captures of 4 and then 32 steps), takes snapshots, sections,
//! traces, a blow-up check and step timings, computes a step in two parts with halo planes and
//! rows moved in and out, starts a second shot and times the interior operators: each module's
//! compile options, each function's shared-memory grant, each allocation, fill and copy (with
//! a hash of the bytes uploaded) and each launch with its grid, block, shared bytes and every
//! parameter's value.

use super::fake::{FakeRuntime, Vendor};
use super::{GpuSolver, Operator};
use crate::backend::Backend;
use crate::backend::tuning::Tuning;
use crate::config::{Config, KernelChoice};
use crate::grid::Section;
use crate::problem::Problem;
use sha2::{Digest, Sha256};

/// One traced run.
struct Case {
    name: &'static str,
    vendor: Vendor,
    shape: [usize; 3],
    radius: usize,
    boundary: &'static str,
    width: usize,
    free_surface: bool,
    kernel: KernelChoice,
    f16: bool,
    /// A density varying with depth (the density step, its layers scaled by K bh).
    density: bool,
}

const STEPS: usize = 48;

impl Case {
    fn problem(&self) -> Problem {
        let h = 10.0;
        let [nx, ny, nz] = self.shape;
        let at = |p: [usize; 3]| format!("[{}, {}, {}]", p[0] as f64 * h, p[1] as f64 * h, p[2] as f64 * h);
        let mut s = format!(
            "[grid]\nshape = [{nx}, {ny}, {nz}]\nspacing = [{h}, {h}, {h}]\n\n\
             [model]\nkind = \"constant\"\nvp = 2000.0\n\n\
             [stencil]\nradius = {}\n\n\
             [time]\nsteps = {STEPS}\ncfl_safety = 0.6\n\n\
             [source]\nposition = {}\nfrequency = 15.0\ninjection = \"trilinear\"\n\n\
             [boundary]\nkind = \"{}\"\nwidth = {}\nfree_surface = {}\nplacement = \"inside\"\n\n\
             [run]\nprecision = \"{}\"\n",
            self.radius,
            at([nx / 2, ny / 2, nz / 3]),
            self.boundary,
            self.width,
            self.free_surface,
            if self.f16 { "f16" } else { "f32" },
        );
        for p in [[1, 1, 1], [nx / 3, ny / 2, 2], [nx - 1, ny - 1, nz - 1]] {
            s += &format!("\n[[receivers]]\nposition = {}\n", at(p));
        }
        let cfg = Config::from_toml(&s).expect("the case's configuration parses");
        let rho = self.density.then(|| (0..nx * ny * nz).map(|i| 1000.0 + (i / (nx * ny)) as f32 * 20.0).collect());
        Problem::build_with_density(&cfg, vec![2000.0; nx * ny * nz], rho).expect("the case's problem builds")
    }

    /// Everything the solver asks of the device over the case's scenario, one record a line.
    fn trace(&self) -> Vec<String> {
        let problem = self.problem();
        let r = self.radius;
        let tuning = match self.vendor {
            Vendor::Cuda => Tuning::for_radius(r),
            Vendor::Hip => Tuning::for_radius_without_ring(r),
        };
        let mut s = GpuSolver::new(FakeRuntime::new(self.vendor), &problem, self.kernel, tuning).expect("opens");
        let mut log = vec![format!("open: {:?}", s.tuning())];
        let mut take = |s: &GpuSolver<FakeRuntime>, what: &str| {
            log.push(format!("-- {what}"));
            log.extend(s.runtime().take_log());
        };
        take(&s, "opened");
        for n in 0..40 {
            s.step(n).expect("step");
        }
        take(&s, "40 steps");
        let l = problem.layout;
        let mut field = vec![0.0; l.points()];
        s.snapshot(&mut field).expect("snapshot");
        take(&s, "snapshot");
        let sections = [Section::Xz { iy: l.ny / 2 }, Section::Xy { iz: 1 }, Section::Yz { ix: 3 }];
        let len = l.nx * l.nz + l.nx * l.ny + l.ny * l.nz;
        s.snapshot_sections(&sections, &mut vec![0.0; len]).expect("sections");
        take(&s, "sections");
        s.traces(40).expect("traces");
        s.field_is_finite().expect("blow-up check");
        s.step_seconds().expect("step timings");
        take(&s, "traces, blow-up check, timings");
        if s.splits_steps() {
            s.begin_field(40, &[0..r, l.nz - r..l.nz], &[]).expect("first part");
            let mut planes = vec![0.0; r * l.nx * l.ny];
            s.next_planes_out(0, r, &mut planes).expect("next planes out");
            s.finish_field(40).expect("rest of the step");
            s.planes_out(l.nz - r, r, &mut planes).expect("planes out");
            s.planes_in(0, r, &planes).expect("planes in");
            let mut rows = vec![0.0; l.nz * r * l.nx];
            s.rows_out(r, r, &mut rows).expect("rows out");
            s.rows_in(0, r, &rows).expect("rows in");
            s.record_receivers().expect("record");
            take(&s, "a step in two parts, halo planes and rows");
        }
        s.step_field(41).expect("step without receivers");
        s.wait().expect("wait");
        take(&s, "step_field");
        s.start_shot(&problem).expect("second shot");
        for n in 0..6 {
            s.step(n).expect("step");
        }
        s.wait().expect("wait");
        take(&s, "second shot");
        let ops: &[Operator] = match (self.f16 || self.density, self.kernel) {
            (true, _) => &[Operator::Fused],
            (false, KernelChoice::ThreePass) => &[Operator::ThreePass, Operator::Laplacian],
            (false, KernelChoice::Fused) => &[Operator::Fused, Operator::ThreePass, Operator::Laplacian],
        };
        for &op in ops {
            s.time_interior(op, 2).expect("timed interior");
            take(&s, &format!("time_interior {op:?}"));
        }
        if !self.f16 && !self.density {
            s.laplacian_output().expect("Laplacian output");
            take(&s, "laplacian_output");
        }
        drop(s);
        log
    }
}

fn cases() -> Vec<Case> {
    use KernelChoice::{Fused, ThreePass};
    use Vendor::{Cuda, Hip};
    let case = |name, vendor, shape, radius, boundary, width, free_surface, kernel, f16| Case {
        name,
        vendor,
        shape,
        radius,
        boundary,
        width,
        free_surface,
        kernel,
        f16,
        density: false,
    };
    let density = |name, vendor, shape, radius, boundary, free_surface| Case {
        density: true,
        ..case(name, vendor, shape, radius, boundary, 8, free_surface, Fused, false)
    };
    vec![
        // The y layers in the pass, the gap's z layers beside them (only the high one absorbs).
        case("cpml_r4_64_free_surface", Cuda, [64; 3], 4, "cpml", 8, true, Fused, false),
        // Both z layers in the pass, R = 8, a grid longer in z.
        case("cpml_r8_200x48x96", Cuda, [200, 48, 96], 8, "cpml", 12, false, Fused, false),
        // Wide layers on a short grid: the gap goes to the y-layer module's own fused_step.
        case("cpml_r4_96x64x48_wide", Cuda, [96, 64, 48], 4, "cpml", 20, false, Fused, false),
        // nx not whole vectors: the layers after the interior.
        case("cpml_r4_67x45x39", Cuda, [67, 45, 39], 4, "cpml", 8, true, Fused, false),
        case("cpml_r2_67x45x39_three_pass", Cuda, [67, 45, 39], 2, "cpml", 8, false, ThreePass, false),
        case("sponge_r4_64", Cuda, [64; 3], 4, "sponge", 8, true, Fused, false),
        case("sponge_r8_64_three_pass", Cuda, [64; 3], 8, "sponge", 8, false, ThreePass, false),
        case("f16_cpml_r4_64", Cuda, [64; 3], 4, "cpml", 8, true, Fused, true),
        case("f16_sponge_r2_67x45x39", Cuda, [67, 45, 39], 2, "sponge", 8, false, Fused, true),
        case("hip_cpml_r4_64", Hip, [64; 3], 4, "cpml", 8, false, Fused, false),
        case("hip_sponge_r8_200x48x96", Hip, [200, 48, 96], 8, "sponge", 12, true, Fused, false),
        // The density step, its CPML layers after it (whole vectors: the y layers would go in the
        // constant density's pass).
        density("density_cpml_r4_64", Cuda, [64; 3], 4, "cpml", true),
        density("density_sponge_r8_67x45x39", Cuda, [67, 45, 39], 8, "sponge", false),
        density("hip_density_cpml_r2_64", Hip, [64; 3], 2, "cpml", false),
    ]
}

const FIXTURE: &str = include_str!("testdata/launch_traces.txt");

/// `name lines sha256` of each case's trace.
fn summary(case: &Case, trace: &[String]) -> String {
    let text = trace.join("\n");
    format!("{} {} {}", case.name, trace.len(), super::sources::hex(&Sha256::digest(text.as_bytes())[..16]))
}

#[test]
fn every_covered_path_launches_as_recorded() {
    let expected: Vec<&str> = FIXTURE.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect();
    let dir = std::env::temp_dir().join("seismic-launch-traces");
    let mut wrong = Vec::new();
    let cases = cases();
    assert_eq!(expected.len(), cases.len(), "one fixture line a case");
    for (case, want) in cases.iter().zip(&expected) {
        let trace = case.trace();
        let got = summary(case, &trace);
        if got != *want {
            // The whole trace, to compare with one taken before the change.
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join(format!("{}.txt", case.name)), trace.join("\n"));
            wrong.push(format!("{want} -> {got}"));
        }
    }
    assert!(wrong.is_empty(), "launch traces changed (written to {}):\n{}", dir.display(), wrong.join("\n"));
}

/// Writes each case's whole trace and the fixture's lines for it to the temporary directory
/// (run by hand, `--ignored`, to record a new fixture).
#[test]
#[ignore = "writes the traces to record a fixture"]
fn record_launch_traces() {
    let dir = std::env::temp_dir().join("seismic-launch-traces-recorded");
    std::fs::create_dir_all(&dir).expect("trace folder");
    let mut lines = Vec::new();
    for case in cases() {
        let trace = case.trace();
        std::fs::write(dir.join(format!("{}.txt", case.name)), trace.join("\n")).expect("trace written");
        lines.push(summary(&case, &trace));
    }
    std::fs::write(dir.join("launch_traces.txt"), lines.join("\n") + "\n").expect("fixture written");
}
