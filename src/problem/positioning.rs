//! Points between grid nodes on the grid: the taps (grid point, weight) of nearest-node,
//! trilinear and Kaiser-windowed sinc positioning, with the sinc mirrored at a free surface.

use crate::config::Injection;
pub(super) use crate::numerics::wavelet::bessel_i0;
use anyhow::{Result, bail, ensure};

/// One grid point and its weight in an interpolation or a spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tap {
    pub point: [usize; 3],
    pub weight: f64,
}

/// How a position between grid points is tied to them: a source's spread of the delta function,
/// a receiver's interpolation. The same taps serve both, which keeps source-receiver reciprocity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positioning {
    /// The nearest grid point, weight 1.
    Nearest,
    /// The 8 surrounding points.
    Trilinear,
    /// Kaiser-windowed sinc over 2 `half_width` points per axis (Hicks 2002).
    Sinc { half_width: usize },
}

/// Sinc half-width when the input gives none: Hicks (2002) recommends r = 4.
pub const DEFAULT_SINC_HALF_WIDTH: usize = 4;

/// Hicks (2002, Geophysics 67(1), Table 2): the Kaiser window parameter b that minimises the
/// interpolation error up to kmax = pi/2 (4 points per wavelength), for half-widths r = 1..10.
/// The kmax = 2 pi / 3 column (b = 4.14 at r = 4) spreads its error over a wider band: at r = 4 its
/// error at 8 points per wavelength is about 0.4% against 0.07% here, and the run warns below 5
/// points per wavelength anyway, so the band this column covers is the one that matters.
pub(super) const KAISER_B: [f64; 10] = [1.24, 2.94, 4.53, 6.31, 7.91, 9.42, 10.95, 12.53, 14.09, 14.18];

/// Largest sinc half-width (the end of Hicks' table).
pub const MAX_SINC_HALF_WIDTH: usize = KAISER_B.len();

impl Positioning {
    /// From a configuration's method and half-width; `key` (`source`, `receivers[2]`) names the
    /// table in errors.
    pub fn from_config(method: Injection, half_width: Option<usize>, key: &str, method_key: &str) -> Result<Self> {
        Ok(match (method, half_width) {
            (Injection::Sinc, r) => {
                let half_width = r.unwrap_or(DEFAULT_SINC_HALF_WIDTH);
                ensure!(
                    (1..=MAX_SINC_HALF_WIDTH).contains(&half_width),
                    "{key}.sinc_half_width must be in 1..={MAX_SINC_HALF_WIDTH}, got {half_width}"
                );
                Positioning::Sinc { half_width }
            }
            (m, Some(_)) => {
                bail!("{key}.sinc_half_width applies only to {method_key} = \"sinc\" (this one is {m:?})")
            }
            (Injection::Trilinear, None) => Positioning::Trilinear,
            (Injection::Nearest, None) => Positioning::Nearest,
        })
    }

    /// The name the output file and the README use.
    pub fn name(&self) -> &'static str {
        match self {
            Positioning::Nearest => "nearest",
            Positioning::Trilinear => "trilinear",
            Positioning::Sinc { .. } => "sinc",
        }
    }

    /// The taps of position `p` (m), distinct points with x fastest. With `free_surface`, sinc
    /// weights above z = 0 are mirrored there with opposite sign (the pressure is odd about the
    /// surface) and the weight on z = 0 itself is dropped (the pressure is zero there). Sinc
    /// weights that fall outside the grid anywhere else are dropped (truncation).
    pub fn taps(
        &self,
        p: [f64; 3],
        origin: [f64; 3],
        spacing: [f64; 3],
        shape: [usize; 3],
        free_surface: bool,
    ) -> Vec<Tap> {
        match *self {
            Positioning::Nearest => vec![Tap { point: nearest(p, origin, spacing, shape), weight: 1.0 }],
            Positioning::Trilinear => trilinear(p, origin, spacing, shape),
            Positioning::Sinc { half_width } => sinc(p, origin, spacing, shape, half_width, free_surface),
        }
    }

    /// Whether the taps of `p` lose weights past a grid face other than a free surface.
    pub fn truncated(
        &self,
        p: [f64; 3],
        origin: [f64; 3],
        spacing: [f64; 3],
        shape: [usize; 3],
        free_surface: bool,
    ) -> bool {
        let Positioning::Sinc { half_width: r } = *self else { return false };
        (0..3).any(|a| {
            let u = (p[a] - origin[a]) / spacing[a];
            if on_node(u).is_some() {
                return false;
            }
            let lo = u.floor() - r as f64 + 1.0;
            let hi = u.floor() + r as f64;
            (lo < 0.0 && !(a == 2 && free_surface)) || hi > (shape[a] - 1) as f64
        })
    }
}

pub(super) fn nearest(p: [f64; 3], origin: [f64; 3], spacing: [f64; 3], shape: [usize; 3]) -> [usize; 3] {
    std::array::from_fn(|a| (((p[a] - origin[a]) / spacing[a]).round().max(0.0) as usize).min(shape[a] - 1))
}

/// Trilinear weights of the (up to) 8 grid points around p; points of zero weight are dropped.
pub fn trilinear(p: [f64; 3], origin: [f64; 3], spacing: [f64; 3], shape: [usize; 3]) -> Vec<Tap> {
    let mut lo = [0usize; 3];
    let mut frac = [0.0f64; 3];
    for a in 0..3 {
        let u = ((p[a] - origin[a]) / spacing[a]).clamp(0.0, (shape[a] - 1) as f64);
        let i = (u.floor() as usize).min(shape[a].saturating_sub(2));
        lo[a] = i;
        frac[a] = if shape[a] == 1 { 0.0 } else { u - i as f64 };
    }
    let mut taps = Vec::with_capacity(8);
    for c in 0..8 {
        let mut point = lo;
        let mut weight = 1.0;
        for a in 0..3 {
            let up = (c >> a) & 1 == 1;
            if up {
                point[a] += 1;
            }
            weight *= if up { frac[a] } else { 1.0 - frac[a] };
        }
        if weight > 1e-12 {
            taps.push(Tap { point, weight });
        }
    }
    taps
}

/// The node index when `u` (grid units) sits on one, to within rounding of a position given in
/// metres.
pub(super) fn on_node(u: f64) -> Option<f64> {
    let k = u.round();
    ((u - k).abs() < 1e-9).then_some(k)
}

/// Kaiser-windowed sinc weights (Hicks 2002) of the 2r points around p per axis, multiplied out
/// with x fastest. An axis on which p sits on a node contributes that node alone: the sinc is 1
/// there and 0 at every other node, so on-grid positions keep a single tap of weight 1.
pub fn sinc(
    p: [f64; 3],
    origin: [f64; 3],
    spacing: [f64; 3],
    shape: [usize; 3],
    r: usize,
    free_surface: bool,
) -> Vec<Tap> {
    let axes: [Vec<(usize, f64)>; 3] = std::array::from_fn(|a| {
        let u = ((p[a] - origin[a]) / spacing[a]).clamp(0.0, (shape[a] - 1) as f64);
        sinc_axis(u, r, shape[a], a == 2 && free_surface)
    });
    let mut taps = Vec::with_capacity(axes.iter().map(Vec::len).product());
    for &(iz, wz) in &axes[2] {
        for &(iy, wy) in &axes[1] {
            for &(ix, wx) in &axes[0] {
                taps.push(Tap { point: [ix, iy, iz], weight: wx * wy * wz });
            }
        }
    }
    taps
}

/// One axis of [`sinc`]: (index, weight) in increasing index order, within 0..n. With `mirror`,
/// index -k folds onto k with its sign flipped and index 0 is dropped (an odd field about 0).
pub(super) fn sinc_axis(u: f64, r: usize, n: usize, mirror: bool) -> Vec<(usize, f64)> {
    let b = KAISER_B[r - 1];
    let r = r as i64;
    let raw: Vec<(i64, f64)> = match on_node(u) {
        Some(k) => vec![(k as i64, 1.0)],
        None => {
            let base = u.floor() as i64;
            (base - r + 1..=base + r)
                .map(|k| {
                    let x = k as f64 - u;
                    let s = (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x);
                    let arg = 1.0 - (x / r as f64).powi(2);
                    (k, s * bessel_i0(b * arg.max(0.0).sqrt()) / bessel_i0(b))
                })
                .collect()
        }
    };
    let mut folded = vec![0.0; (u.floor() as i64 + r + 1).clamp(1, n as i64) as usize];
    let mut used = vec![false; folded.len()];
    for (k, w) in raw {
        let (k, w) = if mirror && k < 0 { (-k, -w) } else { (k, w) };
        if (mirror && k == 0) || k < 0 || k as usize >= folded.len() {
            continue;
        }
        folded[k as usize] += w;
        used[k as usize] = true;
    }
    folded.into_iter().zip(used).enumerate().filter(|(_, (_, u))| *u).map(|(k, (w, _))| (k, w)).collect()
}
