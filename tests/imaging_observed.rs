//! `[imaging] observed`: migration of data read from SEG-Y shot gathers. A two-shot survey
//! modelled by this program over a flat reflector, written as SEG-Y (4-byte IEEE floats, dt a
//! whole number of microseconds: the computed samples as they are), migrated from those files,
//! gives the image of the `true_model` path that models the same data in memory, bit for bit; gathers with
//! a bad header, a short record, a wrong trace count or both data sources are refused by name.

mod process;

use seismic_run::config::{Config, ShotNumber};
use seismic_run::imaging::observed::read_gather;
use seismic_run::output::segy::{Gather, encode};
use std::path::{Path, PathBuf};

/// A line over a flat reflector at 305 m (below 2600 m/s, above 2000 m/s), two shots, 33
/// receivers at 20 m depth, a sponge; dt = 1500 us.
const LINE: &str = "[grid]\nshape = [81, 21, 56]\nspacing = [10.0, 10.0, 10.0]\n\n\
     [stencil]\nradius = 4\n\n[time]\nduration = 0.6\ndt = 1.5e-3\n\n\
     [source]\nposition = [300.0, 100.0, 20.0]\nfrequency = 15.0\ndelay = 0.08\n\n\
     [[receivers]]\nline = { start = [80.0, 100.0, 20.0], end = [720.0, 100.0, 20.0], count = 33 }\n\n\
     [boundary]\nkind = \"sponge\"\nwidth = 8\n\n\
     [survey]\nshots = [[300.0, 100.0, 20.0], [500.0, 100.0, 20.0]]\n";

const BACKGROUND: &str = "[model]\nkind = \"constant\"\nvp = 2000.0\n";
const TRUE_MODEL: &str = "{ kind = \"layered\", depths = [305.0], velocities = [2000.0, 2600.0] }";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seismic-run-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn seismic_run(dir: &Path, args: &[&str]) -> std::process::Output {
    process::seismic_run().current_dir(dir).args(args).output().unwrap()
}

fn image(path: &Path) -> Vec<f32> {
    rust_hdf5::H5File::open(path).unwrap().dataset("image").unwrap().read_raw::<f32>().unwrap()
}

/// The survey modelled in the true model and written as SEG-Y, migrated from the files, against
/// the migration that models the same data in memory: the same image and misfit, bit for bit.
#[test]
fn migrating_a_surveys_segy_gathers_gives_the_true_model_image() {
    let dir = scratch("observed");
    let truth = format!(
        "{LINE}[model]\nkind = \"layered\"\ndepths = [305.0]\nvelocities = [2000.0, 2600.0]\n\n\
         [output]\npath = \"truth.h5\"\nsegy = true\nmodel = false\n"
    );
    std::fs::write(dir.join("truth.toml"), truth).unwrap();
    let out = seismic_run(&dir, &["truth.toml", "--backend", "cpu", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.join("truth_shot00001.sgy").exists(), "the survey writes one gather a shot");
    for (name, data) in
        [("modelled", format!("true_model = {TRUE_MODEL}")), ("read", "observed = \"truth_shot*.sgy\"".to_string())]
    {
        let input = format!(
            "{LINE}{BACKGROUND}\n[run]\nbackend = \"cpu\"\n\n[imaging]\n{data}\ndata_derivative = -0.5\ngradient = true\n\
             output = \"{name}.h5\"\n"
        );
        std::fs::write(dir.join(format!("{name}.toml")), input).unwrap();
        let out = seismic_run(&dir, &["migrate", &format!("{name}.toml")]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("2 shot(s)"), "{stdout}");
    }
    let (modelled, read) = (image(&dir.join("modelled.h5")), image(&dir.join("read.h5")));
    let peak = modelled.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let worst = modelled.iter().zip(&read).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    eprintln!("image from the SEG-Y gathers against the modelled data's: {:.3e} of its peak", worst / peak);
    // The same f32 samples either way (the SEG-Y's IEEE floats at dt itself, both modelled on the
    // CPU), the same sums.
    assert!(peak > 0.0);
    assert_eq!(worst, 0.0, "images differ by {:e} of the peak", worst / peak);
    let misfit = |name: &str| -> f64 {
        let f = rust_hdf5::H5File::open(dir.join(name)).unwrap();
        f.dataset("gradient").unwrap().attr("misfit").unwrap().read_numeric::<f64>().unwrap()
    };
    let (a, b) = (misfit("modelled.h5"), misfit("read.h5"));
    assert_eq!(a, b, "misfits");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A gather of `receivers` traces of `samples` samples at `interval_us`, the receivers along x at
/// 20 m depth, the source at (300, 100, 20) m, written to `path`.
fn write_gather(path: &Path, receivers: usize, samples: usize, interval_us: u32) {
    let positions: Vec<[f64; 3]> = (0..receivers).map(|i| [80.0 + 20.0 * i as f64, 100.0, 20.0]).collect();
    let lines: Vec<(i32, i32)> = (0..receivers).map(|i| (1, i as i32 + 1)).collect();
    let traces: Vec<f32> = (0..receivers * samples).map(|i| (i as f32 * 0.01).sin()).collect();
    let g = Gather {
        traces: &traces,
        samples,
        interval_us,
        source: [300.0, 100.0, 20.0],
        receivers: &positions,
        lines: &lines,
        numbering: ShotNumber::default(),
        text: vec!["test gather".into()],
        two_d: false,
    };
    let mut bytes = Vec::new();
    encode(&g, &mut bytes).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Sets the big-endian 16-bit field at byte `pos` (1-based, of the file) to `v`.
fn patch_u16(path: &Path, pos: usize, v: u16) {
    let mut b = std::fs::read(path).unwrap();
    b[pos - 1..pos + 1].copy_from_slice(&v.to_be_bytes());
    std::fs::write(path, b).unwrap();
}

#[test]
fn bad_gathers_are_refused_naming_the_file_and_the_field() {
    let dir = scratch("observed-bad");
    let (dt, steps) = (1.5e-3, 400);
    let good = dir.join("good.sgy");
    write_gather(&good, 33, steps + 1, 1500);
    let g = read_gather(&good, dt, steps).unwrap();
    assert!(!g.resampled, "dt = the file's interval: the samples as they are");
    assert_eq!((g.traces.len(), g.traces[0].len()), (33, steps));
    let geometry = g.geometry.unwrap();
    assert_eq!(geometry.source, [300.0, 100.0, 20.0]);
    assert_eq!(geometry.receivers[2], [120.0, 100.0, 20.0]);
    // Sample n of the run is the file's n + 1 (its first sample is t = 0).
    assert_eq!(g.traces[1][0], ((steps + 1 + 1) as f32 * 0.01).sin() as f64);

    let check = |path: &Path, field: &str| {
        let e = format!("{:#}", read_gather(path, dt, steps).unwrap_err());
        assert!(e.contains(&path.display().to_string()) && e.contains(field), "{field}: {e}");
    };
    let no_interval = dir.join("no-interval.sgy");
    write_gather(&no_interval, 33, steps + 1, 1500);
    patch_u16(&no_interval, 3217, 0);
    check(&no_interval, "bytes 3217-3218");
    let short = dir.join("short.sgy");
    write_gather(&short, 33, steps / 2, 1500);
    check(&short, "bytes 3221-3222");
    let moved = dir.join("moved-source.sgy");
    write_gather(&moved, 33, steps + 1, 1500);
    // Trace 2's source x (bytes 73-76 of its header) differs from trace 1's.
    let at = 3600 + (240 + 4 * (steps + 1)) + 75;
    patch_u16(&moved, at, 999);
    check(&moved, "bytes 73-80");

    // The command: a gather of 32 traces for the input's 33 receivers (its headers without
    // positions: the input places it), and both data sources at once.
    let few = dir.join("few.sgy");
    write_gather(&few, 32, steps + 1, 1500);
    let mut b = std::fs::read(&few).unwrap();
    for t in 0..32 {
        let h = 3600 + t * (240 + 4 * (steps + 1));
        for field in [41, 45, 49, 73, 77, 81, 85] {
            b[h + field - 1..h + field + 3].fill(0);
        }
    }
    std::fs::write(&few, b).unwrap();
    let single = LINE.replace("[survey]\nshots = [[300.0, 100.0, 20.0], [500.0, 100.0, 20.0]]\n", "");
    for (name, imaging, expected) in [
        ("few", "observed = \"few.sgy\"".to_string(), vec!["few.sgy", "32 traces and 33 receivers"]),
        (
            "both",
            format!("observed = \"few.sgy\"\ntrue_model = {TRUE_MODEL}"),
            vec!["imaging.true_model and imaging.observed are exclusive"],
        ),
        ("none", "output = \"none.h5\"".to_string(), vec!["imaging.observed", "imaging.true_model"]),
        ("missing", "observed = \"absent_*.sgy\"".to_string(), vec!["absent_*.sgy", "no file matches"]),
    ] {
        let input = format!("{single}{BACKGROUND}\n[imaging]\n{imaging}\n");
        assert!(Config::from_toml(&input).is_ok(), "{name}: the input parses");
        std::fs::write(dir.join(format!("{name}.toml")), input).unwrap();
        let out = seismic_run(&dir, &["migrate", &format!("{name}.toml"), "--quiet"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: refused");
        for e in expected {
            assert!(stderr.contains(e), "{name}: {e:?} not in {stderr}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
