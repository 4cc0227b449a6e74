//! The density's Problem API: a uniform density takes the constant-density path, the stiffness
//! and buoyancy follow the density, and the buoyancy fills every cell of a padded field with the
//! values the operator reads there.

use super::*;

/// A 6 x 5 x 8 grid, 10 m spacing, R = 2, vp 1500 above z = 35 m and 3000 below.
fn config(density: &str, boundary: &str) -> Config {
    let text = format!(
        "[grid]\nshape = [6, 5, 8]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"layered\"\ndepths = [35.0]\n\
         velocities = [1500.0, 3000.0]\n{density}\n[time]\nsteps = 3\n[source]\nposition = [20.0, 20.0, 20.0]\n\
         frequency = 10.0\n[stencil]\nradius = 2\n[boundary]\n{boundary}\n"
    );
    Config::from_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn vp() -> Vec<f32> {
    (0..8).flat_map(|z| std::iter::repeat_n(if z < 4 { 1500.0 } else { 3000.0 }, 30)).collect()
}

fn build(density: &str, boundary: &str) -> Result<Problem> {
    Problem::build(&config(density, boundary), vp())
}

const NO_LAYERS: &str = "kind = \"none\"";

#[test]
fn a_uniform_density_is_the_constant_density_problem() {
    let none = build("", NO_LAYERS).unwrap();
    for uniform in
        ["density = 2000.0", "density = [1800.0, 1800.0]", "density = { depths = [5.0], values = [900.0, 900.0] }"]
    {
        let p = build(uniform, NO_LAYERS).unwrap();
        assert_eq!(p.density, None, "{uniform}");
        assert_eq!(p.stiffness(), none.vel2dt2(), "{uniform}");
        assert_eq!(p.step_bytes(), none.step_bytes());
    }
    let layered = build("density = [1000.0, 2500.0]", NO_LAYERS).unwrap();
    assert_eq!(layered.step_bytes(), none.step_bytes() + 4 * 6 * 5 * 8, "the buoyancy read once more");
}

#[test]
fn stiffness_and_buoyancy_follow_the_density() {
    let p = build("density = [1000.0, 2500.0]", NO_LAYERS).unwrap();
    let d = p.density.as_ref().unwrap();
    assert_eq!((d.first, d.rho_ref, d.rho.len()), (0, 1000.0, 240));
    assert_eq!(p.stiffness_at([1, 2, 1]), p.vel2dt2_at([1, 2, 1]));
    assert_eq!(p.stiffness_at([1, 2, 6]), p.vel2dt2_at([1, 2, 6]) * 2.5);
    assert_eq!((p.buoyancy_at([1, 2, 1]), p.buoyancy_at([1, 2, 6])), (1.0, 0.4));
    // Into a padded field, whole or in chunks of planes: the dense stiffness scattered.
    let layout = Layout::new([6, 5, 8], 2).with_plane_padding(32);
    let mut want = vec![-1.0f32; layout.len()];
    let dense: Vec<f32> = p.stiffness().into_iter().map(|v| v as f32).collect();
    layout.scatter(&dense, &mut want);
    let mut whole = vec![-1.0f32; layout.len()];
    p.stiffness_into(&layout, &mut whole, |v| v as f32);
    assert_eq!(whole, want);
    let mut chunked = vec![-1.0f32; layout.len()];
    for first in (0..8).step_by(3) {
        let planes = 3.min(8 - first);
        let at = (layout.halo + first) * layout.plane;
        p.stiffness_planes_into(&layout, first, &mut chunked[at..at + planes * layout.plane], |v| v as f32);
    }
    assert_eq!(chunked, want);
    // Gardner's relation from the velocity: rho_ref is the slow layer's.
    let g = build("density = \"gardner\"", NO_LAYERS).unwrap();
    let ratio = (3000.0f64 / 1500.0).powf(0.25);
    assert!((g.buoyancy_at([0, 0, 7]) - 1.0 / ratio).abs() < 1e-6);
}

/// Every cell of the padded field is written: the interior's bh, the x and y halos the edge
/// column and row, the z halo the edge plane at the bottom and the mirror image above a free
/// surface, padding the edge values.
#[test]
fn buoyancy_fills_every_cell_of_a_padded_field() {
    let density = "density = { depths = [15.0, 25.0, 45.0], values = [1000.0, 2000.0, 4000.0, 5000.0] }";
    for free_surface in [false, true] {
        let boundary = format!("kind = \"none\"\nfree_surface = {free_surface}");
        let p = build(density, &boundary).unwrap();
        let layout = Layout::new([6, 5, 8], 2).with_plane_padding(32);
        let mut field = vec![f32::NAN; layout.len()];
        p.buoyancy_into(&layout, &mut field, |v| v as f32);
        assert!(field.iter().all(|v| v.is_finite()), "every cell written");
        let bh = |z: usize| p.buoyancy_at([0, 0, z]) as f32;
        assert_eq!((bh(0), bh(2), bh(3), bh(7)), (1.0, 0.5, 0.25, 0.2));
        for z in -2..10isize {
            let want = match z {
                z if z < 0 && free_surface => bh(-z as usize),
                z => bh(z.clamp(0, 7) as usize),
            };
            for (x, y) in [(-2, -2), (0, 0), (5, 4), (7, 6), (-1, 3)] {
                assert_eq!(field[layout.index(x, y, z)], want, "({x}, {y}, {z}), free surface {free_surface}");
            }
        }
        assert_eq!(field[layout.len() - 1], bh(7), "the slack repeats the last plane");
    }
}

/// A part of a decomposed run holds the density R planes beyond its own, and its halo planes
/// take those real values; the whole problem's halo at the same planes is the interior.
#[test]
fn a_parts_halo_planes_take_the_real_density() {
    let density = "density = { depths = [15.0, 25.0, 45.0], values = [1000.0, 2000.0, 4000.0, 5000.0] }";
    let cfg = config(density, NO_LAYERS);
    let whole = Problem::build(&cfg, vp()).unwrap();
    let d = whole.density.as_ref().unwrap();
    let plane = 30;
    let held = 3..6;
    let part_density =
        Density { rho: d.rho[plane..8 * plane].to_vec(), first: 1, rho_ref: d.rho_ref, rho_max: d.rho_max };
    let part =
        Problem::build_part(&cfg, vp()[3 * plane..6 * plane].to_vec(), 3, whole.vp_range, Some(part_density)).unwrap();
    let layout = Layout::new([6, 5, held.len()], 2);
    let mut field = vec![0.0f32; layout.len()];
    part.buoyancy_into(&layout, &mut field, |v| v as f32);
    for z in -2..5isize {
        assert_eq!(field[layout.index(2, 2, z)], whole.buoyancy_at([2, 2, (3 + z) as usize]) as f32, "z {z}");
    }
    assert_eq!(part.stiffness_at([2, 2, 4]), whole.stiffness_at([2, 2, 4]));
    // A part's density must reach R planes beyond its planes.
    let short = Density { rho: d.rho[3 * plane..6 * plane].to_vec(), first: 3, rho_ref: d.rho_ref, rho_max: d.rho_max };
    let err = Problem::build_part(&cfg, vp()[3 * plane..6 * plane].to_vec(), 3, whole.vp_range, Some(short))
        .unwrap_err()
        .to_string();
    assert!(err.contains("model.density: z-planes 3..6 for a part needing 1..8"), "{err}");
}

#[test]
fn bad_densities_are_refused_naming_the_key() {
    let err = |density: &str| match Config::from_toml(&format!(
        "[grid]\nshape = [6, 5, 8]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"layered\"\ndepths = [35.0]\n\
         velocities = [1500.0, 3000.0]\n{density}\n[time]\nsteps = 3\n[source]\nposition = [20.0, 20.0, 20.0]\n\
         frequency = 10.0\n[stencil]\nradius = 2\n"
    )) {
        Err(e) => e.to_string(),
        Ok(cfg) => format!("{:#}", Problem::build(&cfg, vp()).unwrap_err()),
    };
    for (density, want) in [
        ("density = -1000.0", "model.density = -1e3 must be a positive density"),
        ("density = 0.0", "model.density = 0e0 must be a positive density"),
        ("density = nan", "model.density = NaN must be a positive density"),
        ("density = 2.2", "model.density = 2.2: densities are in kg/m3; did you mean 2200"),
        ("density = [1000.0, -5.0]", "model.density[1] = -5e0 must be a positive density"),
        ("density = [1000.0]", "model.density has 1 values but model.velocities 2"),
        ("density = { depths = [1.0], values = [1000.0, nan] }", "model.density.values[1] = NaN"),
        ("density = { depths = [1.0], values = [1000.0] }", "model.density.values has 1 entries"),
        ("density = \"rho\"", "model.density = \"rho\": the one named relation is \"gardner\""),
        ("density = { values = [1.0] }", "model.density: give a table"),
        ("density = { file = \"r.npy\", depths = [1.0] }", "model.density.depths does not apply to a density file"),
        ("density = { file = \"r.npy\", shape = [1] }", "model.density.spacing is required"),
        (
            "density = { file = \"r.npy\", units = \"km/s\", shape = [1], spacing = [1.0] }",
            "give \"kg/m3\" or \"g/cm3\"",
        ),
        ("density = { file = \"r.npy\", colour = 1 }", "unknown field `colour`"),
        ("density = [1000.0, 2000.0]\n[run]\nprecision = \"f16\"", "f16 storage does not take"),
    ] {
        let e = err(density);
        assert!(e.contains(want), "{density}: {e}");
    }
    // A list needs a layered velocity; a NaN density given to the build is refused.
    let cfg = Config::from_toml(
        "[grid]\nshape = [6, 5, 8]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
         density = [1000.0, 2000.0]\n[time]\nsteps = 3\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n",
    )
    .unwrap();
    let e = Problem::build(&cfg, vec![2000.0; 240]).unwrap_err().to_string();
    assert!(e.contains("needs kind = \"layered\""), "{e}");
    let mut rho = vec![2000.0f32; 240];
    rho[17] = f32::NAN;
    let e = Problem::build_with_density(&config("", NO_LAYERS), vp(), Some(rho)).unwrap_err().to_string();
    assert!(e.contains("model.density: densities must be finite"), "{e}");
}
