//! `[boundary] placement = "outside"` (the default) puts the absorbing layers around the model:
//! a run of it equals, bit for bit, a run with the layers inside a model padded by hand with its
//! edge values (the grid enlarged by the layers, its origin and the model's moved out by them),
//! traces and snapshots alike, the result file holding the model's part only. Positions stay in
//! the model's coordinates and must lie in the model.

use rust_hdf5::H5File;
use seismic_run::config::Config;
use seismic_run::model::npy;
use seismic_run::problem::Problem;
use std::path::Path;

mod process;
use process::{Scratch, seismic_run};

const H: f64 = 10.0;
/// The model's points along x, y, z.
const MODEL: [usize; 3] = [26, 14, 18];
const WIDTH: usize = 5;

/// A velocity that varies along every axis, so that each layer's edge values differ.
fn model() -> Vec<f32> {
    let [nx, ny, nz] = MODEL;
    let mut v = Vec::with_capacity(nx * ny * nz);
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                v.push(1800.0 + 25.0 * z as f32 + 9.0 * x as f32 + 4.0 * y as f32 + 30.0 * ((x * y) % 3) as f32);
            }
        }
    }
    v
}

/// Layer points before and after the model along x, y, z.
fn layers(free_surface: bool) -> [[usize; 2]; 3] {
    [[WIDTH; 2], [WIDTH; 2], [if free_surface { 0 } else { WIDTH }, WIDTH]]
}

/// `model()` padded by hand with its edge values: (shape, values).
fn padded(free_surface: bool) -> ([usize; 3], Vec<f32>) {
    let l = layers(free_surface);
    let shape: [usize; 3] = std::array::from_fn(|a| MODEL[a] + l[a][0] + l[a][1]);
    let v = model();
    let at = |a: usize, i: usize| i.saturating_sub(l[a][0]).min(MODEL[a] - 1);
    let mut out = Vec::new();
    for z in 0..shape[2] {
        for y in 0..shape[1] {
            for x in 0..shape[0] {
                out.push(v[(at(2, z) * MODEL[1] + at(1, y)) * MODEL[0] + at(0, x)]);
            }
        }
    }
    (shape, out)
}

/// The input of a run on `model.npy` of `shape` (zyx) with its first sample at `origin`, the grid
/// the same, `boundary` spliced into `[boundary]`.
fn input(shape: [usize; 3], origin: [f64; 3], boundary: &str) -> String {
    let [nx, ny, nz] = shape;
    format!(
        "[grid]\nshape = [{nx}, {ny}, {nz}]\nspacing = [{H}, {H}, {H}]\norigin = {origin:?}\n\n\
         [model]\nkind = \"file\"\npath = \"model.npy\"\nformat = \"npy\"\nshape = [{nz}, {ny}, {nx}]\n\
         spacing = [{H}, {H}, {H}]\norigin = {origin:?}\n\n\
         [stencil]\nradius = 3\n\n[time]\nsteps = 90\n\n\
         [source]\nposition = [120.0, 60.0, 40.0]\nfrequency = 18.0\n\n\
         [[receivers]]\nline = {{ start = [0.0, 60.0, 10.0], end = [250.0, 70.0, 170.0], count = 11 }}\n\
         interpolation = \"trilinear\"\n\n\
         [boundary]\n{boundary}\n\n\
         [output]\nsnapshot_every = 30\n\
         snapshot = [{{ kind = \"volume\" }}, {{ kind = \"xz\", at = 70.0 }}, {{ kind = \"yz\", at = 0.0 }}]\n"
    )
}

/// Runs `text` (with `vp` as model.npy of `shape`) in `dir` on the CPU into `name`.h5.
fn run(dir: &Path, name: &str, text: &str, shape: [usize; 3], vp: &[f32]) -> H5File {
    let [nx, ny, nz] = shape;
    std::fs::write(dir.join("model.npy"), npy::to_bytes(&[nz, ny, nx], vp)).unwrap();
    let input = dir.join(format!("{name}.toml"));
    std::fs::write(&input, text).unwrap();
    let out = seismic_run()
        .current_dir(dir)
        .args(["run", "--backend", "cpu", "-o", &format!("{name}.h5")])
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    H5File::open(dir.join(format!("{name}.h5"))).unwrap()
}

fn f32s(f: &H5File, name: &str) -> Vec<f32> {
    f.dataset(name).unwrap().read_raw::<f32>().unwrap()
}

/// The model's part of run-grid snapshots (nsnap, nz, ny, nx) or planes (nsnap, rows, columns),
/// the model's rows and columns starting at `first` = (row, column).
fn crop(values: &[f32], [snaps, rows, cols]: [usize; 3], first: [usize; 2], model: [usize; 2]) -> Vec<f32> {
    let mut out = Vec::new();
    for s in 0..snaps {
        for r in first[0]..first[0] + model[0] {
            let row = (s * rows + r) * cols;
            out.extend_from_slice(&values[row + first[1]..row + first[1] + model[1]]);
        }
    }
    out
}

fn outside_equals_inside_on_a_padded_model(boundary: &str, free_surface: bool, name: &str) {
    let dir: Scratch = process::scratch("layer_placement", name);
    let fs = format!("free_surface = {free_surface}\nwidth = {WIDTH}\n{boundary}");
    let outside = run(&dir, "outside", &input(MODEL, [0.0; 3], &fs), MODEL, &model());
    let l = layers(free_surface);
    let (shape, vp) = padded(free_surface);
    let origin = l.map(|l| 0.0 - l[0] as f64 * H);
    let inside = run(&dir, "inside", &input(shape, origin, &format!("{fs}\nplacement = \"inside\"")), shape, &vp);

    assert_eq!(f32s(&outside, "receivers/pressure"), f32s(&inside, "receivers/pressure"), "traces");
    let [mx, my, mz] = MODEL;
    let [nx, ny, nz] = shape;
    let [fx, fy, fz] = l.map(|l| l[0]);
    assert_eq!(outside.dataset("model/vp").unwrap().shape(), [mz, my, mx]);
    assert_eq!(f32s(&outside, "model/vp"), model(), "/model/vp holds the model");
    // The volume, plane by plane: (nsnap nz, ny, nx) rows of the inside run's whole grid.
    let whole = f32s(&inside, "snapshots/pressure");
    let mut cut = Vec::new();
    for s in 0..3 {
        let volume = &whole[s * nx * ny * nz..][..nx * ny * nz];
        cut.extend(crop(&volume[fz * nx * ny..], [mz, ny, nx], [fy, fx], [my, mx]));
    }
    let got = f32s(&outside, "snapshots/pressure");
    assert_eq!(outside.dataset("snapshots/pressure").unwrap().shape(), [3, mz, my, mx]);
    assert!(got.iter().any(|&v| v != 0.0), "the snapshots hold a wavefield");
    assert_eq!(got, cut, "volume snapshots");
    let xz = crop(&f32s(&inside, "snapshots/pressure_xz"), [3, nz, nx], [fz, fx], [mz, mx]);
    assert_eq!(f32s(&outside, "snapshots/pressure_xz"), xz, "xz snapshots");
    let yz = crop(&f32s(&inside, "snapshots/pressure_yz"), [3, nz, ny], [fz, fy], [mz, my]);
    assert_eq!(f32s(&outside, "snapshots/pressure_yz"), yz, "yz snapshots");
    // The planes' indices are the model's; the grid attributes say where the model lies.
    let index = |f: &H5File, n: &str| f.dataset(n).unwrap().attr("index").unwrap().read_numeric_as::<u64>().unwrap();
    assert_eq!(index(&outside, "snapshots/pressure_xz"), [7]);
    assert_eq!(index(&inside, "snapshots/pressure_xz"), [7 + fy as u64]);
    assert_eq!(index(&outside, "snapshots/pressure_yz"), [0]);
    let origin_of = |f: &H5File| f.dataset("model/vp").unwrap().attr("origin").unwrap().read_numeric_as::<f64>();
    assert_eq!(origin_of(&outside).unwrap(), [0.0; 3]);
    assert_eq!(origin_of(&inside).unwrap(), origin);
}

#[test]
fn cpml_outside_equals_cpml_inside_a_model_padded_by_hand() {
    outside_equals_inside_on_a_padded_model("kind = \"cpml\"", false, "cpml");
}

#[test]
fn sponge_under_a_free_surface_outside_equals_inside_a_padded_model() {
    outside_equals_inside_on_a_padded_model("kind = \"sponge\"", true, "sponge");
}

/// A constant 400 m cube (41 points a side) with layers of 10 points; `extra` added to the input.
fn cube(extra: &str) -> anyhow::Result<Problem> {
    let text = format!(
        "[grid]\nshape = [41, 41, 41]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
         [time]\nsteps = 2\n[source]\nposition = [200.0, 200.0, 200.0]\nfrequency = 10.0\n{extra}"
    );
    let cfg = Config::from_toml(&text)?;
    Problem::build(&cfg, vec![2000.0; 41 * 41 * 41])
}

#[test]
fn the_run_grid_grows_by_the_layers_outside_and_positions_stay_in_the_model() {
    let p = cube("[boundary]\nwidth = 10\n").unwrap();
    assert_eq!(p.shape(), [61, 61, 61]);
    assert_eq!(p.origin, [-100.0; 3]);
    assert_eq!(p.source().taps[0].point, [30, 30, 30], "the source 200 m from the model's origin");
    let p = cube("[boundary]\nwidth = 10\nfree_surface = true\n").unwrap();
    assert_eq!((p.shape(), p.origin), ([61, 61, 51], [-100.0, -100.0, 0.0]), "no layer above a free surface");
    for none in ["[boundary]\nkind = \"none\"\n", "[boundary]\nwidth = 10\nplacement = \"inside\"\n"] {
        let p = cube(none).unwrap();
        assert_eq!((p.shape(), p.origin), ([41; 3], [0.0; 3]), "{none}");
    }
    // A position in the layer but outside the model is an error naming its key, as beyond a grid.
    let err = cube("[[receivers]]\nposition = [-50.0, 200.0, 200.0]\n[boundary]\nwidth = 10\n").unwrap_err();
    assert!(format!("{err:#}").contains("receivers[0] = [-50.0, 200.0, 200.0] m lies outside the grid"), "{err:#}");
    // So is a snapshot plane there.
    let extra = "[boundary]\nwidth = 10\n[output]\nsnapshot_every = 1\nsnapshot = [{ kind = \"xy\", at = 450.0 }]\n";
    let text = format!(
        "[grid]\nshape = [41, 41, 41]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
         [time]\nsteps = 2\n[source]\nposition = [200.0, 200.0, 200.0]\nfrequency = 10.0\n{extra}"
    );
    let cfg = Config::from_toml(&text).unwrap();
    let p = Problem::build(&cfg, vec![2000.0; 41 * 41 * 41]).unwrap();
    let err = seismic_run::output::plan::OutputPlan::from_config(&cfg, &p).unwrap_err().to_string();
    assert!(err.contains("output.snapshot[0].at = 450 m lies outside the grid along z"), "{err}");
}

#[test]
fn placement_and_model_origin_are_checked_keys() {
    let err = cube("[boundary]\nplacement = \"around\"\n").unwrap_err().to_string();
    assert!(err.contains("unknown variant `around`") && err.contains("outside") && err.contains("inside"), "{err}");
    let err = cube("[boundary]\nwidth = 9223372036854775807\n").unwrap_err().to_string();
    assert!(err.contains("boundary.width = 9223372036854775807"), "{err}");
    let text = "[grid]\nshape = [4, 4, 4]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
                origin = [0.0, 0.0, 0.0]\n[time]\nsteps = 2\n[source]\nposition = [0.0, 0.0, 0.0]\nfrequency = 10.0\n";
    let err = Config::from_toml(text).unwrap_err().to_string();
    assert!(err.contains("model.origin does not apply to kind = \"constant\""), "{err}");
    let file = "[model]\nkind = \"file\"\npath = \"m.npy\"\nformat = \"npy\"\nshape = [4, 4, 4]\n\
                spacing = [10.0, 10.0, 10.0]\norigin = [1.0, 2.0]\n";
    let text = format!(
        "[grid]\nshape = [4, 4, 4]\nspacing = [10.0, 10.0, 10.0]\n{file}[time]\nsteps = 2\n[source]\nposition = [0.0, 0.0, 0.0]\nfrequency = 10.0\n"
    );
    let err = Config::from_toml(&text).unwrap_err().to_string();
    // Two values are a 2D grid's form: on a 3D grid an error naming the key.
    assert!(err.contains("model.origin") && err.contains("two values"), "{err}");
}
