//! Shared by the tests that run the `seismic-run` binary: finding it and a scratch directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary under test: cargo's build, else (test executables copied elsewhere, as a
/// GPU machine's staging directory holds them in tests/ beside bin/) `../bin/seismic-run`
/// next to this test executable.
pub fn seismic_run() -> Command {
    let built = Path::new(env!("CARGO_BIN_EXE_seismic-run"));
    let staged = std::env::current_exe().ok().and_then(|t| Some(t.parent()?.parent()?.join("bin").join("seismic-run")));
    match staged {
        Some(s) if !built.exists() && s.exists() => Command::new(s),
        _ => Command::new(built),
    }
}

/// A fresh, empty directory for one test, removed when the test ends.
pub struct Scratch(pub PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A scratch directory named after the test file (`suite`) and the test (`name`).
pub fn scratch(suite: &str, name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("seismic-run-{suite}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}
