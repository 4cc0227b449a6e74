//! Throughput of the CPU reference (GPts/s = interior points updated per second / 1e9) for a few
//! grid sizes, stencil radii and boundaries. A benchmark, not a test:
//! `cargo run --release --example cpu_bench [-- sizes...]`, e.g. `-- 128 256`.

use seismic_run::backend::cpu::{CpuSolver, Real};
use seismic_run::config::Config;
use seismic_run::problem::Problem;
use std::time::Instant;

fn problem(n: usize, radius: usize, boundary: &str) -> Problem {
    let h = 10.0;
    let mid = n as f64 * h / 2.0;
    let text = format!(
        "[grid]\nshape = [{n}, {n}, {n}]\nspacing = [{h}, {h}, {h}]\n\
         [model]\nkind = \"constant\"\nvp = 2000.0\n\
         [stencil]\nradius = {radius}\n\
         [time]\nsteps = 100000\n\
         [source]\nposition = [{mid}, {mid}, {mid}]\nfrequency = 8.0\n\
         [[receivers]]\nposition = [{mid}, {mid}, 20.0]\n\
         [boundary]\nkind = \"{boundary}\"\nwidth = 20\n"
    );
    let cfg = Config::from_toml(&text).expect("benchmark configuration");
    Problem::build(&cfg, vec![2000.0; n * n * n]).expect("benchmark problem")
}

/// Median seconds per step over `steps` steps, after a warm-up.
fn seconds_per_step<T: Real>(p: &Problem, steps: usize) -> f64 {
    let mut solver = CpuSolver::<T>::new(p).expect("solver");
    for n in 0..3 {
        solver.advance(n);
    }
    let mut times: Vec<f64> = (3..3 + steps)
        .map(|n| {
            let t = Instant::now();
            solver.advance(n);
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if args.is_empty() { vec![128, 256] } else { args };
    println!("CPU reference, {} rayon threads", rayon::current_num_threads());
    println!("{:>5} {:>2} {:>6} {:>4} {:>10} {:>8} {:>8}", "n", "R", "bound", "prec", "ms/step", "GPts/s", "GB/s*");
    for &n in &sizes {
        for (radius, boundary) in [(4, "none"), (4, "cpml"), (4, "sponge"), (8, "none")] {
            let p = problem(n, radius, boundary);
            let steps = if n <= 128 { 20 } else { 6 };
            for prec in ["f32", "f64"] {
                if prec == "f64" && (radius != 4 || boundary != "none") {
                    continue;
                }
                let s =
                    if prec == "f32" { seconds_per_step::<f32>(&p, steps) } else { seconds_per_step::<f64>(&p, steps) };
                let pts = (n * n * n) as f64;
                // GB/s* is the f32 effective bandwidth (problem::step_bytes), a lower bound.
                let gbs = p.step_bytes() as f64 / s / 1e9;
                println!(
                    "{n:>5} {radius:>2} {boundary:>6} {prec:>4} {:>10.2} {:>8.3} {:>8.1}",
                    s * 1e3,
                    pts / s / 1e9,
                    if prec == "f32" { gbs } else { f64::NAN }
                );
            }
        }
    }
}
