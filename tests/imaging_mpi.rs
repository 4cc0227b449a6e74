//! `mpirun -np 2 seismic-run migrate` (the `mpi` feature, CPU backend): two ranks migrate a
//! four-shot survey's shots two each and rank 0 writes the sum of their stacks, equal to one
//! process's image and gradient within rounding of the f64 sums' order; a rank whose gather is
//! bad stops both ranks within seconds, each saying why.

#![cfg(feature = "mpi")]

mod process;

use process::{scratch, seismic_run};
use seismic_run::config::ShotNumber;
use seismic_run::output::segy::{Gather, encode};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// Four shots along a line over a flat reflector at 205 m, 25 receivers at 20 m depth, a
/// sponge; dt = 1500 us, 260 steps.
const LINE: &str = "[grid]\nshape = [61, 11, 41]\nspacing = [10.0, 10.0, 10.0]\n\n\
     [model]\nkind = \"constant\"\nvp = 2000.0\n\n\
     [stencil]\nradius = 4\n\n[time]\nsteps = 260\ndt = 1.5e-3\n\n\
     [source]\nposition = [150.0, 50.0, 20.0]\nfrequency = 15.0\ndelay = 0.08\n\n\
     [[receivers]]\nline = { start = [60.0, 50.0, 20.0], end = [540.0, 50.0, 20.0], count = 25 }\n\n\
     [boundary]\nkind = \"sponge\"\nwidth = 8\n\n\
     [survey]\nshots = [[150.0, 50.0, 20.0], [250.0, 50.0, 20.0], [350.0, 50.0, 20.0], [450.0, 50.0, 20.0]]\n";

fn mpirun(dir: &Path, ranks: usize, args: &[&str]) -> Output {
    let bin = seismic_run().get_program().to_owned();
    let mut c = std::process::Command::new("mpirun");
    c.current_dir(dir).args(["--allow-run-as-root", "--oversubscribe", "-np", &ranks.to_string()]);
    c.arg(bin).args(args).env("OMP_NUM_THREADS", "1").env("RAYON_NUM_THREADS", "1");
    c.output().expect("mpirun (Debian: openmpi-bin)")
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn read(path: &Path, name: &str) -> Vec<f32> {
    rust_hdf5::H5File::open(path).unwrap().dataset(name).unwrap().read_raw::<f32>().unwrap()
}

/// The largest difference of `a` and `b` over the largest |a|.
fn relative(a: &[f32], b: &[f32]) -> f32 {
    let peak = a.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(peak > 0.0);
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max) / peak
}

#[test]
fn two_ranks_stack_the_image_of_one_process() {
    let dir = scratch("imaging-mpi", "stack");
    let input = format!(
        "{LINE}\n[imaging]\ntrue_model = {{ kind = \"layered\", depths = [205.0], velocities = [2000.0, 2600.0] }}\n\
         data_derivative = -0.5\nlaplacian = true\ngradient = true\n"
    );
    std::fs::write(dir.join("m.toml"), input).unwrap();
    let one = ok(&seismic_run().current_dir(&*dir).args(["migrate", "m.toml", "-o", "one.h5"]).output().unwrap());
    let two = ok(&mpirun(&dir, 2, &["migrate", "m.toml", "-o", "two.h5"]));
    assert!(one.contains("4 shot(s)"), "{one}");
    assert!(two.contains("2 MPI ranks") && two.contains("rank 0") && two.contains("rank 1"), "{two}");
    assert_eq!(two.matches("wrote ").count(), 2, "rank 0 alone writes the image and its picture: {two}");
    let (image, gradient) = (relative(&read(&dir.join("one.h5"), "image"), &read(&dir.join("two.h5"), "image")), {
        relative(&read(&dir.join("one.h5"), "gradient"), &read(&dir.join("two.h5"), "gradient"))
    });
    eprintln!("2 ranks against 1 process: image {image:.2e}, gradient {gradient:.2e} of their peaks");
    // f64 sums in another order, then rounded to f32: at most an f32 rounding apart (measured:
    // identical).
    assert!(image <= 2.5e-7 && gradient <= 2.5e-7, "image {image:e}, gradient {gradient:e}");
    let misfit = |name: &str| -> f64 {
        let f = rust_hdf5::H5File::open(dir.join(name)).unwrap();
        f.dataset("gradient").unwrap().attr("misfit").unwrap().read_numeric::<f64>().unwrap()
    };
    let (a, b) = (misfit("one.h5"), misfit("two.h5"));
    eprintln!("misfit: 1 process {a:e}, 2 ranks {b:e}: {:.2e} apart", (a - b).abs() / a);
    assert!((a - b).abs() <= 1e-14 * a, "misfits {a} and {b}");
}

/// A gather of shot `shot` of [`LINE`] with `samples` samples of 1500 us (a smooth made-up
/// signal: the run only needs data to migrate), its geometry in the headers.
fn write_gather(path: &Path, shot: usize, samples: usize) {
    let source = [150.0 + 100.0 * shot as f64, 50.0, 20.0];
    let receivers: Vec<[f64; 3]> = (0..25).map(|i| [60.0 + 20.0 * i as f64, 50.0, 20.0]).collect();
    let lines: Vec<(i32, i32)> = (0..25).map(|i| (1, i + 1)).collect();
    let traces: Vec<f32> = (0..25 * samples).map(|i| (i as f32 * 0.05).sin()).collect();
    let g = Gather {
        traces: &traces,
        samples,
        interval_us: 1500,
        source,
        receivers: &receivers,
        lines: &lines,
        numbering: ShotNumber { shot: shot as u64 + 1, first_trace: 1 + 25 * shot as u64 },
        text: vec!["made-up gather".into()],
        two_d: false,
    };
    let mut bytes = Vec::new();
    encode(&g, &mut bytes).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Shot 2 (rank 1's first) has a record too short for the run: rank 1 fails naming the file,
/// rank 0 stops (between steps, between shots or at the wait before the sum), and the job ends
/// within seconds with no image written.
#[test]
fn a_bad_gather_on_one_rank_stops_both() {
    let dir = scratch("imaging-mpi", "fault");
    for shot in 0..4 {
        write_gather(&dir.join(format!("g{shot}.sgy")), shot, if shot == 1 { 100 } else { 261 });
    }
    let input = format!("{LINE}\n[imaging]\nobserved = \"g*.sgy\"\noutput = \"f.h5\"\n");
    std::fs::write(dir.join("f.toml"), input).unwrap();
    let started = Instant::now();
    let out = mpirun(&dir, 2, &["migrate", "f.toml"]);
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{took:?}, stderr:\n{err}");
    assert!(!out.status.success(), "{err}");
    assert!(took < Duration::from_secs(30), "took {took:?}: {err}");
    assert!(err.contains("rank 1 of 2") && err.contains("g1.sgy") && err.contains("bytes 3221-3222"), "{err}");
    assert!(err.contains("rank 0 of 2"), "rank 0 says why it stopped: {err}");
    assert!(!dir.join("f.h5").exists(), "no image");
}
