//! Unit tests of `autotune`.

use super::*;

fn entry(radius: usize, shape: [usize; 3], block_y: u32) -> TunedEntry {
    TunedEntry {
        operator: Operator::Fused,
        radius,
        class: ShapeClass::of(shape),
        shape,
        tuning: Tuning {
            block_x: 32,
            block_y,
            vec: 4,
            window: 32,
            stages: 2,
            min_blocks: 2,
            unroll_z: 9,
            rows: 1,
            order: 0,
            tile_ring: 0,
            halo_ring: 0,
        },
        seconds: 1e-3,
        default_seconds: 1.2e-3,
        tried: 10,
        candidates: 40,
        kernels: "k1".into(),
        date: "2026-11-22".into(),
    }
}

/// The candidate list holds only shapes the compilers accept: NVRTC refused R = 7 with 32-row
/// blocks and no ring (52 KiB of static shared memory, 48 KiB allowed) when the list offered it.
#[test]
fn candidates_fit_the_static_shared_memory_limit() {
    let r7 = Tuning { block_x: 32, block_y: 32, stages: 0, min_blocks: 1, rows: 1, ..Tuning::for_radius(7) };
    assert!(r7.check(7).is_err());
    for radius in 1..=8 {
        let all = launch_candidates(radius, Tuning::for_radius(radius));
        assert!(all.len() >= 10, "R = {radius}: {} candidates", all.len());
        assert!(!all.contains(&r7.without_idle_rings()));
        for t in all {
            t.check(radius).unwrap();
        }
    }
}

#[test]
fn shape_classes_round_log2() {
    assert_eq!(ShapeClass::of([512, 512, 512]), ShapeClass { plane_log2: 18, depth_log2: 9 });
    assert_eq!(ShapeClass::of([1024, 1024, 1024]), ShapeClass { plane_log2: 20, depth_log2: 10 });
    // 768^2 = 589824 = 2^19.17; 768 = 2^9.58.
    assert_eq!(ShapeClass::of([768, 768, 768]), ShapeClass { plane_log2: 19, depth_log2: 10 });
    assert_eq!(ShapeClass::of([2048, 2048, 64]), ShapeClass { plane_log2: 22, depth_log2: 6 });
    let a = ShapeClass::of([512, 512, 512]);
    assert_eq!(a.distance(&ShapeClass::of([1024, 1024, 1024])), 3);
    assert_eq!(a.distance(&a), 0);
}

#[test]
fn lookup_prefers_same_class_then_nearest_and_ignores_other_radii_and_kernels() {
    let mut c = TuningCache { device: "GPU X".into(), ..Default::default() };
    c.insert(entry(4, [512, 512, 512], 8));
    c.insert(entry(4, [1024, 1024, 1024], 16));
    c.insert(entry(2, [600, 600, 600], 4));
    assert_eq!(c.lookup(Operator::Fused, 4, [512, 512, 512], "k1").unwrap().tuning.block_y, 8);
    assert_eq!(c.lookup(Operator::Fused, 4, [1000, 1000, 1100], "k1").unwrap().tuning.block_y, 16);
    // 640^3: xy 2^18.6 -> 19, z 2^9.3 -> 9: one step from 512^3, two from 1024^3.
    assert_eq!(c.lookup(Operator::Fused, 4, [640, 640, 640], "k1").unwrap().tuning.block_y, 8);
    assert!(c.lookup(Operator::Fused, 4, [2048, 2048, 64], "k1").is_none(), "too far from every entry");
    assert!(c.lookup(Operator::Fused, 3, [512, 512, 512], "k1").is_none());
    assert!(c.lookup(Operator::Fused, 4, [512, 512, 512], "k2").is_none(), "other kernel sources");
    // Same radius and class: replaced, not duplicated.
    c.insert(entry(4, [520, 500, 512], 32));
    assert_eq!(c.entries.len(), 3);
    assert_eq!(c.lookup(Operator::Fused, 4, [512, 512, 512], "k1").unwrap().tuning.block_y, 32);
}

#[test]
fn laplacian_entries_are_kept_apart_from_the_full_steps() {
    let mut c = TuningCache { device: "GPU X".into(), ..Default::default() };
    c.insert(entry(4, [512, 512, 512], 8));
    assert!(c.lookup(Operator::Laplacian, 4, [512, 512, 512], "k1").is_none());
    c.insert(TunedEntry { operator: Operator::Laplacian, ..entry(4, [512, 512, 512], 16) });
    assert_eq!(c.entries.len(), 2, "a Laplacian winner does not replace the full step's");
    assert_eq!(c.lookup(Operator::Laplacian, 4, [512, 512, 512], "k1").unwrap().tuning.block_y, 16);
    assert_eq!(c.lookup(Operator::Fused, 4, [512, 512, 512], "k1").unwrap().tuning.block_y, 8);
    // A record written before the operator field existed is the full step's.
    let mut v = serde_json::to_value(&c.entries[0]).unwrap();
    v.as_object_mut().unwrap().remove("operator");
    let old: TunedEntry = serde_json::from_value(v).unwrap();
    assert_eq!(old.operator, Operator::Fused);
    let text = serde_json::to_string(&c.entries[1]).unwrap();
    assert!(text.contains("\"operator\":\"laplacian\""), "{text}");
}

#[test]
fn cache_round_trips_through_json() {
    let mut c = TuningCache {
        device: "NVIDIA H100 80GB HBM3".into(),
        vendor: "cuda".into(),
        arch: "sm_90".into(),
        entries: vec![],
    };
    c.insert(entry(8, [256, 256, 256], 16));
    let text = serde_json::to_string_pretty(&c).unwrap();
    assert!(text.contains("\"plane_log2\": 16"), "{text}");
    let back: TuningCache = serde_json::from_str(&text).unwrap();
    assert_eq!(back, c);
    assert_eq!(device_file_name(&c.device), "NVIDIA_H100_80GB_HBM3");
}

#[test]
fn cache_saves_and_loads_in_a_directory() {
    let dir = std::env::temp_dir().join(format!("seismic-tune-test-{}", std::process::id()));
    let mut c = TuningCache { device: "Test GPU/1".into(), ..Default::default() };
    c.insert(entry(4, [512, 512, 512], 8));
    let path = c.save_in(&dir).unwrap();
    assert_eq!(path, dir.join("tuning-Test_GPU_1.json"));
    assert_eq!(TuningCache::load_from(&dir, "Test GPU/1"), c);
    assert!(TuningCache::load_from(&dir, "Other GPU").entries.is_empty());
    std::fs::write(&path, "{ not json").unwrap();
    assert!(TuningCache::load_from(&dir, "Test GPU/1").entries.is_empty(), "a broken cache reads as empty");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tall_tiles_are_candidates_where_the_queue_fits() {
    let tall = |r: usize, rows: u32| {
        let t = Tuning { rows, block_y: 8.max(r as u32), min_blocks: 1, window: 0, ..Tuning::for_radius(r) };
        launch_candidates(r, Tuning::for_radius(r)).contains(&t.without_idle_rings())
    };
    assert!(tall(4, 4) && tall(4, 3) && tall(1, 4));
    assert!(tall(5, 3) && !tall(5, 4));
    assert!(!tall(6, 3) && !tall(8, 3));
}

#[test]
fn candidates_are_valid_and_start_with_the_default() {
    for r in 1..=8 {
        let d = Tuning::for_radius(r);
        let l = launch_candidates(r, d);
        assert_eq!(l[0], Tuning { window: 0, ..d });
        assert!(l.len() >= 6, "R={r}: {l:?}");
        for (i, t) in l.iter().enumerate() {
            assert!(t.check(r).is_ok());
            assert_eq!(t.window, 0);
            assert!(!l[..i].contains(t), "R={r}: {t:?} twice");
        }
    }
    assert_eq!(window_candidates(512), vec![4, 6, 8, 10, 12, 16, 24, 32, 48, 64]);
    assert_eq!(window_candidates(64), vec![4, 6, 8, 10, 12, 16, 24, 32, 48, 64]);
    assert_eq!(window_candidates(20), vec![4, 6, 8, 10, 12, 16, 20]);
}

#[test]
fn search_shape_caps_points_and_keeps_the_plane() {
    assert_eq!(search_shape([512, 512, 512], 4), [512, 512, 512]);
    assert_eq!(search_shape([1024, 1024, 1024], 4), [1024, 1024, 256]);
    assert_eq!(search_shape([4096, 4096, 64], 8), [4096, 4096, 48]);
}

#[test]
fn civil_dates() {
    assert_eq!(civil_date(0), "1970-01-01");
    assert_eq!(civil_date(19_723), "2024-01-01");
    assert_eq!(civil_date(20_414), "2025-11-22");
    assert_eq!(civil_date(11_016), "2000-02-29");
}
