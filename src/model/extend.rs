//! The model's edge values extended into absorbing layers outside it
//! ([`Placement::Outside`](crate::config::Placement)): every run-grid point in a layer takes the
//! velocity of the model point nearest to it, as Devito pads its models for `nbl`.

use crate::config::{GridConfig, ModelRegion};
use anyhow::{Result, ensure};
use rayon::prelude::*;
use std::ops::Range;

/// The run grid's z-planes `run_planes` (dense (planes, ny, nx) of `run_grid`) from `model_vp`,
/// which holds the model's z-planes from `model_first` on (dense, of the model's grid): inside the
/// model each point keeps its value, in a layer it takes the nearest model point's.
pub fn extend_edges(
    region: &ModelRegion,
    run_grid: &GridConfig,
    model_vp: &[f32],
    model_first: usize,
    run_planes: Range<usize>,
) -> Result<Vec<f32>> {
    let [mx, my, _] = region.shape;
    let [nx, ny, _] = region.run_shape;
    let needed = region.model_planes(run_planes.clone());
    let held = model_vp.len() / (mx * my).max(1);
    ensure!(
        needed.is_empty() || (model_first <= needed.start && needed.end <= model_first + held),
        "model: run-grid z-planes {run_planes:?} need the model's z-planes {needed:?}, and {held} from {model_first} \
         were sampled"
    );
    let xs: Vec<usize> = (0..nx).map(|i| region.model_index(0, i)).collect();
    let mut out = super::volume::planes_filled(run_grid, run_planes.len(), 0.0)?;
    out.par_chunks_mut(nx * ny).enumerate().for_each(|(k, plane)| {
        let mz = region.model_index(2, run_planes.start + k) - model_first;
        for (iy, row) in plane.chunks_exact_mut(nx).enumerate() {
            let from = &model_vp[(mz * my + region.model_index(1, iy)) * mx..][..mx];
            for (v, &x) in row.iter_mut().zip(&xs) {
                *v = from[x];
            }
        }
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_take_the_nearest_model_value() {
        // A 3 x 2 x 2 model with layers of 1 before and 2 after along x, none along y, 1 below z.
        let region = ModelRegion { first: [1, 0, 0], shape: [3, 2, 2], origin: [0.0; 3], run_shape: [6, 2, 3] };
        let grid = GridConfig { shape: region.run_shape, spacing: [1.0; 3], origin: [-1.0, 0.0, 0.0] };
        let model: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let run = extend_edges(&region, &grid, &model, 0, 0..3).unwrap();
        let row = |z: usize, y: usize| run[(z * 2 + y) * 6..][..6].to_vec();
        assert_eq!(row(0, 0), [0.0, 0.0, 1.0, 2.0, 2.0, 2.0]);
        assert_eq!(row(1, 1), [9.0, 9.0, 10.0, 11.0, 11.0, 11.0]);
        assert_eq!(row(2, 1), row(1, 1), "the bottom layer repeats the last plane");
        // A part: run planes 2..3 from the model's plane 1 alone.
        assert_eq!(extend_edges(&region, &grid, &model[6..], 1, 2..3).unwrap(), run[24..]);
        let err = extend_edges(&region, &grid, &model[6..], 1, 0..1).unwrap_err().to_string();
        assert!(err.contains("need the model's z-planes 0..1"), "{err}");
    }
}
