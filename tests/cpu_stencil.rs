//! Beyond the unit tests in src/numerics/stencil.rs: every radius 1..=8 meets the
//! moment conditions that make it exact on polynomials of degree 2R + 1, and R = 5, 6, 7 match
//! the published tables (Fornberg 1988) as the other radii already do.

use seismic_run::numerics::Stencil;
use seismic_run::numerics::stencil::MAX_RADIUS;

#[test]
fn moments_vanish_up_to_degree_2r() {
    // Exact on x^p at 0 for every p <= 2R + 1: sum_k c_k k^p over -R..R is 2 for p = 2 and 0 for
    // every other p (odd p vanish by symmetry; the first derivative: sum d_k k^p = 1 for p = 1).
    for r in 1..=MAX_RADIUS {
        let s = Stencil::new(r);
        for p in (0..=2 * r).step_by(2) {
            let terms: Vec<f64> = (0..=r)
                .map(|k| {
                    let w = if k == 0 { 1.0 } else { 2.0 };
                    w * s.second[k] * (k as f64).powi(p as i32)
                })
                .collect();
            let scale: f64 = terms.iter().map(|t| t.abs()).sum();
            let sum: f64 = terms.iter().sum();
            let want = if p == 2 { 2.0 } else { 0.0 };
            assert!((sum - want).abs() <= 1e-13 * scale, "R = {r}, second derivative, degree {p}: {sum}");
        }
        for p in (1..=2 * r - 1).step_by(2) {
            let terms: Vec<f64> = (1..=r).map(|k| 2.0 * s.first[k] * (k as f64).powi(p as i32)).collect();
            let scale: f64 = terms.iter().map(|t| t.abs()).sum();
            let sum: f64 = terms.iter().sum();
            let want = if p == 1 { 1.0 } else { 0.0 };
            assert!((sum - want).abs() <= 1e-13 * scale, "R = {r}, first derivative, degree {p}: {sum}");
        }
        // Not exact one degree further: the order is exactly 2R, not more.
        let p = 2 * r + 2;
        let sum: f64 = (1..=r).map(|k| 2.0 * s.second[k] * (k as f64).powi(p as i32)).sum();
        assert!(sum.abs() > 1e-3, "R = {r}: exact at degree {p} too");
    }
}

#[test]
fn radii_5_to_7_match_the_published_tables() {
    let tables: [&[f64]; 3] = [
        &[-5269.0 / 1800.0, 5.0 / 3.0, -5.0 / 21.0, 5.0 / 126.0, -5.0 / 1008.0, 1.0 / 3150.0],
        &[-5369.0 / 1800.0, 12.0 / 7.0, -15.0 / 56.0, 10.0 / 189.0, -1.0 / 112.0, 2.0 / 1925.0, -1.0 / 16632.0],
        &[
            -266681.0 / 88200.0,
            7.0 / 4.0,
            -7.0 / 24.0,
            7.0 / 108.0,
            -7.0 / 528.0,
            7.0 / 3300.0,
            -7.0 / 30888.0,
            1.0 / 84084.0,
        ],
    ];
    for (i, t) in tables.iter().enumerate() {
        let s = Stencil::new(i + 5);
        assert_eq!(s.second.len(), t.len());
        for (k, (a, b)) in s.second.iter().zip(t.iter()).enumerate() {
            assert!((a - b).abs() < 1e-14, "R = {}, k = {k}: {a} vs {b}", i + 5);
        }
    }
}
