//! Per-step rates of a finished run (bandwidth, throughput) and their summary, from the device
//! seconds of each step.

use super::RunRecord;
use crate::problem::Problem;

/// Per-step rates and their summary, from the device seconds of each step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepStats {
    pub seconds: Vec<f64>,
    /// Theoretical bytes of a step ([`Problem::step_bytes`]) over its seconds, GB/s (1e9): the
    /// seeds' effective bandwidth, which counts the interior only.
    pub effective_gbps: Vec<f64>,
    /// The full step's bytes ([`Problem::full_step_bytes`]: the interior plus the CPML memory
    /// variables) over its seconds, GB/s.
    pub full_step_gbps: Vec<f64>,
    /// Interior points over seconds, 1e9 points per second.
    pub gpts_per_s: Vec<f64>,
    /// Over the run: total bytes (points) over total seconds.
    pub mean_gbps: f64,
    pub median_gbps: f64,
    pub mean_full_step_gbps: f64,
    pub median_full_step_gbps: f64,
    pub mean_gpts: f64,
    pub median_gpts: f64,
    /// A decomposed run's halo exchange seconds in each step (the slowest rank's; part of
    /// `seconds`), None for a run on one domain.
    pub exchange_seconds: Option<Vec<f64>>,
}

impl StepStats {
    pub fn new(seconds: &[f64], step_bytes: u64, full_step_bytes: u64, points: usize) -> StepStats {
        let rate = |amount: f64| -> Vec<f64> { seconds.iter().map(|&s| amount / s.max(1e-12) / 1e9).collect() };
        let effective_gbps = rate(step_bytes as f64);
        let full_step_gbps = rate(full_step_bytes as f64);
        let gpts_per_s = rate(points as f64);
        let total: f64 = seconds.iter().sum::<f64>().max(1e-12);
        let n = seconds.len() as f64;
        StepStats {
            mean_gbps: n * step_bytes as f64 / total / 1e9,
            median_gbps: median(&effective_gbps),
            mean_full_step_gbps: n * full_step_bytes as f64 / total / 1e9,
            median_full_step_gbps: median(&full_step_gbps),
            mean_gpts: n * points as f64 / total / 1e9,
            median_gpts: median(&gpts_per_s),
            seconds: seconds.to_vec(),
            effective_gbps,
            full_step_gbps,
            gpts_per_s,
            exchange_seconds: None,
        }
    }

    /// With a decomposed run's exchange seconds per step.
    pub fn with_exchange(self, exchange_seconds: &[f64]) -> StepStats {
        StepStats { exchange_seconds: Some(exchange_seconds.to_vec()), ..self }
    }
}

/// Median (mean of the two middle values for an even count); 0 for no values.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { 0.5 * (v[m - 1] + v[m]) }
}

impl StepStats {
    /// The statistics of `record`, a run of `problem` (with its halo exchange seconds, if any).
    pub fn of(problem: &Problem, record: &RunRecord) -> StepStats {
        let stats = StepStats::new(
            &record.step_seconds,
            problem.step_bytes(),
            problem.full_step_bytes(),
            problem.layout.points(),
        );
        match &record.exchange_seconds {
            Some(e) => stats.with_exchange(e),
            None => stats,
        }
    }
}
