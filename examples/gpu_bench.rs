//! Interior-kernel benchmark of the CUDA backend: the same-run STREAM-like ceilings, then the fused
//! step, the three-pass step and the Laplacian-only operator on cubes, with their effective
//! bandwidth (`problem::step_bytes` over the median kernel time) as a share of the ceilings.
//!
//! Usage: gpu_bench [N ...] [--radius R ...] [--reps K] [--sweep] [--ops fused,three-pass,laplacian]
//! `--sweep` also tries fused block shapes and z-windows. Needs an NVIDIA GPU.

use anyhow::Result;
use seismic_run::backend::gpu::{self, Operator, Tuning, cuda::CudaRuntime};

fn main() -> Result<()> {
    let mut sizes = Vec::new();
    let mut radii = Vec::new();
    let mut reps = 20;
    let mut sweep = false;
    let mut ops = vec![Operator::Fused, Operator::ThreePass, Operator::Laplacian];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--radius" => radii.push(args.next().expect("--radius R").parse()?),
            "--reps" => reps = args.next().expect("--reps K").parse()?,
            "--sweep" => sweep = true,
            "--ops" => {
                ops = args
                    .next()
                    .expect("--ops list")
                    .split(',')
                    .map(|o| match o {
                        "fused" => Operator::Fused,
                        "three-pass" => Operator::ThreePass,
                        "laplacian" => Operator::Laplacian,
                        _ => panic!("unknown operator {o}"),
                    })
                    .collect()
            }
            n => sizes.push(n.parse::<usize>()?),
        }
    }
    if sizes.is_empty() {
        sizes.push(512);
    }
    if radii.is_empty() {
        radii.push(4);
    }
    let defs = std::env::var("SEISMIC_KERNEL_DEFS").unwrap_or_default();
    let fmad = std::env::var("SEISMIC_FMAD").unwrap_or_default();
    println!("variant: SEISMIC_KERNEL_DEFS='{defs}' SEISMIC_FMAD='{fmad}'");
    let rt = CudaRuntime::new(0)?;
    let c = gpu::measure_ceiling(&rt, 1 << 30, 20)?;
    println!(
        "device {}: copy {:.0} GB/s, 3R1W {:.0} GB/s (1 GiB arrays, float4, median of 20)",
        c.device, c.copy_gbs, c.three_read_one_write_gbs
    );
    drop(rt);
    let mut rows = Vec::new();
    for &n in &sizes {
        for &r in &radii {
            let mut variants: Vec<(Operator, Tuning)> = ops.iter().map(|&o| (o, Tuning::for_radius(r))).collect();
            if sweep {
                for by in [8u32, 16] {
                    for window in [0u32, 32, 64, 128] {
                        let t = Tuning { block_y: by.max(r as u32), window, ..Tuning::for_radius(r) };
                        if t != Tuning::for_radius(r) {
                            variants.push((Operator::Fused, t));
                        }
                    }
                }
            }
            for (op, t) in variants {
                match gpu::bench_step(CudaRuntime::new(0)?, [n, n, n], r, op, t, reps) {
                    Ok(b) => {
                        let ceiling = if op == Operator::Laplacian { c.copy_gbs } else { c.three_read_one_write_gbs };
                        let line = format!(
                            "[{defs}|fma={fmad}|st={}|mb={}] n={n:5} R={r} {:10} by={:2} vec={} window={:3}: {:8.3} ms {:7.0} GB/s = {:5.1}% of {} \
                             {:6.2} GPts/s",
                            b.stages,
                            b.min_blocks,
                            b.operator,
                            b.block_y,
                            b.vec,
                            b.window,
                            b.seconds * 1e3,
                            b.gbs,
                            100.0 * b.gbs / ceiling,
                            if op == Operator::Laplacian { "copy" } else { "3R1W" },
                            b.gpts
                        );
                        println!("{line}  [{}]", b.kernel_info);
                        rows.push(line);
                    }
                    Err(e) => println!("n={n} R={r} {op:?} {t:?}: {e:#}"),
                }
            }
        }
    }
    println!("== summary ({})", c.device);
    for l in rows {
        println!("{l}");
    }
    Ok(())
}
