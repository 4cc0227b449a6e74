//! The decomposition's plans: splits, halos, GPU cuts and subdomains.
use super::*;
use crate::config::Config;

fn problem(nz: usize, boundary: &str) -> Problem {
    let toml = format!(
        "[grid]\nshape = [12, 10, {nz}]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
         [stencil]\nradius = 2\n[time]\nduration = 0.01\n[source]\nposition = [60.0, 50.0, 100.0]\nfrequency = 10.0\n\
         [boundary]\nkind = \"{boundary}\"\nwidth = 3\nplacement = \"inside\"\n"
    );
    let cfg = Config::from_toml(&toml).unwrap();
    Problem::build(&cfg, vec![2000.0; 12 * 10 * nz]).unwrap()
}

#[test]
fn even_split_puts_the_extra_planes_first_and_widens_the_halo_in_z_layers() {
    let d = Decomposition::even(&problem(31, "sponge"), 3).unwrap();
    assert_eq!(d.slabs, vec![(0, 11), (11, 21), (21, 31)]);
    assert_eq!(d.halo, 2);
    // A cut through a 3-plane z layer (planes 0..3 and 28..31): phi_z needs 2R = 4 halo planes.
    let d = Decomposition::with_planes(&problem(62, "cpml"), &[31, 29, 2]).unwrap_err().to_string();
    assert!(d.contains("rank 2 owns 2 z-planes, fewer than the 4 halo planes"), "{d}");
    let p = problem(31, "cpml");
    assert_eq!(Decomposition::with_planes(&p, &[4, 23, 4]).unwrap().halo, 2, "cuts next to the layers");
    assert_eq!(Decomposition::with_planes(&p, &[11, 10, 10]).unwrap().halo, 2);
}

/// GPU ranks share the step's cost: a CPML layer plane counts 2.5 interior ones, so the
/// ranks at the layered faces own fewer planes; the sponge splits evenly.
#[test]
fn gpu_ranks_share_the_step_cost_with_layer_planes_weighted() {
    let p = problem(200, "cpml");
    let d = Decomposition::for_gpus(&p, 4, 1).unwrap();
    let cost = |(z0, z1): (usize, usize)| -> f64 {
        (z0..z1).map(|z| if !(3..197).contains(&z) { GPU_LAYER_PLANE_COST } else { 1.0 }).sum()
    };
    let share = (194.0 + 6.0 * GPU_LAYER_PLANE_COST) / 4.0;
    assert!(d.slabs.iter().all(|&s| (cost(s) - share).abs() <= GPU_LAYER_PLANE_COST), "{:?}", d.slabs);
    assert!(d.slabs[0].1 - d.slabs[0].0 < d.slabs[1].1 - d.slabs[1].0, "{:?}", d.slabs);
    let even = Decomposition::for_gpus(&problem(200, "sponge"), 4, 1).unwrap();
    assert_eq!(even.slabs, vec![(0, 50), (50, 100), (100, 150), (150, 200)]);
}

#[test]
fn blocks_split_the_ranks_to_move_the_fewest_halo_points() {
    // A cut along z moves ny points a row of x, one along y nz.
    assert_eq!(Decomposition::block_counts([12, 12, 48], 4, 8), (1, 4));
    assert_eq!(Decomposition::block_counts([12, 40, 24], 4, 8), (2, 2));
    assert_eq!(Decomposition::block_counts([12, 40, 24], 2, 8), (2, 1));
    assert_eq!(Decomposition::block_counts([100, 400, 400], 16, 8), (4, 4));
    // Slabs thinner than the halo only where nothing else divides the ranks.
    assert_eq!(Decomposition::block_counts([12, 64, 20], 8, 8), (4, 2));
    assert_eq!(Decomposition::block_counts([12, 12, 12], 7, 8), (1, 7));
}

#[test]
fn blocks_own_rows_and_planes_and_y_cuts_in_layers_widen_the_halo() {
    let p = problem(31, "cpml");
    let d = Decomposition::with_blocks(&p, &[15, 16], &[5, 5]).unwrap();
    assert_eq!((d.ranks(), d.halo), (4, 2));
    assert_eq!((d.planes_of(3), d.rows_of(3)), ((15, 31), (5, 10)));
    assert_eq!((d.z_neighbours(1), d.y_neighbours(1)), ((None, Some(3)), (Some(0), None)));
    assert_eq!((d.planes_held(3), d.rows_held(3)), (13..31, 3..10));
    let s = d.subdomain(&p, 3).unwrap();
    assert_eq!((s.first, s.first_row, s.planes(), s.rows()), (13, 3, 18, 7));
    assert_eq!(s.problem.boundary.profiles[1].a, p.boundary.profiles[1].a[3..10].to_vec());
    assert_eq!(s.problem.vp.len(), 12 * 7 * 18);
    // The y cut at row 2 runs through the 3-row y layer: 2R.
    let d = Decomposition::with_blocks(&p, &[31], &[2, 8]).unwrap_err().to_string();
    assert!(d.contains("rank 0 owns 2 rows, fewer than the 4 halo rows"), "{d}");
}

#[test]
fn too_thin_slabs_are_refused_naming_the_figures() {
    let e = Decomposition::with_planes(&problem(31, "cpml"), &[1, 29, 1]).unwrap_err().to_string();
    assert!(e.contains("rank 0 owns 1 z-planes, fewer than the 4 halo planes"), "{e}");
    let e = Decomposition::with_planes(&problem(31, "cpml"), &[3, 25]).unwrap_err().to_string();
    assert!(e.contains("do not add up to grid.shape[2] = 31"), "{e}");
}

#[test]
fn the_memory_check_per_rank_accepts_n_ranks_and_refuses_fewer() {
    let p = problem(62, "cpml");
    let one = Decomposition::even(&p, 1).unwrap().subdomain(&p, 0).unwrap();
    let budget = one.cpu_bytes() * 6 / 10;
    let d2 = Decomposition::even(&p, 2).unwrap();
    for r in 0..2 {
        d2.subdomain(&p, r).unwrap().check_fits(&d2, p.shape(), budget).unwrap();
    }
    let d1 = Decomposition::even(&p, 1).unwrap();
    let e = one.check_fits(&d1, p.shape(), budget).unwrap_err().to_string();
    assert!(e.contains("grid.shape = [12, 10, 62] over 1 ranks: rank 0 holds 62 z-planes"), "{e}");
    assert!(e.contains("use at least 2 ranks"), "{e}");
}

#[test]
fn subdomains_restrict_the_model_profiles_and_source() {
    let p = problem(31, "cpml");
    let d = Decomposition::with_planes(&p, &[10, 11, 10]).unwrap();
    let s = d.subdomain(&p, 1).unwrap();
    assert_eq!((s.first, s.planes(), s.owned_local()), (8, 15, 2));
    assert_eq!(s.problem.boundary.profiles[2].a, p.boundary.profiles[2].a[8..23].to_vec());
    assert_eq!(s.problem.source().taps, vec![Tap { point: [6, 5, 2], weight: 1.0 }]);
    assert!(d.subdomain(&p, 0).unwrap().problem.source().taps.is_empty());
    assert_eq!(s.problem.vp.len(), 12 * 10 * 15);
}

/// A rank's subdomain built from its part of the model only (`Problem::build_part` with the
/// whole model's velocity range) is the one built from the whole model.
#[test]
fn subdomains_from_a_part_of_the_model_equal_those_from_the_whole() {
    let p = problem(31, "cpml");
    let plane = 12 * 10;
    let vp: Vec<f32> = (0..31 * plane).map(|i| 1500.0 + (i % 97) as f32).collect();
    let cfg = Config::from_toml(
        "[grid]\nshape = [12, 10, 31]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\nvp = 2000.0\n\
         [stencil]\nradius = 2\n[time]\nduration = 0.01\n[source]\nposition = [60.0, 50.0, 100.0]\nfrequency = 10.0\n\
         [boundary]\nkind = \"cpml\"\nwidth = 3\nplacement = \"inside\"\n",
    )
    .unwrap();
    assert_eq!(p.layout.nz, 31);
    let whole = Problem::build(&cfg, vp.clone()).unwrap();
    let d = Decomposition::even(&whole, 3).unwrap();
    for rank in 0..3 {
        let held = d.planes_held(rank);
        let part = Problem::build_part(
            &cfg,
            vp[held.start * plane..held.end * plane].to_vec(),
            held.start,
            whole.vp_range,
            None,
        )
        .unwrap();
        let (a, b) = (d.subdomain(&whole, rank).unwrap(), d.subdomain(&part, rank).unwrap());
        assert_eq!(a.problem.vp, b.problem.vp, "rank {rank}");
        assert_eq!((a.problem.dt, a.problem.steps), (b.problem.dt, b.problem.steps));
        assert_eq!(a.problem.boundary.profiles[2].a, b.problem.boundary.profiles[2].a);
        assert_eq!(a.problem.source().taps, b.problem.source().taps);
        assert_eq!(a.problem.vp_range, b.problem.vp_range);
    }
    let short = Problem::build_part(&cfg, vp[..5 * plane].to_vec(), 0, whole.vp_range, None).unwrap();
    let e = d.subdomain(&short, 1).unwrap_err().to_string();
    assert!(e.contains("rank 1 holds z-planes 9..23 but the problem's model has planes 0..5"), "{e}");
}
