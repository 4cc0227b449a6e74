//! Output files that never destroy what they replace: the checks on an output path before a run,
//! and the temporary file a result is written to and then renamed into place.
//!
//! An output path may name a regular file (replaced) or nothing (created); anything else (a
//! directory, symbolic link, device, FIFO or socket) is refused before any work. The temporary
//! file lives in the same directory under an unpredictable name (`.<name>.<random>.partial`),
//! created exclusively without following links, synced before the rename and the directory
//! after. The destination is checked again just before the rename. Temporary files still open
//! are listed here, so that a signal handler can remove them ([`remove_pending`]).
//!
//! A result file and the files derived from it are one set: [`staged`] keeps the temporary files
//! a writer commits (synced, not renamed) and [`commit_set`] renames them together, removing the
//! files of the set this run does not write, under an exclusive lock on the directory, so that
//! two runs writing the same paths at once leave the set of one of them.

use anyhow::{Context, Result, bail, ensure};
use std::cell::RefCell;
use std::fs::{File, Metadata, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporary files created and not yet committed or removed.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every temporary file not yet committed (for a signal handler about to exit).
pub fn remove_pending() {
    // A poisoned lock still holds the list: the files are removed all the same.
    let list = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    for p in list.iter() {
        let _ = std::fs::remove_file(p);
    }
}

fn forget_pending(path: &Path) {
    PENDING.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| p != path);
}

/// What kind of thing `meta` describes, for messages.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Errors unless `path` names a regular file or nothing (links are not followed); `key` names
/// the setting that gave it.
pub fn check_replaceable(path: &Path, key: &str) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(m) => bail!(
            "{key} = {} is {}, not a regular file: refusing to replace it (give the path of a new or \
             regular file)",
            path.display(),
            kind_of(&m)
        ),
        // Nothing there (or a parent that is no directory, which the caller reports).
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => Ok(()),
        Err(e) => bail!("{key} = {}: cannot inspect it: {e}", path.display()),
    }
}

/// A 64-bit value nobody can guess in advance: std's per-process random hash keys over the time
/// and a counter.
fn unpredictable() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.finish()
}

/// Opens a new file at `path` exclusively (fails if anything, a link included, is there).
fn create_exclusive(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// The directory a path's file is in ("." for a bare name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

thread_local! {
    /// The temporary files committed on this thread inside [`staged`], not yet renamed.
    static STAGE: RefCell<Option<Vec<TempFile>>> = const { RefCell::new(None) };
}

/// Runs `write` with every [`TempFile::commit`] on this thread staged: the file synced but not
/// renamed, kept for [`commit_set`]. Returns what `write` returned and the staged files (removed
/// if dropped uncommitted).
pub fn staged<T>(write: impl FnOnce() -> Result<T>) -> (Result<T>, Vec<TempFile>) {
    let outer = STAGE.with(|s| s.borrow_mut().replace(Vec::new()));
    let r = write();
    let files = STAGE.with(|s| std::mem::replace(&mut *s.borrow_mut(), outer)).unwrap_or_default();
    (r, files)
}

/// An exclusive lock on a directory (flock on its descriptor), held until dropped: the renames of
/// one set of files happen under it.
struct DirLock(File);

impl DirLock {
    fn take(dir: &Path) -> Result<DirLock> {
        use std::os::fd::AsRawFd;
        let d = File::open(dir).with_context(|| format!("cannot open the directory {}", dir.display()))?;
        // SAFETY: a valid descriptor for the call's duration; the lock goes with the descriptor.
        if unsafe { libc::flock(d.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("cannot lock {}", dir.display()));
        }
        Ok(DirLock(d))
    }
}

/// Renames the (synced) temporary files `files` into place together and removes the regular files
/// in `stale` (files of the set that this run does not write), all under an exclusive lock on
/// their directory; every destination is checked before the first rename, so that a refused one
/// renames nothing. Returns the stale files removed.
pub fn commit_set(files: Vec<TempFile>, stale: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let Some(first) = files.first() else { return Ok(Vec::new()) };
    let dir = parent_dir(&first.dest);
    ensure!(files.iter().all(|f| parent_dir(&f.dest) == dir), "the files of one set share a directory");
    for f in &files {
        f.check_identity()?;
    }
    let lock = DirLock::take(&dir)?;
    for f in &files {
        check_replaceable(&f.dest, "the output path")?;
    }
    for mut f in files {
        std::fs::rename(&f.path, &f.dest)
            .with_context(|| format!("cannot rename {} to {}", f.path.display(), f.dest.display()))?;
        f.committed = true;
        forget_pending(&f.path);
    }
    let mut removed = Vec::new();
    for p in stale {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file()) {
            std::fs::remove_file(p).with_context(|| format!("cannot remove {}", p.display()))?;
            removed.push(p.clone());
        }
    }
    // Durable once the directory is synced (where the file system syncs directories).
    let _ = lock.0.sync_all();
    drop(lock);
    Ok(removed)
}

/// A temporary file beside its destination; removed on drop unless committed.
pub struct TempFile {
    file: File,
    path: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl TempFile {
    /// Creates `.<name>.<random>.partial<suffix>` in `dest`'s directory. `suffix` keeps an
    /// extension a writer needs to see (".png").
    pub fn create(dest: &Path, suffix: &str) -> Result<TempFile> {
        let name = dest.file_name().with_context(|| format!("{} has no file name", dest.display()))?;
        let dir = parent_dir(dest);
        let mut last = None;
        for _ in 0..16 {
            let tmp = dir.join(format!(".{}.{:016x}.partial{suffix}", name.to_string_lossy(), unpredictable()));
            match create_exclusive(&tmp) {
                Ok(file) => {
                    PENDING.lock().unwrap_or_else(|e| e.into_inner()).push(tmp.clone());
                    return Ok(TempFile { file, path: tmp, dest: dest.to_path_buf(), committed: false });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e).with_context(|| format!("cannot create {}", tmp.display())),
            }
        }
        Err(last.expect("tried")).with_context(|| format!("cannot create a temporary file in {}", dir.display()))
    }

    /// The open temporary file, for writers that take a handle.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// A second handle on the temporary file (None if the system refuses one).
    pub fn file_handle(&self) -> Option<File> {
        self.file.try_clone().ok()
    }

    /// The temporary file's name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path that opens this very file even if its name were swapped meanwhile (Linux's
    /// /proc/self/fd), else the temporary name itself.
    pub fn open_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        let fd = PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        if fd.exists() { fd } else { self.path.clone() }
    }

    /// Errors unless the temporary name still leads to the file created (nobody replaced it with
    /// a link or another file while a writer opened it by name).
    pub fn check_identity(&self) -> Result<()> {
        let ours = self.file.metadata()?;
        let there = std::fs::symlink_metadata(&self.path)
            .with_context(|| format!("the temporary file {} disappeared", self.path.display()))?;
        ensure!(
            there.file_type().is_file() && there.dev() == ours.dev() && there.ino() == ours.ino(),
            "the temporary file {} was replaced while it was written; nothing was renamed",
            self.path.display()
        );
        Ok(())
    }

    /// Syncs the file's data to the disk (a [`commit_set`] expects its files synced).
    pub fn sync(&self) -> Result<()> {
        self.check_identity()?;
        self.file.sync_all().with_context(|| format!("cannot sync {}", self.path.display()))
    }

    /// The destination the file is renamed to.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Syncs the file, renames it over the destination (which must still be a regular file or
    /// nothing) and syncs the directory. Inside [`staged`], the file is synced and kept for
    /// [`commit_set`] instead of renamed.
    pub fn commit(mut self) -> Result<PathBuf> {
        self.check_identity()?;
        self.file.sync_all().with_context(|| format!("cannot sync {}", self.path.display()))?;
        if STAGE.with(|s| s.borrow().is_some()) {
            let dest = self.dest.clone();
            STAGE.with(|s| s.borrow_mut().as_mut().map(|v| v.push(self)));
            return Ok(dest);
        }
        check_replaceable(&self.dest, "the output path")?;
        std::fs::rename(&self.path, &self.dest)
            .with_context(|| format!("cannot rename {} to {}", self.path.display(), self.dest.display()))?;
        self.committed = true;
        forget_pending(&self.path);
        // The rename is durable once the directory is synced; some file systems refuse to sync a
        // directory, which leaves the rename as durable as they make it.
        if let Ok(d) = File::open(parent_dir(&self.dest)) {
            let _ = d.sync_all();
        }
        Ok(self.dest.clone())
    }
}

/// Writes `bytes` to `path` through a [`TempFile`]: a reader never sees a half-written file, and
/// only a regular file or nothing is replaced.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<PathBuf> {
    use std::io::Write as _;
    let mut tmp = TempFile::create(path, "")?;
    tmp.file().write_all(bytes).with_context(|| format!("cannot write {}", tmp.path().display()))?;
    tmp.commit()
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
            forget_pending(&self.path);
        }
    }
}

/// Starts writing `file`'s dirty pages to the disk without waiting for them (Linux's
/// sync_file_range; elsewhere nothing): a later sync then waits only for what was written since.
pub fn start_writeback(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor for the call's duration; the flag only queues writeback.
        unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("seismic-run-safe-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn temp_files_are_unpredictable_exclusive_and_removed_unless_committed() {
        let dir = scratch("temp");
        let dest = dir.join("out.h5");
        let a = TempFile::create(&dest, "").unwrap();
        let b = TempFile::create(&dest, "").unwrap();
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(".out.h5.") && name.ends_with(".partial"), "{name}");
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        assert!(!pa.exists());
        std::fs::write(b.open_path(), b"data").unwrap();
        assert_eq!(b.commit().unwrap(), dest);
        assert!(!pb.exists());
        assert_eq!(std::fs::read(&dest).unwrap(), b"data");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn commit_refuses_a_destination_that_became_a_directory() {
        let dir = scratch("commit");
        let dest = dir.join("out.h5");
        let t = TempFile::create(&dest, ".png").unwrap();
        assert!(t.path().to_string_lossy().ends_with(".partial.png"));
        let tmp = t.path().to_path_buf();
        std::fs::create_dir(&dest).unwrap();
        let e = format!("{:#}", t.commit().unwrap_err());
        assert!(e.contains("is a directory, not a regular file"), "{e}");
        assert!(!tmp.exists() && dest.is_dir());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn staged_files_are_renamed_together_and_stale_ones_removed() {
        let dir = scratch("set");
        std::fs::write(dir.join("out.sgy"), b"old").unwrap();
        let (r, files) = staged(|| {
            write_file(&dir.join("out.xdmf"), b"new")?;
            write_file(&dir.join("out.png"), b"png")
        });
        assert_eq!(r.unwrap(), dir.join("out.png"));
        assert_eq!(files.len(), 2);
        assert!(!dir.join("out.xdmf").exists() && !dir.join("out.png").exists(), "not renamed while staged");
        let removed = commit_set(files, &[dir.join("out.sgy"), dir.join("out.gif")]).unwrap();
        assert_eq!(removed, [dir.join("out.sgy")]);
        assert_eq!(std::fs::read(dir.join("out.xdmf")).unwrap(), b"new");
        assert_eq!(std::fs::read(dir.join("out.png")).unwrap(), b"png");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
        // A refused destination renames nothing.
        std::fs::create_dir(dir.join("bad.sgy")).unwrap();
        let (_, files) = staged(|| {
            write_file(&dir.join("out.xdmf"), b"newer")?;
            write_file(&dir.join("bad.sgy"), b"x")
        });
        assert!(commit_set(files, &[]).is_err());
        assert_eq!(std::fs::read(dir.join("out.xdmf")).unwrap(), b"new");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn only_regular_files_or_nothing_are_replaceable() {
        let dir = scratch("kinds");
        assert!(check_replaceable(&dir.join("new.h5"), "k").is_ok());
        std::fs::write(dir.join("f.h5"), b"x").unwrap();
        assert!(check_replaceable(&dir.join("f.h5"), "k").is_ok());
        let e = check_replaceable(Path::new("/dev/null"), "--output").unwrap_err().to_string();
        assert!(e.contains("--output = /dev/null is a character device"), "{e}");
        std::os::unix::fs::symlink(dir.join("f.h5"), dir.join("link.h5")).unwrap();
        let e = check_replaceable(&dir.join("link.h5"), "k").unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
