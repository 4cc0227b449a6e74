//! Where a survey's files go, and which process runs which shot: a claim file per shot
//! (`.<stem>_shot00007.claim`) beside the results.
//!
//! A claim is live while the process running the shot holds an exclusive `flock` on it: the file
//! appears already locked (created under a name of its own, locked, then hard-linked into place,
//! which fails if a claim is there), and the lock goes when the process ends, however it ends. Its
//! first line names the owner; once the shot's files are in place the owner adds `done <digest>`
//! (the shot's provenance) and lets go. A claim nobody holds is either done with a digest or left
//! by a process that stopped: the next process takes it over under the lock.

use super::Shot;
use crate::output::result::ResultFile;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where a survey's files go: beside `output` (the input's `[output] path` or `--output`), named
/// after its stem: `<stem>_shot00007.h5` per shot and `<stem>_survey.json`, the index.
#[derive(Clone, Debug)]
pub struct SurveyFiles {
    dir: PathBuf,
    stem: String,
}

/// A shot taken by this process: its claim file, locked until this is dropped.
#[derive(Debug)]
pub struct Claim {
    file: File,
    owner: String,
}

impl Claim {
    /// Records that the shot's files are in place, computed with provenance `digest`, and lets go.
    pub fn done(mut self, digest: &str) -> Result<()> {
        write_claim(&mut self.file, &format!("{}\ndone {digest}\n", self.owner))?;
        // Durable before the lock goes: a process that takes the claim next reads it whole.
        self.file.sync_data().context("cannot sync a claim file")
    }
}

/// Shot `i`'s claim, as another process sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimState {
    /// No claim file.
    Free,
    /// A process holds it now.
    Live,
    /// Nobody holds it: its shot done with this digest, or (None) left unfinished.
    Left { done: Option<String> },
}

fn flock(f: &File, how: i32) -> std::io::Result<bool> {
    // SAFETY: a valid descriptor for the call's duration; the lock belongs to the open file.
    if unsafe { libc::flock(f.as_raw_fd(), how) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) { Ok(false) } else { Err(e) }
}

fn write_claim(f: &mut File, text: &str) -> Result<()> {
    f.set_len(0)?;
    f.rewind()?;
    f.write_all(text.as_bytes()).context("cannot write a claim file")
}

/// The digest a claim's text records as done.
fn done_digest(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("done ")).map(|d| d.trim().to_string())
}

impl SurveyFiles {
    pub fn new(output: &Path) -> Result<SurveyFiles> {
        let stem = output.file_stem().and_then(|s| s.to_str()).filter(|s| !s.is_empty());
        let stem =
            stem.with_context(|| format!("output path {}: no file name to name the shots by", output.display()))?;
        Ok(SurveyFiles { dir: crate::output::safe::parent_dir(output), stem: stem.to_string() })
    }

    /// The result file of shot `i`.
    pub fn shot(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}_shot{i:05}.h5", self.stem))
    }

    /// The survey's index (JSON).
    pub fn index(&self) -> PathBuf {
        self.dir.join(format!("{}_survey.json", self.stem))
    }

    fn claim(&self, i: usize) -> PathBuf {
        self.dir.join(format!(".{}_shot{i:05}.claim", self.stem))
    }

    /// Opens shot `i`'s claim and locks it (`wait`: until its holder lets go); None when there is
    /// none, or (not waiting) a process holds it: `Err(true)`.
    fn lock_existing(&self, i: usize, wait: bool) -> Result<std::result::Result<File, bool>> {
        let path = self.claim(i);
        for _ in 0..64 {
            let f = match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Err(false)),
                Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
            };
            let how = if wait { libc::LOCK_EX } else { libc::LOCK_EX | libc::LOCK_NB };
            if !flock(&f, how).with_context(|| format!("cannot lock {}", path.display()))? {
                return Ok(Err(true));
            }
            // Removed or replaced between the open and the lock: look again.
            let same = std::fs::symlink_metadata(&path).is_ok_and(|m| m.ino() == f.metadata().map_or(0, |o| o.ino()));
            if same {
                return Ok(Ok(f));
            }
        }
        anyhow::bail!("{}: keeps changing under this process", path.display())
    }

    /// Takes shot `i` for this process unless a process holds it or its claim records it done
    /// with `digest`: a new claim file appears atomically, already locked; a claim left by a
    /// stopped process is taken over.
    pub fn try_claim(&self, i: usize, owner: &str, digest: &str) -> Result<Option<Claim>> {
        let path = self.claim(i);
        loop {
            let tmp = self.dir.join(format!(
                ".{}_shot{i:05}.claim.{}.{:x}",
                self.stem,
                std::process::id(),
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
            ));
            let mut f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
                .with_context(|| format!("cannot claim shot {i}: {}", tmp.display()))?;
            flock(&f, libc::LOCK_EX)?;
            write_claim(&mut f, &format!("{owner}\n"))?;
            let linked = std::fs::hard_link(&tmp, &path);
            let _ = std::fs::remove_file(&tmp);
            match linked {
                Ok(()) => return Ok(Some(Claim { file: f, owner: owner.to_string() })),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e).with_context(|| format!("cannot claim shot {i}: {}", path.display())),
            }
            drop(f);
            match self.lock_existing(i, false)? {
                Err(true) => return Ok(None),
                // Removed meanwhile: create it again.
                Err(false) => continue,
                Ok(mut f) => {
                    let mut text = String::new();
                    f.read_to_string(&mut text).with_context(|| format!("cannot read {}", path.display()))?;
                    if done_digest(&text).as_deref() == Some(digest) {
                        return Ok(None);
                    }
                    write_claim(&mut f, &format!("{owner}\n"))?;
                    return Ok(Some(Claim { file: f, owner: owner.to_string() }));
                }
            }
        }
    }

    /// Shot `i`'s claim as it is now (a held claim is not waited for).
    pub fn claim_state(&self, i: usize) -> Result<ClaimState> {
        Ok(match self.lock_existing(i, false)? {
            Err(false) => ClaimState::Free,
            Err(true) => ClaimState::Live,
            Ok(mut f) => {
                let mut text = String::new();
                f.read_to_string(&mut text)?;
                ClaimState::Left { done: done_digest(&text) }
            }
        })
    }

    /// Waits until no process holds shot `i`'s claim.
    pub fn wait_for(&self, i: usize) -> Result<()> {
        self.lock_existing(i, true).map(|_| ())
    }

    /// Records shot `i` done with `digest` (a complete file found by a resume), unless a process
    /// holds its claim; keeps the owner a claim names.
    pub fn mark_done(&self, i: usize, owner: &str, digest: &str) -> Result<()> {
        match self.lock_existing(i, false)? {
            Err(true) => Ok(()),
            Err(false) => match self.try_claim(i, owner, digest)? {
                Some(c) => c.done(digest),
                None => Ok(()),
            },
            Ok(mut f) => {
                let mut text = String::new();
                f.read_to_string(&mut text)?;
                let owner = text.lines().next().filter(|l| !l.is_empty()).unwrap_or(owner).to_string();
                Claim { file: f, owner }.done(digest)
            }
        }
    }

    /// Who claimed shot `i` (the owner written by [`Self::try_claim`]), if anyone.
    pub fn claimed_by(&self, i: usize) -> Option<String> {
        let text = std::fs::read_to_string(self.claim(i)).ok()?;
        text.lines().next().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
    }

    /// Removes the claims of `shots` that no process holds (a fresh start, or the shots a resume
    /// runs again); returns those a process holds, left alone.
    pub fn release(&self, shots: impl IntoIterator<Item = usize>) -> Result<Vec<usize>> {
        let mut held = Vec::new();
        for i in shots {
            match self.lock_existing(i, false)? {
                Err(true) => held.push(i),
                Err(false) => {}
                // Removed while locked: a process that opened it meanwhile sees the name gone
                // after its lock and looks again.
                Ok(_locked) => match std::fs::remove_file(self.claim(i)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e).with_context(|| format!("cannot remove {}", self.claim(i).display())),
                },
            }
        }
        Ok(held)
    }

    /// Whether shot `shot`'s result file is there and is the shot's: it opens as a result file
    /// with every dataset's checksum recorded, was computed with provenance `digest`, and its
    /// source and receivers are the shot's. `verify`: its datasets are also read back against
    /// their checksums (a damaged file is not complete).
    pub fn check(&self, shot: &Shot, receivers: &[[f64; 3]], digest: &str, verify: bool) -> ShotFile {
        let r = match ResultFile::open(&self.shot(shot.index)) {
            Ok(r) => r,
            Err(_) if !self.shot(shot.index).exists() => return ShotFile::Missing,
            Err(e) => return ShotFile::Damaged(format!("{e:#}")),
        };
        match r.provenance() {
            Some(p) if p == digest => {}
            Some(_) => return ShotFile::Changed,
            None => return ShotFile::Damaged("it records no provenance (an older or unfinished file)".into()),
        }
        let close = |a: [f64; 3], b: [f64; 3]| (0..3).all(|k| (a[k] - b[k]).abs() <= 1e-9 * (1.0 + b[k].abs()));
        let same = close(r.source_position(), shot.source)
            && r.receivers.len() == receivers.len()
            && r.receivers.iter().zip(receivers).all(|(a, b)| close(*a, *b));
        if !same {
            return ShotFile::Changed;
        }
        let checked = if verify { r.verify() } else { r.checksums_recorded() };
        match checked {
            Ok(()) => ShotFile::Complete,
            Err(e) => ShotFile::Damaged(format!("{e:#}")),
        }
    }
}

/// What a shot's result file is, against the shot as it now would be ([`SurveyFiles::check`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ShotFile {
    Complete,
    Missing,
    /// Computed from another input, model or numerics version (its provenance differs).
    Changed,
    /// Not a whole result file (why).
    Damaged(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_taken_once_done_or_taken_over() {
        let dir = std::env::temp_dir().join(format!("seismic-survey-claims-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = SurveyFiles::new(&dir.join("run.h5")).unwrap();
        assert_eq!(files.shot(7), dir.join("run_shot00007.h5"));
        assert_eq!(files.index(), dir.join("run_survey.json"));
        assert_eq!(files.claim_state(3).unwrap(), ClaimState::Free);
        let held = files.try_claim(3, "rank 0", "d1").unwrap().expect("free");
        assert!(files.try_claim(3, "rank 1", "d1").unwrap().is_none(), "held by a live claim");
        assert_eq!(files.claim_state(3).unwrap(), ClaimState::Live);
        assert_eq!(files.claimed_by(3).as_deref(), Some("rank 0"));
        assert_eq!(files.release([3, 4]).unwrap(), [3], "a held claim stays");
        held.done("d1").unwrap();
        assert_eq!(files.claim_state(3).unwrap(), ClaimState::Left { done: Some("d1".into()) });
        assert!(files.try_claim(3, "rank 1", "d1").unwrap().is_none(), "done with this digest");
        // Another digest, or a claim its process left unfinished: taken over.
        let c = files.try_claim(3, "rank 1", "d2").unwrap().expect("done with another digest");
        assert_eq!(files.claimed_by(3).as_deref(), Some("rank 1"));
        drop(c);
        assert_eq!(files.claim_state(3).unwrap(), ClaimState::Left { done: None });
        assert!(files.try_claim(3, "rank 2", "d2").unwrap().is_some(), "left unfinished");
        files.mark_done(5, "complete before this resume", "d3").unwrap();
        assert_eq!(files.claim_state(5).unwrap(), ClaimState::Left { done: Some("d3".into()) });
        assert!(files.release([3, 5]).unwrap().is_empty());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
