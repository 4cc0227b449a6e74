//! Throughput of the CPU backend against the memory bandwidth of the same cores, measured in the
//! same run: STREAM-like copy and 3-read-1-write ceilings (rayon, the threads the solver uses,
//! arrays of 128 MiB, and the 3-read-1-write again on arrays of one field's size), then the step's
//! interior alone (no boundary), with a sponge and with CPML, as GPts/s (interior points updated
//! per second / 1e9) and as effective GB/s (the bytes a step must move at least: p^n, p^{n-1},
//! c^2 dt^2 read, p^{n+1} written, plus the halos) over both 3-read-1-write ceilings (the 128 MiB
//! one measured again after each case, the case set against the two around it). A benchmark,
//! not a test:
//!
//!     cargo run --release --example cpu_bench [-- [--isa avx512|avx2|portable] [--steps N] [--only none|sponge|cpml|r8|f64] sizes...]
//!
//! Default: 200^3, R = 4, a 20-point layer, f32, 30 timed steps (median) after 3 untimed.

use rayon::prelude::*;
use seismic_run::backend::cpu::{CpuSolver, Isa, Real};
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
         [time]\nsteps = 100000\ndt = 0.0005\n\
         [source]\nposition = [{mid}, {mid}, {mid}]\nfrequency = 10.0\n\
         [[receivers]]\nline = {{ start = [100.0, {mid}, 500.0], end = [{}, {mid}, 500.0], count = 100 }}\n\
         [boundary]\nkind = \"{boundary}\"\nwidth = 20\nplacement = \"inside\"\n",
        n as f64 * h - 100.0
    );
    let cfg = Config::from_toml(&text).expect("benchmark configuration");
    Problem::build(&cfg, vec![2000.0; n * n * n]).expect("benchmark problem")
}

fn median(t: &mut [f64]) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Median seconds per step over `steps` steps, after a warm-up.
fn seconds_per_step<T: Real>(p: &Problem, isa: Isa, steps: usize) -> f64 {
    // As seismic-run runs it: subnormals flushed (a run from rest sees few in these steps).
    let mut solver = CpuSolver::<T>::with_isa(p, isa).expect("solver").flushing_subnormals(true);
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
    median(&mut times)
}

/// STREAM-like copy and 3-read-1-write bandwidths (GB/s, reads plus writes) of the rayon pool on
/// f32 arrays of `len` elements: median of `reps` runs after one untimed.
fn ceilings(len: usize, reps: usize) -> (f64, f64) {
    let threads = rayon::current_num_threads();
    let piece = len.div_ceil(threads * 16).max(1 << 14);
    // First written in parallel, in the pieces the kernels use, so each thread's pages are its
    // own; on a page, as the solver's fields are (a Vec would start 16 bytes into a cache line).
    let fill = |v: f32| {
        let mut a = aligned_vec::AVec::<f32, aligned_vec::ConstAlign<4096>>::with_capacity(4096, len);
        // SAFETY: the capacity holds len elements; MaybeUninit needs no initialisation.
        let spare = unsafe { std::slice::from_raw_parts_mut(a.as_mut_ptr().cast::<std::mem::MaybeUninit<f32>>(), len) };
        spare.par_chunks_mut(piece).for_each(|c| c.iter_mut().for_each(|x| _ = x.write(v)));
        // SAFETY: every element written above.
        unsafe { a.set_len(len) };
        a
    };
    let (a, b, c, mut d) = (fill(1.0), fill(2.0), fill(3.0), fill(0.0));
    let time = |f: &mut dyn FnMut()| -> f64 {
        f();
        let mut t: Vec<f64> = (0..reps)
            .map(|_| {
                let s = Instant::now();
                f();
                s.elapsed().as_secs_f64()
            })
            .collect();
        median(&mut t)
    };
    let bytes = (len * 4) as f64;
    let copy = time(&mut || {
        d.par_chunks_mut(piece).zip(a.par_chunks(piece)).for_each(|(d, a)| d.copy_from_slice(a));
    });
    let three = time(&mut || {
        d.par_chunks_mut(piece).zip(a.par_chunks(piece)).zip(b.par_chunks(piece).zip(c.par_chunks(piece))).for_each(
            |((d, a), (b, c))| {
                for i in 0..d.len() {
                    d[i] = a[i] + b[i] * c[i];
                }
            },
        );
    });
    std::hint::black_box(&d);
    (2.0 * bytes / copy / 1e9, 4.0 * bytes / three / 1e9)
}

fn main() {
    let mut isa = Isa::detect();
    let mut steps = 30;
    let mut sizes = Vec::new();
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--isa" => {
                isa = match args.next().as_deref() {
                    Some("avx512") => Isa::Avx512,
                    Some("avx2") => Isa::Avx2Fma,
                    Some("portable") => Isa::Portable,
                    other => panic!("--isa takes avx512, avx2 or portable, not {other:?}"),
                }
            }
            "--only" => only = args.next(),
            "--steps" => steps = args.next().and_then(|s| s.parse().ok()).expect("--steps takes a count"),
            s => sizes.push(s.parse::<usize>().unwrap_or_else(|_| panic!("not a grid size: {s}"))),
        }
    }
    if sizes.is_empty() {
        sizes.push(200);
    }
    assert!(isa.available(), "this CPU cannot run the {} build", isa.name());
    let threads = rayon::current_num_threads();
    let (copy, three) = ceilings(1 << 25, 10);
    println!("CPU backend, {threads} rayon threads, {} build", isa.name());
    println!("ceilings (4 arrays of 128 MiB): copy {copy:.1} GB/s, 3-read-1-write {three:.1} GB/s");
    for &n in &sizes {
        // The same kernel on arrays of one field's size: fields that fit the last-level cache (a
        // Xeon's 480 MiB L3 held 200^3's) stream faster than 128 MiB arrays do.
        let (_, three_here) = ceilings(n * n * n, 10);
        println!("{n}^3: 3-read-1-write on four arrays of its field's size {three_here:.1} GB/s");
        println!(
            "{:>5} {:>2} {:>8} {:>4} {:>9} {:>7} {:>7} {:>9} {:>9} {:>13}",
            "n", "R", "boundary", "prec", "ms/step", "GPts/s", "GB/s", "of 3r1w", "of n^3's", "3r1w around"
        );
        // The 128 MiB ceiling again after each case: on a shared machine it moves between
        // minutes (43 to 79 GB/s on one EPYC), so each case is set against the mean of the two
        // measured around it, and both are printed.
        let mut before = three;
        for (radius, boundary, prec) in
            [(4, "none", "f32"), (4, "sponge", "f32"), (4, "cpml", "f32"), (8, "none", "f32"), (4, "none", "f64")]
        {
            let case = if radius == 8 {
                "r8"
            } else if prec == "f64" {
                "f64"
            } else {
                boundary
            };
            if only.as_deref().is_some_and(|o| o != case) {
                continue;
            }
            let p = problem(n, radius, boundary);
            let s = if prec == "f32" {
                seconds_per_step::<f32>(&p, isa, steps)
            } else {
                seconds_per_step::<f64>(&p, isa, steps)
            };
            let width = if prec == "f32" { 1.0 } else { 2.0 };
            let gbs = width * p.step_bytes() as f64 / s / 1e9;
            let (_, after) = ceilings(1 << 25, 5);
            println!(
                "{n:>5} {radius:>2} {boundary:>8} {prec:>4} {:>9.2} {:>7.3} {:>7.1} {:>8.0}% {:>8.0}% {:>13}",
                s * 1e3,
                (n * n * n) as f64 / s / 1e9,
                gbs,
                200.0 * gbs / (before + after),
                100.0 * gbs / three_here,
                format!("{before:.1} / {after:.1}")
            );
            before = after;
        }
    }
}
