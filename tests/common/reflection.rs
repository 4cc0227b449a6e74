//! The absorbing layer's reflection, measured as small domain against large domain: the traces of
//! receivers near the faces of a small domain closed by the layer, against the same receivers in a
//! domain so large that nothing comes back from its walls within the window. Their difference is
//! what the layer reflects; its largest value over the window, relative to the reference's
//! largest value, is the reflection.

use super::{Setup, max_abs, max_abs_diff};
use seismic_run::problem::Problem;

/// Velocity (m/s) and spacing (m) of the cases: only points per wavelength and points count.
pub const C: f64 = 2000.0;
pub const H: f64 = 10.0;

/// Where the waves meet the layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incidence {
    /// A 31^3 interior, the source at its centre, receivers 6 points before a face's layer, an
    /// edge's and a corner's: incidence within 45 degrees of the normal.
    Normal,
    /// A 71 x 21 x 21 interior, the source and the receivers 6 points from the low y face's
    /// layer, the receivers 20, 40 and 60 points away along x: the reflection off that face comes
    /// in at 59, 73 and 79 degrees from the normal, along with the x faces' near the ends.
    Grazing,
}

/// A measured case: the source's points per minimum wavelength (at 2.5 f0, the Ricker's highest
/// frequency), the stencil radius and the incidence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Case {
    pub points_per_wavelength: f64,
    pub radius: usize,
    pub incidence: Incidence,
}

/// The widest layer the window makes room for, unless a case's domains are built for a wider one
/// ([`Case::small_in`], [`Case::large_in`]).
pub const MAX_WIDTH: usize = 20;

impl Case {
    pub fn frequency(&self) -> f64 {
        C / (2.5 * H * self.points_per_wavelength)
    }

    /// The interior's points (between the layers), the source's and the receivers' interior indices.
    fn geometry(&self) -> ([usize; 3], [usize; 3], Vec<[usize; 3]>) {
        match self.incidence {
            Incidence::Normal => {
                let at = |o: [isize; 3]| o.map(|d| (15 + d) as usize);
                let offsets = [[10, 0, 0], [0, 0, -10], [10, 10, 0], [10, 10, 10]];
                ([31; 3], [15; 3], offsets.iter().map(|&o| at(o)).collect())
            }
            Incidence::Grazing => ([71, 21, 21], [5, 5, 10], vec![[25, 5, 10], [45, 5, 10], [65, 5, 10]]),
        }
    }

    /// Simulated time: the wavelet (2.4 / f0 long) after the longest path through the first
    /// reflection off a face next to a receiver in a layer of up to `widest` points.
    fn duration(&self, widest: usize) -> f64 {
        let (_, s, rs) = self.geometry();
        let farthest = rs.iter().map(|r| (0..3).map(|a| (r[a] as f64 - s[a] as f64).powi(2)).sum::<f64>().sqrt());
        let path = farthest.fold(0.0, f64::max) + 2.0 * (7 + widest) as f64;
        2.4 / self.frequency() + path * H / C
    }

    fn setup(
        &self,
        shape: [usize; 3],
        source: [usize; 3],
        receivers: Vec<[usize; 3]>,
        width: usize,
        widest: usize,
    ) -> Setup {
        Setup {
            shape,
            spacing: H,
            vp: C,
            radius: self.radius,
            frequency: self.frequency(),
            delay: 1.2 / self.frequency(),
            cfl_safety: 0.8,
            duration: self.duration(widest),
            source,
            receivers,
            boundary: if width == 0 { "none" } else { "cpml" },
            width,
            free_surface: false,
        }
    }

    /// The small domain: the interior with a CPML of `width` points on every face.
    pub fn small(&self, width: usize) -> Problem {
        self.small_in(width, MAX_WIDTH)
    }

    /// [`Case::small`] in the window of a layer of `widest` points, for layers wider than
    /// `MAX_WIDTH` (the run of [`Case::large_in`] with the same `widest` is its reference).
    pub fn small_in(&self, width: usize, widest: usize) -> Problem {
        assert!(width <= widest, "a layer of {width} points in the window of {widest}");
        let (interior, s, rs) = self.geometry();
        let shift = |p: [usize; 3]| p.map(|i| i + width);
        let shape = interior.map(|n| n + 2 * width);
        self.setup(shape, shift(s), rs.into_iter().map(shift).collect(), width, widest).problem()
    }

    /// The reference: walls far enough that a wave off them reaches no receiver before the end
    /// (every path source -> wall -> receiver, projected on the wall's axis, longer than the
    /// simulated time's travel, plus a stencil's reach).
    pub fn large(&self) -> Problem {
        self.large_in(MAX_WIDTH)
    }

    /// [`Case::large`] in the window of a layer of `widest` points.
    pub fn large_in(&self, widest: usize) -> Problem {
        let (_, s, rs) = self.geometry();
        let travel = (C * self.duration(widest) / H).ceil() as isize + 2 * self.radius as isize + 2;
        let rel: Vec<[isize; 3]> = rs.iter().map(|r| std::array::from_fn(|a| r[a] as isize - s[a] as isize)).collect();
        let lo: [usize; 3] =
            std::array::from_fn(|a| ((travel - rel.iter().map(|r| r[a]).min().unwrap()) / 2 + 1) as usize);
        let hi: [usize; 3] =
            std::array::from_fn(|a| ((travel + rel.iter().map(|r| r[a]).max().unwrap()) / 2 + 1) as usize);
        let shape = std::array::from_fn(|a| lo[a] + hi[a] + 1);
        let at = |r: [isize; 3]| std::array::from_fn(|a| (lo[a] as isize + r[a]) as usize);
        self.setup(shape, lo, rel.into_iter().map(at).collect(), 0, widest).problem()
    }
}

/// Per receiver: max |small - reference| / max |reference| over the whole window (both runs have
/// the same dt and steps).
pub fn reflections(small: &[Vec<f64>], reference: &[Vec<f64>]) -> Vec<f64> {
    small.iter().zip(reference).map(|(s, r)| max_abs_diff(s, r, 0..r.len()) / max_abs(r)).collect()
}

/// A ratio of amplitudes in decibels.
pub fn db(x: f64) -> f64 {
    20.0 * x.log10()
}

/// The reflection of each receiver of `case` with a layer of `width` points (the default
/// profiles), both domains run by `run` (traces per receiver, in f64).
pub fn measure(case: &Case, width: usize, run: impl Fn(&Problem) -> Vec<Vec<f64>>) -> Vec<f64> {
    let (small, large) = (case.small(width), case.large());
    assert_eq!((small.dt, small.steps), (large.dt, large.steps), "the domains step alike");
    reflections(&run(&small), &run(&large))
}

/// The default layer width for a stencil of `radius` (`boundary.width` when the input does not
/// give it).
pub fn default_width(radius: usize) -> usize {
    seismic_run::boundary::default_width(radius)
}
