//! The traces on a sample interval of whole microseconds, first sample at t = 0, for SEG-Y.
//!
//! The run records sample j at t0 + j dt (t0 = dt): the field starts at p = 0, so t = 0 holds an
//! exact zero, written as the first sample. Where dt is a whole number of microseconds the samples
//! are copied as they are; otherwise they are resampled onto the largest whole-microsecond
//! interval not above dt (a little finer than dt, so nothing is decimated) by 8-point Lagrange
//! interpolation: the degree-7 polynomial through the 4 samples on each side. The traces are far
//! oversampled (the stability limit puts dt well below the source's band), where this is accurate
//! to about 1e-10 at 40 samples per period and 1e-6 at 15; an output time on an input sample takes
//! that sample alone. Before the first sample the field is zero; beyond the last it is taken as the
//! last sample.

/// Input samples on each side of an output time (8 points in all).
const SIDE: i64 = 4;

/// Traces on the output time axis: (traces, samples) row-major, sample k at k * interval_us µs.
#[derive(Clone, Debug, PartialEq)]
pub struct OnIntegerInterval {
    pub traces: Vec<f32>,
    pub samples: usize,
    pub interval_us: u32,
    /// Whether the samples were interpolated (dt not a whole number of microseconds).
    pub resampled: bool,
}

/// The Lagrange weights at position `u` (in input samples) of the 2 SIDE points from
/// `floor(u) - SIDE + 1`: exactly 1 and 0s where `u` is one of them.
pub fn lagrange(u: f64) -> (i64, [f64; 2 * SIDE as usize]) {
    let base = u.floor() as i64 - SIDE + 1;
    let weights = std::array::from_fn(|m| {
        let mut w = 1.0;
        for k in 0..2 * SIDE {
            if k != m as i64 {
                w *= (u - (base + k) as f64) / (m as i64 - k) as f64;
            }
        }
        w
    });
    (base, weights)
}

/// Whether `dt` (s) is a whole number of microseconds, as far as its f64 value says.
fn whole_microseconds(dt: f64) -> Option<u32> {
    let us = dt * 1e6;
    let r = us.round();
    ((us - r).abs() <= 1e-9 * us.max(1.0) && r >= 1.0 && r <= u32::MAX as f64).then_some(r as u32)
}

/// `traces` ((ntr, steps) row-major, sample j at t0 + j dt, s) on a whole-microsecond interval
/// from t = 0 to the last recorded time.
pub fn on_integer_interval(traces: &[f32], steps: usize, dt: f64, t0: f64) -> OnIntegerInterval {
    let ntr = traces.len().checked_div(steps).unwrap_or(0);
    if let Some(us) = whole_microseconds(dt).filter(|_| (t0 - dt).abs() <= 1e-12 * dt) {
        let mut out = Vec::with_capacity(ntr * (steps + 1));
        for trace in traces.chunks_exact(steps) {
            out.push(0.0);
            out.extend_from_slice(trace);
        }
        return OnIntegerInterval { traces: out, samples: steps + 1, interval_us: us, resampled: false };
    }
    let interval_us = ((dt * 1e6).floor() as u32).max(1);
    let interval = interval_us as f64 * 1e-6;
    let last = t0 + (steps as f64 - 1.0) * dt;
    let samples = (last / interval + 1e-9).floor() as usize + 1;
    // Each output time's first input sample and weights, shared by all traces.
    let taps: Vec<(i64, [f64; 2 * SIDE as usize])> =
        (0..samples).map(|k| lagrange((k as f64 * interval - t0) / dt)).collect();
    let mut out = Vec::with_capacity(ntr * samples);
    for trace in traces.chunks_exact(steps) {
        let value = |j: i64| -> f64 { if j < 0 { 0.0 } else { trace[(j as usize).min(steps - 1)] as f64 } };
        out.extend(
            taps.iter()
                .map(|(base, w)| w.iter().enumerate().map(|(m, w)| w * value(base + m as i64)).sum::<f64>() as f32),
        );
    }
    OnIntegerInterval { traces: out, samples, interval_us, resampled: true }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_microsecond_steps_are_copied_after_a_leading_zero() {
        let traces = [1.0f32, 2.0, 3.0, -1.0, -2.0, -3.0];
        let r = on_integer_interval(&traces, 3, 5e-4, 5e-4);
        assert_eq!(r.interval_us, 500);
        assert!(!r.resampled);
        assert_eq!(r.samples, 4);
        assert_eq!(r.traces, [0.0, 1.0, 2.0, 3.0, 0.0, -1.0, -2.0, -3.0]);
    }

    #[test]
    fn weights_pick_a_sample_alone_and_sum_to_one_between() {
        assert_eq!(lagrange(5.0), (2, [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]));
        let (base, w) = lagrange(-0.3);
        assert_eq!(base, -4);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-14);
    }

    /// Sines of 20 and 100 Hz sampled at dt = 1168.81 µs (t0 = dt, 43 and 8.6 samples per
    /// period) come out on 1168 µs within 1e-9 and 1e-4 of their amplitude away from the
    /// record's ends (measured: 2.3e-10 and 8.0e-5).
    #[test]
    fn band_limited_trace_is_resampled_onto_whole_microseconds() {
        let (dt, steps) = (1168.81e-6, 800);
        for (f, tolerance) in [(20.0, 1e-9), (100.0, 1e-4)] {
            let wave = |t: f64| (2.0 * std::f64::consts::PI * f * t).sin();
            let trace: Vec<f64> = (0..steps).map(|j| wave((j + 1) as f64 * dt)).collect();
            // f64 through the same weights as the f32 traces, so that f32 rounding does not hide the error.
            let r = on_integer_interval(&trace.iter().map(|&v| v as f32).collect::<Vec<_>>(), steps, dt, dt);
            assert!(r.resampled);
            assert_eq!(r.interval_us, 1168);
            assert_eq!(r.samples, ((steps as f64 * dt) / 1168e-6).floor() as usize + 1);
            assert_eq!(r.traces[0], 0.0);
            let worst = (8..r.samples - 8)
                .map(|k| {
                    let (base, w) = lagrange((k as f64 * 1168e-6 - dt) / dt);
                    let v: f64 = w.iter().enumerate().map(|(m, w)| w * trace[(base + m as i64) as usize]).sum();
                    assert!((r.traces[k] as f64 - v).abs() <= 1e-6, "sample {k}: f32 {} vs {v}", r.traces[k]);
                    (v - wave(k as f64 * 1168e-6)).abs()
                })
                .fold(0.0f64, f64::max);
            assert!(worst < tolerance, "{f} Hz: largest error {worst}");
        }
    }
}
