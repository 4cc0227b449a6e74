//! Unit tests of `tuning`.

use super::{Tuning, TuningOverride};

#[test]
fn a_tuning_override_sets_its_fields_and_the_ones_derived_from_them() {
    let o = TuningOverride::parse(" block_x=16, rows = 1,window=12 ").expect("parses");
    let t = o.tuning(4, true, false);
    let d = Tuning::for_radius(4);
    assert_eq!((t.block_x, t.rows, t.window), (16, 1, 12));
    assert_eq!((t.vec, t.stages, t.order), (d.vec, d.stages, d.order));
    // vec=2 turns the ring off, and with it the halo ring and the extra rows.
    let t = TuningOverride::parse("vec=2").expect("parses").tuning(4, true, false);
    assert_eq!((t.vec, t.stages, t.halo_ring, t.rows), (2, 0, 0, 1));
    assert_eq!(TuningOverride::parse("").expect("empty").tuning(4, true, false), d);
}

#[test]
fn a_tuning_override_names_the_field_and_its_values_on_an_error() {
    for (text, says) in [
        ("block_x=12", "block_x takes 8, 16 or 32"),
        ("rows=five", "rows takes 1 to 4"),
        ("blocks=2", "no launch-shape field \"blocks\""),
        ("vec", "not field=value"),
        ("order=1,order=2", "order is set twice"),
    ] {
        let e = TuningOverride::parse(text).expect_err(text).to_string();
        assert!(e.contains(says) && e.contains("SEISMIC_TUNING"), "{text}: {e}");
    }
}

/// The y layers go in the pass with the default launch shape at every radius.
#[test]
fn the_layer_tile_fits_the_default_launch_shape_at_every_radius() {
    for r in 1..=8 {
        let t = Tuning::for_radius(r).effective(r);
        assert!(t.for_ylayers(r).layer_tile_fits(r), "R = {r}: {t:?}, y layers");
    }
}

/// From R = 6: 16 x 8 threads, two rows a thread, two blocks a multiprocessor.
#[test]
fn high_radii_take_two_rows_in_sixteen_by_eight_blocks() {
    for r in 6..=8 {
        let t = Tuning::for_radius(r);
        assert_eq!((t.block_x, t.block_y, t.rows, t.min_blocks), (16, 8, 2, 2), "R = {r}");
        assert_eq!(t.effective(r), t, "R = {r}");
        t.check(r).unwrap();
        // The f16 step keeps its measured shapes.
        let h = t.for_half(r);
        assert_eq!((h.block_x, h.rows, h.min_blocks), (32, 1, if r == 6 { 3 } else { 2 }), "R = {r}");
    }
}

#[test]
fn halos_ride_the_ring_where_there_is_one() {
    let t = Tuning::for_radius(4);
    assert_eq!((t.stages, t.halo_ring), (2, 1));
    for r in 1..=8 {
        assert_eq!(Tuning::for_radius(r).halo_ring, 1, "R = {r}");
    }
    assert_eq!(Tuning::for_radius_without_ring(4).halo_ring, 0);
    let plain = Tuning { halo_ring: 0, ..t };
    // 2R rows of 32 vectors and 2 vectors for each of 12 tile rows, 16 B each, in 3 slots.
    assert_eq!(t.dynamic_shared_bytes(4, true) - plain.dynamic_shared_bytes(4, true), 3 * (2 * 4 * 32 + 12 * 2) * 16);
    assert_eq!(Tuning { stages: 0, ..t }.effective(4).halo_ring, 0);
}

#[test]
fn the_laplacian_gets_one_stage_more_where_it_fits() {
    for r in 1..=8 {
        let t = Tuning::for_radius(r).effective(r);
        let l = t.for_laplacian(r);
        assert_eq!(l.stages, t.stages + 1, "R = {r}");
        // The module is compiled with `effective`'s rows (sources::kernel_options), the host
        // launches this tuning's tile: the two must agree (a deeper ring that `effective`
        // would cut to fewer rows left a tile's last rows uncomputed).
        assert_eq!(l.effective(r), l, "R = {r}");
        assert_eq!((l.block_y, l.rows, l.fused_tile_y()), (t.block_y, t.rows, t.fused_tile_y()));
        l.check(r).unwrap();
    }
    let ring = Tuning { tile_ring: 1, ..Tuning::for_radius(4) };
    assert_eq!(ring.for_laplacian(4).stages, ring.stages);
    let none = Tuning::for_radius_without_ring(4);
    assert_eq!(none.for_laplacian(4), none);
}

/// The Laplacian-only operator's own default: tall tiles at R = 4 with the ring, which then
/// keeps its two stages (a third would not fit beside the 43.5 KB tile); the step's elsewhere.
#[test]
fn the_laplacian_default_has_tall_tiles_at_radius_four_and_unrolls_at_eight() {
    let t = Tuning::default_for(4, true, true);
    assert_eq!((t.block_x, t.block_y, t.rows, t.min_blocks), (32, 8, 4, 1));
    assert_eq!(t.effective(4), t);
    assert_eq!(t.for_laplacian(4).stages, 2);
    for tall in [t, Tuning { rows: 3, ..t }] {
        let l = tall.for_laplacian(4);
        assert_eq!(l.effective(4), l, "{}", l.label());
    }
    // The step's own tall shape stops at two stages too.
    assert!(Tuning { stages: 3, ..t }.check(4).is_err());
    t.check(4).unwrap();
    for r in [1, 2, 3, 5, 7] {
        assert_eq!(Tuning::default_for(r, true, true), Tuning::for_radius(r), "R = {r}");
    }
    // At R = 8 its z loop is unrolled twice.
    assert_eq!(Tuning::default_for(8, true, true), Tuning { unroll_z: 2, ..Tuning::for_radius(8) });
    // At R = 6 the step's third stage is its own; the Laplacian adds one to two (for_laplacian).
    assert_eq!(Tuning::default_for(6, true, true), Tuning { stages: 2, ..Tuning::for_radius(6) });
    for r in 1..=8 {
        assert_eq!(Tuning::default_for(r, false, true), Tuning::for_radius_without_ring(r), "R = {r}");
        assert_eq!(Tuning::default_for(r, true, false), Tuning::for_radius(r), "R = {r}");
    }
}

fn tuning(block_y: u32, stages: u32, rows: u32) -> Tuning {
    Tuning {
        block_x: 32,
        block_y,
        vec: 4,
        window: 0,
        stages,
        min_blocks: 2,
        unroll_z: 1,
        rows,
        order: 0,
        tile_ring: 0,
        halo_ring: 0,
    }
}

#[test]
fn rows_need_the_asynchronous_ring() {
    assert_eq!(tuning(8, 0, 2).effective(4).rows, 1);
    assert_eq!(tuning(8, 2, 2).effective(4).rows, 2);
}

#[test]
fn rows_are_lowered_until_the_tile_fits() {
    for r in 1..=8usize {
        for rows in 1..=4 {
            let t = tuning(8.max(r as u32), 2, rows).effective(r);
            assert!(t.rows >= 1 && t.rows <= rows);
            assert!(t.check(r).is_ok(), "R = {r}, rows {rows} -> {t:?}");
            let static_tile = 2 * (t.fused_tile_y() + 2 * r as u32) * (32 + 2 * (r as u32).div_ceil(4)) * 16;
            assert!(static_tile <= 48 << 10 && t.fused_tile_y() <= 32, "R = {r}: {t:?}");
        }
    }
    // 8 rows of threads x 4 rows = 32 rows at R = 4 fit: 2 x 40 x 34 x 16 B = 43.5 KB.
    assert_eq!(tuning(8, 2, 4).effective(4).rows, 4);
    // At R = 8 that tile would take 55 KB of static shared memory.
    assert!(tuning(8, 2, 4).effective(8).rows < 4);
}
