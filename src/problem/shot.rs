//! The source and receivers of one shot: their positions from the configuration, checked to lie
//! in the grid, and their taps.

use super::positioning::{Positioning, Tap};
use crate::config::{self, Config};
use crate::numerics::Ricker;
use anyhow::{Result, ensure};

/// A point source: where it injects and what it injects each step.
#[derive(Clone, Debug, PartialEq)]
pub struct PointSource {
    pub position: [f64; 3],
    pub wavelet: Ricker,
    /// How the delta function is spread over grid points.
    pub injection: Positioning,
    /// The spread (weights sum to about 1: exactly for nearest and trilinear).
    pub taps: Vec<Tap>,
    /// Sample n is s(n dt) / (dx dy dz): the discrete delta is folded in.
    pub samples: Vec<f64>,
}

/// A pressure receiver: the weighted sum of the pressure at its taps.
#[derive(Clone, Debug, PartialEq)]
pub struct Receiver {
    pub position: [f64; 3],
    pub interpolation: Positioning,
    pub taps: Vec<Tap>,
}
fn receiver_positions(r: &config::ReceiverConfig, i: usize) -> Result<Vec<[f64; 3]>> {
    let given = r.position.is_some() as u8 + r.line.is_some() as u8 + r.grid.is_some() as u8;
    ensure!(given == 1, "receivers[{i}]: give exactly one of `position`, `line` or `grid`");
    if let Some(p) = r.position {
        return Ok(vec![p]);
    }
    if let Some(l) = &r.line {
        ensure!(l.count >= 1, "receivers[{i}].line.count must be at least 1");
        let n = l.count;
        return Ok((0..n)
            .map(|k| {
                let f = if n == 1 { 0.0 } else { k as f64 / (n - 1) as f64 };
                std::array::from_fn(|a| l.start[a] + f * (l.end[a] - l.start[a]))
            })
            .collect());
    }
    let g = r.grid.as_ref().expect("one of three");
    ensure!(g.count_a >= 1 && g.count_b >= 1 && g.count_c >= 1, "receivers[{i}].grid counts must be at least 1");
    let mut out = Vec::with_capacity(r.count()?);
    for k in 0..g.count_c {
        for j in 0..g.count_b {
            for a in 0..g.count_a {
                out.push(std::array::from_fn(|d| {
                    g.origin[d] + a as f64 * g.step_a[d] + j as f64 * g.step_b[d] + k as f64 * g.step_c[d]
                }));
            }
        }
    }
    Ok(out)
}

/// The source and receivers of `cfg` (their taps on the grid, the source's samples at `dt` for
/// `steps` steps) and the warnings they raise: the part of a [`Problem`](super::Problem) that differs between the
/// shots of a survey.
pub fn shot_geometry(cfg: &Config, dt: f64, steps: usize) -> Result<(PointSource, Vec<Receiver>, Vec<String>)> {
    let (shape, spacing, origin) = (cfg.grid.shape, cfg.grid.spacing, cfg.grid.origin);
    let src = &cfg.source;
    ensure!(src.frequency > 0.0, "source.frequency must be positive, got {}", src.frequency);
    let wavelet = Ricker::new(src.frequency, src.amplitude, src.delay);
    let inside = |p: [f64; 3], key: &str| -> Result<()> {
        for a in 0..3 {
            let lo = origin[a];
            let hi = origin[a] + (shape[a] - 1) as f64 * spacing[a];
            ensure!(
                p[a] >= lo - 1e-9 * spacing[a] && p[a] <= hi + 1e-9 * spacing[a],
                "{key} = {p:?} m lies outside the grid ({} from {lo} to {hi} m)",
                ["x", "y", "z"][a]
            );
        }
        Ok(())
    };
    inside(src.position, "source.position")?;
    let free_surface = cfg.boundary.free_surface;
    let mut warnings = Vec::new();
    let injection = Positioning::from_config(src.injection, src.sinc_half_width, "source", "injection")?;
    let src_taps = injection.taps(src.position, origin, spacing, shape, free_surface);
    ensure!(
        !src_taps.is_empty(),
        "source.position = {:?} m lies on the free surface (z = {} m), where the pressure is held at zero: \
         move it below the surface",
        src.position,
        origin[2]
    );
    if injection.truncated(src.position, origin, spacing, shape, free_surface) {
        warnings.push(format!(
            "source.position = {:?} m is closer than sinc_half_width points to a grid face: its sinc weights \
             past the face are dropped",
            src.position
        ));
    }
    let cell = spacing[0] * spacing[1] * spacing[2];
    let samples = (0..steps).map(|n| wavelet.at(n as f64 * dt) / cell).collect();
    let source = PointSource { position: src.position, wavelet, injection, taps: src_taps, samples };

    let mut receivers = Vec::new();
    let mut truncated = 0;
    for (i, r) in cfg.receivers.iter().enumerate() {
        let key = format!("receivers[{i}]");
        let interpolation = Positioning::from_config(r.interpolation, r.sinc_half_width, &key, "interpolation")?;
        for p in receiver_positions(r, i)? {
            inside(p, &key)?;
            truncated += interpolation.truncated(p, origin, spacing, shape, free_surface) as usize;
            let taps = interpolation.taps(p, origin, spacing, shape, free_surface);
            receivers.push(Receiver { position: p, interpolation, taps });
        }
    }
    if truncated > 0 {
        warnings.push(format!(
            "{truncated} receiver(s) closer than sinc_half_width points to a grid face: their sinc weights past \
             the face are dropped"
        ));
    }
    Ok((source, receivers, warnings))
}
