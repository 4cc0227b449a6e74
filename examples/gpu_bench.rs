//! Interior-kernel benchmark of the CUDA backend: the same-run STREAM-like ceilings, then the fused
//! step, the three-pass step and the Laplacian-only operator on cubes, with their effective
//! bandwidth (`problem::step_bytes` over the median kernel time) as a share of the ceilings.
//!
//! Usage: gpu_bench [N | NXxNYxNZ ...] [--radius R ...] [--reps K] [--sweep]
//! [--ops fused,three-pass,laplacian] [--variant SPEC ...] [--windows W,W,...] [--ceiling-mib M,M,...]
//! `--sweep` also tries fused block shapes and z-windows. Each `--variant` times every operator with
//! the default tuning changed by SPEC, colon-separated keys bx, by, vec, w, st, mb, uz, rows, o, tr, hr (e.g.
//! `rows=2:by=4:mb=3`; `base` for the default itself) in one process, so that all variants share
//! one ceiling measurement. `--windows` times each variant at these fused z-windows on one solver
//! (0: the automatic choice). `--ceiling-mib` also measures the ceilings at these array sizes (the
//! reference stays 1 GiB), to see how much of a small grid's shortfall the copy kernel shares.
//! Without `--variant`, the launch shape is the default, or the one SEISMIC_TUNING sets
//! (`TuningOverride`). Needs an NVIDIA GPU.

use anyhow::Result;
use seismic_run::backend::gpu::{self, Operator, Tuning, cuda::CudaRuntime};

fn main() -> Result<()> {
    let mut sizes = Vec::new();
    let mut radii = Vec::new();
    let mut reps = 20;
    let mut sweep = false;
    let mut ops = vec![Operator::Fused, Operator::ThreePass, Operator::Laplacian];
    let mut specs: Vec<String> = Vec::new();
    let mut windows: Option<Vec<u32>> = None;
    let mut ceiling_mib: Vec<usize> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--radius" => radii.push(args.next().expect("--radius R").parse()?),
            "--reps" => reps = args.next().expect("--reps K").parse()?,
            "--sweep" => sweep = true,
            "--variant" => specs.push(args.next().expect("--variant SPEC")),
            "--windows" => {
                windows =
                    Some(args.next().expect("--windows list").split(',').map(|w| w.parse()).collect::<Result<_, _>>()?)
            }
            "--ceiling-mib" => {
                ceiling_mib =
                    args.next().expect("--ceiling-mib list").split(',').map(|m| m.parse()).collect::<Result<_, _>>()?
            }
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
            n => {
                let d: Vec<usize> = n.split('x').map(|v| v.parse()).collect::<Result<_, _>>()?;
                sizes.push(match d[..] {
                    [n] => [n, n, n],
                    [x, y, z] => [x, y, z],
                    _ => anyhow::bail!("size {n}: N or NXxNYxNZ"),
                });
            }
        }
    }
    if sizes.is_empty() {
        sizes.push([512; 3]);
    }
    if radii.is_empty() {
        radii.push(4);
    }
    let over = gpu::TuningOverride::from_environment()?;
    let rt = CudaRuntime::new(0)?;
    let c = gpu::measure_ceiling(&rt, 1 << 30, 20)?;
    println!(
        "device {}: copy {:.0} GB/s, 3R1W {:.0} GB/s (1 GiB arrays, float4, median of 20)",
        c.device, c.copy_gbs, c.three_read_one_write_gbs
    );
    for &mib in &ceiling_mib {
        let s = gpu::measure_ceiling(&rt, mib << 20, 50)?;
        println!(
            "  at {mib} MiB arrays: copy {:.0} GB/s ({:.1}% of 1 GiB), 3R1W {:.0} GB/s ({:.1}%)",
            s.copy_gbs,
            100.0 * s.copy_gbs / c.copy_gbs,
            s.three_read_one_write_gbs,
            100.0 * s.three_read_one_write_gbs / c.three_read_one_write_gbs
        );
    }
    drop(rt);
    let mut rows = Vec::new();
    for &n in &sizes {
        for &r in &radii {
            let mut variants: Vec<(Operator, Tuning)> = if specs.is_empty() {
                ops.iter()
                    .map(|&o| (o, over.as_ref().map_or(Tuning::for_radius(r), |v| v.tuning(r, true, false))))
                    .collect()
            } else {
                let mut v = Vec::new();
                for spec in &specs {
                    let t = apply_spec(Tuning::for_radius(r), spec)?;
                    v.extend(ops.iter().map(|&o| (o, t)));
                }
                v
            };
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
                let ws = windows.clone().unwrap_or_else(|| vec![t.window]);
                match seismic_run::bench::interior::bench_windows(CudaRuntime::new(0)?, n, r, op, t, &ws, reps) {
                    Ok(bs) => bs.into_iter().for_each(|b| {
                        let n = format!("{}x{}x{}", n[0], n[1], n[2]);
                        let ceiling = if op == Operator::Laplacian { c.copy_gbs } else { c.three_read_one_write_gbs };
                        let line = format!(
                            "[st={}|mb={}|rows={}|uz={}|o={}|tr={}|hr={}] n={n:>14} R={r} {:10} bx={:2} by={:2} vec={} window={:3}: {:8.3} ms {:7.0} GB/s = {:5.1}% of {} \
                             {:6.2} GPts/s",
                            b.stages,
                            b.min_blocks,
                            b.rows,
                            b.unroll_z,
                            b.order,
                            b.tile_ring,
                            b.halo_ring,
                            b.operator,
                            b.block_x,
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
                    }),
                    Err(e) => println!("n={n:?} R={r} {op:?} {t:?}: {e:#}"),
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

/// The tuning `t` changed by a variant SPEC (see the module docs).
fn apply_spec(mut t: Tuning, spec: &str) -> Result<Tuning> {
    for kv in spec.split(':').filter(|kv| !kv.is_empty() && *kv != "base") {
        let (k, v) = kv.split_once('=').ok_or_else(|| anyhow::anyhow!("variant key without value: {kv}"))?;
        let v: u32 = v.parse()?;
        match k {
            "bx" => t.block_x = v,
            "by" => t.block_y = v,
            "vec" => t.vec = v,
            "w" => t.window = v,
            "st" => t.stages = v,
            "mb" => t.min_blocks = v,
            "uz" => t.unroll_z = v,
            "rows" => t.rows = v,
            "o" => t.order = v,
            "tr" => t.tile_ring = v,
            "hr" => t.halo_ring = v,
            _ => anyhow::bail!("unknown variant key {k} (bx, by, vec, w, st, mb, uz, rows, o, tr, hr)"),
        }
    }
    Ok(t)
}
