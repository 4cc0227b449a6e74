//! Velocity models sampled onto the run grid: every kind, axis orders, units, resampling, the
//! Marmousi data set (read from where seismic-run finds it) and fetching a data set.

use seismic_run::config::{Config, GridConfig};
use seismic_run::model::{self, npy, volume::VelocityVolume};
use std::path::{Path, PathBuf};

/// A fresh, empty scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seismic-run-models-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config(grid: &str, model: &str) -> Config {
    let text = format!(
        "[grid]\n{grid}\n[model]\n{model}\n[time]\nsteps = 1\n[source]\nposition = [0.0, 0.0, 0.0]\nfrequency = 10.0\n"
    );
    Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}"))
}

fn raw_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn at(vp: &[f32], shape: [usize; 3], ix: usize, iy: usize, iz: usize) -> f32 {
    vp[(iz * shape[1] + iy) * shape[0] + ix]
}

#[test]
fn constant_fills_the_grid() {
    let cfg = config("shape = [4, 3, 2]\nspacing = [10.0, 10.0, 10.0]", "kind = \"constant\"\nvp = 1800.0");
    let m = model::sample(&cfg, Path::new(".")).unwrap();
    assert_eq!(m.vp, vec![1800.0; 24]);
    assert!(m.warnings.is_empty());
}

#[test]
fn layered_changes_velocity_at_each_depth() {
    let shape = [3, 2, 7];
    let cfg = config(
        "shape = [3, 2, 7]\nspacing = [10.0, 10.0, 10.0]\norigin = [0.0, 0.0, -5.0]",
        "kind = \"layered\"\ndepths = [20.0, 35.0]\nvelocities = [1500.0, 2000.0, 3000.0]",
    );
    let vp = model::load(&cfg, Path::new(".")).unwrap();
    // z = -5, 5, 15 | 25 | 35 (at the second depth: the layer below), 45, 55
    let expected = [1500.0, 1500.0, 1500.0, 2000.0, 3000.0, 3000.0, 3000.0];
    for (iz, want) in expected.iter().enumerate() {
        for iy in 0..2 {
            for ix in 0..3 {
                assert_eq!(at(&vp, shape, ix, iy, iz), *want, "iz = {iz}");
            }
        }
    }
}

/// A smooth, distinct value per point of a (nx, ny, nz) model, m/s.
fn field(ix: usize, iy: usize, iz: usize) -> f32 {
    1500.0 + 7.0 * ix as f32 + 13.0 * iy as f32 + 29.0 * iz as f32 + ((ix * iy + iz) % 5) as f32
}

#[test]
fn raw_files_in_any_axis_order_give_the_same_grid() {
    let dir = scratch("axis-order");
    let [nx, ny, nz] = [5, 4, 3];
    // Same field stored x fastest ("zyx") and z fastest ("xyz").
    let mut zyx = Vec::new();
    for iz in 0..nz {
        for iy in 0..ny {
            for ix in 0..nx {
                zyx.push(field(ix, iy, iz));
            }
        }
    }
    let mut xyz = Vec::new();
    for ix in 0..nx {
        for iy in 0..ny {
            for iz in 0..nz {
                xyz.push(field(ix, iy, iz));
            }
        }
    }
    std::fs::write(dir.join("zyx.bin"), raw_bytes(&zyx)).unwrap();
    std::fs::write(dir.join("xyz.bin"), raw_bytes(&xyz)).unwrap();
    let grid = "shape = [5, 4, 3]\nspacing = [10.0, 20.0, 5.0]";
    let a = config(
        grid,
        "kind = \"file\"\npath = \"zyx.bin\"\nshape = [3, 4, 5]\nspacing = [5.0, 20.0, 10.0]\naxis_order = \"zyx\"",
    );
    let b = config(
        grid,
        "kind = \"file\"\npath = \"xyz.bin\"\nshape = [5, 4, 3]\nspacing = [10.0, 20.0, 5.0]\naxis_order = \"xyz\"",
    );
    let va = model::sample(&a, &dir).unwrap();
    let vb = model::sample(&b, &dir).unwrap();
    assert_eq!(va.vp, zyx, "same grid as the file: the values themselves");
    assert_eq!(vb.vp, zyx);
    assert!(va.warnings.is_empty() && vb.warnings.is_empty());
}

#[test]
fn trilinear_resampling_reproduces_linear_fields() {
    let lin = |x: f64, y: f64, z: f64| 2000.0 + 3.0 * x - 2.0 * y + 5.0 * z;
    let (h, n) = (20.0, [6, 5, 4]);
    let mut values = Vec::new();
    for iz in 0..n[2] {
        for iy in 0..n[1] {
            for ix in 0..n[0] {
                values.push(lin(ix as f64 * h, iy as f64 * h, iz as f64 * h) as f32);
            }
        }
    }
    let vol = VelocityVolume::new(values, &[2, 1, 0], &[n[2], n[1], n[0]], &[h, h, h]);
    let grid = GridConfig { shape: [17, 11, 10], spacing: [6.0, 7.0, 6.5], origin: [1.0, 2.0, 0.5] };
    let mut warnings = Vec::new();
    let vp = vol.resample(&grid, 0..grid.shape[2], [0.0; 3], "test", &mut warnings).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    for iz in 0..10 {
        for iy in 0..11 {
            for ix in 0..17 {
                let p = [1.0 + 6.0 * ix as f64, 2.0 + 7.0 * iy as f64, 0.5 + 6.5 * iz as f64];
                let got = at(&vp, grid.shape, ix, iy, iz) as f64;
                assert!((got - lin(p[0], p[1], p[2])).abs() < 1e-2, "{p:?}: {got}");
            }
        }
    }
}

#[test]
fn npy_2d_section_in_km_per_s_is_extruded_along_y() {
    let dir = scratch("npy-2d");
    let (nx, nz) = (6, 4);
    // Depth fastest, like Marmousi: index = ix * nz + iz.
    let values: Vec<f32> = (0..nx * nz).map(|i| 1.5 + 0.01 * i as f32).collect();
    std::fs::write(dir.join("section.npy"), npy::to_bytes(&[nx, nz], &values)).unwrap();
    let cfg = config(
        "shape = [6, 3, 4]\nspacing = [12.5, 1.0, 12.5]",
        "kind = \"file\"\nformat = \"npy\"\npath = \"section.npy\"\nshape = [6, 4]\nspacing = [12.5, 12.5]\n\
         units = \"km/s\"\naxis_order = \"xz\"",
    );
    let vp = model::load(&cfg, &dir).unwrap();
    for iz in 0..nz {
        for iy in 0..3 {
            for ix in 0..nx {
                let want = values[ix * nz + iz] * 1000.0;
                assert!((at(&vp, [6, 3, 4], ix, iy, iz) - want).abs() < 1e-3);
            }
        }
    }
}

#[test]
fn grid_beyond_the_model_takes_the_edge_value_and_warns() {
    let vol = VelocityVolume::new(vec![1000.0, 2000.0, 3000.0, 4000.0], &[0, 2], &[2, 2], &[10.0, 10.0]);
    let grid = GridConfig { shape: [4, 1, 2], spacing: [10.0, 10.0, 10.0], origin: [-10.0, 0.0, 0.0] };
    let mut warnings = Vec::new();
    let vp = vol.resample(&grid, 0..grid.shape[2], [0.0; 3], "tiny", &mut warnings).unwrap();
    // x = -10 and 20 clamp to x = 0 and 10.
    assert_eq!(vp, vec![1000.0, 1000.0, 3000.0, 3000.0, 2000.0, 2000.0, 4000.0, 4000.0]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("tiny") && warnings[0].contains("covers x from 0 to 10 m"), "{}", warnings[0]);
}

/// The Marmousi file, found where seismic-run looks (SEISMIC_DATA_DIR, ./data, ../shared/models),
/// so that the tests also run where the data set sits elsewhere (the staged GPU machine).
fn marmousi_file() -> PathBuf {
    let d = model::descriptor("marmousi").unwrap();
    d.locate(&model::data_dirs()).unwrap_or_else(|e| panic!("{e:#}"))
}

fn marmousi_raw() -> Vec<f32> {
    let path = marmousi_file();
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

#[test]
fn marmousi_descriptor_matches_the_data_file() {
    let all = model::descriptors();
    assert!(all.iter().any(|d| d.name == "marmousi"));
    let d = model::descriptor("marmousi").unwrap();
    assert_eq!((d.shape.clone(), d.axis_order.as_str()), (vec![1601, 401], "xz"));
    assert_eq!(d.bytes, 1601 * 401 * 4);
    let path = d.locate(&model::data_dirs()).unwrap();
    d.check_file(&path).unwrap();
    assert!(model::descriptor("marmousi3d").unwrap_err().to_string().contains("marmousi"));
}

#[test]
fn marmousi_on_its_own_spacing_is_the_data_in_m_per_s() {
    let raw = marmousi_raw();
    let shape = [40, 2, 30];
    let cfg = config("shape = [40, 2, 30]\nspacing = [7.5, 50.0, 7.5]", "kind = \"marmousi\"\nx_offset = 750.0");
    let m = model::sample(&cfg, Path::new(".")).unwrap();
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    for iz in 0..30 {
        for ix in 0..40 {
            let want = raw[(ix + 100) * 401 + iz] * 1000.0;
            for iy in 0..2 {
                assert!((at(&m.vp, shape, ix, iy, iz) - want).abs() < 1e-2, "({ix}, {iz})");
            }
        }
    }
    assert_eq!(at(&m.vp, shape, 0, 0, 0), 1500.0, "water at the top");
}

#[test]
fn marmousi_resampled_between_samples_is_bilinear_and_clamped_beyond() {
    let raw = marmousi_raw();
    let v = |ix: usize, iz: usize| raw[ix * 401 + iz] as f64 * 1000.0;
    // 11.25 m = 1.5 samples: every other grid point falls midway between two samples.
    let cfg = config("shape = [1070, 1, 267]\nspacing = [11.25, 10.0, 11.25]", "kind = \"marmousi\"");
    let m = model::sample(&cfg, Path::new(".")).unwrap();
    let shape = [1070, 1, 267];
    let got = at(&m.vp, shape, 3, 0, 5) as f64; // x = 33.75 m = sample 4.5, z = 56.25 m = sample 7.5
    let want = (v(4, 7) + v(5, 7) + v(4, 8) + v(5, 8)) / 4.0;
    assert!((got - want).abs() < 1e-2, "{got} vs {want}");
    // x reaches 1069 * 11.25 = 12026.25 m > 12000 m: the edge value, and a warning.
    assert!(m.warnings.len() == 1 && m.warnings[0].contains("marmousi"), "{:?}", m.warnings);
    assert!((at(&m.vp, shape, 1069, 0, 0) as f64 - v(1600, 0)).abs() < 1e-2);
    let (lo, hi) = m.vp.iter().fold((f32::MAX, 0.0f32), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(lo >= 1028.0 - 0.5 && hi <= 4700.0 + 0.5, "{lo} {hi}");
}

#[test]
fn fetch_downloads_checks_and_renames() {
    let dest = scratch("fetch");
    let d = model::descriptor("marmousi").unwrap();
    let source = std::fs::canonicalize(marmousi_file()).unwrap();
    let url = format!("file://{}", source.display());
    let path = model::dataset::fetch_from(&d, &url, &dest).unwrap();
    assert_eq!(path, dest.join("marmousi/vp_marmousi_bi"));
    d.check_file(&path).unwrap();
    assert_eq!(d.locate(std::slice::from_ref(&dest)).unwrap(), path);
    // Only the file itself is left: no temporary download.
    assert_eq!(std::fs::read_dir(dest.join("marmousi")).unwrap().count(), 1);
    // A second fetch keeps the intact file, even from an address that does not answer.
    assert_eq!(model::dataset::fetch_from(&d, "file:///nonexistent/vp", &dest).unwrap(), path);
}

#[test]
fn fetch_without_network_says_how_to_download_by_hand() {
    let dest = scratch("fetch-offline");
    let d = model::descriptor("marmousi").unwrap();
    let e = model::dataset::fetch_from(&d, "file:///nonexistent/vp_marmousi_bi", &dest).unwrap_err().to_string();
    assert!(e.contains("No network") && e.contains("file:///nonexistent/vp_marmousi_bi"), "{e}");
    assert!(e.contains(&dest.join("marmousi/vp_marmousi_bi").display().to_string()), "{e}");
    assert_eq!(std::fs::read_dir(dest.join("marmousi")).unwrap().count(), 0, "no partial file left");
    // A download that is not the data set is refused and removed.
    let wrong = dest.join("wrong.bin");
    std::fs::write(&wrong, vec![0u8; 16]).unwrap();
    let e = model::dataset::fetch_from(&d, &format!("file://{}", wrong.display()), &dest).unwrap_err();
    assert!(format!("{e:#}").contains("holds 16 bytes"), "{e:#}");
    assert!(!dest.join("marmousi/vp_marmousi_bi").exists());
}

/// A rank's part of the model (`sample_planes`) is the whole sampling's planes, bit for bit, for
/// every kind: constant, layered, a raw file resampled trilinearly and Marmousi resampled.
#[test]
fn sampled_planes_equal_the_whole_model_restricted_to_them() {
    let dir = scratch("planes");
    let (n, h) = ([6, 5, 7], 20.0);
    let values: Vec<f32> =
        (0..n[2]).flat_map(|iz| (0..n[1]).flat_map(move |iy| (0..n[0]).map(move |ix| field(ix, iy, iz)))).collect();
    std::fs::write(dir.join("m.bin"), raw_bytes(&values)).unwrap();
    let grid = "shape = [13, 9, 17]\nspacing = [9.0, 11.0, 7.3]\norigin = [1.0, 2.0, 0.7]";
    let file =
        format!("kind = \"file\"\npath = \"m.bin\"\nshape = [{}, {}, {}]\nspacing = [{h}, {h}, {h}]", n[2], n[1], n[0]);
    for model in [
        "kind = \"constant\"\nvp = 1800.0".to_string(),
        "kind = \"layered\"\ndepths = [30.0, 61.1]\nvelocities = [1500.0, 2000.0, 3000.0]".into(),
        file,
        "kind = \"marmousi\"\nx_offset = 333.3".into(),
    ] {
        let cfg = config(grid, &model);
        let whole = model::sample(&cfg, &dir).unwrap().vp;
        let plane = 13 * 9;
        for planes in [0..17, 0..5, 4..11, 16..17, 9..9] {
            let part = model::sample_planes(&cfg, &dir, planes.clone()).unwrap().vp;
            let want = &whole[planes.start * plane..planes.end * plane];
            assert!(part.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()), "{model}: planes {planes:?}");
            assert_eq!(part.len(), want.len(), "{model}: planes {planes:?}");
        }
    }
}

/// A rank reads of a model file only the z-samples its planes interpolate from (no rank holds the
/// whole model): the part read holds just those samples, in every storage order (z slowest,
/// between, fastest; 3D raw, 2D `.npy`), and resamples to the whole model's planes bit for bit.
#[test]
fn a_part_of_a_model_file_holds_only_the_z_samples_its_planes_need() {
    use seismic_run::config::{FileFormat, Units};
    use seismic_run::model::file::FileSpec;
    use seismic_run::model::volume::planes_needed;
    let dir = scratch("file-part");
    let n = [6, 5, 9]; // x, y, z samples of the file, 20 m apart
    let letter = |a: usize| ["x", "y", "z"][a];
    let grid_text = "shape = [13, 9, 31]\nspacing = [9.0, 11.0, 5.3]\norigin = [1.0, 2.0, 0.7]";
    let cfg_grid = config(grid_text, "kind = \"constant\"\nvp = 1.0").grid;
    let plane = 13 * 9;
    for order in [[2, 1, 0], [0, 2, 1], [1, 0, 2], [2, 0, 3], [0, 2, 3]] {
        // Axis 3 marks a 2D section: axes x and z only, stored as .npy in km/s.
        let axes: Vec<usize> = order.iter().copied().filter(|&a| a < 3).collect();
        let two_d = axes.len() == 2;
        let shape: Vec<usize> = axes.iter().map(|&a| n[a]).collect();
        let mut values = Vec::new();
        let mut idx = [0usize; 3];
        let count: usize = shape.iter().product();
        for flat in 0..count {
            let mut rest = flat;
            for k in (0..axes.len()).rev() {
                idx[axes[k]] = rest % shape[k];
                rest /= shape[k];
            }
            let v = field(idx[0], if two_d { 0 } else { idx[1] }, idx[2]);
            values.push(if two_d { v / 1000.0 } else { v });
        }
        let axis_order: String = axes.iter().map(|&a| letter(a)).collect();
        let (name, format, units) = if two_d {
            std::fs::write(dir.join(format!("{axis_order}.npy")), npy::to_bytes(&shape, &values)).unwrap();
            (format!("{axis_order}.npy"), "npy", "km/s")
        } else {
            std::fs::write(dir.join(format!("{axis_order}.bin")), raw_bytes(&values)).unwrap();
            (format!("{axis_order}.bin"), "raw-f32", "m/s")
        };
        let spacing = vec![20.0; axes.len()];
        let model = format!(
            "kind = \"file\"\npath = \"{name}\"\nformat = \"{format}\"\nunits = \"{units}\"\nshape = {shape:?}\n\
             spacing = {spacing:?}\naxis_order = \"{axis_order}\""
        );
        let cfg = config(grid_text, &model);
        let whole = model::sample(&cfg, &dir).unwrap().vp;
        let spec = FileSpec {
            path: &dir.join(&name),
            format: if two_d { FileFormat::Npy } else { FileFormat::RawF32 },
            shape: &shape,
            spacing: &spacing,
            units: if two_d { Units::KilometresPerSecond } else { Units::MetresPerSecond },
            axis_order: &axis_order,
            sha256: None,
            key: "model",
        };
        for planes in [0..31, 0..5, 12..19, 30..31] {
            let needed = planes_needed(n[2], 20.0, &cfg_grid, planes.clone(), 0.0);
            assert!(needed.len() < n[2] || planes.len() == 31, "{axis_order}: planes {planes:?} need {needed:?}");
            let part = spec.read_planes(Some(needed.clone())).unwrap();
            assert_eq!(part.values.len(), count / n[2] * needed.len(), "{axis_order}: planes {planes:?}");
            assert_eq!(part.held_z, needed);
            let sampled = model::sample_planes(&cfg, &dir, planes.clone()).unwrap().vp;
            let want = &whole[planes.start * plane..planes.end * plane];
            assert_eq!(sampled.len(), want.len());
            assert!(
                sampled.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{axis_order}: planes {planes:?}"
            );
        }
        // The z-samples a part holds are what it reads: asking it for planes beyond them is an error.
        let part = spec.read_planes(Some(0..2)).unwrap();
        let err = part.resample(&cfg_grid, 20..31, [0.0; 3], "test", &mut Vec::new()).unwrap_err();
        assert!(format!("{err}").contains("were read"), "{err}");
    }
}

/// A run's missing data set is downloaded into the fetch directory when that directory is searched
/// (a notice says so), and only then; offline, the error still lists every path tried and says how
/// to get the file, then why the download failed.
#[test]
fn a_missing_data_set_is_fetched_on_first_use_into_the_searched_fetch_directory() {
    let dir = scratch("first-use");
    let (elsewhere, into) = (dir.join("elsewhere"), dir.join("data"));
    let mut d = model::descriptor("marmousi").unwrap();
    d.url = format!("file://{}", std::fs::canonicalize(marmousi_file()).unwrap().display());
    let e = d.locate_or_fetch_into(std::slice::from_ref(&elsewhere), &into).unwrap_err().to_string();
    assert!(e.contains("not found") && !into.exists(), "not searched, so not fetched: {e}");
    let dirs = [elsewhere.clone(), into.clone()];
    let path = d.locate_or_fetch_into(&dirs, &into).unwrap();
    assert_eq!(path, into.join("marmousi/vp_marmousi_bi"));
    d.check_file(&path).unwrap();
    d.url = "file:///nonexistent/vp_marmousi_bi".into();
    let offline = dir.join("offline");
    let e = format!("{:#}", d.locate_or_fetch_into(std::slice::from_ref(&offline), &offline).unwrap_err());
    for part in ["looked at", "seismic-run fetch-model marmousi", "Downloading it failed", "No network here?"] {
        assert!(e.contains(part), "{part:?} missing from: {e}");
    }
}
