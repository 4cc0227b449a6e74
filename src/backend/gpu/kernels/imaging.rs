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
