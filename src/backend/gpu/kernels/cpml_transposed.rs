//! The parameters of the CPML layers' transposed terms (kernels/cpml_transposed.cu), a backward
//! step's (`super::super::cpml_transposed`).

use super::super::runtime::{DevicePtr, GpuRuntime};
use super::{AxisWeights, Launch};
use anyhow::Result;
use std::ffi::c_void;

kernel_params!(
    /// `cpml_transposed_prepare`, `cpml_transposed_gather` (cpml_transposed.cu,
    /// `CPML_TRANSPOSED_PARAMS`): one axis's terms, over its slab or over its `bands` grid indices
    /// near a layer (`band`); `bh` null for a constant density.
    CpmlTransposedAxis for ["cpml_transposed_prepare": "float", "cpml_transposed_gather": "float"] {
        cur: DevicePtr = "const float*",
        next: DevicePtr = "float*",
        stiffness: DevicePtr = "const float*",
        bh: DevicePtr = "const float*",
        lambda: DevicePtr = "float*",
        eta: DevicePtr = "float*",
        beta: DevicePtr = "float*",
        gamma: DevicePtr = "float*",
        sigma: DevicePtr = "float*",
        a: DevicePtr = "const float*",
        b: DevicePtr = "const float*",
        coord: DevicePtr = "const int*",
        band: DevicePtr = "const int*",
        w: AxisWeights = "AxisWeights",
        axis: i32 = "int",
        width: i32 = "int",
        bands: i32 = "int",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
    }
);
