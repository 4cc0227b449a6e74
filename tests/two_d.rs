//! 2D runs (grid.shape = [nx, nz]) on the CPU: a line source against the 2D Green's function,
//! CPML reflection on the x and z faces, the free surface, the stencil's symmetry, a density
//! interface's reflection coefficient, and the 2D forms' input errors.

mod process;

mod common;

use common::plane::*;
use seismic_run::config::Config;
use seismic_run::problem::Problem;

#[test]
fn line_source_matches_the_2d_green_function_off_grid() {
    let g = off_grid_line_source();
    let p = g.problem();
    assert!(p.is_2d());
    let traces = run::<f32>(&p);
    let c = 2000.0;
    for (rec, trace) in g.receivers.iter().zip(&traces) {
        let r = dist(g.source, *rec);
        // The window: the direct wavelet and 0.2 s of its tail, long before the walls' reflections.
        let t_end = r / c + g.delay + 0.2;
        assert!(t_end < (2.0 * 1990.0 - r) / c);
        let samples = ((t_end / p.dt) as usize).min(trace.len());
        let exact: Vec<f64> = (0..samples).map(|i| line_source_pressure(&p, r, c, (i + 1) as f64 * p.dt)).collect();
        let err = relative_l2(trace, &exact, samples);
        eprintln!("2D analytic: r = {r:6.1} m, relative L2 error {err:.3e}");
        // Measured 5.1e-4 .. 1.9e-3 (f32, R = 4, sinc r = 4): the bound of 0.3%.
        assert!(err <= 3e-3, "receiver {rec:?} at {r} m: relative L2 error {err}");
    }
}

#[test]
fn cpml_reflects_60_db_or_less_at_the_default_width() {
    // Normal incidence (faces, an edge's corner), and grazing along the low z face.
    let normal = |ppw, r| reflection_db(&run::<f64>, [41, 41], [20, 20], &[[34, 20], [20, 6], [34, 34]], ppw, r);
    let grazing = |ppw, r| reflection_db(&run::<f64>, [101, 21], [6, 6], &[[30, 6], [55, 6], [80, 6]], ppw, r);
    for (ppw, r) in [(5.0, 4), (10.0, 4), (15.0, 4), (5.0, 2), (10.0, 8)] {
        let (n, g) = (normal(ppw, r), grazing(ppw, r));
        eprintln!("2D CPML, {ppw} points per wavelength, R = {r}: normal {n:.1} dB, grazing {g:.1} dB");
        // Measured -76 (R = 4, 5 points, normal) to -80 dB: the issue's -60 dB at the default width.
        assert!(n <= -60.0 && g <= -60.0, "{ppw} ppw, R = {r}: normal {n:.1} dB, grazing {g:.1} dB");
    }
}

/// A free surface at z = 0 is the antisymmetric image: the same run with no surface, the grid
/// mirrored above z = 0 and a source of opposite sign at the mirrored position, gives the same
/// traces (the mirrored grid's rows -k hold exactly -p(k) at every step).
#[test]
fn free_surface_is_the_antisymmetric_image() {
    let (nx, nz) = (81, 40);
    let base = on_grid([nx, nz], 4, 12.0, 0.6, [40, 8], &[[52, 3], [30, 12], [60, 25]], "none", 0);
    let surface = Plane { free_surface: true, ..base.clone() };
    let cfg = Config::from_toml(&surface.toml()).unwrap();
    let p = Problem::build(&cfg, seismic_run::model::load(&cfg, std::path::Path::new(".")).unwrap()).unwrap();
    let with_surface = run::<f64>(&p);
    // The mirrored grid: rows -(nz - 1)..=(nz - 1), two sources.
    let h = 10.0;
    let mirrored = format!(
        "[grid]\nshape = [{nx}, {}]\nspacing = [{h}, {h}]\norigin = [0.0, {}]\n\n[model]\nkind = \"constant\"\nvp = 2000.0\n\n\
         [stencil]\nradius = 4\n\n[time]\nduration = 0.6\ndt = {:e}\n\n\
         [[source]]\nposition = [400.0, 80.0]\nfrequency = 12.0\ndelay = {}\ninjection = \"nearest\"\n\n\
         [[source]]\nposition = [400.0, -80.0]\nfrequency = 12.0\ndelay = {}\namplitude = -1.0\ninjection = \"nearest\"\n\n\
         [boundary]\nkind = \"none\"\n{}",
        2 * nz - 1,
        -((nz - 1) as f64) * h,
        p.dt,
        1.2 / 12.0,
        1.2 / 12.0,
        base.receivers
            .iter()
            .map(|r| format!("\n[[receivers]]\nposition = [{}, {}]\ninterpolation = \"nearest\"\n", r[0], r[1]))
            .collect::<String>()
    );
    let cfg = Config::from_toml(&mirrored).unwrap();
    let q = Problem::build(&cfg, seismic_run::model::load(&cfg, std::path::Path::new(".")).unwrap()).unwrap();
    assert_eq!(q.dt, p.dt);
    let image = run::<f64>(&q);
    for (a, b) in with_surface.iter().zip(&image) {
        let err = max_abs_diff(a, b) / max_abs(b);
        assert!(max_abs(b) > 0.0 && err <= 1e-12, "free surface against its image: {err:e}");
    }
}

/// On a square grid (dx = dz) with the source at the centre, receivers mirrored in x, in z and
/// across the diagonal record the same trace: the operator is the same along both axes and the
/// CPML's faces alike.
#[test]
fn mirrored_receivers_record_the_same_trace() {
    let c = 30;
    let rec = [[c + 9, c + 4], [c - 9, c + 4], [c + 9, c - 4], [c + 4, c + 9], [c - 4, c - 9]];
    let g = on_grid([2 * c + 1, 2 * c + 1], 4, 10.0, 0.5, [c, c], &rec, "cpml", 10);
    let traces = run::<f64>(&g.problem());
    let reference = &traces[0];
    assert!(max_abs(reference) > 0.0);
    for t in &traces[1..] {
        let err = max_abs_diff(t, reference) / max_abs(reference);
        // Only the order of the x and z taps' sums differs between mirror images: f64 rounding.
        assert!(err <= 1e-12, "mirrored receiver: {err:e}");
    }
}

/// A density step at normal incidence reflects R = (Z2 - Z1) / (Z2 + Z1) of a plane wave; a line
/// source's cylindrical wave far from it and a receiver on the source's side at the source's depth
/// (the reflection comes back along the normal) see about that ratio between the reflected and
/// the direct arrivals once geometric spreading is taken out: the reflected wave has travelled
/// farther, sqrt(r_direct / r_reflected) in 2D.
#[test]
fn density_interface_reflects_the_impedance_contrast() {
    let rho = (1000.0, 2500.0);
    let expected = (rho.1 - rho.0) / (rho.1 + rho.0);
    // The interface at z = 1000 m, the source 300 m above it, the receiver 150 m above the
    // source: the direct wave travels 150 m, the reflection 150 + 2 * 300 = 750 m.
    let mut g = on_grid([201, 181], 4, 15.0, 0.75, [100, 70], &[[100, 55]], "cpml", 20);
    g.model =
        format!("kind = \"constant\"\nvp = 2000.0\ndensity = {{ depths = [1000.0], values = [{}, {}] }}", rho.0, rho.1);
    let p = g.problem();
    assert!(p.variable_density());
    let trace = &run::<f64>(&p)[0];
    let dt = p.dt;
    let peak_in = |t0: f64, t1: f64| {
        let (a, b) = ((t0 / dt) as usize, ((t1 / dt) as usize).min(trace.len()));
        trace[a..b].iter().fold(0.0f64, |m, v| m.max(v.abs()))
    };
    let delay = g.delay;
    let direct = peak_in(delay + 150.0 / 2000.0 - 0.06, delay + 150.0 / 2000.0 + 0.06);
    let reflected = peak_in(delay + 750.0 / 2000.0 - 0.06, delay + 750.0 / 2000.0 + 0.06);
    let measured = reflected / direct * (750.0f64 / 150.0).sqrt();
    eprintln!("2D density step: reflection {measured:.4}, expected {expected:.4}");
    // Measured 0.445 against 0.429 (the wavelet's spread in incidence angle and frequency).
    assert!((measured - expected).abs() <= 0.05 * expected, "reflection {measured} against {expected}");
}

/// The 2D forms' input errors name the key and the form to use.
#[test]
fn bad_2d_inputs_are_refused_by_name() {
    let base = off_grid_line_source().toml();
    let err = |text: &str| match Config::from_toml(text) {
        Err(e) => e.to_string(),
        Ok(cfg) => match seismic_run::model::load(&cfg, std::path::Path::new(".")).and_then(|vp| {
            let p = Problem::build(&cfg, vp)?;
            seismic_run::output::plan::OutputPlan::from_config(&cfg, &p).map(|_| p)
        }) {
            Err(e) => format!("{e:#}"),
            Ok(_) => panic!("accepted: {text}"),
        },
    };
    // A 3D grid with a position in the 2D form.
    let three_d = base
        .replace("shape = [401, 401]", "shape = [401, 3, 401]")
        .replace("spacing = [10, 10]", "spacing = [10, 10, 10]");
    let e = err(&three_d);
    assert!(e.contains("source.position") && e.contains("[x, y, z]"), "{e}");
    // Planes that a 2D grid does not have.
    for kind in ["xy", "yz"] {
        let e =
            err(&format!("{base}\n[output]\nsnapshot_every = 10\nsnapshot = [{{ kind = \"{kind}\", at = 100.0 }}]\n"));
        assert!(e.contains("output.snapshot[0].kind") && e.contains("2D"), "{e}");
    }
    let e = err(&format!("{base}\n[run]\ndecomposition = \"z\"\n"));
    assert!(e.contains("run.decomposition") && e.contains("2D"), "{e}");
    let e = err(&format!("{base}\n[run]\nprecision = \"f16\"\n"));
    assert!(e.contains("run.precision") && e.contains("2D"), "{e}");
    let e = err(&base.replace("shape = [401, 401]", "shape = [401, 401, 1, 1]"));
    assert!(e.contains("grid.shape") || e.contains("[x, z]"), "{e}");
}

/// The three-pass kernel refuses a 2D grid by name (a 2D grid's GPU step is one kernel), and
/// `auto` then runs it on the CPU.
#[test]
fn the_three_pass_kernel_refuses_a_2d_grid_and_auto_runs_it_on_the_cpu() {
    use seismic_run::backend::registry;
    use seismic_run::config::{BackendChoice, KernelChoice};
    let mut g = off_grid_line_source();
    g.duration = 0.01;
    let p = g.problem();
    let e = registry::open_gpu(&p, BackendChoice::Cuda, KernelChoice::ThreePass, 0).err().expect("refused");
    assert!(format!("{e:#}").contains("2D") && format!("{e:#}").contains("three-pass"), "{e:#}");
    let mut notice = String::new();
    let b = registry::open(&p, BackendChoice::Auto, KernelChoice::ThreePass, 0, &mut |s| notice += s).unwrap();
    assert_eq!(b.info().backend, "cpu");
    assert!(notice.contains("2D"), "{notice}");
}

/// A 2D step's bytes: three fields read and one written a point (16 B at f32) and the x and z
/// halos, no y halo; the CPML adds its memory variables on the x and z faces only.
#[test]
fn a_2d_step_counts_its_own_bytes() {
    let mut g = off_grid_line_source();
    g.boundary = "cpml";
    g.width = 10;
    let p = g.problem();
    let (nx, nz, r) = (401u64, 401u64, 4u64);
    assert_eq!(p.step_bytes(), 16 * nx * nz + 4 * 2 * r * (nx + nz));
    // psi and zeta (16 B) on 2 x 10 columns and 2 x 10 rows.
    assert_eq!(p.full_step_bytes() - p.step_bytes(), 16 * (20 * nz + 20 * nx));
}

/// A 2D survey through the binary: positions [x, z] in `[survey] shots`, a moving spread; each
/// shot's traces equal a single run of its own input (the survey's shot input, positions kept in
/// the 2D form) bit for bit.
#[test]
fn a_2d_survey_equals_its_shots_run_one_by_one() {
    use seismic_run::output::result::ResultFile;
    use seismic_run::survey::{self, SurveyFiles};
    let text = "[grid]\nshape = [80, 40]\nspacing = [10.0, 10.0]\n[model]\nkind = \"layered\"\ndepths = [200.0]\n\
                velocities = [1500.0, 2500.0]\n[time]\nsteps = 120\n[source]\nposition = [200.0, 30.0]\n\
                frequency = 10.0\n[[receivers]]\nline = { start = [100.0, 20.0], end = [300.0, 20.0], count = 5 }\n\
                [boundary]\nwidth = 8\nfree_surface = true\n[output]\npath = \"s.h5\"\n[survey]\n\
                shots = [[200.0, 30.0], [400.0, 35.0]]\nspread = \"moving\"\n";
    let dir = process::scratch("two_d", "survey");
    std::fs::write(dir.join("s.toml"), text).unwrap();
    let run = |file: &str| {
        let out =
            process::seismic_run().current_dir(&*dir).args([file, "--backend", "cpu", "--quiet"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let traces = |path: &std::path::Path| -> Vec<u32> {
        ResultFile::open(path).unwrap().traces().unwrap().iter().map(|v| v.to_bits()).collect()
    };
    run("s.toml");
    let files = SurveyFiles::new(&dir.join("s.h5")).unwrap();
    let cfg = Config::from_toml(text).unwrap();
    let shots = survey::shots(&cfg).unwrap();
    assert_eq!(shots.len(), 2);
    let mut got = Vec::new();
    for s in &shots {
        let name = format!("single{}", s.index);
        let shot_text = survey::shot_input(text, s).unwrap().replace("\"s.h5\"", &format!("\"{name}.h5\""));
        std::fs::write(dir.join(format!("{name}.toml")), shot_text).unwrap();
        run(&format!("{name}.toml"));
        let shot = traces(&files.shot(s.index));
        assert_eq!(traces(&dir.join(format!("{name}.h5"))), shot, "shot {}", s.index);
        got.push(shot);
    }
    assert_ne!(got[0], got[1]);
}

/// A 2D run's SEG-Y (output.segy) read back: the textual header says 2D and gives the grid,
/// origin and source in x and z; the trace headers have x but no y, no inline or crossline
/// numbers, the ensemble number placing each receiver on the line; the samples are the run's
/// traces after a leading zero.
#[test]
fn a_2d_run_writes_a_2d_segy_line() {
    use seismic_run::output::result::ResultFile;
    use seismic_run::output::segy;
    let text = "[grid]\nshape = [60, 40]\nspacing = [10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
                [time]\nsteps = 40\ndt = 0.001\n[source]\nposition = [305.0, 100.0]\nfrequency = 15.0\n\
                [[receivers]]\nline = { start = [100.0, 50.0], end = [400.0, 50.0], count = 4 }\n\
                [boundary]\nwidth = 8\n[output]\npath = \"r.h5\"\nsegy = true\n";
    let dir = process::scratch("two_d", "segy");
    std::fs::write(dir.join("r.toml"), text).unwrap();
    let out =
        process::seismic_run().current_dir(&*dir).args(["r.toml", "--backend", "cpu", "--quiet"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b = std::fs::read(dir.join("r.sgy")).unwrap();
    let lines = segy::textual_header_lines(&b[..3200]);
    assert!(lines[0].ends_with("synthetic shot gather, 2D acoustic finite differences"), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("C 3 grid 60 x 40 points (x, z), spacing 10 x 10 m")), "{lines:?}");
    assert!(lines.iter().any(|l| l.ends_with("source at x 305 z 100 m")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("no inline or crossline")), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains(" y ") || l.contains("3D")), "{lines:?}");
    let r = ResultFile::open(&dir.join("r.h5")).unwrap();
    let traces = r.traces().unwrap();
    let (nrec, steps) = (4, 40);
    // dt = 1 ms: samples as computed, after the zero at t = 0.
    let ns = steps + 1;
    assert_eq!(b.len(), 3600 + nrec * (240 + 4 * ns));
    assert_eq!(u16::from_be_bytes([b[3220], b[3221]]) as usize, ns);
    let i32_at = |h: &[u8], pos: usize| i32::from_be_bytes(h[pos - 1..pos + 3].try_into().unwrap());
    for i in 0..nrec {
        let h = &b[3600 + i * (240 + 4 * ns)..];
        let x = r.receivers[i][0];
        assert_eq!(x, 100.0 + 100.0 * i as f64);
        // Source x 305 and midpoints (x + 305) / 2, halves: the coordinates scaled by -10.
        assert_eq!(i16::from_be_bytes([h[70], h[71]]), -10);
        assert_eq!(
            (i32_at(h, 73), i32_at(h, 81), i32_at(h, 181)),
            (3050, (10.0 * x) as i32, (5.0 * (x + 305.0)) as i32)
        );
        assert_eq!((i32_at(h, 77), i32_at(h, 85), i32_at(h, 185)), (0, 0, 0), "trace {i}: no y");
        assert_eq!((i32_at(h, 189), i32_at(h, 193)), (0, 0), "trace {i}: no inline or crossline");
        assert_eq!(i32_at(h, 21), i as i32 + 1);
        assert_eq!(i32_at(h, 37), (x - 305.0).abs().round() as i32 * if x < 305.0 { -1 } else { 1 });
        let samples: Vec<f32> =
            (0..ns).map(|k| f32::from_be_bytes(h[240 + 4 * k..244 + 4 * k].try_into().unwrap())).collect();
        assert_eq!(samples[0], 0.0);
        assert_eq!(&samples[1..], &traces[i * steps..(i + 1) * steps], "trace {i}");
    }
}
