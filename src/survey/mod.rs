//! Surveys: many shots over one model in one invocation. This module says what the shots are
//! (`[survey]`: positions, and whether the receivers move with the shot), what each shot's input
//! is (the survey's input with its own source and receivers: a shot's result file is that of a
//! single run of it), where each shot's result goes, and which shots a process takes.
//!
//! With `[survey] aperture`, each shot runs on the part of the grid around its sources and
//! receivers ([`aperture`]).
//!
//! Shots are handed out dynamically through claim files ([`claims`]): every process (an MPI rank,
//! or any process started on the same survey) takes the next unclaimed shot when it is free, so
//! uneven shots balance. A shot's files are written to temporary names, synced and renamed
//! together (`output::derived::commit_with`), so a result file is whole the moment it is
//! reported done; it records its [`provenance`] and its datasets' checksums. `--resume` keeps the
//! shots whose files are complete, verify and were computed from the same input ([`ResumeMode`]),
//! and runs the others again.

pub mod aperture;
pub mod claims;
pub mod provenance;

pub use claims::{Claim, ClaimState, ShotFile, SurveyFiles};

use crate::config::{Config, Spread};
use anyhow::{Context, Result, bail, ensure};
use std::path::{Path, PathBuf};

/// What `--resume` does with a shot whose file was computed from another input (frequency,
/// velocities, steps, boundary, model file, numerics version: its provenance differs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ResumeMode {
    /// Runs it again, and says how many (`--resume`).
    Rerun,
    /// Refuses to start, naming the shots (`--resume=strict`).
    Strict,
}

/// One shot of a survey.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shot {
    /// 0-based, in the order `[survey]` lists the shots.
    pub index: usize,
    /// Source position, m.
    pub source: [f64; 3],
    /// What the receivers move by (zero with a fixed spread), m.
    pub shift: [f64; 3],
}

/// The shots of `cfg`: its `[survey]`, or the one shot at `[source] position` without one.
pub fn shots(cfg: &Config) -> Result<Vec<Shot>> {
    let Some(survey) = &cfg.survey else {
        return Ok(vec![Shot { index: 0, source: cfg.source.first().position, shift: [0.0; 3] }]);
    };
    let reference = cfg.source.first().position;
    Ok(survey
        .positions()?
        .into_iter()
        .enumerate()
        .map(|(index, source)| {
            let shift = match survey.spread {
                Spread::Fixed => [0.0; 3],
                Spread::Moving => std::array::from_fn(|a| source[a] - reference[a]),
            };
            Shot { index, source, shift }
        })
        .collect())
}

/// The input of one shot as TOML text: the survey's input `text` with `[source] position` at the
/// shot (with `[[source]]`, the first source there and every other moved with it, keeping its
/// offset from the first), every `[[receivers]]` position, line and grid moved by the shot's
/// shift, and no `[survey]`. Its result file is then that of a single run of this text.
pub fn shot_input(text: &str, shot: &Shot) -> Result<String> {
    let mut doc: toml::Table = text.parse().context("the survey's input")?;
    doc.remove("survey");
    let sources: Vec<&mut toml::Table> = match doc.get_mut("source") {
        Some(toml::Value::Table(t)) => vec![t],
        Some(toml::Value::Array(list)) => list.iter_mut().filter_map(|s| s.as_table_mut()).collect(),
        _ => bail!("the input has no [source]"),
    };
    let mut move_by: Option<[f64; 3]> = None;
    for source in sources {
        let v = source.get("position").context("source position")?;
        let (p, form) = position_of(v).context("source position")?;
        let moved = match move_by {
            None => {
                move_by = Some(std::array::from_fn(|a| shot.source[a] - p[a]));
                shot.source
            }
            Some(by) => std::array::from_fn(|a| p[a] + by[a]),
        };
        source.insert("position".into(), coordinates(moved, form));
    }
    if shot.shift != [0.0; 3] {
        let receivers = doc.get_mut("receivers").and_then(|r| r.as_array_mut());
        for r in receivers.into_iter().flatten().filter_map(|r| r.as_table_mut()) {
            for (table, key) in
                [(None, "position"), (Some("line"), "start"), (Some("line"), "end"), (Some("grid"), "origin")]
            {
                let t = match table {
                    None => Some(&mut *r),
                    Some(name) => r.get_mut(name).and_then(|t| t.as_table_mut()),
                };
                if let Some(v) = t.and_then(|t| t.get_mut(key)) {
                    let (p, form) = position_of(v).with_context(|| format!("receivers {key}"))?;
                    *v = coordinates(std::array::from_fn(|a| p[a] + shot.shift[a]), form);
                }
            }
        }
    }
    Ok(toml::to_string(&doc)?)
}

/// A position as the input writes it: [x, y, z], or [x, z] where `form` is 2 (a 2D grid's).
fn coordinates(p: [f64; 3], form: usize) -> toml::Value {
    let kept: Vec<f64> = if form == 2 { vec![p[0], p[2]] } else { p.to_vec() };
    toml::Value::Array(kept.into_iter().map(toml::Value::Float).collect())
}

/// A position of the input text and its form (3 values, or 2 on a 2D grid: [x, z], its y read as
/// 0, which no shift of a 2D survey changes).
fn position_of(v: &toml::Value) -> Result<([f64; 3], usize)> {
    let a = v.as_array().context("a position is an array of 3 numbers (2 on a 2D grid)")?;
    ensure!(matches!(a.len(), 2 | 3), "a position is exactly 3 numbers (2 on a 2D grid), got {}", a.len());
    let mut given = [0.0; 3];
    for (c, x) in given.iter_mut().zip(a) {
        *c = x.as_float().or_else(|| x.as_integer().map(|i| i as f64)).context("a coordinate is a number")?;
    }
    let p = if a.len() == 2 { [given[0], 0.0, given[1]] } else { given };
    Ok((p, a.len()))
}

/// One line of the index: a shot, its positions and its result file.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct IndexEntry {
    pub shot: usize,
    pub source: [f64; 3],
    pub receiver_shift: [f64; 3],
    pub file: String,
    /// "complete" or "missing".
    pub status: String,
    /// Who ran it ("rank 1 on host", from its claim), when known.
    pub ran_by: Option<String>,
}

/// Writes the index of `shots` (atomically): each shot's positions, file and whether it is complete.
pub fn write_index(files: &SurveyFiles, shots: &[Shot], complete: &[bool]) -> Result<PathBuf> {
    ensure!(shots.len() == complete.len(), "one completion flag per shot");
    let entries: Vec<IndexEntry> = shots
        .iter()
        .zip(complete)
        .map(|(s, &done)| IndexEntry {
            shot: s.index,
            source: s.source,
            receiver_shift: s.shift,
            file: files.shot(s.index).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
            status: if done { "complete" } else { "missing" }.into(),
            ran_by: files.claimed_by(s.index),
        })
        .collect();
    let json = serde_json::to_string_pretty(&serde_json::json!({ "shots": entries }))?;
    crate::output::safe::write_file(&files.index(), json.as_bytes())
}

/// Reads an index written by [`write_index`].
pub fn read_index(path: &Path) -> Result<Vec<IndexEntry>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
    let Some(shots) = v.get("shots") else { bail!("{}: no `shots` list", path.display()) };
    Ok(serde_json::from_value(shots.clone())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INPUT: &str = "[grid]\nshape = [20, 10, 12]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                         vp = 2000.0\n[time]\nsteps = 5\n[source]\nposition = [50.0, 40.0, 30.0]\nfrequency = 10.0\n\
                         [[receivers]]\nposition = [60.0, 40.0, 20.0]\n[[receivers]]\n\
                         line = { start = [10.0, 40.0, 10.0], end = [90.0, 40.0, 10.0], count = 3 }\n";

    fn config(survey: &str) -> Config {
        Config::from_toml(&format!("{INPUT}[survey]\n{survey}\n")).unwrap()
    }

    #[test]
    fn shots_from_a_list_a_line_and_a_grid() {
        let c = config("shots = [[10.0, 40.0, 30.0], [20.0, 40.0, 30.0]]");
        assert_eq!(
            shots(&c).unwrap().iter().map(|s| s.source).collect::<Vec<_>>(),
            [[10.0, 40.0, 30.0], [20.0, 40.0, 30.0]]
        );
        let c =
            config("line = { start = [10.0, 40.0, 30.0], end = [110.0, 40.0, 30.0], count = 3 }\nspread = \"moving\"");
        let s = shots(&c).unwrap();
        assert_eq!(s.iter().map(|s| s.source[0]).collect::<Vec<_>>(), [10.0, 60.0, 110.0]);
        assert_eq!(s[2].shift, [60.0, 0.0, 0.0], "moved from [source] position");
        let c = config(
            "grid = { origin = [10.0, 10.0, 30.0], step_a = [10.0, 0.0, 0.0], count_a = 2, step_b = [0.0, 20.0, 0.0], \
             count_b = 3 }",
        );
        let s = shots(&c).unwrap();
        assert_eq!(s.len(), 6);
        assert_eq!((s[1].source, s[5].source, s[5].index), ([20.0, 10.0, 30.0], [20.0, 50.0, 30.0], 5));
        assert_eq!(shots(&Config::from_toml(INPUT).unwrap()).unwrap().len(), 1, "no [survey]: one shot");
    }

    #[test]
    fn bad_surveys_name_the_key() {
        for (survey, key) in [
            ("shots = []", "survey.shots is empty"),
            ("shots = [[1.0, 2.0]]", "survey.shots[0]"),
            (
                "shots = [[1.0, 2.0, 3.0]]\nline = { start = [0.0, 0.0, 0.0], end = [1.0, 0.0, 0.0], count = 2 }",
                "exactly one",
            ),
            ("line = { start = [0.0, 0.0, 0.0], end = [1.0, 0.0, 0.0], count = 0 }", "survey.line.count"),
            ("spread = \"moving\"", "exactly one"),
        ] {
            let e = config(survey).check_values().unwrap_err().to_string();
            assert!(e.contains(key), "{survey}: {e}");
        }
        assert!(Config::from_toml(&format!("{INPUT}[survey]\nspred = \"moving\"\n")).is_err(), "unknown keys");
    }

    #[test]
    fn a_shot_input_moves_the_source_and_a_moving_spread() {
        let c = config("shots = [[70.0, 40.0, 30.0]]\nspread = \"moving\"");
        let shot = shots(&c).unwrap()[0];
        let text = shot_input(&format!("{INPUT}[survey]\nshots = [[70.0, 40.0, 30.0]]\nspread = \"moving\"\n"), &shot)
            .unwrap();
        let s = Config::from_toml(&text).unwrap();
        assert!(s.survey.is_none());
        assert_eq!(s.source.first().position, [70.0, 40.0, 30.0]);
        assert_eq!(s.receivers[0].position, Some([80.0, 40.0, 20.0]));
        let line = s.receivers[1].line.as_ref().unwrap();
        assert_eq!((line.start, line.end, line.count), ([30.0, 40.0, 10.0], [110.0, 40.0, 10.0], 3));
        // A fixed spread keeps the receivers.
        let fixed = Shot { shift: [0.0; 3], ..shot };
        let s = Config::from_toml(&shot_input(INPUT, &fixed).unwrap()).unwrap();
        assert_eq!(s.receivers[0].position, Some([60.0, 40.0, 20.0]));
    }
}
