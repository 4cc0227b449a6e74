//! GPU backends: one solver over a small runtime trait, implemented by CUDA (cudarc) and HIP.
