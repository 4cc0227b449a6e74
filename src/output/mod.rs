//! Outputs of a run: the HDF5 result file ([`hdf5`] writes it, [`result`] reads it back; the
//! only modules that use rust-hdf5), the files derived from it ([`derived`] lists them: [`segy`]
//! traces, [`xdmf`] sidecar, [`plot`] pictures and animation), the progress bar ([`progress`]) and the safe creation and
//! replacement of every output file ([`safe`]).

pub mod checksum;
pub mod crop;
pub mod derived;
pub mod hdf5;
pub mod plan;
pub mod plot;
pub mod progress;
pub mod result;
pub mod safe;
pub mod segy;
pub mod xdmf;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// Checks, before any work, every path in `derived`: each must name a regular file or nothing
/// ([`safe::check_replaceable`]), and none may be the result file `h5` itself (a result named
/// `run.xdmf` would be replaced by its own sidecar). `key` names the setting that gave `h5`.
pub fn check_derived_paths(h5: &Path, key: &str, derived: &[(PathBuf, &str)]) -> Result<()> {
    for (path, what) in derived {
        if same_file(path, h5) {
            bail!(
                "{what} would replace {key} = {} itself ({}); give each file a name of its own (a result \
                 file's extension is .h5)",
                h5.display(),
                path.display()
            );
        }
        safe::check_replaceable(path, what)
            .with_context(|| format!("{key} = {}: the files derived from it go beside it", h5.display()))?;
    }
    Ok(())
}

/// Whether the output path `a` names the file `b`: the same path, or the same existing file
/// (device and inode) under another name (a link at `a` is itself the file renamed over).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    a == b
        || match (std::fs::symlink_metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
}
