//! Bad input, end to end through the library (`Config::from_toml` -> `Config::validate` ->
//! `model::sample` -> `Problem::build`, and the GPU's memory check): each case is an error that names
//! the key, file or limit at fault. The CLI's exit status and the absence of an output file are
//! tested with the binary (tests of the app).

use seismic_run::config::Config;
use seismic_run::model;
use seismic_run::problem::Problem;
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seismic-run-bad-input-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A valid run, small enough to build in milliseconds; `{model}` and `{extra}` are spliced in.
fn input(model: &str, extra: &str) -> String {
    format!(
        r#"[grid]
shape = [24, 20, 16]
spacing = [10.0, 10.0, 10.0]

[model]
{model}

[time]
steps = 10

[source]
position = [120.0, 100.0, 40.0]
frequency = 15.0

[[receivers]]
line = {{ start = [20.0, 100.0, 20.0], end = [220.0, 100.0, 20.0], count = 11 }}

[boundary]
width = 4

[output]
path = "out.h5"
{extra}"#
    )
}

const CONSTANT: &str = "kind = \"constant\"\nvp = 2000.0";

/// Every library stage a run goes through before it allocates on a device or writes output.
fn run_in(dir: &Path, text: &str, data_dirs: &[PathBuf]) -> anyhow::Result<Problem> {
    let cfg = Config::from_toml(text)?;
    cfg.validate(dir)?;
    let m = model::sample_with_data_dirs(&cfg, dir, data_dirs)?;
    Problem::build(&cfg, m.vp)
}

fn error_in(dir: &Path, text: &str) -> String {
    match run_in(dir, text, &[]) {
        Ok(_) => panic!("accepted bad input:\n{text}"),
        Err(e) => {
            eprintln!("=====\n{e:#}");
            format!("{e:#}")
        }
    }
}

fn error(text: &str) -> String {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    error_in(&scratch(&format!("call-{n}")), text)
}

fn assert_names(e: &str, parts: &[&str]) {
    for p in parts {
        assert!(e.contains(p), "error does not mention {p:?}:\n{e}");
    }
}

#[test]
fn the_valid_input_runs() {
    let p = run_in(&scratch("valid"), &input(CONSTANT, ""), &[]).unwrap();
    assert_eq!(p.receivers.len(), 11);
}

#[test]
fn unknown_keys_are_named_with_their_line() {
    let e = error(&input(CONSTANT, "snapshot_evry = 5"));
    assert_names(&e, &["snapshot_evry", "line 24"]);
    let e = error(&input(CONSTANT, "").replace("[time]", "[time]\nstep = 3"));
    assert_names(&e, &["step", "line 10"]);
    let e = error(&input("kind = \"constant\"\nvp = 2000.0\nvs = 1000.0", ""));
    assert_names(&e, &["vs", "line"]);
    // A key of another model kind: named, with the section's line.
    let e = error(&input("kind = \"constant\"\nvp = 2000.0\ndepths = [10.0]", ""));
    assert_names(&e, &["model.depths", "kind = \"constant\"", "line 5"]);
    let e = error(&input("kind = \"layered\"\ndepths = [10.0]", ""));
    assert_names(&e, &["model.velocities", "required", "line 5"]);
    let e = error(&input("kind = \"marmosi\"", ""));
    assert_names(&e, &["marmosi", "line 6"]);
    let e = error(&format!("[stencl]\nradius = 2\n{}", input(CONSTANT, "")));
    assert_names(&e, &["stencl", "line 1"]);
}

#[test]
fn wrong_types_are_named_with_their_line() {
    let e = error(&input(CONSTANT, "").replace("steps = 10", "steps = \"ten\""));
    assert_names(&e, &["steps", "line 10", "string"]);
    let e = error(&input("kind = \"constant\"\nvp = [2000.0]", ""));
    assert_names(&e, &["vp", "line"]);
    let e = error(&input(CONSTANT, "").replace("spacing = [10.0, 10.0, 10.0]", "spacing = [10.0, 10.0]"));
    assert_names(&e, &["grid.spacing", "two values", "is 3D"]);
    let e = error(&input(CONSTANT, "").replace("frequency = 15.0", "frequency = \"high\""));
    assert_names(&e, &["frequency", "line 14", "string"]);
}

#[test]
fn missing_sections_are_named() {
    let text = input(CONSTANT, "");
    let without_source = text.replace("[source]\nposition = [120.0, 100.0, 40.0]\nfrequency = 15.0\n", "");
    assert_names(&error(&without_source), &["source"]);
}

#[test]
fn zero_or_negative_shape_and_spacing() {
    let base = input(CONSTANT, "");
    let e = error(&base.replace("shape = [24, 20, 16]", "shape = [24, 0, 16]"));
    assert_names(&e, &["grid.shape[1]", "positive"]);
    // A negative size is not a size: the parser names it.
    let e = error(&base.replace("shape = [24, 20, 16]", "shape = [24, 20, -16]"));
    assert_names(&e, &["shape", "line 2", "-16"]);
    let e = error(&base.replace("spacing = [10.0, 10.0, 10.0]", "spacing = [10.0, 10.0, -10.0]"));
    assert_names(&e, &["grid.spacing[2]", "positive"]);
    let e = error(&base.replace("spacing = [10.0, 10.0, 10.0]", "spacing = [0.0, 10.0, 10.0]"));
    assert_names(&e, &["grid.spacing[0]"]);
    let e = error(&base.replace("spacing = [10.0, 10.0, 10.0]", "spacing = [10.0, nan, 10.0]"));
    assert_names(&e, &["grid.spacing[1]"]);
}

#[test]
fn source_and_receivers_outside_the_grid() {
    let base = input(CONSTANT, "");
    let e = error(&base.replace("position = [120.0, 100.0, 40.0]", "position = [120.0, 100.0, 400.0]"));
    assert_names(&e, &["source.position", "outside the grid", "z from 0 to 150 m"]);
    let e = error(&base.replace("end = [220.0, 100.0, 20.0]", "end = [260.0, 100.0, 20.0]"));
    assert_names(&e, &["receivers[0]", "outside the grid"]);
}

#[test]
fn dt_above_the_cfl_limit() {
    let e = error(&input(CONSTANT, "").replace("steps = 10", "steps = 10\ndt = 0.01"));
    assert_names(&e, &["time.dt", "CFL"]);
    // Just below the limit is accepted.
    let limit = run_in(&scratch("cfl"), &input(CONSTANT, ""), &[]).unwrap().dt_limit();
    let ok = input(CONSTANT, "").replace("steps = 10", &format!("steps = 10\ndt = {:e}", limit * 0.999));
    run_in(&scratch("cfl"), &ok, &[]).unwrap();
}

#[test]
fn bad_model_parameters() {
    let e = error(&input("kind = \"constant\"\nvp = -1500.0", ""));
    assert_names(&e, &["model.vp"]);
    let e = error(&input("kind = \"layered\"\ndepths = [50.0]\nvelocities = [1500.0]", ""));
    assert_names(&e, &["model.velocities", "model.depths"]);
    let e = error(&input("kind = \"layered\"\ndepths = [50.0, 40.0]\nvelocities = [1500.0, 2000.0, 2500.0]", ""));
    assert_names(&e, &["model.depths", "increase"]);
    let e = error(&input("kind = \"layered\"\ndepths = [50.0]\nvelocities = [1500.0, 0.0]", ""));
    assert_names(&e, &["model.velocities[1]", "positive"]);
}

/// The grid's own shape, as a model file: (nz, ny, nx) = (16, 20, 24), x fastest.
fn file_model(path: &str, extra: &str) -> String {
    format!(
        "kind = \"file\"\npath = \"{path}\"\nshape = [16, 20, 24]\nspacing = [10.0, 10.0, 10.0]\naxis_order = \"zyx\"\n{extra}"
    )
}

fn write_model(dir: &Path, name: &str, values: &[f32]) {
    std::fs::write(dir.join(name), values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
}

#[test]
fn model_file_missing_or_of_the_wrong_size() {
    let dir = scratch("file-size");
    let e = error_in(&dir, &input(&file_model("absent.bin", ""), ""));
    assert_names(&e, &["model.path", "absent.bin", "does not exist"]);
    write_model(&dir, "short.bin", &vec![2000.0; 16 * 20 * 24 - 1]);
    let e = error_in(&dir, &input(&file_model("short.bin", ""), ""));
    assert_names(&e, &["short.bin", "holds 30716 bytes, expected 30720"]);
    write_model(&dir, "fine.bin", &vec![2000.0; 16 * 20 * 24]);
    let e = error_in(&dir, &input(&file_model("fine.bin", "").replace("[16, 20, 24]", "[16, 20]"), ""));
    assert_names(&e, &["model.shape", "model.axis_order"]);
    let e = error_in(&dir, &input(&file_model("fine.bin", "").replace("[16, 20, 24]", "[16, 0, 24]"), ""));
    assert_names(&e, &["model.shape[1]"]);
    let e = error_in(
        &dir,
        &input(
            &file_model("fine.bin", "")
                .replace("spacing = [10.0, 10.0, 10.0]\naxis", "spacing = [10.0, -1.0, 10.0]\naxis"),
            "",
        ),
    );
    assert_names(&e, &["model.spacing[1]"]);
    let e = error_in(&dir, &input(&file_model("fine.bin", "").replace("\"zyx\"", "\"zyy\""), ""));
    assert_names(&e, &["model.axis_order"]);
    run_in(&dir, &input(&file_model("fine.bin", ""), ""), &[]).unwrap();
}

#[test]
fn model_file_checksum() {
    let dir = scratch("file-sha");
    write_model(&dir, "m.bin", &vec![2000.0; 16 * 20 * 24]);
    let bytes = std::fs::read(dir.join("m.bin")).unwrap();
    let good = model::file::sha256_hex(&bytes);
    run_in(&dir, &input(&file_model("m.bin", &format!("sha256 = \"{good}\"")), ""), &[]).unwrap();
    let bad = format!("sha256 = \"{}\"", "0".repeat(64));
    let e = error_in(&dir, &input(&file_model("m.bin", &bad), ""));
    assert_names(&e, &["m.bin", "SHA-256", &good, "corrupt"]);
}

#[test]
fn model_file_with_nan_or_non_positive_velocities() {
    let dir = scratch("file-values");
    let mut v = vec![2000.0f32; 16 * 20 * 24];
    v[(3 * 20 + 2) * 24 + 1] = f32::NAN;
    write_model(&dir, "nan.bin", &v);
    let e = error_in(&dir, &input(&file_model("nan.bin", ""), ""));
    assert_names(&e, &["nan.bin", "NaN", "index [3, 2, 1]"]);
    v[(3 * 20 + 2) * 24 + 1] = 2000.0;
    v[5] = -1.0;
    write_model(&dir, "negative.bin", &v);
    let e = error_in(&dir, &input(&file_model("negative.bin", ""), ""));
    assert_names(&e, &["negative.bin", "-1", "index [0, 0, 5]", "positive"]);
    v[5] = 0.0;
    write_model(&dir, "zero.bin", &v);
    assert_names(&error_in(&dir, &input(&file_model("zero.bin", ""), "")), &["zero.bin", "index [0, 0, 5]"]);
}

#[test]
fn npy_model_file_not_matching_its_description() {
    let dir = scratch("npy");
    std::fs::write(dir.join("m.npy"), model::npy::to_bytes(&[16, 24, 20], &vec![2000.0; 16 * 20 * 24])).unwrap();
    let text = input(&file_model("m.npy", "format = \"npy\""), "");
    assert_names(&error_in(&dir, &text), &["m.npy", "[16, 24, 20]", "model.shape = [16, 20, 24]"]);
    // The right shape, its data cut short by one value.
    let mut bytes = model::npy::to_bytes(&[16, 20, 24], &vec![2000.0; 16 * 20 * 24]);
    bytes.truncate(bytes.len() - 4);
    std::fs::write(dir.join("m.npy"), bytes).unwrap();
    assert_names(&error_in(&dir, &text), &["m.npy", "needs 30720 bytes", "holds 30716"]);
}

#[test]
fn marmousi_missing_lists_every_path_tried_and_how_to_get_it() {
    let dir = scratch("marmousi-missing");
    let dirs = [dir.join("first"), dir.join("second")];
    let cfg = Config::from_toml(&input("kind = \"marmousi\"", "")).unwrap();
    let e = format!("{:#}", model::sample_with_data_dirs(&cfg, &dir, &dirs).unwrap_err());
    assert_names(
        &e,
        &[
            "marmousi/vp_marmousi_bi",
            &dirs[0].join("marmousi/vp_marmousi_bi").display().to_string(),
            &dirs[1].join("marmousi/vp_marmousi_bi").display().to_string(),
            "seismic-run fetch-model marmousi",
            "https://github.com/devitocodes/data/raw/master/Simple2D/vp_marmousi_bi",
            "SEISMIC_DATA_DIR",
        ],
    );
    // The default search order.
    let defaults: Vec<String> = model::data_dirs().iter().map(|d| d.display().to_string()).collect();
    assert!(defaults.ends_with(&["data".to_string(), "../shared/models".to_string()]), "{defaults:?}");
}

#[test]
fn marmousi_of_the_wrong_size_or_checksum() {
    let dir = scratch("marmousi-corrupt");
    std::fs::create_dir_all(dir.join("marmousi")).unwrap();
    let file = dir.join("marmousi/vp_marmousi_bi");
    let cfg = Config::from_toml(&input("kind = \"marmousi\"", "")).unwrap();
    let dirs = [dir.clone()];
    std::fs::write(&file, vec![0u8; 1000]).unwrap();
    let e = format!("{:#}", model::sample_with_data_dirs(&cfg, &dir, &dirs).unwrap_err());
    assert_names(&e, &[&file.display().to_string(), "holds 1000 bytes, expected 2568004", "fetch-model marmousi"]);
    std::fs::write(&file, vec![0u8; 2568004]).unwrap();
    let e = format!("{:#}", model::sample_with_data_dirs(&cfg, &dir, &dirs).unwrap_err());
    assert_names(&e, &[&file.display().to_string(), "SHA-256", "corrupt", "fetch-model marmousi"]);
}

#[test]
fn output_directory_that_cannot_be_written() {
    let dir = scratch("output");
    // A missing directory is made (the run's output lands where asked).
    run_in(&dir, &input(CONSTANT, "").replace("out.h5", "new/sub/out.h5"), &[]).unwrap();
    assert!(dir.join("new/sub").is_dir());
    std::fs::write(dir.join("plain-file"), b"x").unwrap();
    let e = error_in(&dir, &input(CONSTANT, "").replace("out.h5", "plain-file/out.h5"));
    assert_names(&e, &["output.path", "plain-file", "not a directory"]);
    std::fs::create_dir_all(dir.join("a-dir")).unwrap();
    let e = error_in(&dir, &input(CONSTANT, "").replace("out.h5", "a-dir"));
    assert_names(&e, &["output.path", "a-dir", "is a directory"]);
    // A read-only directory (root writes anyway, so this part needs an ordinary user).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let ro = dir.join("read-only");
        std::fs::create_dir_all(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        if std::fs::write(ro.join("probe"), b"x").is_err() {
            let e = error_in(&dir, &input(CONSTANT, "").replace("out.h5", "read-only/out.h5"));
            assert_names(&e, &["output.path", "read-only", "cannot write"]);
        }
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The check leaves nothing behind.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.iter().all(|n| !n.to_string_lossy().contains("probe")), "{left:?}");
}

/// The GPU backend's memory check, as `GpuSolver::new` runs it before allocating (no GPU needed):
/// the estimate covers the fields, the CPML slabs and the traces, and a device with a byte less
/// than that plus the margin is refused with the grid, the need and the memory named.
#[cfg(feature = "cuda")]
#[test]
fn grid_too_large_for_the_device() {
    use seismic_run::backend::gpu::solver::{MEMORY_MARGIN, check_fits, estimate_bytes};
    use seismic_run::config::KernelChoice;
    let dir = scratch("device-memory");
    let p = run_in(&dir, &input(CONSTANT, ""), &[]).unwrap();
    let need = estimate_bytes(&p, KernelChoice::Fused);
    // At least the three padded fields, psi twice and zeta in every slab, and the traces.
    let slabs: u64 = p.boundary.slabs(p.shape()).iter().map(|s| 12 * s.len() as u64).sum();
    assert!(need >= 12 * p.layout.len() as u64 + slabs + 4 * 11 * 10, "{need}");
    assert!(estimate_bytes(&p, KernelChoice::ThreePass) >= need + 4 * p.layout.len() as u64, "a fourth field");
    let total = 80 << 30;
    check_fits(&p, KernelChoice::Fused, "test GPU", need + MEMORY_MARGIN, total).unwrap();
    let e = check_fits(&p, KernelChoice::Fused, "test GPU", need + MEMORY_MARGIN - 1, total).unwrap_err().to_string();
    // The grid of [24, 20, 16] points with 4-point layers outside it on every face.
    assert_names(&e, &["run grid [32, 28, 24]", "grid.shape", "test GPU", "GiB", "11 receivers x 10 steps"]);
    // Longer runs need room for their traces.
    let longer = run_in(&dir, &input(CONSTANT, "").replace("steps = 10", "steps = 1000"), &[]).unwrap();
    assert!(estimate_bytes(&longer, KernelChoice::Fused) >= need + 4 * 11 * 990);
}

#[test]
fn grid_too_large_for_the_host_fails_before_allocating() {
    // 10^17 points: no machine holds the velocity alone; the error comes instead of an abort.
    let text = input(CONSTANT, "").replace("shape = [24, 20, 16]", "shape = [1000000, 1000000, 100000]");
    let e = error(&text);
    assert_names(&e, &["grid.shape = [1000000, 1000000, 100000]", "GiB"]);
    let text = input(CONSTANT, "").replace("shape = [24, 20, 16]", "shape = [4294967296, 4294967296, 2]");
    assert_names(&error(&text), &["grid.shape", "more points than"]);
}

#[test]
fn input_file_errors_name_the_file() {
    let dir = scratch("input-file");
    let path = dir.join("run.toml");
    std::fs::write(&path, input(CONSTANT, "plot = maybe")).unwrap();
    let e = format!("{:#}", Config::from_file(&path).unwrap_err());
    assert_names(&e, &[&path.display().to_string(), "line 24", "plot"]);
    let e = format!("{:#}", Config::from_file(&dir.join("absent.toml")).unwrap_err());
    assert_names(&e, &["absent.toml", "cannot read input file"]);
}

#[test]
fn a_blow_up_stops_the_run_and_leaves_no_result_file() {
    use seismic_run::backend::cpu::CpuSolver;
    use seismic_run::backend::{Backend, DeviceInfo};
    use seismic_run::output::hdf5::{Hdf5Writer, RunMetadata, Volumes};
    use seismic_run::output::plan::OutputPlan;
    use seismic_run::solver;
    let dir = scratch("blow-up");
    let text = input(CONSTANT, "snapshot_every = 5").replace("steps = 10", "steps = 60");
    let cfg = Config::from_toml(&text).unwrap();
    let m = model::sample_with_data_dirs(&cfg, &dir, &[]).unwrap();
    let mut problem = Problem::build(&cfg, m.vp).unwrap();
    // Inputs cannot ask for dt above the CFL limit (Problem::build refuses it), so the test sets it
    // afterwards: three times the limit grows without bound within a few dozen steps.
    problem.dt = 3.0 * problem.dt_limit();
    let plan = OutputPlan::from_config(&cfg, &problem).unwrap();
    let mut backend = CpuSolver::<f32>::new(&problem).unwrap();
    let out = dir.join("out.h5");
    let meta = RunMetadata {
        input_toml: text.clone(),
        version: "test".into(),
        device: DeviceInfo { backend: "cpu", name: "test".into(), kernel: "rayon".into() },
        compression: 0,
        provenance: None,
        shot: None,
    };
    let e = std::thread::scope(|scope| {
        let mut writer = Hdf5Writer::start(scope, &out, &problem, &plan, meta, 2, Volumes::Whole).unwrap();
        solver::run(&problem, &mut backend, &plan, &mut writer, &mut |_| {}).unwrap_err()
    });
    let b = e.blow_up().expect("a blow-up error");
    assert_eq!(b.found, 60, "a short run is checked after its last step");
    let msg = format!("{e:#}");
    assert_names(&msg, &["non-finite", "between step 0 and step 60", "300% of the stability (CFL) limit"]);
    assert!(!backend.field_is_finite().unwrap());
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "no result or temporary file: {left:?}");
}

#[test]
fn wrong_array_lengths_and_non_finite_values_are_named() {
    let e = error(&input(CONSTANT, "").replace("shape = [24, 20, 16]", "shape = [24, 20, 16, 24]"));
    assert_names(&e, &["line 2", "invalid length 4", "[x, y, z]"]);
    // Two values are a 2D grid's form: on a 3D grid an error naming the key.
    let e = error(&input(CONSTANT, "").replace("position = [120.0, 100.0, 40.0]", "position = [120.0, 100.0]"));
    assert_names(&e, &["source.position", "two values", "[x, y, z]"]);
    let e = error(&input(CONSTANT, "").replace("frequency = 15.0", "frequency = 15.0\namplitude = -inf"));
    assert_names(&e, &["source.amplitude = -inf", "finite"]);
    let e = error(&input(CONSTANT, "").replace("steps = 10", "duration = nan"));
    assert_names(&e, &["time.duration = NaN"]);
    let e = error(&input(CONSTANT, "").replace("spacing = [10.0, 10.0, 10.0]", "spacing = [10.0, 1e300, 10.0]"));
    assert_names(&e, &["grid.spacing[1] = 1e300", "1e8"]);
    let e = error(&input(CONSTANT, "").replace("count = 11", "count = 100000000000"));
    assert_names(&e, &["100000000000 receivers", "GiB of host memory", "traces of"]);
}

#[test]
fn km_per_s_overflow_names_the_file() {
    let dir = scratch("km-overflow");
    write_model(&dir, "v.bin", &vec![1e37f32; 24 * 20 * 16]);
    let e = error_in(&dir, &input(&file_model("v.bin", "units = \"km/s\""), ""));
    assert_names(&e, &["v.bin", "km/s x 1000", "model.units"]);
}

/// `[run] halo_overlap` takes true, false or "auto"; anything else is named with its line.
#[test]
fn halo_overlap_takes_true_false_or_auto() {
    use seismic_run::config::HaloOverlap;
    for (value, want) in [("true", HaloOverlap::On), ("false", HaloOverlap::Off), ("\"auto\"", HaloOverlap::Auto)] {
        let cfg = Config::from_toml(&format!("{}\n[run]\nhalo_overlap = {value}\n", input(CONSTANT, ""))).unwrap();
        assert_eq!(cfg.run.halo_overlap, want, "{value}");
    }
    assert_eq!(Config::from_toml(&input(CONSTANT, "")).unwrap().run.halo_overlap, HaloOverlap::Auto);
    for value in ["\"maybe\"", "3"] {
        let e = error(&format!("{}\n[run]\nhalo_overlap = {value}\n", input(CONSTANT, "")));
        assert_names(&e, &["halo_overlap", "expected true, false or \"auto\"", "line 26"]);
    }
}

#[test]
fn a_variable_density_with_the_three_pass_kernel_is_refused_on_a_gpu_and_auto_takes_the_cpu() {
    use seismic_run::backend::registry;
    use seismic_run::config::{BackendChoice, KernelChoice};
    let layered = "kind = \"layered\"\ndepths = [60.0]\nvelocities = [2000.0, 2500.0]\ndensity = [1000.0, 2000.0]";
    let dir = scratch("density-gpu");
    let p = run_in(&dir, &input(layered, ""), &[]).unwrap();
    assert!(p.variable_density());
    for gpu in [BackendChoice::Cuda, BackendChoice::Hip] {
        let e = format!("{:#}", registry::open_gpu(&p, gpu, KernelChoice::ThreePass, 0).err().expect("refused"));
        assert_names(&e, &["model.density", "run.kernel = \"three-pass\"", "run.kernel = \"fused\""]);
    }
    let mut notices = Vec::new();
    let b = registry::open(&p, BackendChoice::Auto, KernelChoice::ThreePass, 0, &mut |n| notices.push(n.to_string()))
        .unwrap();
    assert_eq!(b.info().backend, "cpu");
    assert!(notices.len() == 1 && notices[0].contains("model.density varies"), "{notices:?}");
}
