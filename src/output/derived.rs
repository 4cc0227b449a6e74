//! The files derived from a finished result file, as a list of writers: each [`DerivedFile`]
//! names the files it writes beside the result (checked before a run starts) and writes them from
//! the result file, as `seismic-run export` does. A new derived format is one more type here and
//! one more line where the list is chosen ([`for_run`], and `export`'s flags).

use super::result::{self, ResultFile};
use super::{plot, segy, xdmf};
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One kind of file made from a result file.
pub trait DerivedFile {
    /// The files it writes for the result file `h5`, each with what makes it (for messages).
    fn paths(&self, h5: &Path) -> Vec<(PathBuf, &'static str)>;

    /// Writes them from `result`; returns the paths written. `notice` gets one line where a file
    /// cannot hold everything (e.g. SEG-Y traces resampled onto whole microseconds).
    fn write(&self, result: &ResultFile, notice: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>>;
}

/// The XDMF sidecar (`<stem>.xdmf`), which opens the result's snapshots in ParaView or VisIt.
pub struct Xdmf {
    /// What asks for it, for messages.
    pub what: &'static str,
}

/// The receiver traces as SEG-Y (rev 1; rev 2 where counts need it), at `path` (default `<stem>.sgy`).
pub struct Segy {
    pub path: Option<PathBuf>,
    pub what: &'static str,
}

/// The pictures and the snapshot animation.
pub struct Pictures;

impl DerivedFile for Xdmf {
    fn paths(&self, h5: &Path) -> Vec<(PathBuf, &'static str)> {
        vec![(result::sibling(h5, "xdmf"), self.what)]
    }

    fn write(&self, result: &ResultFile, _: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>> {
        let path = result::sibling(&result.path, "xdmf");
        xdmf::write(result, &path)?;
        Ok(vec![path])
    }
}

impl Segy {
    fn path(&self, h5: &Path) -> PathBuf {
        self.path.clone().unwrap_or_else(|| result::sibling(h5, "sgy"))
    }
}

impl DerivedFile for Segy {
    fn paths(&self, h5: &Path) -> Vec<(PathBuf, &'static str)> {
        vec![(self.path(h5), self.what)]
    }

    fn write(&self, result: &ResultFile, notice: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>> {
        let path = self.path(&result.path);
        for n in segy::write(result, &path)? {
            notice(&n);
        }
        Ok(vec![path])
    }
}

impl DerivedFile for Pictures {
    fn paths(&self, h5: &Path) -> Vec<(PathBuf, &'static str)> {
        plot::picture_paths(h5).into_iter().map(|p| (p, "the picture (--plot)")).collect()
    }

    fn write(&self, result: &ResultFile, _: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>> {
        plot::draw_all(result)
    }
}

/// The derived files of a run or an export, in the order they are written (shared with the
/// threads that finish survey shots).
pub type DerivedList = Vec<Derived>;

/// One entry of a [`DerivedList`].
pub type Derived = Arc<dyn DerivedFile + Send + Sync>;

/// What a run writes beside its result file: the XDMF sidecar always, the SEG-Y with `segy`
/// (`[output] segy`), the pictures with `plot` (`--plot` or `[output] plot`).
pub fn for_run(segy: bool, plot: bool) -> DerivedList {
    let mut list: DerivedList = vec![Arc::new(Xdmf { what: "the XDMF sidecar" })];
    if segy {
        list.push(Arc::new(Segy { path: None, what: "the SEG-Y file (output.segy)" }));
    }
    if plot {
        list.push(Arc::new(Pictures));
    }
    list
}

/// Every file `list` writes for the result file `h5`.
pub fn paths(list: &[Derived], h5: &Path) -> Vec<(PathBuf, &'static str)> {
    list.iter().flat_map(|d| d.paths(h5)).collect()
}

/// Writes every file of `list` from the finished result file `h5` (notices on stderr); returns
/// the paths written.
pub fn write_all(list: &[Derived], h5: &Path) -> Result<Vec<PathBuf>> {
    let result = ResultFile::open(h5)?;
    let mut written = Vec::new();
    for d in list {
        written.extend(d.write(&result, &mut |n| eprintln!("notice: {n}"))?);
    }
    Ok(written)
}
