//! `[source]` and `[[receivers]]`: the wavelet, where the source and receivers are and how
//! positions between grid points are tied to them.

use super::values::*;
use anyhow::{Context, Result};
use serde::Deserialize;

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Metres, in the grid's coordinates (origin included).
    #[serde(deserialize_with = "three")]
    pub position: [f64; 3],
    /// Ricker peak frequency, Hz.
    pub frequency: f64,
    #[serde(default = "one")]
    pub amplitude: f64,
    /// Time of the wavelet's peak, s (default 1 / frequency).
    pub delay: Option<f64>,
    /// How the point source is spread over grid points: "sinc" (default), "trilinear" or "nearest".
    #[serde(default)]
    pub injection: Injection,
    /// Half-width r of the windowed sinc (2r points per axis); only with injection = "sinc".
    pub sinc_half_width: Option<usize>,
}

fn one() -> f64 {
    1.0
}

/// How a position between grid points is tied to them: a source's spread, a receiver's
/// interpolation (see `problem::Positioning`).
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Injection {
    Nearest,
    Trilinear,
    /// Kaiser-windowed sinc (Hicks 2002).
    #[default]
    Sinc,
}

/// One `[[receivers]]` entry: exactly one of `position`, `line` or `grid`.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct ReceiverConfig {
    #[serde(default, deserialize_with = "three_opt")]
    pub position: Option<[f64; 3]>,
    pub line: Option<LineConfig>,
    pub grid: Option<ReceiverGridConfig>,
    /// How the pressure is read between grid points: "sinc" (default), "trilinear" or "nearest".
    #[serde(default)]
    pub interpolation: Injection,
    /// Half-width r of the windowed sinc (2r points per axis); only with interpolation = "sinc".
    pub sinc_half_width: Option<usize>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct LineConfig {
    #[serde(deserialize_with = "three")]
    pub start: [f64; 3],
    #[serde(deserialize_with = "three")]
    pub end: [f64; 3],
    pub count: usize,
}

/// A regular 2D or 3D grid of receivers: `origin + i*step_a + j*step_b (+ k*step_c)`.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ReceiverGridConfig {
    #[serde(deserialize_with = "three")]
    pub origin: [f64; 3],
    #[serde(deserialize_with = "three")]
    pub step_a: [f64; 3],
    pub count_a: usize,
    #[serde(deserialize_with = "three")]
    pub step_b: [f64; 3],
    pub count_b: usize,
    #[serde(default, deserialize_with = "three")]
    pub step_c: [f64; 3],
    #[serde(default = "one_usize")]
    pub count_c: usize,
}

fn one_usize() -> usize {
    1
}

impl ReceiverConfig {
    /// Receivers this entry gives, with checked arithmetic (a line or grid of absurd counts is an
    /// error here, before anything is allocated for it).
    pub fn count(&self) -> Result<usize> {
        if let Some(l) = &self.line {
            return Ok(l.count);
        }
        if let Some(g) = &self.grid {
            return g.count_a.checked_mul(g.count_b).and_then(|n| n.checked_mul(g.count_c)).with_context(|| {
                format!("receivers grid counts {} x {} x {} overflow", g.count_a, g.count_b, g.count_c)
            });
        }
        Ok(self.position.is_some() as usize)
    }
}
