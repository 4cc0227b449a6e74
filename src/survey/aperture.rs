//! Shot aperture (`[survey] aperture`): a shot runs on the part of the model around its sources
//! and receivers, the margin added in x (and y on a 3D grid), clipped to the grid; z keeps the
//! whole depth. This module finds a shot's box ([`ShotBox`]) on the whole grid's points, writes
//! the shot's input and configuration on it (the `[grid]` origin and shape of the box, the whole
//! run's dt and steps), builds its [`Problem`] from the whole grid's model cut to the box (so every
//! point of the box has the whole run's model value, bit for bit, smoothing included), and adds a
//! box's image back into the whole grid's at the box's place. It works on configurations and
//! problems, not on a backend: a backend opens on a shot's box problem as on any problem.
//!
//! Each box's absorbing layers sit around the box: reflections from beyond it are lost, and the
//! boundary's residual reflection comes from the box's edges.

use crate::config::{Config, GridConfig, ModelRegion};
use crate::model::Model;
use crate::problem::Problem;
use anyhow::{Context, Result, ensure};

/// Grid points added beyond the margin on each side, so that a source's or receiver's sinc taps
/// (10 points at most) lie inside the box.
pub const TAP_POINTS: usize = 10;

/// A checked `survey.aperture` (m): a finite margin, zero or more.
pub fn check_margin(margin: f64) -> Result<()> {
    ensure!(
        margin.is_finite() && margin >= 0.0,
        "survey.aperture = {margin}: the margin around a shot's sources and receivers must be a finite length in m, \
         zero or more (leave the key out to run every shot on the whole grid)"
    );
    Ok(())
}

/// The margin of `cfg`'s `[survey] aperture`, checked, or None.
pub fn margin(cfg: &Config) -> Result<Option<f64>> {
    let Some(margin) = cfg.survey.as_ref().and_then(|s| s.aperture) else { return Ok(None) };
    check_margin(margin)?;
    Ok(Some(margin))
}

/// A shot's box on the whole grid of `[grid]`: its first point and shape, per axis x, y, z.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShotBox {
    /// The whole grid's index of the box's point (0, 0, 0).
    pub first: [usize; 3],
    /// The box's points along x, y, z.
    pub shape: [usize; 3],
    /// The whole grid's points along x, y, z.
    pub whole: [usize; 3],
}

impl ShotBox {
    /// The box's points.
    pub fn points(&self) -> usize {
        self.shape.iter().product()
    }

    /// The box's points as a fraction of the whole grid's.
    pub fn share(&self) -> f64 {
        self.points() as f64 / self.whole.iter().product::<usize>() as f64
    }

    /// The box's `[grid]`: the whole grid's points it holds, its origin at its first one.
    pub fn grid(&self, whole: &GridConfig) -> GridConfig {
        GridConfig {
            shape: self.shape,
            spacing: whole.spacing,
            origin: std::array::from_fn(|a| whole.origin[a] + self.first[a] as f64 * whole.spacing[a]),
        }
    }

    /// `values` of the whole grid (dense (nz, ny, nx), x fastest) cut to the box.
    pub fn cut(&self, values: &[f32]) -> Vec<f32> {
        let ([nx, ny, _], [bx, by, bz], [fx, fy, fz]) = (self.whole, self.shape, self.first);
        let mut out = Vec::with_capacity(self.points());
        for k in fz..fz + bz {
            for j in fy..fy + by {
                out.extend_from_slice(&values[(k * ny + j) * nx + fx..][..bx]);
            }
        }
        out
    }
}

/// The box of a shot whose input (on the whole grid) is `shot_cfg`: its sources and receivers,
/// `margin` m and [`TAP_POINTS`] beyond them in x (and y on a 3D grid), clipped to the grid.
/// A box narrower than the stencil (2R + 1 points) is refused.
pub fn shot_box(shot_cfg: &Config, margin: f64) -> Result<ShotBox> {
    check_margin(margin)?;
    let grid = &shot_cfg.grid;
    let (sources, receivers, _) = crate::problem::shot_geometry(shot_cfg, 1.0, 1)?;
    let positions: Vec<[f64; 3]> =
        sources.iter().map(|s| s.position).chain(receivers.iter().map(|r| r.position)).collect();
    let mut first = [0; 3];
    let mut shape = grid.shape;
    for a in [0, 1] {
        if a == 1 && grid.is_2d() {
            continue;
        }
        let (lo, hi) =
            positions.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| (l.min(p[a]), h.max(p[a])));
        let index = |x: f64| (x - grid.origin[a]) / grid.spacing[a];
        let last = grid.shape[a] - 1;
        let i0 = (index(lo - margin).floor() - TAP_POINTS as f64).clamp(0.0, last as f64) as usize;
        let i1 = (index(hi + margin).ceil() + TAP_POINTS as f64).clamp(0.0, last as f64) as usize;
        (first[a], shape[a]) = (i0, i1 - i0 + 1);
        let needed = 2 * shot_cfg.stencil.radius + 1;
        ensure!(
            shape[a] == grid.shape[a] || shape[a] >= needed,
            "survey.aperture: a shot's box is {} points along {}, fewer than the stencil's {needed}",
            shape[a],
            ["x", "y"][a]
        );
    }
    Ok(ShotBox { first, shape, whole: grid.shape })
}

/// The configuration of a shot on its box: `shot_cfg` (the shot on the whole grid) with the box's
/// `[grid]`, and the whole run's `dt` and `steps` (a box's own CFL limit may differ).
pub fn box_config(shot_cfg: &Config, b: &ShotBox, dt: f64, steps: usize) -> Config {
    let mut c = shot_cfg.clone();
    c.grid = b.grid(&shot_cfg.grid);
    (c.time.dt, c.time.steps, c.time.duration) = (Some(dt), Some(steps), None);
    c
}

/// The input text of a shot on its box: `text` (the shot's input on the whole grid, as
/// [`super::shot_input`] writes it) with `[grid] origin` and `shape` the box's (in the form the
/// input gives them: 2 numbers on a 2D grid) and `[time]` the whole run's `dt` and `steps`.
pub fn box_input(text: &str, b: &ShotBox, whole: &GridConfig, dt: f64, steps: usize) -> Result<String> {
    let mut doc: toml::Table = text.parse().context("the shot's input")?;
    let g = b.grid(whole);
    let grid = doc.get_mut("grid").and_then(|g| g.as_table_mut()).context("the input has no [grid]")?;
    let two = grid.get("shape").and_then(|s| s.as_array()).is_some_and(|s| s.len() == 2);
    let pick = |v: [f64; 3]| if two { vec![v[0], v[2]] } else { v.to_vec() };
    let shape = pick(g.shape.map(|n| n as f64)).into_iter().map(|n| toml::Value::Integer(n as i64)).collect();
    grid.insert("shape".into(), toml::Value::Array(shape));
    grid.insert("origin".into(), toml::Value::Array(pick(g.origin).into_iter().map(toml::Value::Float).collect()));
    let time = doc.entry("time").or_insert_with(|| toml::Value::Table(Default::default()));
    let time = time.as_table_mut().context("[time] is a table")?;
    time.remove("duration");
    time.insert("dt".into(), toml::Value::Float(dt));
    time.insert("steps".into(), toml::Value::Integer(steps as i64));
    Ok(toml::to_string(&doc)?)
}

/// Each shot's input `(text, config)` (on the whole grid) moved onto its box: its text by
/// [`box_input`], its configuration by [`box_config`] (what else it holds kept); the boxes in the
/// shots' order.
pub fn box_inputs(inputs: &mut [(String, Config)], margin: f64, dt: f64, steps: usize) -> Result<Vec<ShotBox>> {
    inputs
        .iter_mut()
        .enumerate()
        .map(|(i, (text, cfg))| {
            let b = shot_box(cfg, margin).with_context(|| format!("survey shot {i}"))?;
            *text = box_input(text, &b, &cfg.grid, dt, steps)?;
            *cfg = box_config(cfg, &b, dt, steps);
            Ok(b)
        })
        .collect()
}

/// The problem of a shot on its box: `box_cfg` ([`box_config`]) on the whole grid's `model`
/// cut to the box.
pub fn box_problem(box_cfg: &Config, model: &Model, b: &ShotBox) -> Result<Problem> {
    Problem::build_with_density(box_cfg, b.cut(&model.vp), model.rho.as_ref().map(|r| b.cut(r)))
}

/// Adds `part`, a field on the run grid of a shot's box (the box's model region `box_region`),
/// into `whole`, the same field on the whole run grid (`whole_region`), at the box's place. The
/// box's absorbing layers are left out where they lie inside the whole model (they hold no
/// image of it); where the box reaches the whole grid's edge, its layers are the whole run's.
pub fn add_into_whole(
    whole: &mut [f64],
    whole_region: &ModelRegion,
    part: &[f64],
    box_region: &ModelRegion,
    b: &ShotBox,
) {
    let [wx, wy, _] = whole_region.run_shape;
    let [px, py, pz] = box_region.run_shape;
    // Along each axis, the box's run indices kept: its model points, and its layers where the
    // box's edge is the grid's.
    let kept: [std::ops::Range<usize>; 3] = std::array::from_fn(|a| {
        let lo = if b.first[a] == 0 { 0 } else { box_region.first[a] };
        let hi = if b.first[a] + b.shape[a] == b.whole[a] {
            box_region.run_shape[a]
        } else {
            box_region.first[a] + b.shape[a]
        };
        lo..hi
    });
    // Box run index i along axis a is whole run index i + first[a] (both grids' layers are as wide).
    for k in kept[2].clone().filter(|&k| k < pz) {
        for j in kept[1].clone().filter(|&j| j < py) {
            let from = &part[(k * py + j) * px..][..px];
            let wk = k + b.first[2];
            let wj = j + b.first[1];
            let to = &mut whole[(wk * wy + wj) * wx + b.first[0]..];
            for i in kept[0].clone() {
                to[i] += from[i];
            }
        }
    }
}

/// The whole grid's models a migration's shots are cut from: the migration velocity of `[model]`
/// and, where the data are modelled, `[imaging] true_model`, on the whole run's dt and steps.
pub struct MigrationBoxes {
    margin: f64,
    migration: Model,
    truth: Option<(crate::config::ModelSection, Model)>,
    dt: f64,
    steps: usize,
    whole_region: ModelRegion,
}

/// One migrated shot on its box: its problems in the migration velocity and, where the data are
/// modelled, in the true model.
pub struct BoxedShot {
    pub shot_box: ShotBox,
    pub migration: Problem,
    pub truth: Option<Problem>,
    whole_region: ModelRegion,
    box_region: ModelRegion,
}

impl MigrationBoxes {
    /// For `cfg` with `[survey] aperture` (None without): its models sampled on the whole grid
    /// (files relative to `input_dir`), the shots to run on `dt` and `steps` (the whole run's).
    /// Observed data from gathers are refused: their shots are placed by the files' headers.
    pub fn new(cfg: &Config, input_dir: &std::path::Path, dt: f64, steps: usize) -> Result<Option<MigrationBoxes>> {
        let Some(margin) = margin(cfg)? else { return Ok(None) };
        let imaging = cfg.imaging.as_ref().context("[imaging]")?;
        ensure!(
            imaging.observed.is_none(),
            "survey.aperture with imaging.observed: a shot's box is made from the input's shots, and gathers are              placed by their headers; leave the aperture out, or model the data in imaging.true_model"
        );
        let truth = match imaging.true_model()? {
            Some(section) => {
                let mut c = cfg.clone();
                c.model = section.clone();
                Some((section, crate::model::sample(&c, input_dir).context("imaging.true_model")?))
            }
            None => None,
        };
        let migration = crate::model::sample(cfg, input_dir)?;
        Ok(Some(MigrationBoxes { margin, migration, truth, dt, steps, whole_region: cfg.model_region() }))
    }

    /// The banner's line of what the aperture saves over the shots of inputs `shot_cfgs`.
    pub fn saving_line(&self, shot_cfgs: &[Config]) -> Result<String> {
        let boxes: Vec<ShotBox> = shot_cfgs.iter().map(|c| shot_box(c, self.margin)).collect::<Result<_>>()?;
        Ok(saving_line(self.margin, &boxes))
    }

    /// The shot whose input on the whole grid is `shot_cfg`, on its box.
    pub fn shot(&self, shot_cfg: &Config) -> Result<BoxedShot> {
        let b = shot_box(shot_cfg, self.margin)?;
        let cfg = box_config(shot_cfg, &b, self.dt, self.steps);
        let migration = box_problem(&cfg, &self.migration, &b)?;
        let truth = match &self.truth {
            Some((section, model)) => {
                let mut c = cfg.clone();
                c.model = section.clone();
                Some(box_problem(&c, model, &b).context("imaging.true_model")?)
            }
            None => None,
        };
        Ok(BoxedShot { shot_box: b, migration, truth, whole_region: self.whole_region, box_region: cfg.model_region() })
    }
}

impl BoxedShot {
    /// Adds `part` (a field on this shot's box's run grid) into `whole` at the box's place
    /// ([`add_into_whole`]).
    pub fn add_into(&self, whole: &mut [f64], part: &[f64]) {
        add_into_whole(whole, &self.whole_region, part, &self.box_region, &self.shot_box);
    }
}

/// What an aperture saves over `boxes`: a line for the banner, the boxes' points against the
/// whole grid's.
pub fn saving_line(margin: f64, boxes: &[ShotBox]) -> String {
    let shares: Vec<f64> = boxes.iter().map(ShotBox::share).collect();
    let lo = shares.iter().copied().fold(f64::INFINITY, f64::min) * 100.0;
    let hi = shares.iter().copied().fold(0.0, f64::max) * 100.0;
    let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64 * 100.0;
    format!(
        "aperture: {margin} m around each shot's sources and receivers (survey.aperture); a shot's box holds {lo:.1}% to \
         {hi:.1}% of the grid's points (mean {mean:.1}%): a saving of {:.1}% of the points a shot computes",
        100.0 - mean
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const INPUT: &str = "[grid]\nshape = [101, 5, 20]\nspacing = [10.0, 10.0, 10.0]\norigin = [-100.0, 0.0, 0.0]\n\
                         [model]\nkind = \"constant\"\nvp = 2000.0\n[time]\nduration = 0.1\n[source]\n\
                         position = [200.0, 20.0, 30.0]\nfrequency = 10.0\n[[receivers]]\n\
                         line = { start = [150.0, 20.0, 20.0], end = [350.0, 20.0, 20.0], count = 5 }\n";

    #[test]
    fn a_box_spans_the_shot_and_its_margin_clipped_to_the_grid() {
        let cfg = Config::from_toml(INPUT).unwrap();
        let b = shot_box(&cfg, 100.0).unwrap();
        // x from 150 - 100 = 50 m (index 15) less 10 points, to 350 + 100 = 450 m (index 55) plus 10.
        assert_eq!((b.first[0], b.shape[0]), (5, 61));
        // y: the grid's 5 points are fewer than the margin's reach: the whole of y; z: whole.
        assert_eq!((b.first[1], b.shape[1], b.first[2], b.shape[2]), (0, 5, 0, 20));
        assert_eq!(b.grid(&cfg.grid).origin, [-50.0, 0.0, 0.0]);
        let wide = shot_box(&cfg, 1e4).unwrap();
        assert_eq!(wide, ShotBox { first: [0; 3], shape: [101, 5, 20], whole: [101, 5, 20] });
    }

    #[test]
    fn a_box_input_holds_the_box_grid_and_the_whole_runs_time() {
        let cfg = Config::from_toml(INPUT).unwrap();
        let b = shot_box(&cfg, 100.0).unwrap();
        let c = Config::from_toml(&box_input(INPUT, &b, &cfg.grid, 1e-3, 77).unwrap()).unwrap();
        assert_eq!((c.grid.shape, c.grid.origin), ([61, 5, 20], [-50.0, 0.0, 0.0]));
        assert_eq!((c.time.dt, c.time.steps, c.time.duration), (Some(1e-3), Some(77), None));
        assert_eq!(c.grid.shape, box_config(&cfg, &b, 1e-3, 77).grid.shape);
    }

    #[test]
    fn a_cut_and_an_add_back_put_every_point_in_its_place() {
        let b = ShotBox { first: [2, 1, 0], shape: [3, 2, 2], whole: [6, 4, 2] };
        let values: Vec<f32> = (0..48).map(|i| i as f32).collect();
        let cut = b.cut(&values);
        assert_eq!(cut, [8.0, 9.0, 10.0, 14.0, 15.0, 16.0, 32.0, 33.0, 34.0, 38.0, 39.0, 40.0]);
        let (region, part_region) = (ModelRegion::whole(b.whole, [0.0; 3]), ModelRegion::whole(b.shape, [0.0; 3]));
        let mut whole = vec![0.0; 48];
        add_into_whole(&mut whole, &region, &cut.iter().map(|&v| v as f64).collect::<Vec<_>>(), &part_region, &b);
        for (i, w) in whole.iter().enumerate() {
            let inside = cut.contains(&(i as f32));
            assert_eq!(*w, if inside { i as f64 } else { 0.0 }, "point {i}");
        }
    }

    #[test]
    fn bad_margins_name_the_key() {
        for m in [-1.0, f64::NAN, f64::INFINITY] {
            assert!(check_margin(m).unwrap_err().to_string().contains("survey.aperture"), "{m}");
        }
        let survey = "[survey]\nshots = [[200.0, 20.0, 30.0]]\naperture = 100.0\nranks_per_shot = 2\n";
        let e = Config::from_toml(&format!("{INPUT}{survey}")).unwrap().check_values().unwrap_err().to_string();
        assert!(e.contains("survey.aperture") && e.contains("ranks_per_shot"), "{e}");
    }
}
