//! The backend-agnostic time loop: steps, snapshots, receiver traces and per-step statistics.
