//! One shot on the CPU: the sources' taps added after the sweep (step 5), the receivers'
//! samples (step 6) and the free surface's mirrored planes.

use super::{CpuSolver, Part, Real};
use crate::grid::Layout;
use crate::problem::Problem;

impl<T: Real> CpuSolver<T> {
    /// Step 5 for the source taps on the planes of `part`, in their order.
    pub(super) fn inject(&mut self, n: usize, part: Part) {
        let row = self.source.row;
        if n >= self.source.steps() {
            return;
        }
        let plane = self.layout.plane;
        let halo = self.layout.halo;
        let in_first = |o: usize| {
            let iz = o / plane - halo;
            self.split.as_ref().is_some_and(|sp| sp.first.iter().any(|r| r.contains(&iz)))
        };
        let samples = &self.source.samples[n * row..(n + 1) * row];
        for (t, &(o, w)) in self.source.taps.iter().enumerate() {
            let take = match part {
                Part::All => true,
                Part::First => in_first(o),
                Part::Rest => !in_first(o),
            };
            if take {
                self.prev[o] += w * samples[if row == 1 { 0 } else { t }];
            }
        }
    }

    /// Step 6: one sample per receiver from the current wavefield (p^{n+1} once the step is done).
    pub fn record(&mut self) {
        for (taps, trace) in self.rec_taps.iter().zip(self.traces.iter_mut()) {
            let mut v = T::default();
            for &(o, w) in taps {
                v += w * self.cur[o];
            }
            trace.push(v);
        }
    }

    /// p(-k) = -p(k) above z = 0, and p(0) = 0: a pressure-free surface at z = 0.
    pub(super) fn mirror_top(&mut self) {
        let l = self.layout;
        for iy in 0..l.ny {
            let row0 = l.row(iy, 0);
            for v in &mut self.cur[row0..row0 + l.nx] {
                *v = T::default();
            }
            for k in 1..=self.radius {
                let src = l.row(iy, k);
                let dst = l.index(0, iy as isize, -(k as isize));
                for ix in 0..l.nx {
                    self.cur[dst + ix] = T::default() - self.cur[src + ix];
                }
            }
        }
    }
}

/// The sources' taps as step 5 applies them: (offset in the solver's field, weight * c^2 dt^2)
/// per tap and the samples of [`SourceInjection`](crate::problem::SourceInjection), `row` a step,
/// each rounded to `T` once.
pub(super) struct SourceTaps<T> {
    pub taps: Vec<(usize, T)>,
    pub row: usize,
    pub samples: Vec<T>,
}

impl<T> SourceTaps<T> {
    /// Steps with samples.
    pub fn steps(&self) -> usize {
        self.samples.len().checked_div(self.row).unwrap_or(0)
    }
}

/// The sources' taps (offsets in a field of `layout`, the solver's, weights with c^2 dt^2 there)
/// and samples, and each receiver's (offset, weight), as the step applies them.
#[allow(clippy::type_complexity)]
pub(super) fn shot_taps<T: Real>(
    problem: &Problem,
    layout: &Layout,
    vel2dt2: &[T],
) -> (SourceTaps<T>, Vec<Vec<(usize, T)>>) {
    let taps = |t: &[crate::problem::Tap]| -> Vec<(usize, T)> {
        t.iter()
            .map(|t| {
                let [x, y, z] = t.point;
                (layout.index(x as isize, y as isize, z as isize), T::of(t.weight))
            })
            .collect()
    };
    let injection = problem.source_injection();
    let source = SourceTaps {
        taps: taps(&injection.taps).into_iter().map(|(o, w)| (o, T::of(w.f64() * vel2dt2[o].f64()))).collect(),
        row: injection.row,
        samples: injection.samples.iter().map(|&s| T::of(s)).collect(),
    };
    (source, problem.receivers.iter().map(|r| taps(&r.taps)).collect())
}
