//! The ranges every number of the input must lie in, their checks, and the reading of
//! positions and grid axes from TOML arrays (three values, or two on a 2D grid).

use anyhow::{Result, ensure};
use serde::{Deserialize, Deserializer, de::Error as _};

/// y of a position given in the two-element form [x, z]: a marker that
/// [`Config::resolve_plane`](super::Config) replaces by the grid's y on a 2D grid and refuses by
/// key on a 3D one: a NaN of its own payload, so that neither a coordinate nor a `nan` given in
/// the input (the quiet NaN without payload) can be mistaken for it.
pub(super) const PLANE_Y: f64 = f64::from_bits(0x7ff8_0000_0000_2d2d);

/// A position: [x, y, z], or [x, z] (a 2D grid's form, y left as [`PLANE_Y`]).
pub(super) fn point<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 3], D::Error> {
    let v = Vec::<f64>::deserialize(d)?;
    match *v.as_slice() {
        [x, z] => Ok([x, PLANE_Y, z]),
        [x, y, z] => Ok([x, y, z]),
        _ => Err(D::Error::invalid_length(v.len(), &"[x, y, z], or [x, z] on a 2D grid")),
    }
}

/// [`point`] for an optional key.
pub(super) fn point_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[f64; 3]>, D::Error> {
    point(d).map(Some)
}

/// A grid's per-axis values: [x, y, z], or [x, z] (a 2D grid), y then taking `y`.
fn grid_axes<'de, D: Deserializer<'de>, T: Deserialize<'de> + Copy>(d: D, y: T) -> Result<[T; 3], D::Error> {
    let v = Vec::<T>::deserialize(d)?;
    match *v.as_slice() {
        [x, z] => Ok([x, y, z]),
        [x, y, z] => Ok([x, y, z]),
        _ => Err(D::Error::invalid_length(v.len(), &"[x, y, z], or [x, z] for a 2D grid")),
    }
}

/// `grid.shape`: [nx, ny, nz], or [nx, nz] (a 2D grid: ny = 1).
pub(super) fn grid_shape<'de, D: Deserializer<'de>>(d: D) -> Result<[usize; 3], D::Error> {
    grid_axes(d, 1)
}

/// `grid.spacing`: [dx, dy, dz], or [dx, dz] (a 2D grid's form: dy [`PLANE_Y`] until
/// `Config::resolve_plane` makes it 1 m, its sources then line sources of a unit length along y).
pub(super) fn grid_spacing<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 3], D::Error> {
    grid_axes(d, PLANE_Y)
}

/// `grid.origin`: [x, y, z], or [x, z] (a 2D grid's form: y [`PLANE_Y`] until
/// `Config::resolve_plane` makes it 0).
pub(super) fn grid_origin<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 3], D::Error> {
    grid_axes(d, PLANE_Y)
}

/// Largest velocity accepted, m/s: the fastest rocks are below 10 km/s, so anything above is a
/// unit mix-up (km/s given as m/s, or the reverse applied twice).
pub const MAX_VELOCITY: f64 = 1e5;
/// Smallest velocity accepted, m/s (slower than any fluid; guards against m/s given as km/s).
pub const MIN_VELOCITY: f64 = 1.0;
/// Largest grid spacing or absolute coordinate, m (Earth-sized models are well inside).
pub const MAX_LENGTH: f64 = 1e8;
/// Smallest grid spacing, m.
pub const MIN_SPACING: f64 = 1e-6;
/// Largest |source amplitude|: far above any physical use, far below what overflows f32 fields.
pub const MAX_AMPLITUDE: f64 = 1e15;
/// Largest source frequency, Hz.
pub const MAX_FREQUENCY: f64 = 1e9;
/// Largest simulated time or |source delay|, s.
pub const MAX_TIME: f64 = 1e7;

/// The velocities of rocks and fluids, m/s: a velocity outside is almost always a unit mistake
/// (km/s given as m/s, or a value scaled twice), an error unless `[run] check_units = false`.
pub const USUAL_VELOCITY: [f64; 2] = [100.0, 20_000.0];
/// The smallest grid or model spacing of field and laboratory-scale models, m: a smaller one is
/// almost always a spacing given in km, an error unless `[run] check_units = false`.
pub const USUAL_MIN_SPACING: f64 = 0.1;

/// The key that turns the unit checks off, as the errors name it.
const UNITS_KEY: &str = "[run] check_units = false";

/// Errors, suggesting the unit mistake, when the velocity `v` (m/s) of `key` lies outside
/// [`USUAL_VELOCITY`].
pub fn check_velocity_units(key: &str, v: f64) -> Result<()> {
    let [lo, hi] = USUAL_VELOCITY;
    ensure!(
        v >= lo,
        "{key} = {v}: velocities are in m/s; did you mean {}? (velocities below {lo} m/s are refused as a \
         likely unit mistake; for a model that is truly that slow set {UNITS_KEY})",
        v * 1000.0
    );
    ensure!(
        v <= hi,
        "{key} = {v}: velocities are in m/s; did you mean {}? (velocities above {hi} m/s are refused as a \
         likely unit mistake, e.g. km/s values scaled twice; for a model that is truly that fast set {UNITS_KEY})",
        v / 1000.0
    );
    Ok(())
}

/// Errors, suggesting the unit mistake, when the spacing `h` (m) of `key` is below
/// [`USUAL_MIN_SPACING`].
pub fn check_spacing_units(key: &str, h: f64) -> Result<()> {
    ensure!(
        h >= USUAL_MIN_SPACING,
        "{key} = {h}: spacings are in m; did you mean {} m? (spacings below {USUAL_MIN_SPACING} m are refused \
         as a likely unit mistake; for a model that is truly that fine set {UNITS_KEY})",
        h * 1000.0
    );
    Ok(())
}

pub(super) fn finite_in(key: &str, v: f64, lo: f64, hi: f64, what: &str) -> Result<()> {
    let range =
        if lo == f64::MIN_POSITIVE { format!("positive and at most {hi:e}") } else { format!("from {lo:e} to {hi:e}") };
    ensure!(v.is_finite() && v >= lo && v <= hi, "{key} = {v:e} must be {what}, finite and {range}");
    Ok(())
}

pub(super) fn finite3(key: &str, v: [f64; 3], lo: f64, hi: f64, what: &str) -> Result<()> {
    for (a, x) in v.iter().enumerate() {
        finite_in(&format!("{key}[{a}]"), *x, lo, hi, what)?;
    }
    Ok(())
}
