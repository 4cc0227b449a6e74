//! Central finite-difference coefficients of order 2R on a star stencil of radius R.
//!
//! Closed forms (the limit of Fornberg's recursion for equispaced central points) for any R:
//! second derivative `c_k = 2 (-1)^(k+1) (R!)^2 / (k^2 (R-k)! (R+k)!)`, `c_0 = -2 sum c_k`;
//! first derivative `d_k = (-1)^(k+1) (R!)^2 / (k (R-k)! (R+k)!)`.

/// Largest supported stencil radius (order 16).
pub const MAX_RADIUS: usize = 8;

#[derive(Clone, Debug, PartialEq)]
pub struct Stencil {
    pub radius: usize,
    /// Second-derivative weights for unit spacing, index 0..=R (symmetric: weight of +-k is `second[k]`).
    pub second: Vec<f64>,
    /// First-derivative weights for unit spacing, index 0..=R (antisymmetric; `first[0] == 0`).
    pub first: Vec<f64>,
}

fn factorial(n: usize) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

impl Stencil {
    pub fn new(radius: usize) -> Stencil {
        assert!((1..=MAX_RADIUS).contains(&radius), "stencil radius {radius} outside 1..={MAX_RADIUS}");
        let r = radius;
        let rf2 = factorial(r).powi(2);
        let mut second = vec![0.0; r + 1];
        let mut first = vec![0.0; r + 1];
        for k in 1..=r {
            let sign = if k % 2 == 1 { 1.0 } else { -1.0 };
            let common = rf2 / (factorial(r - k) * factorial(r + k));
            second[k] = 2.0 * sign * common / (k * k) as f64;
            first[k] = sign * common / k as f64;
        }
        second[0] = -2.0 * second[1..].iter().sum::<f64>();
        Stencil { radius, second, first }
    }

    /// Formal order of accuracy in space.
    pub fn order(&self) -> usize {
        2 * self.radius
    }

    /// Second-derivative weights scaled by 1/h^2, index 0..=R.
    pub fn second_scaled(&self, h: f64) -> Vec<f64> {
        self.second.iter().map(|c| c / (h * h)).collect()
    }

    /// Largest magnitude of the stencil's Fourier symbol over all wavenumbers, for unit spacing:
    /// max over theta of -(c_0 + 2 sum c_k cos(k theta)). It is attained at theta = pi for these
    /// coefficients, but it is evaluated on a fine grid so that the claim need not be trusted.
    pub fn spectral_radius(&self) -> f64 {
        let samples = 4096;
        (0..=samples)
            .map(|i| {
                let theta = std::f64::consts::PI * i as f64 / samples as f64;
                let s: f64 = (1..=self.radius).map(|k| self.second[k] * (k as f64 * theta).cos()).sum();
                -(self.second[0] + 2.0 * s)
            })
            .fold(0.0, f64::max)
    }

    /// Exact leapfrog stability limit for a homogeneous medium of velocity `vmax`:
    /// c^2 dt^2 * sum_i mu / h_i^2 <= 4.
    pub fn cfl_limit(&self, spacing: [f64; 3], vmax: f64) -> f64 {
        self.cfl_limit_over(&spacing, vmax)
    }

    /// [`Self::cfl_limit`] of the operator over the axes of `spacing` only (x and z: a 2D grid's).
    pub fn cfl_limit_over(&self, spacing: &[f64], vmax: f64) -> f64 {
        let mu = self.spectral_radius();
        let s: f64 = spacing.iter().map(|h| mu / (h * h)).sum();
        2.0 / (vmax * s.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_published_tables() {
        // Fornberg (1988), table 1, central second derivative.
        let tables: [&[f64]; 4] = [
            &[-2.0, 1.0],
            &[-5.0 / 2.0, 4.0 / 3.0, -1.0 / 12.0],
            &[-49.0 / 18.0, 3.0 / 2.0, -3.0 / 20.0, 1.0 / 90.0],
            &[-205.0 / 72.0, 8.0 / 5.0, -1.0 / 5.0, 8.0 / 315.0, -1.0 / 560.0],
        ];
        for (i, t) in tables.iter().enumerate() {
            let s = Stencil::new(i + 1);
            for (a, b) in s.second.iter().zip(t.iter()) {
                assert!((a - b).abs() < 1e-14, "R={} {a} vs {b}", i + 1);
            }
        }
        // 16th order (R = 8) central second derivative, from the same closed form as published.
        let r8 = [
            -1077749.0 / 352800.0,
            16.0 / 9.0,
            -14.0 / 45.0,
            112.0 / 1485.0,
            -7.0 / 396.0,
            112.0 / 32175.0,
            -2.0 / 3861.0,
            16.0 / 315315.0,
            -1.0 / 411840.0,
        ];
        let s = Stencil::new(8);
        for (a, b) in s.second.iter().zip(r8.iter()) {
            assert!((a - b).abs() < 1e-13, "R=8 {a} vs {b}");
        }
        let d2 = Stencil::new(2);
        assert!((d2.first[1] - 2.0 / 3.0).abs() < 1e-15 && (d2.first[2] + 1.0 / 12.0).abs() < 1e-15);
    }

    #[test]
    fn exact_on_polynomials_of_degree_2r() {
        for r in 1..=MAX_RADIUS {
            let s = Stencil::new(r);
            let x0 = 0.3;
            let h = 0.5;
            for p in 0..=2 * r {
                let f = |x: f64| x.powi(p as i32);
                let mut d2 = s.second[0] * f(x0);
                let mut d1 = 0.0;
                for k in 1..=r {
                    let (xp, xm) = (x0 + k as f64 * h, x0 - k as f64 * h);
                    d2 += s.second[k] * (f(xp) + f(xm));
                    d1 += s.first[k] * (f(xp) - f(xm));
                }
                d2 /= h * h;
                d1 /= h;
                let exact2 = if p >= 2 { (p * (p - 1)) as f64 * x0.powi(p as i32 - 2) } else { 0.0 };
                let exact1 = if p >= 1 { p as f64 * x0.powi(p as i32 - 1) } else { 0.0 };
                let scale = 1.0 + exact2.abs() * 10f64.powi(r as i32);
                assert!((d2 - exact2).abs() < 1e-7 * scale, "R={r} p={p}: {d2} vs {exact2}");
                if p <= 2 * r {
                    assert!((d1 - exact1).abs() < 1e-7 * (1.0 + exact1.abs()) * 10f64.powi(r as i32), "R={r} p={p} d1");
                }
            }
        }
    }

    #[test]
    fn spectral_radius_is_at_nyquist() {
        for r in 1..=MAX_RADIUS {
            let s = Stencil::new(r);
            let nyquist: f64 = 4.0 * (1..=r).step_by(2).map(|k| s.second[k]).sum::<f64>();
            assert!((s.spectral_radius() - nyquist).abs() < 1e-12 * nyquist);
        }
        // Second order in 1D: c dt / h <= 1.
        let s = Stencil::new(1);
        let dt = s.cfl_limit([1.0, 1e30, 1e30], 1.0);
        assert!((dt - 1.0).abs() < 1e-12);
    }
}
