//! Observed data read from SEG-Y shot gathers (`[imaging] observed`): one file a shot, its
//! traces put on the run's time axis, and the shot's geometry from the trace headers when they
//! hold it.
//!
//! A gather is any SEG-Y file [`crate::model::segy::Layout`] reads (revisions 0 to 2, either byte
//! order, IBM or IEEE floats, integers), one trace per receiver. This program's own gathers
//! (`[output] segy = true`, a survey's shots: `output::segy`) have IEEE floats and the geometry
//! in the headers, the first sample at t = 0.
//!
//! Geometry, per trace, scalars applied (0 read as 1, negative divides): source x, y at bytes
//! 73-80 and group x, y at 81-88 (scalar 71-72); the source's depth is its depth below the surface
//! (49-52) minus the surface's elevation (45-48) and a receiver's is minus its group elevation
//! (41-44) (scalar 69-70): z is depth below elevation 0, positive down, as the writer sets them.
//! A gather whose geometry fields are all zero has none: its shot's positions come from the input.
//!
//! Time: sample k is at t0 + k dt_file, t0 the delay recording time (109-110, ms, time scalar
//! 215-216), dt_file the binary header's interval (3217-3218, or rev 2's double). The run's trace
//! sample n is at (n + 1) dt: with dt_file = dt and t0 = 0 that is the file's sample n + 1 as it
//! is; otherwise the trace is resampled by 8-point Lagrange interpolation (the writer's own,
//! `output::segy::resample`), zero before the record starts.

use crate::model::segy::Layout;
use crate::output::segy::resample::lagrange;
use anyhow::{Context, Result, bail, ensure};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// One shot's observed data and, where its headers give it, its geometry.
#[derive(Clone, Debug, PartialEq)]
pub struct Gather {
    pub path: PathBuf,
    /// One trace per receiver, in file order: `steps` samples each, sample n at (n + 1) dt.
    pub traces: Vec<Vec<f64>>,
    /// Source and receiver positions (m, z down) from the headers; None where they hold none.
    pub geometry: Option<Geometry>,
    /// Whether the traces were interpolated onto the run's time axis (the file's interval or
    /// first sample's time differ from the run's).
    pub resampled: bool,
    /// The file's sample interval, s.
    pub interval: f64,
}

/// The positions a gather's headers give.
#[derive(Clone, Debug, PartialEq)]
pub struct Geometry {
    pub source: [f64; 3],
    pub receivers: Vec<[f64; 3]>,
}

/// The gather files of `pattern` (a path or a glob, relative to `input_dir` unless absolute), in
/// the order of their names; none is an error naming the pattern.
pub fn gather_paths(pattern: &str, input_dir: &Path) -> Result<Vec<PathBuf>> {
    let full = if Path::new(pattern).is_absolute() { PathBuf::from(pattern) } else { input_dir.join(pattern) };
    let text = full.to_string_lossy();
    let mut paths: Vec<PathBuf> = glob::glob(&text)
        .with_context(|| format!("imaging.observed = {pattern:?} is not a valid path or glob"))?
        .collect::<std::result::Result<_, _>>()
        .with_context(|| format!("imaging.observed = {pattern:?}"))?;
    paths.retain(|p| p.is_file());
    paths.sort();
    ensure!(!paths.is_empty(), "imaging.observed = {pattern:?}: no file matches {text}");
    Ok(paths)
}

/// A header value with its SEG-Y scalar: negative divides, positive multiplies, 0 is 1.
fn scaled(v: i32, scalar: i16) -> f64 {
    match scalar {
        0 => v as f64,
        s if s < 0 => v as f64 / -(s as f64),
        s => v as f64 * s as f64,
    }
}

/// Reads the gather at `path` onto the run's time axis: `steps` samples of `dt` (s), sample n at
/// (n + 1) dt. Errors name the file and the header field at fault.
pub fn read_gather(path: &Path, dt: f64, steps: usize) -> Result<Gather> {
    let name = path.display();
    let mut f = File::open(path).with_context(|| format!("cannot open {name}"))?;
    let len = f.metadata().with_context(|| format!("cannot read {name}"))?.len();
    let l = Layout::read(&mut f, len, path)?;
    ensure!(
        l.interval > 0.0,
        "{name}: the binary header's sample interval (bytes 3217-3218) is 0: the gather's time axis is unknown"
    );
    let interval = l.interval * 1e-6;
    let mut r = BufReader::new(f);
    r.seek(SeekFrom::Start(l.first_trace)).with_context(|| format!("cannot read {name}"))?;
    let mut h = [0u8; 240];
    let mut data = vec![0u8; (l.trace_bytes() - 240) as usize];
    let mut records = Vec::with_capacity(l.traces);
    let mut t0 = None;
    let (mut source, mut receivers) = (None::<[f64; 3]>, Vec::with_capacity(l.traces));
    for t in 0..l.traces {
        r.read_exact(&mut h).with_context(|| format!("cannot read {name}"))?;
        r.read_exact(&mut data).with_context(|| format!("cannot read {name}"))?;
        let n = l.u16_at(&h, 115) as usize;
        ensure!(
            n == 0 || n == l.samples || l.samples > u16::MAX as usize,
            "{name}: trace {} has {n} samples (bytes 115-116), the binary header {} (bytes 3221-3222): a gather's \
             traces are all of one length",
            t + 1,
            l.samples
        );
        let time_scalar = l.i16_at(&h, 215);
        let delay = scaled(l.i16_at(&h, 109) as i32, time_scalar) * 1e-3;
        match t0 {
            None => t0 = Some(delay),
            Some(first) => ensure!(
                (delay - first).abs() <= 1e-9,
                "{name}: trace {} starts at {delay} s (delay, bytes 109-110), trace 1 at {first} s: a gather's traces \
                 start together",
                t + 1
            ),
        }
        let (xy, z) = (l.i16_at(&h, 71), l.i16_at(&h, 69));
        let s = [
            scaled(l.i32_at(&h, 73), xy),
            scaled(l.i32_at(&h, 77), xy),
            scaled(l.i32_at(&h, 49), z) - scaled(l.i32_at(&h, 45), z),
        ];
        match source {
            None => source = Some(s),
            Some(first) => ensure!(
                s.iter().zip(&first).all(|(a, b)| (a - b).abs() <= 1e-6 * a.abs().max(1.0)),
                "{name}: trace {} has its source at {s:?} m (bytes 73-80, 45-52), trace 1 at {first:?} m: a gather is \
                 one shot",
                t + 1
            ),
        }
        receivers.push([scaled(l.i32_at(&h, 81), xy), scaled(l.i32_at(&h, 85), xy), -scaled(l.i32_at(&h, 41), z)]);
        records.push((0..l.samples).map(|k| l.sample(&data, k) as f64).collect::<Vec<f64>>());
    }
    let source = source.context("no traces")?;
    let geometry = (source != [0.0; 3] || receivers.iter().any(|r| *r != [0.0; 3]))
        .then(|| Geometry { source, receivers: receivers.clone() });
    let t0 = t0.unwrap_or(0.0);
    let end = t0 + (l.samples - 1) as f64 * interval;
    let last = steps as f64 * dt;
    if end + interval < last * (1.0 - 1e-9) {
        bail!(
            "{name}: its traces end at {end:.6} s ({} samples, bytes 3221-3222, of {} us from {t0} s) and the run at \
             {last:.6} s ({steps} steps of {dt:e} s): the gather must cover the run's time (a shorter [time] duration)",
            l.samples,
            l.interval
        );
    }
    let same_axis = (interval - dt).abs() <= 1e-9 * dt && t0 == 0.0 && l.samples > steps;
    let traces = records.iter().map(|trace| on_run_axis(trace, t0, interval, dt, steps, same_axis)).collect();
    Ok(Gather { path: path.to_path_buf(), traces, geometry, resampled: !same_axis, interval })
}

/// `trace` (sample k at t0 + k `interval`) at the run's times (n + 1) dt, n < steps: the samples
/// themselves where the axes agree (`same_axis`), else 8-point Lagrange interpolation, zero before
/// t0 and the last sample beyond the end.
fn on_run_axis(trace: &[f64], t0: f64, interval: f64, dt: f64, steps: usize, same_axis: bool) -> Vec<f64> {
    if same_axis {
        return trace[1..=steps].to_vec();
    }
    let value = |j: i64| if j < 0 { 0.0 } else { trace[(j as usize).min(trace.len() - 1)] };
    (0..steps)
        .map(|n| {
            let (base, w) = lagrange(((n + 1) as f64 * dt - t0) / interval);
            w.iter().enumerate().map(|(m, w)| w * value(base + m as i64)).sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 20 Hz Ricker wavelet (zero before t = 0, as a run's traces are) recorded at 1 ms comes
    /// onto dt = 0.7 ms within 1e-8 of its peak (measured: 3.6e-9).
    #[test]
    fn a_trace_on_another_interval_is_interpolated_onto_the_run_axis() {
        let wave = |t: f64| {
            let a = (std::f64::consts::PI * 20.0 * (t - 0.1)).powi(2);
            (1.0 - 2.0 * a) * (-a).exp()
        };
        let trace: Vec<f64> = (0..400).map(|k| wave(k as f64 * 1e-3)).collect();
        let (dt, steps) = (0.7e-3, 500);
        let out = on_run_axis(&trace, 0.0, 1e-3, dt, steps, false);
        let worst = (0..steps - 8).map(|n| (out[n] - wave((n + 1) as f64 * dt)).abs()).fold(0.0, f64::max);
        eprintln!("largest difference: {worst:.2e}");
        assert!(worst < 1e-8, "{worst:e}");
        assert_eq!(on_run_axis(&trace, 0.0, 1e-3, 1e-3, 3, true), trace[1..4]);
    }
}
