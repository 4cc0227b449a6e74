//! The parameters of reverse-time migration's imaging kernels (kernels/imaging.cu): the kept
//! source field and the image, illumination and gradient sums (`super::super::imaging`).

use super::super::runtime::{DevicePtr, GpuRuntime, TypedPtr};
use super::Launch;
use anyhow::Result;
use std::ffi::c_void;

kernel_params!(
    /// `keep_source` (imaging.cu): kept = field, illumination += field^2, over n values.
    KeepSource for ["keep_source": "float"] {
        field: TypedPtr<f32> = "const float*",
        kept: TypedPtr<f32> = "float*",
        illumination: DevicePtr = "double*",
        n: u64 = "u64",
    }
);

kernel_params!(
    /// `correlate_image` (imaging.cu): image += source adjoint, over n values.
    CorrelateImage for ["correlate_image": "float"] {
        source: TypedPtr<f32> = "const float*",
        adjoint: TypedPtr<f32> = "const float*",
        image: DevicePtr = "double*",
        n: u64 = "u64",
    }
);

kernel_params!(
    /// `correlate_gradient` (imaging.cu): gradient += adjoint (next - 2 g cur + g^2 prev), over n
    /// values (a null cur, prev or sponge: zeros, zeros, ones).
    CorrelateGradient for ["correlate_gradient": "float"] {
        next: TypedPtr<f32> = "const float*",
        cur: TypedPtr<f32> = "const float*",
        prev: TypedPtr<f32> = "const float*",
        sponge: DevicePtr = "const double*",
        adjoint: TypedPtr<f32> = "const float*",
        gradient: DevicePtr = "double*",
        n: u64 = "u64",
    }
);

kernel_params!(
    /// `illumination_max` (imaging.cu): highest = max(highest, illumination) over the grid's points
    /// from plane z0, as the bits of a non-negative double.
    IlluminationMax for ["illumination_max": "float"] {
        illumination: DevicePtr = "const double*",
        highest: TypedPtr<u64> = "u64*",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        z0: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
        origin: i64 = "i64",
    }
);

kernel_params!(
    /// `stack_normalised` (imaging.cu): stack += image / (illumination + fraction highest) over
    /// the grid's points from plane z0 (nothing where highest is 0).
    StackNormalised for ["stack_normalised": "float"] {
        image: DevicePtr = "const double*",
        illumination: DevicePtr = "const double*",
        highest: TypedPtr<u64> = "const u64*",
        fraction: f64 = "double",
        stack: DevicePtr = "double*",
        nx: i32 = "int",
        ny: i32 = "int",
        nz: i32 = "int",
        z0: i32 = "int",
        pitch: i64 = "i64",
        plane: i64 = "i64",
        origin: i64 = "i64",
    }
);
