//! Source time functions: the built-in Ricker wavelet and a wavelet given as samples (read from a
//! file by `wavelet_file`), resampled to the run's time step by a Kaiser-windowed sinc.

use std::f64::consts::PI;

/// Ricker wavelet (second derivative of a Gaussian, sign flipped so the peak is positive).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ricker {
    /// Peak frequency, Hz.
    pub frequency: f64,
    pub amplitude: f64,
    /// Time of the peak, s.
    pub delay: f64,
}

impl Ricker {
    pub fn new(frequency: f64, amplitude: f64, delay: Option<f64>) -> Ricker {
        Ricker { frequency, amplitude, delay: delay.unwrap_or(1.0 / frequency) }
    }

    pub fn at(&self, t: f64) -> f64 {
        let a = (PI * self.frequency * (t - self.delay)).powi(2);
        self.amplitude * (1.0 - 2.0 * a) * (-a).exp()
    }

    /// Highest frequency with meaningful energy, used for dispersion checks (2.5 x peak).
    pub fn max_frequency(&self) -> f64 {
        2.5 * self.frequency
    }
}

/// Half-width of the resampling kernel in periods of its cutoff (zero crossings on each side).
const RESAMPLE_HALF_WIDTH: f64 = 16.0;
/// Kaiser window parameter of the resampling kernel (side lobes near -80 dB).
const RESAMPLE_KAISER_B: f64 = 10.0;

/// A wavelet given as samples at a regular interval (from a file), read at any time by
/// band-limited interpolation: a sinc with cutoff at the lower of the samples' and the run's
/// Nyquist frequencies (so resampling to a coarser step filters out what the step cannot carry),
/// Kaiser-windowed over 16 periods of the cutoff on each side. At the samples' own times, with a
/// step no coarser than theirs, it gives the samples exactly.
#[derive(Clone, Debug, PartialEq)]
pub struct SampledWavelet {
    /// The file's values (before `amplitude`).
    pub samples: Vec<f64>,
    /// Sample interval, s.
    pub interval: f64,
    /// Time of the first sample, s (the file's start time plus the source's delay).
    pub start: f64,
    pub amplitude: f64,
    /// Period of the interpolating sinc, s: the larger of `interval` and the run's dt.
    pub period: f64,
}

impl SampledWavelet {
    /// `samples` at `interval` from `start`, scaled by `amplitude`, to be read at steps of `dt`
    /// (an interval within 1e-9 of dt, as times printed in a text file give it, counts as dt's).
    pub fn new(samples: Vec<f64>, interval: f64, start: f64, amplitude: f64, dt: f64) -> SampledWavelet {
        let period = if interval >= dt * (1.0 - 1e-9) { interval } else { dt };
        SampledWavelet { samples, interval, start, amplitude, period }
    }

    pub fn at(&self, t: f64) -> f64 {
        let u = (t - self.start) / self.interval;
        let n = self.samples.len();
        if self.period == self.interval {
            let k = u.round();
            if (u - k).abs() < 1e-9 {
                return if k >= 0.0 && k < n as f64 { self.amplitude * self.samples[k as usize] } else { 0.0 };
            }
        }
        // Kernel in units of the sample interval: ratio <= 1 scales the sinc's argument.
        let ratio = self.interval / self.period;
        let reach = RESAMPLE_HALF_WIDTH / ratio;
        let lo = (u - reach).ceil().max(0.0);
        let hi = (u + reach).floor().min(n as f64 - 1.0);
        if hi < lo {
            return 0.0;
        }
        let norm = bessel_i0(RESAMPLE_KAISER_B);
        let mut sum = 0.0;
        for j in lo as usize..=hi as usize {
            let x = (u - j as f64) * ratio;
            let sinc = if x == 0.0 { 1.0 } else { (PI * x).sin() / (PI * x) };
            let w = 1.0 - (x / RESAMPLE_HALF_WIDTH).powi(2);
            let window = bessel_i0(RESAMPLE_KAISER_B * w.max(0.0).sqrt()) / norm;
            sum += self.samples[j] * ratio * sinc * window;
        }
        self.amplitude * sum
    }

    /// Amplitude spectrum of the samples at `f` Hz (a direct sum: evaluated at a few hundred
    /// frequencies once per run).
    fn spectrum(&self, f: f64) -> f64 {
        let (mut re, mut im) = (0.0, 0.0);
        for (j, &s) in self.samples.iter().enumerate() {
            let phase = 2.0 * PI * f * j as f64 * self.interval;
            re += s * phase.cos();
            im -= s * phase.sin();
        }
        (re * re + im * im).sqrt()
    }

    /// (peak frequency, highest frequency whose amplitude is at least 3.3% of the peak's), Hz,
    /// from the spectrum below the Nyquist frequency of `period` on a grid of 512 frequencies;
    /// for a Ricker wavelet these are its peak frequency and 2.5 times that.
    pub fn frequencies(&self) -> (f64, f64) {
        const GRID: usize = 512;
        let nyquist = 0.5 / self.period;
        let amp: Vec<(f64, f64)> = (1..=GRID)
            .map(|i| {
                let f = nyquist * i as f64 / GRID as f64;
                (f, self.spectrum(f))
            })
            .collect();
        let (grid_f, peak) =
            amp.iter().fold((nyquist / GRID as f64, 0.0), |m, &(f, a)| if a > m.1 { (f, a) } else { m });
        let max_f = amp.iter().rev().find(|&&(_, a)| a >= 0.033 * peak).map_or(grid_f, |&(f, _)| f);
        // The peak refined between the grid's neighbours by golden-section search: the CPML's
        // frequency shift then matches a Ricker's own to rounding.
        let step = nyquist / GRID as f64;
        let (mut lo, mut hi) = ((grid_f - step).max(0.0), grid_f + step);
        let golden = 0.5 * (5f64.sqrt() - 1.0);
        for _ in 0..80 {
            let (a, b) = (hi - golden * (hi - lo), lo + golden * (hi - lo));
            if self.spectrum(a) >= self.spectrum(b) {
                hi = b;
            } else {
                lo = a;
            }
        }
        (0.5 * (lo + hi), max_f)
    }
}

/// The modified Bessel function of the first kind, order 0, by its power series
/// sum ((x/2)^k / k!)^2; converges fast for the arguments of the Kaiser windows here (x <= 15).
pub fn bessel_i0(x: f64) -> f64 {
    let q = 0.25 * x * x;
    let (mut term, mut sum, mut k) = (1.0, 1.0, 1.0);
    while term > 1e-17 * sum {
        term *= q / (k * k);
        sum += term;
        k += 1.0;
    }
    sum
}

/// A source's time function.
#[derive(Clone, Debug, PartialEq)]
pub enum Wavelet {
    Ricker(Ricker),
    Sampled(SampledWavelet),
}

impl From<Ricker> for Wavelet {
    fn from(r: Ricker) -> Wavelet {
        Wavelet::Ricker(r)
    }
}

impl Wavelet {
    pub fn at(&self, t: f64) -> f64 {
        match self {
            Wavelet::Ricker(r) => r.at(t),
            Wavelet::Sampled(s) => s.at(t),
        }
    }

    /// Peak frequency, Hz (the CPML's frequency shift).
    pub fn frequency(&self) -> f64 {
        match self {
            Wavelet::Ricker(r) => r.frequency,
            Wavelet::Sampled(s) => s.frequencies().0,
        }
    }

    /// Highest frequency with meaningful energy, used for dispersion checks.
    pub fn max_frequency(&self) -> f64 {
        match self {
            Wavelet::Ricker(r) => r.max_frequency(),
            Wavelet::Sampled(s) => s.frequencies().1,
        }
    }

    /// "ricker" or "file", as the output file names it.
    pub fn name(&self) -> &'static str {
        match self {
            Wavelet::Ricker(_) => "ricker",
            Wavelet::Sampled(_) => "file",
        }
    }

    pub fn amplitude(&self) -> f64 {
        match self {
            Wavelet::Ricker(r) => r.amplitude,
            Wavelet::Sampled(s) => s.amplitude,
        }
    }

    /// The Ricker's peak time, or the sampled wavelet's first sample's time, s.
    pub fn delay(&self) -> f64 {
        match self {
            Wavelet::Ricker(r) => r.delay,
            Wavelet::Sampled(s) => s.start,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_and_zero_crossings() {
        let w = Ricker::new(10.0, 2.0, None);
        assert!((w.at(0.1) - 2.0).abs() < 1e-12);
        let tz = 0.1 + 1.0 / (PI * 10.0 * 2f64.sqrt());
        assert!(w.at(tz).abs() < 1e-12);
        assert!(w.at(0.0).abs() < 1e-3 * 2.0);
    }

    /// A 10 Hz Ricker peaking at 0.15 s (negligible at t = 0, where the samples start: a wavelet
    /// cut off there rings in any band-limited reading).
    fn sampled_ricker(interval: f64, dt: f64) -> (Ricker, SampledWavelet) {
        let r = Ricker::new(10.0, 1.0, Some(0.15));
        let samples = (0..(0.4 / interval) as usize).map(|j| r.at(j as f64 * interval)).collect();
        (r, SampledWavelet::new(samples, interval, 0.0, 1.0, dt))
    }

    #[test]
    fn samples_at_the_step_are_read_exactly_and_zero_outside() {
        let (r, s) = sampled_ricker(1e-3, 1e-3);
        for n in 0..400 {
            assert_eq!(s.at(n as f64 * 1e-3), r.at(n as f64 * 1e-3));
        }
        assert_eq!(s.at(-1e-3), 0.0);
        assert_eq!(s.at(0.5), 0.0);
    }

    #[test]
    fn finer_and_coarser_samples_resample_to_the_ricker() {
        // Samples every 0.5 ms read at 0.7 ms (low-passed at 714 Hz, far above the Ricker's band),
        // and samples every 2 ms read at 0.3 ms (interpolated between them).
        for (interval, dt) in [(5e-4, 7e-4), (2e-3, 3e-4)] {
            let (r, s) = sampled_ricker(interval, dt);
            let err = (20..300).map(|n| (s.at(n as f64 * dt) - r.at(n as f64 * dt)).abs()).fold(0.0, f64::max);
            assert!(err < 3e-6, "interval {interval} dt {dt}: {err}");
        }
    }

    #[test]
    fn a_sampled_ricker_has_the_ricker_frequencies() {
        let (r, s) = sampled_ricker(1e-3, 1e-3);
        let (peak, max) = s.frequencies();
        assert!((peak - r.frequency).abs() < 1e-4 * r.frequency, "{peak}");
        assert!((max - r.max_frequency()).abs() < 1.5, "{max}");
    }
}
