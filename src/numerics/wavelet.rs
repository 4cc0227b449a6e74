//! Source time functions.

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
}
