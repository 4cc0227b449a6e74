//! `[survey]`: the shots of a survey, where each one's source is, and whether the receivers move
//! with it.

use super::shot::{LineConfig, ReceiverGridConfig};
use super::values::*;
use anyhow::{Result, ensure};
use serde::Deserialize;

/// Largest number of shots a survey may list.
pub const MAX_SHOTS: usize = 1_000_000;

/// `[survey]`: the shot positions (exactly one of `shots`, `line` or `grid`) and whether the
/// receivers stay or move with the shot.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SurveyConfig {
    /// Shot positions one by one, m.
    pub shots: Option<Vec<Vec<f64>>>,
    /// Shots evenly spaced from `start` to `end`.
    pub line: Option<LineConfig>,
    /// Shots on a regular grid, `origin + i*step_a + j*step_b (+ k*step_c)`.
    pub grid: Option<ReceiverGridConfig>,
    /// "fixed" (default): every shot records the `[[receivers]]` as given; "moving": the receivers
    /// move with the shot, by its offset from `[source] position` (a streamer, a moving spread).
    #[serde(default)]
    pub spread: Spread,
    /// Processes running each shot together, its grid split into z-slabs over them (as
    /// `[run] decomposition = "z"`); the job's processes form groups of this many, each group
    /// taking shots in turn. 1 (default): every process runs whole shots on its own.
    #[serde(default = "one_rank")]
    pub ranks_per_shot: usize,
    /// Shot aperture: the margin (m) around each shot's sources and receivers, in x (and y on a 3D
    /// grid), of the box the shot runs on (`survey::aperture`); None: the whole grid.
    pub aperture: Option<f64>,
}

fn one_rank() -> usize {
    1
}

/// Whether a survey's receivers move with the shot.
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    #[default]
    Fixed,
    Moving,
}

impl SurveyConfig {
    /// The shot positions in order, checked: exactly one of `shots`, `line` or `grid`, at least
    /// one shot and at most [`MAX_SHOTS`], every coordinate finite (errors name `survey.*`).
    pub fn positions(&self) -> Result<Vec<[f64; 3]>> {
        let given = self.shots.is_some() as u8 + self.line.is_some() as u8 + self.grid.is_some() as u8;
        ensure!(given == 1, "survey: give exactly one of `shots`, `line` or `grid` ({given} given)");
        let positions: Vec<[f64; 3]> = if let Some(list) = &self.shots {
            ensure!(list.len() <= MAX_SHOTS, "survey.shots: {} shots, more than {MAX_SHOTS}", list.len());
            list.iter()
                .enumerate()
                .map(|(i, p)| {
                    <[f64; 3]>::try_from(p.as_slice()).map_err(|_| {
                        anyhow::anyhow!("survey.shots[{i}] = {p:?}: a position is exactly 3 coordinates in m")
                    })
                })
                .collect::<Result<_>>()?
        } else if let Some(l) = &self.line {
            ensure!((1..=MAX_SHOTS).contains(&l.count), "survey.line.count = {} must be in 1..={MAX_SHOTS}", l.count);
            let k = |i: usize| if l.count == 1 { 0.0 } else { i as f64 / (l.count - 1) as f64 };
            (0..l.count).map(|i| std::array::from_fn(|a| l.start[a] + k(i) * (l.end[a] - l.start[a]))).collect()
        } else {
            let g = self.grid.as_ref().expect("one of the three");
            let n = g.count_a.checked_mul(g.count_b).and_then(|n| n.checked_mul(g.count_c)).unwrap_or(usize::MAX);
            ensure!(
                (1..=MAX_SHOTS).contains(&n),
                "survey.grid: {} x {} x {} shots must be 1 to {MAX_SHOTS}",
                g.count_a,
                g.count_b,
                g.count_c
            );
            let mut v = Vec::with_capacity(n);
            for k in 0..g.count_c {
                for j in 0..g.count_b {
                    for i in 0..g.count_a {
                        v.push(std::array::from_fn(|a| {
                            g.origin[a] + i as f64 * g.step_a[a] + j as f64 * g.step_b[a] + k as f64 * g.step_c[a]
                        }));
                    }
                }
            }
            v
        };
        ensure!(!positions.is_empty(), "survey.shots is empty: list at least one shot");
        for (i, p) in positions.iter().enumerate() {
            finite3(&format!("survey shot {i}"), *p, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
        }
        Ok(positions)
    }
}
