use super::positioning::bessel_i0;
use super::*;
use crate::config::Injection;

/// The full step's bound counts each axis's layer points once per axis: 10 x 8 x 6 with layers
/// of 2 has 192 x, 240 y and 320 z layer points (160 z under a free surface).
#[test]
fn full_step_bytes_add_the_memory_variables_of_each_layer() {
    let interior = step_bytes([10, 8, 6], 1, true);
    assert_eq!(full_step_bytes([10, 8, 6], 1, 0, false), interior);
    assert_eq!(full_step_bytes([10, 8, 6], 1, 2, false), interior + 16 * (192 + 240 + 320));
    assert_eq!(full_step_bytes([10, 8, 6], 1, 2, true), interior + 16 * (192 + 240 + 160));
}

#[test]
fn trilinear_weights_sum_to_one_and_interpolate_linear_fields() {
    let shape = [10, 8, 6];
    let taps = trilinear([12.5, 7.0, 31.0], [0.0; 3], [5.0, 2.0, 10.0], shape);
    let s: f64 = taps.iter().map(|t| t.weight).sum();
    assert!((s - 1.0).abs() < 1e-12);
    let f = |p: [usize; 3]| 3.0 * p[0] as f64 * 5.0 - 2.0 * p[1] as f64 * 2.0 + p[2] as f64 * 10.0;
    let v: f64 = taps.iter().map(|t| t.weight * f(t.point)).sum();
    assert!((v - (3.0 * 12.5 - 2.0 * 7.0 + 31.0)).abs() < 1e-9);
    // On a grid point: one tap.
    assert_eq!(trilinear([10.0, 4.0, 20.0], [0.0; 3], [5.0, 2.0, 10.0], shape).len(), 1);
}

/// The vectorised chunks give what one fold of f32::min and max gives, NaNs skipped alike, on
/// lengths that are not whole lanes or chunks.
#[test]
fn velocity_range_is_the_fold_of_min_and_max() {
    for n in [1, 15, 16, 17, 1000, (1 << 16) + 33, 3 * (1 << 16) - 1] {
        let mut vp: Vec<f32> = (0..n).map(|i| 1500.0 + ((i * 7919) % 4001) as f32 * 0.75).collect();
        vp[n / 2] = f32::NAN;
        vp[n - 1] = if n > 2 { 1234.5 } else { vp[n - 1] };
        let fold = vp.iter().fold([f32::INFINITY, 0.0f32], |[lo, hi], &v| [lo.min(v), hi.max(v)]);
        assert_eq!(velocity_range(&vp), fold, "n = {n}");
    }
}

/// c^2 dt^2 written into a padded field, whole or a few planes at a time, is the dense
/// `vel2dt2` scattered, bit for bit, and nothing outside the interior is written.
#[test]
fn vel2dt2_into_a_field_is_the_dense_copy_scattered() {
    let text = "[grid]\nshape = [13, 7, 9]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                vp = 1500.0\n[time]\nsteps = 5\n[source]\nposition = [20.0, 20.0, 20.0]\nfrequency = 10.0\n\
                [[receivers]]\nposition = [30.0, 30.0, 30.0]\n[stencil]\nradius = 3\n[boundary]\nkind = \"none\"";
    let vp: Vec<f32> = (0..13 * 7 * 9).map(|i| 1500.0 + ((i * 104_729) % 3001) as f32 * 0.37).collect();
    let problem = Problem::build(&Config::from_toml(text).unwrap(), vp).unwrap();
    let layout = Layout::new([13, 7, 9], 3).with_plane_padding(32);
    let mut want = vec![-1.0f32; layout.len()];
    let dense: Vec<f32> = problem.vel2dt2().into_iter().map(|v| v as f32).collect();
    layout.scatter(&dense, &mut want);
    let mut whole = vec![-1.0f32; layout.len()];
    problem.vel2dt2_into(&layout, &mut whole, |v| v as f32);
    assert_eq!(whole, want);
    let mut chunked = vec![-1.0f32; layout.len()];
    for first in (0..9).step_by(4) {
        let planes = 4.min(9 - first);
        let at = (layout.halo + first) * layout.plane;
        problem.vel2dt2_planes_into(&layout, first, &mut chunked[at..at + planes * layout.plane], |v| v as f32);
    }
    assert_eq!(chunked, want);
}

const SHAPE: [usize; 3] = [40, 40, 40];

fn sinc4(p: [f64; 3], free_surface: bool) -> Vec<Tap> {
    Positioning::Sinc { half_width: 4 }.taps(p, [0.0; 3], [10.0; 3], SHAPE, free_surface)
}

#[test]
fn sinc_on_a_grid_point_is_one_tap_of_weight_one() {
    assert_eq!(sinc4([200.0, 130.0, 70.0], false), vec![Tap { point: [20, 13, 7], weight: 1.0 }]);
    // On a node along x and z only: the 8 y weights alone.
    let taps = sinc4([200.0, 133.0, 70.0], false);
    assert_eq!(taps.len(), 8);
    assert!(taps.iter().all(|t| t.point[0] == 20 && t.point[2] == 7));
}

#[test]
fn sinc_taps_are_distinct_x_fastest_and_interpolate_band_limited_fields() {
    let p = [203.7, 131.2, 75.5];
    let taps = sinc4(p, false);
    assert_eq!(taps.len(), 512);
    let order = |t: &Tap| (t.point[2], t.point[1], t.point[0]);
    assert!(taps.windows(2).all(|w| order(&w[0]) < order(&w[1])), "sorted, x fastest, distinct");
    // A plane wave at 8 points per wavelength, oblique: Hicks' kmax = pi/2 weights reproduce
    // it to about 1e-3 (trilinear: cos(k h / 2) per axis, a few per cent).
    let k = [0.6, 0.4, 0.5].map(|c: f64| c * 2.0 * std::f64::consts::PI / 80.0 / (0.77f64).sqrt());
    let field = |x: [f64; 3]| (k[0] * x[0] + k[1] * x[1] + k[2] * x[2] + 0.3).cos();
    let at = |taps: &[Tap]| taps.iter().map(|t| t.weight * field(t.point.map(|i| i as f64 * 10.0))).sum::<f64>();
    let exact = field(p);
    let err = (at(&taps) - exact).abs();
    let tri = (at(&trilinear(p, [0.0; 3], [10.0; 3], SHAPE)) - exact).abs();
    assert!(err < 1e-3 && err < tri / 10.0, "sinc error {err:e}, trilinear {tri:e}");
    let sum: f64 = taps.iter().map(|t| t.weight).sum();
    assert!((sum - 1.0).abs() < 2e-3, "weights sum to {sum}");
}

#[test]
fn sinc_near_the_free_surface_mirrors_with_opposite_sign() {
    // 1.3 points below the surface: 4 of the 8 z weights fall at or above z = 0.
    let p = [203.7, 131.2, 13.0];
    let taps = sinc4(p, true);
    assert!(taps.iter().all(|t| t.point[2] >= 1), "nothing on or above the surface");
    let zs: std::collections::BTreeSet<usize> = taps.iter().map(|t| t.point[2]).collect();
    assert_eq!(zs.into_iter().collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
    // A field odd about z = 0, as the free surface makes it, is interpolated as in open space.
    let k = 2.0 * std::f64::consts::PI / 80.0;
    let field = |x: [f64; 3]| (k * x[2]).sin() * (0.5 * k * x[0]).cos();
    let v: f64 = taps.iter().map(|t| t.weight * field(t.point.map(|i| i as f64 * 10.0))).sum();
    assert!((v - field(p)).abs() < 1e-3, "{v} vs {}", field(p));
    // On the surface itself the pressure is zero: no taps.
    assert!(sinc4([203.7, 131.2, 0.0], true).is_empty());
}

#[test]
fn sinc_is_truncated_at_other_faces_and_reports_it() {
    let s = Positioning::Sinc { half_width: 4 };
    let p = [15.0, 200.0, 200.0];
    let taps = s.taps(p, [0.0; 3], [10.0; 3], SHAPE, false);
    assert_eq!(taps.len(), 6, "x nodes -2..=5, the two below 0 dropped");
    assert!(s.truncated(p, [0.0; 3], [10.0; 3], SHAPE, false));
    assert!(!s.truncated([200.5, 200.0, 13.0], [0.0; 3], [10.0; 3], SHAPE, true));
    assert!(s.truncated([200.5, 200.0, 13.0], [0.0; 3], [10.0; 3], SHAPE, false));
}

#[test]
fn sinc_half_width_is_checked_and_only_for_sinc() {
    let e = Positioning::from_config(Injection::Sinc, Some(11), "source", "injection").unwrap_err();
    assert!(e.to_string().contains("source.sinc_half_width must be in 1..=10"), "{e}");
    let e = Positioning::from_config(Injection::Trilinear, Some(4), "receivers[1]", "interpolation").unwrap_err();
    assert!(e.to_string().contains("receivers[1].sinc_half_width applies only to interpolation"), "{e}");
    assert_eq!(
        Positioning::from_config(Injection::Sinc, None, "source", "injection").unwrap(),
        Positioning::Sinc { half_width: 4 }
    );
}

#[test]
fn bessel_i0_matches_tabulated_values() {
    // Abramowitz and Stegun, Table 9.8: I0(1) = 1.266065878, I0(5) = 27.23987182.
    assert!((bessel_i0(1.0) - 1.266065878).abs() < 1e-9);
    assert!((bessel_i0(5.0) - 27.23987182).abs() < 1e-7);
    assert_eq!(bessel_i0(0.0), 1.0);
}
