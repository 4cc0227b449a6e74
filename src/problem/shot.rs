//! The sources and receivers of one shot: their positions from the configuration, checked to lie
//! in the grid, their taps and wavelets, and what the sources inject together each step
//! ([`SourceInjection`]).

use super::Problem;
use super::positioning::{Positioning, Tap};
use crate::config::{self, Config, WaveletConfig};
use crate::numerics::wavelet_file::read_wavelet;
use crate::numerics::{Ricker, SampledWavelet, Wavelet};
use anyhow::{Context, Result, ensure};
use std::collections::BTreeMap;

/// A point source: where it injects and what it injects each step.
#[derive(Clone, Debug, PartialEq)]
pub struct PointSource {
    pub position: [f64; 3],
    pub wavelet: Wavelet,
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

/// The wavelet of source `s` (`key` names it in errors), to be read at steps of `dt`.
fn wavelet(s: &config::SourceConfig, key: &str, dt: f64) -> Result<Wavelet> {
    Ok(match &s.wavelet {
        WaveletConfig::Ricker => {
            let f = s.frequency.with_context(|| format!("{key}.frequency is required with the Ricker wavelet"))?;
            ensure!(f > 0.0, "{key}.frequency must be positive, got {f}");
            Ricker::new(f, s.amplitude, s.delay).into()
        }
        WaveletConfig::File(w) => {
            let samples =
                read_wavelet(&w.file, w.trace, w.sample_interval).with_context(|| format!("{key}.wavelet"))?;
            let start = samples.start + s.delay.unwrap_or(0.0);
            Wavelet::Sampled(SampledWavelet::new(samples.values, samples.interval, start, s.amplitude, dt))
        }
    })
}

/// The sources and receivers of `cfg` (their taps on the grid, the sources' samples at `dt` for
/// `steps` steps) and the warnings they raise: the part of a [`Problem`](super::Problem) that
/// differs between the shots of a survey.
pub fn shot_geometry(cfg: &Config, dt: f64, steps: usize) -> Result<(Vec<PointSource>, Vec<Receiver>, Vec<String>)> {
    // Positions must lie in the model (the grid of `[grid]`); their taps are on the run grid,
    // which holds absorbing layers outside the model too.
    let model = &cfg.grid;
    let run_grid = cfg.run_grid();
    let (shape, spacing, origin) = (run_grid.shape, run_grid.spacing, run_grid.origin);
    let inside = |p: [f64; 3], key: &str| -> Result<()> {
        for a in 0..3 {
            let lo = model.origin[a];
            let hi = model.origin[a] + (model.shape[a] - 1) as f64 * spacing[a];
            ensure!(
                p[a] >= lo - 1e-9 * spacing[a] && p[a] <= hi + 1e-9 * spacing[a],
                "{key} = {p:?} m lies outside the grid ({} from {lo} to {hi} m)",
                ["x", "y", "z"][a]
            );
        }
        Ok(())
    };
    let free_surface = cfg.boundary.free_surface;
    let mut warnings = Vec::new();
    // A point source's discrete delta: 1 / (dx dy dz); on a 2D grid a line source's, 1 / (dx dz)
    // (a unit length along y), so that 2D traces are the 2D Green's function's.
    let cell = if model.is_2d() { spacing[0] * spacing[2] } else { spacing[0] * spacing[1] * spacing[2] };
    let mut sources = Vec::with_capacity(cfg.source.len());
    for (i, src) in cfg.source.iter().enumerate() {
        let key = cfg.source.key(i);
        let wavelet = wavelet(src, &key, dt)?;
        inside(src.position, &format!("{key}.position"))?;
        let injection = Positioning::from_config(src.injection, src.sinc_half_width, &key, "injection")?;
        let taps = injection.taps(src.position, origin, spacing, shape, free_surface);
        ensure!(
            !taps.is_empty(),
            "{key}.position = {:?} m lies on the free surface (z = {} m), where the pressure is held at zero: \
             move it below the surface",
            src.position,
            origin[2]
        );
        if injection.truncated(src.position, origin, spacing, shape, free_surface) {
            warnings.push(format!(
                "{key}.position = {:?} m is closer than sinc_half_width points to a grid face: its sinc weights \
                 past the face are dropped",
                src.position
            ));
        }
        let samples = (0..steps).map(|n| wavelet.at(n as f64 * dt) / cell).collect();
        sources.push(PointSource { position: src.position, wavelet, injection, taps, samples });
    }

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
    Ok((sources, receivers, warnings))
}

/// What step 5 adds at the sources' taps, the same for every backend: at tap t in step n,
/// `weight_t * c^2 dt^2 * samples[n * row + t]` (`t` taken as 0 when `row` is 1).
///
/// One source keeps its own taps and weights and its one row of samples (`row` = 1). Several
/// sources are merged into the distinct points of all their taps (weight 1, ordered by z, y, x),
/// each with its own row entry per step: the sum over the sources of their weight there times
/// their sample, in the sources' order. Every backend rounds these sums once, so the sources'
/// overlapping taps add up the same everywhere; the price is steps x taps samples.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceInjection {
    pub taps: Vec<Tap>,
    /// Samples per step: 1 (all taps share one wavelet) or the number of taps (one each).
    pub row: usize,
    pub samples: Vec<f64>,
}

impl SourceInjection {
    /// The injection of `sources`.
    pub fn of(sources: &[PointSource]) -> SourceInjection {
        if let [one] = sources {
            return SourceInjection { taps: one.taps.clone(), row: 1, samples: one.samples.clone() };
        }
        let mut points = BTreeMap::new();
        for t in sources.iter().flat_map(|s| &s.taps) {
            let [x, y, z] = t.point;
            points.entry([z, y, x]).or_insert(t.point);
        }
        let column: BTreeMap<[usize; 3], usize> = points.values().enumerate().map(|(c, &p)| (p, c)).collect();
        let taps: Vec<Tap> = points.values().map(|&point| Tap { point, weight: 1.0 }).collect();
        let row = taps.len();
        let steps = if row == 0 { 0 } else { sources.iter().map(|s| s.samples.len()).max().unwrap_or(0) };
        let mut samples = vec![0.0; steps * row];
        for s in sources {
            for t in &s.taps {
                let c = column[&t.point];
                for (n, &v) in s.samples.iter().enumerate() {
                    samples[n * row + c] += t.weight * v;
                }
            }
        }
        SourceInjection { taps, row, samples }
    }

    /// Steps with samples (no injection after them).
    pub fn steps(&self) -> usize {
        self.samples.len().checked_div(self.row).unwrap_or(0)
    }

    /// The sample tap `t` takes at step `n` (before its weight).
    pub fn sample(&self, n: usize, t: usize) -> f64 {
        self.samples[n * self.row + if self.row == 1 { 0 } else { t }]
    }

    /// The largest value the sources add to one point in one step: |weight c^2 dt^2 sample|,
    /// with `vel2dt2` the factor at a grid point.
    pub fn peak(&self, vel2dt2: impl Fn([usize; 3]) -> f64) -> f64 {
        let steps = self.steps();
        self.taps
            .iter()
            .enumerate()
            .map(|(t, tap)| {
                let smax = (0..steps).fold(0.0f64, |m, n| m.max(self.sample(n, t).abs()));
                (tap.weight * vel2dt2(tap.point) * smax).abs()
            })
            .fold(0.0f64, f64::max)
    }
}

impl Problem {
    /// The first source: the one a survey moves from shot to shot.
    pub fn source(&self) -> &PointSource {
        &self.sources[0]
    }

    /// What the sources inject each step ([`SourceInjection`]).
    pub fn source_injection(&self) -> SourceInjection {
        SourceInjection::of(&self.sources)
    }
}
