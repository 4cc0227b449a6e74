//! The files derived from a finished result file, as a list of writers: each [`DerivedFile`]
//! names the files it writes beside the result (checked before a run starts) and writes them from
//! the result file, as `seismic-run export` does. A new derived format is one more type here and
//! one more line where the list is chosen ([`for_run`], and `export`'s flags).
//!
//! A run's result file and its derived files are one set ([`commit_with`]): the derived files are
//! made from the finished result under its temporary name, and all are renamed into place
//! together, the set's files this run does not write (an earlier run's SEG-Y or pictures at the
//! same stem) removed with a notice, so that the files on disk always come from one run.

use super::hdf5::{Commit, Written};
use super::result::{self, ResultFile};
use super::{plot, safe, segy, xdmf};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One kind of file made from a result file.
pub trait DerivedFile {
    /// The files it writes for the result file `h5`, each with what makes it (for messages).
    fn paths(&self, h5: &Path) -> Vec<(PathBuf, &'static str)>;

    /// Writes them from `result`; returns the paths written. `notice` gets one line where a file
    /// cannot hold everything (e.g. SEG-Y's 16-bit sample count).
    fn write(&self, result: &ResultFile, notice: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>>;
}

/// The XDMF sidecar (`<stem>.xdmf`), which opens the result's snapshots in ParaView or VisIt.
pub struct Xdmf {
    /// What asks for it, for messages.
    pub what: &'static str,
}

/// The receiver traces as SEG-Y rev 2, at `path` (default `<stem>.sgy`).
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
        if let Some(n) = segy::write(result, &path)? {
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

/// Renames the finished result file `commit` into place together with the files of `list` made
/// from it ([`safe::commit_set`]), and removes the files a run may write beside the result that
/// `list` does not (with a notice each): the set on disk is this run's. Returns the result file
/// and the derived files written. Where a derived file fails, the result file is still kept (a
/// long run is not lost; `seismic-run export` makes the derived files later), every derived file
/// at its stem removed, and the error says so.
pub fn commit_with(commit: Commit, list: &[Derived]) -> Result<(Written, Vec<PathBuf>)> {
    let dest = commit.path().to_path_buf();
    let (made, staged) = safe::staged(|| {
        let mut r = ResultFile::open(&commit.temp().open_path())?;
        // Named as it will be: the derived files refer to the result by its final name.
        r.path = dest.clone();
        let mut written = Vec::new();
        for d in list {
            written.extend(d.write(&r, &mut |n| eprintln!("notice: {n}"))?);
        }
        Ok(written)
    });
    let h5 = commit.into_synced()?;
    let every = paths(&for_run(true, true), &dest);
    let (written, made_error) = match made {
        Ok(w) => (w, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let files = if made_error.is_none() { staged } else { Vec::new() };
    let stale: Vec<PathBuf> =
        every.into_iter().map(|(p, _)| p).filter(|p| !written.contains(p) && *p != dest).collect();
    let removed = safe::commit_set(std::iter::once(h5).chain(files).collect(), &stale)
        .with_context(|| format!("writing {}", dest.display()))?;
    for p in &removed {
        eprintln!(
            "notice: removed {}: an earlier run's file beside {}, which this run does not write",
            p.display(),
            dest.display()
        );
    }
    if let Some(e) = made_error {
        return Err(e.context(format!(
            "the result file {} is complete and kept, but a file derived from it failed (none is beside it; \
             `seismic-run export` makes them from it)",
            dest.display()
        )));
    }
    Ok((Written { path: dest }, written))
}
