//! MI-series static report: compiles every step-module variant (R = 1..8, with and without the
//! sponge; fused, three-pass, update, CPML, free-surface, source/receiver and stream kernels) ahead
//! of time with hipcc for gfx90a and gfx940, and prints each kernel's resource usage as markdown.
//! Needs hipcc, not a GPU. Usage: hip_static_report [--arch gfx90a,gfx940] [--jobs N] [--out FILE]

use anyhow::{Context, Result, bail};
use seismic_run::backend::gpu::hip::aot;
use std::time::Instant;

fn main() -> Result<()> {
    let mut archs: Vec<String> = aot::REPORT_ARCHS.iter().map(|s| s.to_string()).collect();
    let mut jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let mut out: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--arch" => archs = value()?.split(',').map(str::to_string).collect(),
            "--jobs" => jobs = value()?.parse().context("--jobs takes a positive integer")?,
            "--out" => out = Some(value()?),
            "-h" | "--help" => {
                println!("usage: hip_static_report [--arch gfx90a,gfx940] [--jobs N] [--out FILE]");
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let arch_refs: Vec<&str> = archs.iter().map(String::as_str).collect();
    let variants = aot::step_variants();
    let start = Instant::now();
    let usages = aot::report(&aot::step_source(), &variants, &arch_refs, jobs)?;
    let seconds = start.elapsed().as_secs_f64();
    let table = aot::markdown_table(&usages, &aot::KERNEL_ORDER);
    let spilling: Vec<String> = usages
        .iter()
        .filter(|u| u.spills())
        .map(|u| format!("{} R={} {} {}", u.kernel, u.radius, u.flavour, u.arch))
        .collect();
    let summary = format!(
        "{} hipcc compiles ({} variants x {} archs) in {seconds:.1} s with {jobs} jobs; kernels with spills or \
         scratch: {}",
        variants.len() * archs.len(),
        variants.len(),
        archs.len(),
        if spilling.is_empty() { "none".to_string() } else { spilling.join(", ") }
    );
    print!("{table}");
    println!("\n{summary}");
    if let Some(path) = out {
        std::fs::write(&path, format!("{table}\n{summary}\n")).with_context(|| format!("cannot write {path}"))?;
    }
    Ok(())
}
