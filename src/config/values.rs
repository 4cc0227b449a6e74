//! The ranges every number of the input must lie in, their checks, and the reading of
//! 3-vectors from TOML arrays.

use anyhow::{Result, ensure};
use serde::{Deserialize, Deserializer, de::Error as _};

/// A fixed-size array read from a TOML array of exactly 3 values (serde's own `[T; 3]` takes the
/// first 3 of a longer array and ignores the rest).
pub(super) fn three<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<[T; 3], D::Error> {
    let v = Vec::<T>::deserialize(d)?;
    let n = v.len();
    v.try_into().map_err(|_| D::Error::invalid_length(n, &"an array of exactly 3 values"))
}

pub(super) fn three_opt<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<[T; 3]>, D::Error> {
    three(d).map(Some)
}

/// Largest velocity accepted, m/s: the fastest rocks are below 10 km/s, so anything above is a
/// unit mix-up (km/s given as m/s, or the reverse applied twice).
pub const MAX_VELOCITY: f64 = 1e5;
/// Smallest velocity accepted, m/s (slower than any fluid; guards against m/s given as km/s).
pub const MIN_VELOCITY: f64 = 1.0;
/// Largest grid spacing or absolute coordinate, m (Earth-sized models are well inside).
pub const MAX_LENGTH: f64 = 1e8;
/// Smallest grid spacing, m.
pub const MIN_SPACING: f64 = 1e-6;
/// Largest |source amplitude|: far above any physical use, far below what overflows f32 fields.
pub const MAX_AMPLITUDE: f64 = 1e15;
/// Largest source frequency, Hz.
pub const MAX_FREQUENCY: f64 = 1e9;
/// Largest simulated time or |source delay|, s.
pub const MAX_TIME: f64 = 1e7;

pub(super) fn finite_in(key: &str, v: f64, lo: f64, hi: f64, what: &str) -> Result<()> {
    let range =
        if lo == f64::MIN_POSITIVE { format!("positive and at most {hi:e}") } else { format!("from {lo:e} to {hi:e}") };
    ensure!(v.is_finite() && v >= lo && v <= hi, "{key} = {v:e} must be {what}, finite and {range}");
    Ok(())
}

pub(super) fn finite3(key: &str, v: [f64; 3], lo: f64, hi: f64, what: &str) -> Result<()> {
    for (a, x) in v.iter().enumerate() {
        finite_in(&format!("{key}[{a}]"), *x, lo, hi, what)?;
    }
    Ok(())
}
