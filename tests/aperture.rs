//! `[survey] aperture` through the binary on the CPU backend, on 2D lines: a shot on its box
//! records the traces of the whole-grid shot within the absorbing boundary's residual reflection,
//! a reflector inside the margin included; a migration on the boxes images a flat reflector at
//! its depth, close to the whole-grid image; the banner states the saving; bad margins are
//! refused by name.

mod process;

use process::{scratch, seismic_run};
use seismic_run::config::Config;
use seismic_run::output::result::ResultFile;
use seismic_run::survey::SurveyFiles;
use std::path::Path;
use std::process::Output;

/// A 2D line 1600 m wide and 600 m deep at 10 m, CPML, a moving spread of 7 receivers 300 m long
/// centred on each shot; `model` the `[model]` keys, `survey` extra `[survey]` keys.
fn input(model: &str, shots: &str, survey: &str) -> String {
    format!(
        "[grid]\nshape = [161, 60]\nspacing = [10.0, 10.0]\n[model]\n{model}\n[time]\nduration = 0.6\n\
         [source]\nposition = [400.0, 100.0]\nfrequency = 12.0\n[[receivers]]\n\
         line = {{ start = [250.0, 100.0], end = [550.0, 100.0], count = 7 }}\n\
         [boundary]\nkind = \"cpml\"\nwidth = 12\n[output]\npath = \"s.h5\"\n\
         [survey]\n{shots}\nspread = \"moving\"\n{survey}\n"
    )
}

fn run(dir: &Path, args: &[&str]) -> Output {
    seismic_run().current_dir(dir).args(args).output().unwrap()
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Each shot's traces of the survey `text`, run in a fresh directory, and what it printed.
fn survey(name: &str, text: &str, shots: usize, files: &[(&str, Vec<u8>)]) -> (Vec<Vec<f32>>, String) {
    let dir = scratch("aperture", name);
    for (f, bytes) in files {
        std::fs::write(dir.join(f), bytes).unwrap();
    }
    std::fs::write(dir.join("s.toml"), text).unwrap();
    let stdout = ok(&run(&dir, &["s.toml"]));
    let files = SurveyFiles::new(&dir.join("s.h5")).unwrap();
    ((0..shots).map(|i| ResultFile::open(&files.shot(i)).unwrap().traces().unwrap()).collect(), stdout)
}

fn max_abs(v: &[f32]) -> f64 {
    v.iter().fold(0.0f64, |m, &x| m.max((x as f64).abs()))
}

fn max_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((*x as f64 - *y as f64).abs()))
}

const TWO_SHOTS: &str = "line = { start = [400.0, 100.0], end = [1000.0, 100.0], count = 2 }";

#[test]
fn a_shot_on_its_box_records_the_whole_grids_traces_and_the_banner_says_the_saving() {
    let model = "kind = \"constant\"\nvp = 2000.0";
    let (whole, _) = survey("whole", &input(model, TWO_SHOTS, ""), 2, &[]);
    let (boxed, stdout) = survey("boxed", &input(model, TWO_SHOTS, "aperture = 200.0"), 2, &[]);
    // Boxes of 86 and 91 of the 161 columns (the margin and 10 points beyond the spread).
    assert!(
        stdout.contains("aperture: 200 m") && stdout.contains("53.4% to 56.5%") && stdout.contains("saving of 45.0%"),
        "{stdout}"
    );
    for (s, (w, b)) in whole.iter().zip(&boxed).enumerate() {
        let err = max_diff(w, b) / max_abs(w);
        eprintln!("shot {s}: traces on the box {err:.2e} of the peak from the whole grid's");
        assert!(err < 3e-5, "shot {s}: {err:.2e}");
    }
}

/// A raw f32 model of the line's grid (z slowest): `left` m/s where x < `at` m, `right` beyond.
fn vertical_interface(at: f64, left: f32, right: f32) -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..60 {
        for ix in 0..161 {
            let v = if (ix as f64 * 10.0) < at { left } else { right };
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    bytes
}

#[test]
fn a_reflector_inside_the_margin_reflects_as_on_the_whole_grid() {
    let model = "kind = \"file\"\npath = \"m.raw\"\nshape = [60, 161]\nspacing = [10.0, 10.0]\naxis_order = \"zx\"";
    let shot = "shots = [[400.0, 100.0]]";
    let (with_wall, without) = (vertical_interface(700.0, 2000.0, 3000.0), vertical_interface(700.0, 2000.0, 2000.0));
    let (whole, _) = survey("wall", &input(model, shot, ""), 1, &[("m.raw", with_wall.clone())]);
    let (plain, _) = survey("plain", &input(model, shot, ""), 1, &[("m.raw", without)]);
    let (boxed, _) = survey("wall-boxed", &input(model, shot, "aperture = 200.0"), 1, &[("m.raw", with_wall)]);
    let reflection: Vec<f32> = whole[0].iter().zip(&plain[0]).map(|(a, b)| a - b).collect();
    let err = max_diff(&whole[0], &boxed[0]) / max_abs(&reflection);
    eprintln!(
        "reflection {:.2e} of the direct wave's peak; on the box it differs by {err:.2e} of its peak",
        max_abs(&reflection) / max_abs(&plain[0])
    );
    assert!(max_abs(&reflection) > 0.05 * max_abs(&plain[0]), "the interface reflects");
    assert!(err < 1.5e-5, "{err:.2e}");
}

fn image(path: &Path) -> Vec<f32> {
    rust_hdf5::H5File::open(path).unwrap().dataset("image").unwrap().read_raw::<f32>().unwrap()
}

/// The migration line (migrate runs 3D grids): 121 x 21 x 56 points at 10 m, a sponge, two shots
/// at x = 300 and 900 m, each with 16 receivers from 150 m before it to 150 m after it.
fn migration_input(survey: &str, name: &str) -> String {
    format!(
        "[grid]\nshape = [121, 21, 56]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
         [time]\nduration = 0.6\ndt = 1.5e-3\n[source]\nposition = [300.0, 100.0, 20.0]\nfrequency = 15.0\n\
         delay = 0.08\n[[receivers]]\nline = {{ start = [150.0, 100.0, 20.0], end = [450.0, 100.0, 20.0], count = 16 }}\n\
         [boundary]\nkind = \"sponge\"\nwidth = 8\n[survey]\nshots = [[300.0, 100.0, 20.0], [900.0, 100.0, 20.0]]\n\
         spread = \"moving\"\n{survey}\n[imaging]\n\
         true_model = {{ kind = \"layered\", depths = [305.0], velocities = [2000.0, 2600.0] }}\n\
         data_derivative = -0.5\noutput = \"{name}.h5\"\n"
    )
}

/// Depth (m) of the image's largest value in column `ix` at the line's y, between 150 and 470 m
/// (a parabola through the peak and its neighbours).
fn peak_depth(image: &[f32], ix: usize) -> f64 {
    let at = |iz: usize| image[(iz * 21 + 10) * 121 + ix] as f64;
    let iz = (15..47).max_by(|&a, &b| at(a).total_cmp(&at(b))).unwrap();
    let (m, c, p) = (at(iz - 1), at(iz), at(iz + 1));
    (iz as f64 + 0.5 * (m - p) / (m - 2.0 * c + p)) * 10.0
}

#[test]
fn a_migration_on_the_boxes_images_the_flat_reflector_as_the_whole_grid() {
    let dir = scratch("aperture", "migrate");
    let mut images = Vec::new();
    for (name, survey) in [("whole", ""), ("boxed", "aperture = 200.0")] {
        std::fs::write(dir.join(format!("{name}.toml")), migration_input(survey, name)).unwrap();
        let stdout = ok(&run(&dir, &["migrate", &format!("{name}.toml")]));
        // Boxes of 76 of the 121 columns each.
        assert_eq!(
            stdout.contains("62.8% to 62.8%") && stdout.contains("saving of 37.2%"),
            !survey.is_empty(),
            "{stdout}"
        );
        images.push(image(&dir.join(format!("{name}.h5"))));
    }
    let (whole, boxed) = (&images[0], &images[1]);
    let peak = max_abs(whole);
    // Within 60 m of each shot (the reflection points of its spread): the reflector at its depth,
    // the image close to the whole grid's.
    let (mut worst_depth, mut worst_diff) = (0.0f64, 0.0f64);
    for ix in (24..=36).chain(84..=96) {
        let (zw, zb) = (peak_depth(whole, ix), peak_depth(boxed, ix));
        assert!((zb - 305.0).abs() <= 10.0, "x = {} m: imaged at {zb:.1} m", ix * 10);
        let column = |im: &[f32], iz: usize| im[(iz * 21 + 10) * 121 + ix] as f64;
        let diff = (0..56).map(|iz| (column(whole, iz) - column(boxed, iz)).abs()).fold(0.0, f64::max) / peak;
        (worst_depth, worst_diff) = (worst_depth.max((zb - zw).abs()), worst_diff.max(diff));
    }
    eprintln!(
        "under the spreads: peaks {worst_depth:.2} m from the whole grid's, columns within {worst_diff:.2e} of its peak"
    );
    assert!(worst_depth <= 0.5 && worst_diff < 0.05, "{worst_depth} m, {worst_diff:.2e}");
}

#[test]
fn bad_apertures_are_refused_naming_the_key() {
    let model = "kind = \"constant\"\nvp = 2000.0";
    for survey in ["aperture = -1.0", "aperture = nan", "aperture = inf"] {
        let cfg = Config::from_toml(&input(model, TWO_SHOTS, survey)).unwrap();
        let e = cfg.check_values().unwrap_err().to_string();
        assert!(e.contains("survey.aperture"), "{survey}: {e}");
    }
    let dir = scratch("aperture", "refused");
    std::fs::write(dir.join("s.toml"), input(model, TWO_SHOTS, "aperture = -5.0")).unwrap();
    let out = run(&dir, &["s.toml"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("survey.aperture"));
}
