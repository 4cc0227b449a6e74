//! The CPU solver as a [`Backend`]: steps, snapshots, traces and the halo planes and rows a
//! decomposed run exchanges (through f32).

use super::memory::{split_at_ends, task_ends};
use super::shot::shot_taps;
use super::{CpuSolver, Field, Real, cpu_layout};
use crate::backend::{Backend, DeviceInfo};
use crate::grid::{Layout, Section, for_each_section};
use crate::problem::Problem;
use anyhow::{Result, ensure};
use rayon::prelude::*;
use std::ops::Range;

/// Interior z-planes `z0..z0 + planes` of `field` into `buf`, dense (planes, ny, nx), through f32.
fn copy_planes_out<T: Real>(l: &Layout, field: &[T], z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
    let plane = l.nx * l.ny;
    ensure!(z0 + planes <= l.nz && buf.len() == planes * plane, "halo planes {z0}..{} of {}", z0 + planes, l.nz);
    for (k, chunk) in buf.chunks_exact_mut(plane).enumerate() {
        for (iy, row) in chunk.chunks_exact_mut(l.nx).enumerate() {
            let src = l.row(iy, z0 + k);
            for (o, v) in row.iter_mut().zip(&field[src..src + l.nx]) {
                *o = v.f64() as f32;
            }
        }
    }
    Ok(())
}

impl<T: Real> Backend for CpuSolver<T> {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: "cpu",
            name: format!("CPU (rayon, {} threads, {})", rayon::current_num_threads(), self.isa.name()),
            kernel: "rayon".into(),
        }
    }

    fn step(&mut self, n: usize) -> Result<()> {
        self.advance(n);
        Ok(())
    }

    fn snapshot(&mut self, out: &mut [f32]) -> Result<()> {
        ensure!(
            out.len() == self.layout.points(),
            "snapshot buffer has {} values, grid {}",
            out.len(),
            self.layout.points()
        );
        Section::Volume.copy_from(&self.layout, |i| self.cur[i].f64() as f32, out);
        Ok(())
    }

    fn snapshot_sections(&mut self, sections: &[Section], out: &mut [f32]) -> Result<()> {
        let l = self.layout;
        for_each_section(sections, [l.nx, l.ny, l.nz], out, |s, part| {
            s.copy_from(&l, |i| self.cur[i].f64() as f32, part);
            Ok(())
        })
    }

    fn start_shot(&mut self, problem: &Problem) -> Result<()> {
        ensure!(cpu_layout::<T>(problem.layout) == self.layout, "a shot must use the grid the backend was opened with");
        let (layout, chunks) = (self.layout, &self.chunks);
        // Each thread clears the planes it sweeps (the pages stay where first touch put them).
        let zero = |v: &mut Field<T>| {
            split_at_ends(v, task_ends(&layout, chunks)).into_par_iter().for_each(|p| p.fill(T::default()));
        };
        zero(&mut self.cur);
        zero(&mut self.prev);
        if let Some((axes, _)) = &mut self.cpml {
            for a in axes.iter_mut() {
                a.psi.fill(T::default());
                a.psi_next.fill(T::default());
                a.zeta.fill(T::default());
            }
        }
        self.set_direction(problem)?;
        (self.source, self.rec_taps) = shot_taps(problem, &self.layout, &self.vel2dt2);
        self.traces = (0..problem.receivers.len()).map(|_| Vec::with_capacity(problem.steps)).collect();
        self.seconds.clear();
        self.open = None;
        Ok(())
    }

    fn traces(&mut self, steps: usize) -> Result<Vec<f32>> {
        Ok(self.traces.iter().flat_map(|t| t[..steps.min(t.len())].iter().map(|v| v.f64() as f32)).collect())
    }

    /// Also false when a value is finite in f64 but beyond f32 (the output's type).
    fn field_is_finite(&mut self) -> Result<bool> {
        let max = f32::MAX as f64;
        Ok(self.cur.par_iter().all(|v| v.f64().abs() <= max))
    }

    fn step_seconds(&mut self) -> Result<Vec<f64>> {
        Ok(self.seconds.clone())
    }

    fn step_field(&mut self, n: usize) -> Result<()> {
        self.advance_field(n);
        Ok(())
    }

    fn record_receivers(&mut self) -> Result<()> {
        self.record();
        Ok(())
    }

    /// The planes go through f32: a decomposed run is exact in f32 only.
    fn planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        copy_planes_out(&self.layout, &self.cur, z0, planes, buf)
    }

    fn rows_out(&mut self, y0: usize, rows: usize, buf: &mut [f32]) -> Result<()> {
        let l = self.layout;
        ensure!(y0 + rows <= l.ny && buf.len() == l.nz * rows * l.nx, "halo rows {y0}..{} of {}", y0 + rows, l.ny);
        for (k, row) in buf.chunks_exact_mut(l.nx).enumerate() {
            let src = l.row(y0 + k % rows, k / rows);
            for (o, v) in row.iter_mut().zip(&self.cur[src..src + l.nx]) {
                *o = v.f64() as f32;
            }
        }
        Ok(())
    }

    fn rows_in(&mut self, y0: usize, rows: usize, buf: &[f32]) -> Result<()> {
        let l = self.layout;
        ensure!(y0 + rows <= l.ny && buf.len() == l.nz * rows * l.nx, "halo rows {y0}..{} of {}", y0 + rows, l.ny);
        for (k, row) in buf.chunks_exact(l.nx).enumerate() {
            let dst = l.row(y0 + k % rows, k / rows);
            for (o, &v) in self.cur[dst..dst + l.nx].iter_mut().zip(row) {
                *o = T::of(v as f64);
            }
        }
        Ok(())
    }

    fn begin_field(&mut self, n: usize, first: &[Range<usize>], leave: &[Range<usize>]) -> Result<()> {
        let nz = self.layout.nz;
        for ranges in [first, leave] {
            ensure!(
                ranges.windows(2).all(|w| w[0].end <= w[1].start)
                    && ranges.iter().all(|r| r.start <= r.end && r.end <= nz),
                "planes {ranges:?} of a step in two parts are not sorted disjoint ranges of 0..{nz}"
            );
        }
        CpuSolver::begin_field(self, n, first, leave);
        Ok(())
    }

    fn next_planes_out(&mut self, z0: usize, planes: usize, buf: &mut [f32]) -> Result<()> {
        copy_planes_out(&self.layout, self.newest(), z0, planes, buf)
    }

    fn finish_field(&mut self, n: usize) -> Result<()> {
        CpuSolver::finish_field(self, n);
        Ok(())
    }

    fn splits_steps(&self) -> bool {
        true
    }

    fn planes_in(&mut self, z0: usize, planes: usize, buf: &[f32]) -> Result<()> {
        let l = self.layout;
        let plane = l.nx * l.ny;
        ensure!(z0 + planes <= l.nz && buf.len() == planes * plane, "halo planes {z0}..{} of {}", z0 + planes, l.nz);
        for (k, chunk) in buf.chunks_exact(plane).enumerate() {
            for (iy, row) in chunk.chunks_exact(l.nx).enumerate() {
                let dst = l.row(iy, z0 + k);
                for (o, &v) in self.cur[dst..dst + l.nx].iter_mut().zip(row) {
                    *o = T::of(v as f64);
                }
            }
        }
        Ok(())
    }
}
