//! Velocity models read from SEG-Y files that segyio wrote (IBM floats, rev 1; made by
//! validation/segy_models.py, which also writes the same values as .npy): the geometry comes from
//! the trace headers, and a run over the SEG-Y model is bit for bit the run over the .npy.

mod common;

use seismic_run::config::Config;
use seismic_run::model;
use seismic_run::problem::Problem;
use std::path::Path;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

/// An input over `model` with a source and a line of receivers at depth `depth` (m).
fn input(grid: &str, model: &str, source: [f64; 3], line: ([f64; 3], [f64; 3])) -> Config {
    let text = format!(
        "[grid]\n{grid}\n[model]\n{model}\n[time]\nsteps = 60\n[source]\nposition = {source:?}\nfrequency = 12.0\n\
         [[receivers]]\nline = {{ start = {:?}, end = {:?}, count = 7 }}\n[boundary]\nkind = \"cpml\"\nwidth = 4\n",
        line.0, line.1
    );
    Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// Receiver traces of a CPU run of `cfg`.
fn traces(cfg: &Config) -> Vec<Vec<f64>> {
    let vp = model::load(cfg, Path::new(DATA)).unwrap_or_else(|e| panic!("{e:#}"));
    let problem = Problem::build(cfg, vp).unwrap_or_else(|e| panic!("{e:#}"));
    common::run::<f32>(&problem)
}

fn same_bits(a: &[Vec<f64>], b: &[Vec<f64>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()))
}

#[test]
fn segy_2d_model_runs_bit_for_bit_as_its_npy() {
    // The model is 287.5 m wide and 190 m deep; the grid samples it between its points.
    let grid = "shape = [40, 10, 26]\nspacing = [7.0, 7.0, 7.0]";
    let line = ([20.0, 31.5, 14.0], [260.0, 31.5, 14.0]);
    let segy = input(grid, "kind = \"file\"\npath = \"model2d.sgy\"\nformat = \"segy\"", [140.0, 31.5, 70.0], line);
    let npy = input(
        grid,
        "kind = \"file\"\npath = \"model2d.npy\"\nformat = \"npy\"\naxis_order = \"xz\"\nshape = [24, 20]\nspacing = [12.5, 10.0]",
        [140.0, 31.5, 70.0],
        line,
    );
    assert_eq!(model::load(&segy, Path::new(DATA)).unwrap(), model::load(&npy, Path::new(DATA)).unwrap());
    let (a, b) = (traces(&segy), traces(&npy));
    assert!(a.iter().all(|t| t.iter().any(|&v| v != 0.0)), "every receiver records the shot");
    assert!(same_bits(&a, &b), "the SEG-Y model's traces differ from the .npy model's");
}

#[test]
fn segy_3d_model_runs_bit_for_bit_as_its_npy() {
    // 6 crosslines 20 m apart along x, 4 inlines 25 m apart along y, 10 samples 8 m apart.
    let grid = "shape = [21, 16, 15]\nspacing = [5.0, 5.0, 5.0]";
    let line = ([25.0, 40.0, 25.0], [75.0, 40.0, 25.0]);
    let segy = input(grid, "kind = \"file\"\npath = \"model3d.sgy\"\nformat = \"segy\"", [50.0, 35.0, 40.0], line);
    let npy = input(
        grid,
        "kind = \"file\"\npath = \"model3d.npy\"\nformat = \"npy\"\naxis_order = \"yxz\"\nshape = [4, 6, 10]\n\
         spacing = [25.0, 20.0, 8.0]",
        [50.0, 35.0, 40.0],
        line,
    );
    let (vs, vn) = (model::sample(&segy, Path::new(DATA)).unwrap(), model::sample(&npy, Path::new(DATA)).unwrap());
    assert_eq!(vs, vn);
    let (a, b) = (traces(&segy), traces(&npy));
    assert!(a.iter().all(|t| t.iter().any(|&v| v != 0.0)), "every receiver records the shot");
    assert!(same_bits(&a, &b), "the SEG-Y model's traces differ from the .npy model's");
}

#[test]
fn segy_geometry_from_headers_matches_the_input_when_both_are_given() {
    let grid = "shape = [4, 4, 4]\nspacing = [5.0, 5.0, 5.0]";
    let line = ([0.0, 0.0, 0.0], [15.0, 0.0, 0.0]);
    let given = "kind = \"file\"\npath = \"model3d.sgy\"\nformat = \"segy\"\naxis_order = \"yxz\"\nshape = [4, 6, 10]";
    assert!(model::sample(&input(grid, given, [5.0, 5.0, 5.0], line), Path::new(DATA)).is_ok());
    let wrong = "kind = \"file\"\npath = \"model3d.sgy\"\nformat = \"segy\"\nshape = [6, 4, 10]";
    let e = format!("{:#}", model::sample(&input(grid, wrong, [5.0, 5.0, 5.0], line), Path::new(DATA)).unwrap_err());
    assert!(e.contains("holds a model of shape [4, 6, 10]") && e.contains("model.shape = [6, 4, 10]"), "{e}");
    // Other formats still need shape and spacing.
    let text = "[grid]\nshape = [4, 4, 4]\nspacing = [5.0, 5.0, 5.0]\n[model]\nkind = \"file\"\npath = \"m.npy\"\n\
                format = \"npy\"\n[time]\nsteps = 1\n[source]\nposition = [0.0, 0.0, 0.0]\nfrequency = 10.0\n";
    let e = Config::from_toml(text).unwrap_err().to_string();
    assert!(e.contains("model.shape is required"), "{e}");
}

/// `seismic-run fetch-model marmousi --segy`: the data set written as a SEG-Y model reads back,
/// through its headers alone, as the same velocities as `kind = "marmousi"`.
#[test]
fn marmousi_written_as_segy_samples_as_the_named_model() {
    let d = model::descriptor("marmousi").unwrap();
    let dir = std::env::temp_dir().join(format!("seismic-run-segy-marmousi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("marmousi.sgy");
    d.write_segy(&model::data_dirs(), &out).unwrap_or_else(|e| panic!("{e:#}"));
    let grid = "shape = [120, 2, 50]\nspacing = [40.0, 40.0, 20.0]\norigin = [3000.0, 0.0, 0.0]";
    let line = ([3100.0, 20.0, 10.0], [3500.0, 20.0, 10.0]);
    let named = input(grid, "kind = \"marmousi\"", [3300.0, 20.0, 100.0], line);
    let segy = input(grid, "kind = \"file\"\npath = \"marmousi.sgy\"\nformat = \"segy\"", [3300.0, 20.0, 100.0], line);
    let want = model::sample(&named, Path::new(".")).unwrap();
    let got = model::sample(&segy, &dir).unwrap_or_else(|e| panic!("{e:#}"));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(got, want);
}
