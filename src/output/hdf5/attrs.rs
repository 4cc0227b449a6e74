//! Attributes and small datasets of the result file, each with its error named as HDF5's.

use crate::output::checksum::{self, Entry, bytes_of};
use crate::problem::Problem;
use anyhow::{Result, anyhow};
use rust_hdf5::{H5Dataset, H5Group, H5Type, VarLenUnicode};

pub(super) fn h5(e: rust_hdf5::Hdf5Error) -> anyhow::Error {
    anyhow!("HDF5: {e}")
}

pub(super) fn attr_string(ds: &H5Dataset, name: &str, value: &str) -> Result<()> {
    ds.new_attr::<VarLenUnicode>().shape(()).create(name).map_err(h5)?.write_string(value).map_err(h5)
}

pub(super) fn attr_f64s(ds: &H5Dataset, name: &str, values: &[f64]) -> Result<()> {
    ds.new_attr::<f64>().shape([values.len()]).create(name).map_err(h5)?.write_array(values).map_err(h5)
}

pub(super) fn attr_f64(ds: &H5Dataset, name: &str, value: f64) -> Result<()> {
    ds.new_attr::<f64>().shape(()).create(name).map_err(h5)?.write_numeric(&value).map_err(h5)
}

/// spacing, origin (x, y, z; m) and axes on a dataset holding the model's grid values.
pub(super) fn grid_attrs(ds: &H5Dataset, problem: &Problem, origin: [f64; 3], axes: &str) -> Result<()> {
    attr_f64s(ds, "spacing", &problem.spacing)?;
    attr_f64s(ds, "origin", &origin)?;
    attr_string(ds, "axes", axes)
}

/// A 1-D dataset `group`/`name` of `values`, its checksum added to `sums`.
pub(super) fn dataset_1d<T: H5Type + bytemuck::Pod>(
    sums: &mut Vec<Entry>,
    group: (&H5Group, &str),
    name: &str,
    values: &[T],
) -> Result<H5Dataset> {
    let ds = group.0.new_dataset::<T>().shape([values.len()]).create(name).map_err(h5)?;
    ds.write_raw(values).map_err(h5)?;
    sums.push(checksum::whole(&format!("{}/{name}", group.1), bytes_of(values)));
    Ok(ds)
}

/// `/model/rho` (`shape`, the model's grid) of the density `rho` (kg/m3), with the grid's
/// attributes, its checksum added to `sums`.
pub(super) fn model_density(
    sums: &mut Vec<Entry>,
    model: &H5Group,
    shape: [usize; 3],
    rho: &[f32],
    problem: &Problem,
    origin: [f64; 3],
) -> Result<()> {
    anyhow::ensure!(rho.len() == shape.iter().product::<usize>(), "{} densities for a model of {shape:?}", rho.len());
    let ds = model.new_dataset::<f32>().shape(shape).create("rho").map_err(h5)?;
    ds.write_raw(rho).map_err(h5)?;
    sums.push(checksum::whole("model/rho", bytes_of(rho)));
    grid_attrs(&ds, problem, origin, "zyx")?;
    attr_string(&ds, "units", "kg/m3")
}
