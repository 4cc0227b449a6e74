//! What a run prints before its first step: the grid, time, boundary, backend and output.

use crate::backend::DeviceInfo;
use crate::boundary::{BoundaryKind, DEFAULT_WIDTH_REASON, default_width};
use crate::output::plan::OutputPlan;
use crate::problem::Problem;
use std::path::Path;

/// The banner's line for `model.smoothing`, where the input gives it (after [`print_header`]).
pub fn print_smoothing(cfg: &crate::config::Config) {
    if let Some(sigma) = cfg.model.smoothing {
        println!(
            "  smoothing the model: a Gaussian of {sigma} m standard deviation on the slowness 1/vp (model.smoothing)"
        );
    }
}

/// The header of a run of `problem` from `input` on `device` into `out` (about `file_bytes`).
pub fn print_header(
    input: &Path,
    problem: &Problem,
    plan: &OutputPlan,
    device: &DeviceInfo,
    out: &Path,
    file_bytes: f64,
) {
    let [nx, ny, nz] = problem.shape();
    let [dx, dy, dz] = problem.spacing;
    let b = &problem.boundary;
    println!("seismic-run {}: {}", env!("CARGO_PKG_VERSION"), input.display());
    // A 2D grid's y is no axis of the run: its shape and spacing are said in x and z.
    let (shape, spacing) = if problem.is_2d() {
        (format!("{nx} x {nz} (2D)"), format!("{dx} x {dz}"))
    } else {
        (format!("{nx} x {ny} x {nz}"), format!("{dx} x {dy} x {dz}"))
    };
    println!(
        "  grid      {shape} = {:.2} M points, spacing {spacing} m, stencil radius {}",
        problem.layout.points() as f64 / 1e6,
        problem.stencil.radius
    );
    let [vmin, vmax] = problem.vp_range;
    let density = match &problem.density {
        Some(d) => format!(
            "the density varies, {:.0}..{:.0} kg/m^3 (its operator reads the buoyancy too: 20 B a point a step in f32)",
            d.rho_ref, d.rho_max
        ),
        None => "a constant density".to_string(),
    };
    println!("  model     vp {vmin:.0}..{vmax:.0} m/s, {density}");
    println!(
        "  time      dt = {:.4e} s ({:.0}% of the CFL limit), {} steps, {:.3} s",
        problem.dt,
        100.0 * problem.dt / problem.dt_limit(),
        problem.steps,
        problem.dt * problem.steps as f64
    );
    let region = plan.region(problem);
    let [mx, my, mz] = region.shape;
    let why = if b.kind == BoundaryKind::Cpml && b.width == default_width(problem.stencil.radius) {
        format!(" (the default: {DEFAULT_WIDTH_REASON})")
    } else {
        String::new()
    };
    println!(
        "  boundary  {}, {} points{why}{}{}",
        format!("{:?}", b.kind).to_lowercase(),
        b.width,
        match (region.is_whole(), problem.is_2d()) {
            (true, _) => String::new(),
            (false, true) => format!(" outside the model of {mx} x {mz}"),
            (false, false) => format!(" outside the model of {mx} x {my} x {mz}"),
        },
        if b.free_surface { ", free surface at z = 0" } else { "" }
    );
    println!(
        "  backend   {}: {}, kernel {}, {} storage",
        device.backend,
        device.name,
        device.kernel,
        problem.precision.name()
    );
    println!(
        "  output    {} (about {:.3} GiB: {} receivers, {} snapshots of {})",
        out.display(),
        file_bytes / (1u64 << 30) as f64,
        problem.receivers.len(),
        plan.snapshot_steps.len(),
        if plan.snapshots.is_empty() {
            "nothing".to_string()
        } else {
            plan.snapshots.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
        }
    );
}

/// The phases of a process's start-up before its first step, timed as they end: the banner's
/// start-up line (where the seconds go before a survey's first shot).
pub struct StartUp {
    begun: std::time::Instant,
    last: std::time::Instant,
    phases: Vec<(&'static str, f64)>,
}

impl Default for StartUp {
    fn default() -> StartUp {
        StartUp::new()
    }
}

impl StartUp {
    pub fn new() -> StartUp {
        let now = std::time::Instant::now();
        StartUp { begun: now, last: now, phases: Vec::new() }
    }

    /// Ends `phase` now.
    pub fn mark(&mut self, phase: &'static str) {
        let now = std::time::Instant::now();
        self.phases.push((phase, (now - self.last).as_secs_f64()));
        self.last = now;
    }

    /// "2.10 s: MPI 0.30 s, model 0.40 s, ...".
    pub fn line(&self) -> String {
        let phases: Vec<String> = self.phases.iter().map(|(p, s)| format!("{p} {s:.2} s")).collect();
        format!("{:.2} s: {}", (self.last - self.begun).as_secs_f64(), phases.join(", "))
    }
}
