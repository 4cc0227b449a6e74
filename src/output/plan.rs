//! What a run records besides the traces ([`OutputPlan`]): the snapshot sections of `[output]`,
//! named as the result file names them, and the steps they are taken after. Built once from the
//! configuration and the problem; the time loop takes snapshots by it and the writers lay out
//! the file by it.

use crate::config::{Config, ModelRegion};
pub use crate::grid::Section;
use crate::problem::Problem;
use anyhow::{Context, Result, bail, ensure};

/// One snapshot dataset: its name under `/snapshots`, the section it keeps and, for planes, the
/// grid position of the plane (m) along its normal.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotSpec {
    pub name: String,
    pub section: Section,
    pub at: Option<f64>,
}

/// What the run records besides the traces: snapshot sections and when they are taken.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputPlan {
    /// Steps between snapshots (0: none).
    pub snapshot_every: usize,
    pub snapshots: Vec<SnapshotSpec>,
    /// Number of steps done at each snapshot (the snapshot holds p at time `step * dt`).
    pub snapshot_steps: Vec<usize>,
    /// The part of the run grid the result file covers: the model, without absorbing layers
    /// outside it (None: the whole run grid). Snapshots and `/model/vp` are cropped to it where
    /// they are written ([`super::crop`]).
    pub model_region: Option<ModelRegion>,
    /// Whether `/model/vp` is written (`output.model`).
    pub model: bool,
}

impl OutputPlan {
    /// No snapshots at all.
    pub fn none() -> OutputPlan {
        OutputPlan {
            snapshot_every: 0,
            snapshots: Vec::new(),
            snapshot_steps: Vec::new(),
            model_region: None,
            model: true,
        }
    }

    /// The part of `problem`'s grid the result file covers ([`Self::model_region`]).
    pub fn region(&self, problem: &Problem) -> ModelRegion {
        self.model_region.unwrap_or_else(|| ModelRegion::whole(problem.shape(), problem.origin))
    }

    /// Reads `[output]`: `snapshot_every` steps apart, the sections of `[[output.snapshot]]`
    /// (the whole volume when none is listed). Planes snap to the nearest grid index of the
    /// model; the sections are the run grid's, cut to the model where they are written.
    pub fn from_config(cfg: &Config, problem: &Problem) -> Result<OutputPlan> {
        let region = cfg.model_region();
        ensure!(region.run_shape == problem.shape(), "the output plan of a problem of another configuration");
        let model_region = Some(region);
        let every = cfg.output.snapshot_every;
        if every == 0 {
            return Ok(OutputPlan { model_region, model: cfg.output.model, ..OutputPlan::none() });
        }
        let grid = region.shape;
        let mut snapshots: Vec<SnapshotSpec> = Vec::new();
        let listed: Vec<_> = if cfg.output.snapshot.is_empty() {
            vec![crate::config::SnapshotConfig { kind: "volume".into(), at: None }]
        } else {
            cfg.output.snapshot.clone()
        };
        for (i, s) in listed.iter().enumerate() {
            let key = format!("output.snapshot[{i}]");
            let axis = match s.kind.as_str() {
                "volume" => None,
                "xz" => Some(1),
                "xy" => Some(2),
                "yz" => Some(0),
                other => bail!("{key}.kind = {other:?}: expected \"volume\", \"xz\", \"xy\" or \"yz\""),
            };
            let two_d = problem.is_2d();
            ensure!(
                !two_d || matches!(axis, None | Some(1)),
                "{key}.kind = {:?}: a 2D grid (grid.shape = [nx, nz]) is one xz plane: its snapshots are \"xz\" \
                 or \"volume\"",
                s.kind
            );
            let (section, at) = match axis {
                None => {
                    ensure!(s.at.is_none(), "{key}.at: a volume snapshot has no plane position");
                    (Section::Volume, None)
                }
                // A 2D grid's xz plane is the grid itself: `at` is its y or nothing.
                Some(1) if two_d && s.at.is_none_or(|at| at == region.origin[1]) => {
                    (Section::Xz { iy: 0 }, Some(region.origin[1]))
                }
                Some(a) => {
                    let at = s.at.with_context(|| format!("{key}.at: a {} plane needs its position (m)", s.kind))?;
                    // In the model's grid; the section's index is the run grid's.
                    let u = (at - region.origin[a]) / problem.spacing[a];
                    ensure!(
                        u > -0.5 && u < grid[a] as f64 - 0.5,
                        "{key}.at = {at} m lies outside the grid along {}",
                        ["x", "y", "z"][a]
                    );
                    let i = (u.round().max(0.0) as usize).min(grid[a] - 1);
                    let run_index = region.first[a] + i;
                    let section = match a {
                        0 => Section::Yz { ix: run_index },
                        1 => Section::Xz { iy: run_index },
                        _ => Section::Xy { iz: run_index },
                    };
                    (section, Some(region.origin[a] + i as f64 * problem.spacing[a]))
                }
            };
            let base = if section == Section::Volume { "pressure".to_string() } else { format!("pressure_{}", s.kind) };
            // A second plane of the same kind gets a number: pressure_xz, pressure_xz_1, ...
            let taken = snapshots.iter().filter(|t| same_kind(&t.section, &section)).count();
            let name = if taken == 0 { base } else { format!("{base}_{taken}") };
            snapshots.push(SnapshotSpec { name, section, at });
        }
        let snapshot_steps = (1..=problem.steps / every).map(|k| k * every).collect();
        Ok(OutputPlan { snapshot_every: every, snapshots, snapshot_steps, model_region, model: cfg.output.model })
    }

    /// Values in one snapshot: every section's, one after the other (the order of `snapshots`).
    pub fn snapshot_len(&self, grid: [usize; 3]) -> usize {
        self.snapshots.iter().map(|s| s.section.len(grid)).sum()
    }

    /// The part of [`snapshot_len`](Self::snapshot_len) in volume sections.
    pub fn volume_len(&self, grid: [usize; 3]) -> usize {
        self.snapshots.iter().filter(|s| s.section == Section::Volume).map(|s| s.section.len(grid)).sum()
    }

    /// An xz-plane to picture: an xz snapshot, or the volume cut through `iy`.
    pub fn xz_view(&self, iy: usize) -> Option<(usize, Section)> {
        let i = self
            .snapshots
            .iter()
            .position(|s| matches!(s.section, Section::Xz { .. }))
            .or_else(|| self.snapshots.iter().position(|s| s.section == Section::Volume))?;
        let section = match self.snapshots[i].section {
            Section::Volume => Section::Xz { iy },
            s => s,
        };
        Some((i, section))
    }
}

fn same_kind(a: &Section, b: &Section) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::resources::{base_host_bytes, snapshot_values};

    #[test]
    fn sections_extract_the_right_points() {
        let grid = [4, 3, 2];
        let field: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let mut out = Vec::new();
        Section::Xz { iy: 1 }.extract(grid, &field, &mut out);
        assert_eq!(out, vec![4.0, 5.0, 6.0, 7.0, 16.0, 17.0, 18.0, 19.0]);
        Section::Xy { iz: 1 }.extract(grid, &field, &mut out);
        assert_eq!(out, (12..24).map(|i| i as f32).collect::<Vec<_>>());
        Section::Yz { ix: 2 }.extract(grid, &field, &mut out);
        assert_eq!(out, vec![2.0, 6.0, 10.0, 14.0, 18.0, 22.0]);
        assert_eq!(Section::Yz { ix: 2 }.shape(grid), vec![2, 3]);
    }

    pub(crate) fn config_for(snapshots: &str) -> Config {
        let text = format!(
            "[grid]\nshape = [10, 8, 6]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 1500.0\n\
             [time]\nsteps = 25\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n\
             [boundary]\nkind = \"none\"\n[output]\nsnapshot_every = 10\n{snapshots}"
        );
        Config::from_toml(&text).unwrap()
    }

    pub(crate) fn plan_for(snapshots: &str) -> Result<OutputPlan> {
        let cfg = config_for(snapshots);
        let problem = Problem::build(&cfg, vec![1500.0; 480]).unwrap();
        OutputPlan::from_config(&cfg, &problem)
    }

    #[test]
    fn snapshot_buffers_hold_the_planned_sections_only() {
        for list in
            ["", "snapshot = [{ kind = \"xz\", at = 34.0 }, { kind = \"yz\", at = 0.0 }, { kind = \"xy\", at = 10.0 }]"]
        {
            let (cfg, plan) = (config_for(list), plan_for(list).unwrap());
            assert_eq!(snapshot_values(&cfg), plan.snapshot_len([10, 8, 6]), "{list}");
        }
        // xz 6 x 10, yz 6 x 8, xy 8 x 10: 188 values instead of the volume's 480.
        assert_eq!(
            snapshot_values(&config_for(
                "snapshot = [{ kind = \"xz\", at = 34.0 }, { kind = \"yz\", at = 0.0 }, { kind = \"xy\", at = 10.0 }]"
            )),
            188
        );
        assert_eq!(base_host_bytes(&config_for(""), 2), 480.0 * 8.0 + 4.0 * 2.0 * 480.0);
    }

    #[test]
    fn plans_name_sections_and_reject_bad_ones() {
        let plan = plan_for("").unwrap();
        assert_eq!(plan.snapshot_steps, vec![10, 20]);
        assert_eq!(plan.snapshots.len(), 1);
        assert_eq!((plan.snapshots[0].name.as_str(), plan.snapshots[0].section), ("pressure", Section::Volume));
        let plan = plan_for(
            "snapshot = [{ kind = \"xz\", at = 34.0 }, { kind = \"xz\", at = 0.0 }, { kind = \"volume\" }, \
             { kind = \"yz\", at = 90.0 }]",
        )
        .unwrap();
        let names: Vec<_> = plan.snapshots.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["pressure_xz", "pressure_xz_1", "pressure", "pressure_yz"]);
        assert_eq!(plan.snapshots[0].section, Section::Xz { iy: 3 });
        assert_eq!(plan.snapshots[0].at, Some(30.0));
        assert_eq!(plan.snapshots[3].section, Section::Yz { ix: 9 });
        assert_eq!(plan.xz_view(5), Some((0, Section::Xz { iy: 3 })));
        let err = plan_for("snapshot = [{ kind = \"xq\" }]").unwrap_err().to_string();
        assert!(err.contains("output.snapshot[0].kind"), "{err}");
        let err = plan_for("snapshot = [{ kind = \"xy\", at = 500.0 }]").unwrap_err().to_string();
        assert!(err.contains("output.snapshot[0].at"), "{err}");
        let err = plan_for("snapshot = [{ kind = \"xy\" }]").unwrap_err().to_string();
        assert!(err.contains("output.snapshot[0].at"), "{err}");
    }
}
