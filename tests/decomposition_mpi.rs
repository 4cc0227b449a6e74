//! The decomposed run under mpirun (feature `mpi`): 2 and 3 ranks (26 + 25 and 17 + 17 + 17
//! planes of the run grid: 47 planes of model and a 4-point layer below them), each sampling only
//! its planes of a layered model, write a result file whose traces, snapshots and model (cut to
//! the model's planes) equal the single-rank run's bit for bit; y-z blocks over 2 and 4 ranks.

#![cfg(feature = "mpi")]

mod process;

use process::{scratch, seismic_run};
use rust_hdf5::H5File;
use std::path::Path;
use std::process::Command;

const INPUT: &str = r#"
[grid]
shape = [12, 12, 47]
spacing = [10.0, 10.0, 10.0]
[model]
kind = "layered"
depths = [95.0, 205.0, 333.0]
velocities = [1500.0, 1800.0, 2100.0, 2500.0]
[stencil]
radius = 4
[time]
duration = 0.05
[source]
position = [55.0, 62.0, 235.0]
frequency = 30.0
delay = 0.02
injection = "sinc"
[boundary]
kind = "cpml"
width = 4
free_surface = true
[[receivers]]
line = { start = [43.0, 57.0, 15.0], end = [43.0, 57.0, 455.0], count = 23 }
interpolation = "sinc"
[output]
snapshot_every = 9
[[output.snapshot]]
kind = "volume"
[[output.snapshot]]
kind = "xz"
at = 40.0
[[output.snapshot]]
kind = "xy"
at = 160.0
[run]
backend = "cpu"
"#;

/// The traces, snapshots and model of a result file, as bits, those it has of each kind.
fn datasets(path: &Path) -> Vec<(String, Vec<u32>)> {
    let f = H5File::open(path).unwrap();
    let names = ["receivers/pressure", "snapshots/pressure", "snapshots/pressure_xz", "snapshots/pressure_xy"];
    names
        .iter()
        .chain(&["snapshots/pressure_yz", "model/vp"])
        .filter_map(|name| {
            let v: Vec<f32> = f.dataset(name).ok()?.read_raw().unwrap();
            Some((name.to_string(), v.iter().map(|x| x.to_bits()).collect()))
        })
        .collect()
}

/// The single-rank run of `input` against the same under mpirun with each of `ranks`; `files`
/// (name, bytes) are written beside the input first; rank 0's banner names `exchange`.
fn compare(name: &str, input: &str, ranks: &[usize], files: &[(&str, Vec<u8>)], exchange: &str) {
    let runs: Vec<(usize, &str)> = ranks.iter().map(|&r| (r, exchange)).collect();
    compare_runs(name, input, "z", &runs, files);
}

/// [`compare`] with `[run] decomposition = "<decomposition>"`, each run's banner naming its phrase.
fn compare_runs(name: &str, input: &str, decomposition: &str, runs: &[(usize, &str)], files: &[(&str, Vec<u8>)]) {
    let dir = scratch("decomposition_mpi", name);
    for (file, bytes) in files {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
    std::fs::write(dir.join("single.toml"), input).unwrap();
    let split = input.replace("[run]\n", &format!("[run]\ndecomposition = \"{decomposition}\"\n"));
    std::fs::write(dir.join("split.toml"), split).unwrap();
    let single = dir.join("single.h5");
    let out = seismic_run().arg(dir.join("single.toml")).arg("-q").arg("-o").arg(&single).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want = datasets(&single);
    assert!(want[0].1.iter().any(|&b| b != 0), "the traces recorded the wave");
    for &(ranks, phrase) in runs {
        let h5 = dir.join(format!("split{ranks}.h5"));
        let bin = seismic_run().get_program().to_owned();
        let out = Command::new("mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "-np", &ranks.to_string()])
            .arg(bin)
            .arg(dir.join("split.toml"))
            .arg("-o")
            .arg(&h5)
            .output()
            .expect("mpirun (openmpi-bin) runs");
        assert!(out.status.success(), "{ranks} ranks: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(phrase), "{ranks} ranks: the banner names \"{phrase}\": {stdout}");
        let f = H5File::open(&h5).unwrap();
        let exchange: Vec<f64> = f.dataset("stats/exchange_seconds").unwrap().read_raw().unwrap();
        let seconds: Vec<f64> = f.dataset("stats/seconds").unwrap().read_raw().unwrap();
        assert_eq!(exchange.len(), seconds.len(), "{ranks} ranks: a step's exchange seconds each");
        // The exchange is timed by device events, the step by the host clock, so one step's
        // exchange may come out longer than its step (an exchange waiting on a later peer); over
        // the run it is a part of the step.
        assert!(exchange.iter().all(|x| x.is_finite() && *x > 0.0), "{ranks} ranks: exchange seconds {exchange:?}");
        let median = |v: &[f64]| {
            let mut v = v[1..].to_vec();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        assert!(
            median(&exchange) <= median(&seconds),
            "{ranks} ranks: median exchange {} s of a median {} s step",
            median(&exchange),
            median(&seconds)
        );
        let got = datasets(&h5);
        let names = |d: &[(String, Vec<u32>)]| d.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&want), names(&got), "{ranks} ranks: datasets");
        for ((name, a), (_, b)) in want.iter().zip(got) {
            assert_eq!(a.len(), b.len(), "{ranks} ranks: {name} length");
            let first = (0..a.len()).find(|&i| a[i] != b[i]);
            assert!(first.is_none(), "{ranks} ranks: {name} differs first at value {first:?}");
        }
    }
}

/// Every radius 1..=8, 2 and 3 uneven ranks, the exchange overlapping the step.
#[test]
fn two_and_three_mpi_ranks_write_the_single_rank_result_bit_for_bit() {
    for radius in 1..=8 {
        let input = INPUT.replace("radius = 4", &format!("radius = {radius}"));
        let exchange = "halo exchange through host memory (MPI), overlapping the step";
        compare(&format!("cpu-r{radius}"), &input, &[2, 3], &[], exchange);
    }
}

/// A density varying with the layers (each rank samples its planes of it, and the R planes beyond
/// them its operator reads): 2 and 3 z-slab ranks, and 4 y-z blocks of [`YZ_INPUT`], write the
/// single-rank result bit for bit.
#[test]
fn a_variable_density_over_mpi_ranks_writes_the_single_rank_result_bit_for_bit() {
    let input = with_density(INPUT);
    let exchange = "halo exchange through host memory (MPI), overlapping the step";
    compare("cpu-density", &input, &[2, 3], &[], exchange);
    compare_runs("cpu-density-yz", &with_density(YZ_INPUT), "yz", &[(4, "4 y-z blocks")], &[]);
}

/// `input` with a density per layer of its model (1000..2500 kg/m^3).
fn with_density(input: &str) -> String {
    input.replace(
        "velocities = [1500.0, 1800.0, 2100.0, 2500.0]",
        "velocities = [1500.0, 1800.0, 2100.0, 2500.0]\ndensity = [1000.0, 2200.0, 1700.0, 2500.0]",
    )
}

/// y-z blocks (`decomposition = "yz"`) on a 12 x 40 x 24 grid (its layers inside it, so that the
/// cuts fall where the positions are): 2 ranks split it along y alone
/// (2 row blocks), 4 into 2 x 2 blocks (the splits that move the fewest halo points); the source
/// and snapshot planes on the cuts, receivers along y and z across them.
#[test]
fn y_z_blocks_over_two_and_four_mpi_ranks_write_the_single_rank_result_bit_for_bit() {
    y_z_blocks_compare(
        "cpu",
        &[(2, "2 y-z blocks: 1 z-slabs of [24] planes x 2 row blocks"), (4, "4 y-z blocks: 2 z-slabs")],
    );
}

/// The y-z blocks input on `backend`, the single-rank run against each (ranks, banner phrase).
fn y_z_blocks_compare(backend: &str, runs: &[(usize, &str)]) {
    let input = YZ_INPUT.replace("backend = \"cpu\"", &format!("backend = \"{backend}\""));
    compare_runs(&format!("yz-{backend}"), &input, "yz", runs, &[]);
}

/// A 12 x 40 x 24 grid for y-z blocks: the source on the y cut of 2 row blocks, receivers along y
/// and z across the cuts, every snapshot kind.
const YZ_INPUT: &str = r#"
[grid]
shape = [12, 40, 24]
spacing = [10.0, 10.0, 10.0]
[model]
kind = "layered"
depths = [55.0, 125.0, 175.0]
velocities = [1500.0, 1800.0, 2100.0, 2500.0]
[stencil]
radius = 4
[time]
duration = 0.05
[source]
position = [55.0, 195.0, 115.0]
frequency = 30.0
delay = 0.02
injection = "sinc"
[boundary]
kind = "cpml"
width = 4
free_surface = true
placement = "inside"
[[receivers]]
line = { start = [43.0, 15.0, 57.0], end = [43.0, 385.0, 57.0], count = 23 }
interpolation = "sinc"
[[receivers]]
line = { start = [71.0, 203.0, 5.0], end = [71.0, 203.0, 225.0], count = 12 }
interpolation = "trilinear"
[output]
snapshot_every = 9
[[output.snapshot]]
kind = "volume"
[[output.snapshot]]
kind = "xz"
at = 200.0
[[output.snapshot]]
kind = "xy"
at = 120.0
[[output.snapshot]]
kind = "yz"
at = 40.0
[run]
backend = "cpu"
"#;

/// With `halo_overlap = false` the planes move after the step, on the main thread: the same bits.
#[test]
fn the_exchange_after_the_step_writes_the_same_result() {
    let input = INPUT.replace("[run]\n", "[run]\nhalo_overlap = false\n");
    compare("cpu-after", &input, &[2], &[], "halo exchange through host memory (MPI); not NCCL");
}

/// Each rank reads only the z-samples of a model file its planes need (the file stored with z
/// between x and y, at its own 40 m spacing): the result, `/model/vp` included, is the single
/// rank's bit for bit.
#[test]
fn two_mpi_ranks_reading_their_parts_of_a_model_file_write_the_single_rank_result() {
    let (nx, ny, nz) = (4, 4, 13);
    let mut bytes = Vec::new();
    for ix in 0..nx {
        for iz in 0..nz {
            for iy in 0..ny {
                let v =
                    1500.0 + 60.0 * iz as f32 + 25.0 * ix as f32 + 10.0 * iy as f32 + ((ix + 2 * iy + iz) % 3) as f32;
                bytes.extend(v.to_le_bytes());
            }
        }
    }
    let model = format!(
        "kind = \"file\"\npath = \"vp.bin\"\nshape = [{nx}, {nz}, {ny}]\nspacing = [40.0, 40.0, 40.0]\naxis_order = \"xzy\""
    );
    let start = INPUT.find("kind = \"layered\"").unwrap();
    let end = INPUT.find("[stencil]").unwrap();
    let input = format!("{}{model}\n{}", &INPUT[..start], &INPUT[end..]);
    compare("cpu-file", &input, &[2], &[("vp.bin", bytes)], "overlapping the step");
}

/// Two ranks sharing one GPU (host-staged halos) write the single-GPU result bit for bit: under
/// `halo_overlap = "auto"` after the step (ranks sharing a GPU), and with `true` moved while the
/// rest of the step runs.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a GPU"]
fn two_mpi_ranks_on_one_gpu_write_the_single_gpu_result_bit_for_bit() {
    let input = INPUT.replace("backend = \"cpu\"", "backend = \"cuda\"");
    compare("cuda", &input, &[2], &[], "halo exchange through host memory (MPI) after the step (ranks share a GPU)");
    let input = input.replace("[run]\n", "[run]\nhalo_overlap = true\n");
    compare("cuda-overlap", &input, &[2], &[], "halo exchange through host memory (MPI), overlapping the step");
}

/// The density's step over 2 ranks on one GPU (each its part of the buoyancy): the single-GPU
/// result bit for bit.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a GPU"]
fn a_variable_density_over_two_mpi_ranks_on_one_gpu_writes_the_single_gpu_result_bit_for_bit() {
    let input = with_density(INPUT).replace("backend = \"cpu\"", "backend = \"cuda\"");
    compare("cuda-density", &input, &[2], &[], "halo exchange through host memory (MPI) after the step");
}

/// y-z blocks over 4 ranks sharing one GPU (2 x 2, host path): the single-GPU result bit for bit.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a GPU"]
fn y_z_blocks_over_four_ranks_on_one_gpu_write_the_single_gpu_result_bit_for_bit() {
    y_z_blocks_compare("cuda", &[(4, "4 y-z blocks: 2 z-slabs")]);
}

/// CPML of 12 points (four times the 3 halo planes) under a free surface, R = 3, on a 40 x 36 x 64
/// model (64 x 60 x 76 points with the layers outside it) cut through the middle: 2 and 3 z-slab
/// ranks and 4 y-z blocks over the GPUs present (a GPU each on a host with as many; ranks share
/// them otherwise) write the single-GPU result bit for bit, each subdomain holding the layers of
/// the grid's faces it has.
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a GPU"]
fn cpml_wider_than_the_halo_over_gpu_ranks_writes_the_single_gpu_result_bit_for_bit() {
    let input = INPUT
        .replace("backend = \"cpu\"", "backend = \"cuda\"")
        .replace("shape = [12, 12, 47]", "shape = [40, 36, 64]")
        .replace("radius = 4", "radius = 3")
        .replace("width = 4", "width = 12");
    compare_runs("cuda-cpml12", &input, "z", &[(2, "halo exchange"), (3, "halo exchange")], &[]);
    compare_runs("cuda-cpml12-yz", &input, "yz", &[(4, "4 y-z blocks")], &[]);
}

/// Two ranks on one GPU: `halo_exchange = "auto"` takes the host path and says why in the banner;
/// `"nccl"` is an error naming the key and the shared GPU, and writes no file.
#[cfg(feature = "nccl")]
#[test]
#[ignore = "needs a GPU"]
fn nccl_with_two_ranks_on_one_gpu_falls_back_or_is_refused() {
    let dir = scratch("decomposition_mpi", "nccl_one_gpu");
    let input = INPUT.replace("backend = \"cpu\"", "backend = \"cuda\"\ndecomposition = \"z\"");
    let bin = seismic_run().get_program().to_owned();
    let run = |exchange: &str| {
        let toml = dir.join(format!("{exchange}.toml"));
        std::fs::write(&toml, input.replace("[run]\n", &format!("[run]\nhalo_exchange = \"{exchange}\"\n"))).unwrap();
        let h5 = dir.join(format!("{exchange}.h5"));
        let out = Command::new("mpirun")
            .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
            .arg(&bin)
            .arg(&toml)
            .arg("-o")
            .arg(&h5)
            .output()
            .expect("mpirun (openmpi-bin) runs");
        (out, h5)
    };
    let (out, h5) = run("auto");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("not NCCL: 2 ranks share 1 GPU(s)"), "{stdout}");
    assert!(h5.exists());
    let (out, h5) = run("nccl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("run.halo_exchange = \"nccl\": 2 ranks share 1 GPU(s)"), "{stderr}");
    assert!(!h5.exists(), "no file written");
}

/// SIGTERM to the ranks (a batch scheduler's time limit) stops every rank at the same step (they
/// vote every 16 steps), the job ends with 128 + SIGTERM, and no result file (nor a temporary
/// one) is left.
#[test]
fn sigterm_stops_every_rank_together_and_leaves_no_output() {
    let dir = scratch("decomposition_mpi", "sigterm");
    let long = INPUT.replace("duration = 0.05", "steps = 400000").replace("[run]\n", "[run]\ndecomposition = \"z\"\n");
    std::fs::write(dir.join("long.toml"), long).unwrap();
    let h5 = dir.join("long.h5");
    let child = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .arg(seismic_run().get_program())
        .arg(dir.join("long.toml"))
        .arg("-q")
        .arg("-o")
        .arg(&h5)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mpirun (openmpi-bin) runs");
    // Into the time loop: the result's temporary file exists once the ranks have set up (a loaded
    // machine may take seconds).
    let started = std::time::Instant::now();
    while std::fs::read_dir(&*dir).unwrap().count() < 2 && started.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    // The ranks (mpirun's children) get the signal, as a batch scheduler's time limit sends it to
    // every task; mpirun itself, signalled, kills its job.
    let ranks: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let after_name = stat.rsplit(')').next().unwrap_or("");
            after_name.split_whitespace().nth(1) == Some(&child.id().to_string())
        })
        .collect();
    assert_eq!(ranks.len(), 2, "mpirun's two ranks: {ranks:?}");
    for pid in ranks {
        // SAFETY: a signal to a process this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // mpirun ends the job when the first rank exits (143: 128 + SIGTERM), so the other's own
    // message may not come through.
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("interrupted after"), "the ranks stop by themselves: {stderr}");
    let left: Vec<_> = std::fs::read_dir(&*dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!h5.exists() && left.len() == 1, "only the input is left: {left:?}");
}
