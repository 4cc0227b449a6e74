//! Named velocity data sets (Marmousi, ...): their descriptors, where their files are looked for,
//! and how to fetch one.
//!
//! Each data set is described by a TOML file in `models/` (embedded in the binary, so it runs from
//! any directory). The data file itself is never part of the repository: it is looked for under
//! `$SEISMIC_DATA_DIR`, then `./data`, then `../shared/models` (relative to the current directory,
//! so a fresh clone next to `../shared` finds the project's copy), and its size and SHA-256 are
//! checked before use. [`fetch`] downloads it with curl; a run whose data set is missing fetches
//! it on first use ([`Descriptor::locate_or_fetch`]).

use super::file::{FileSpec, sha256_of};
use super::volume::VelocityVolume;
use crate::config::{FileFormat, Units};
use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable naming the first directory searched for data-set files.
pub const DATA_DIR_ENV: &str = "SEISMIC_DATA_DIR";

/// The descriptors in `models/`, embedded at build time.
const DESCRIPTORS: &[(&str, &str)] = &[("models/marmousi.toml", include_str!("../../models/marmousi.toml"))];

/// What `models/<name>.toml` says about a data set.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Descriptor {
    pub name: String,
    pub description: String,
    /// Path of the data file under a data directory.
    pub file: String,
    pub format: FileFormat,
    /// Storage order, slowest axis first ("xz": x slowest, depth fastest).
    pub axis_order: String,
    /// Sizes in the axes of `axis_order`.
    pub shape: Vec<usize>,
    /// Spacings (m) in the axes of `axis_order`.
    pub spacing: Vec<f64>,
    pub units: Units,
    /// Size of the data file in bytes.
    pub bytes: u64,
    /// SHA-256 of the data file, lowercase hex.
    pub sha256: String,
    /// Public download address.
    pub url: String,
    pub attribution: String,
}

/// Every known data set, in the order of `models/`.
pub fn descriptors() -> Vec<Descriptor> {
    DESCRIPTORS
        .iter()
        .map(|(path, text)| toml::from_str(text).unwrap_or_else(|e| panic!("{path} is not a valid descriptor: {e}")))
        .collect()
}

/// The descriptor of data set `name`, or an error listing the known ones.
pub fn descriptor(name: &str) -> Result<Descriptor> {
    let all = descriptors();
    match all.iter().find(|d| d.name == name) {
        Some(d) => Ok(d.clone()),
        None => bail!(
            "unknown model data set {name:?}; known: {}",
            all.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The directories searched for data-set files, in order: `$SEISMIC_DATA_DIR` (when set),
/// `./data`, `../shared/models`.
pub fn data_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(PathBuf::from("data"));
    dirs.push(Path::new("..").join("shared").join("models"));
    dirs
}

/// Where [`fetch`] puts files by default: `$SEISMIC_DATA_DIR` when set, else `./data`.
pub fn default_fetch_dir() -> PathBuf {
    std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("data"))
}

impl Descriptor {
    /// The file's description; the SHA-256 is left out because [`check_file`](Self::check_file)
    /// checks it first, with advice on replacing the file.
    fn spec<'a>(&'a self, path: &'a Path) -> FileSpec<'a> {
        FileSpec {
            path,
            format: self.format,
            shape: &self.shape,
            spacing: &self.spacing,
            units: self.units,
            axis_order: &self.axis_order,
            sha256: None,
            key: &self.name,
        }
    }

    /// How to get the file, for error messages.
    fn how_to_get(&self) -> String {
        format!(
            "Get it with:\n    seismic-run fetch-model {name}\n\
             which downloads {url} into ./data (or ${DATA_DIR_ENV}). Without network, download that address \
             by hand and save it as data/{file}, or set {DATA_DIR_ENV} to a directory holding {file}.",
            name = self.name,
            url = self.url,
            file = self.file
        )
    }

    /// The first existing data file among `dirs`, or an error listing every path tried and how
    /// to get the file.
    pub fn locate(&self, dirs: &[PathBuf]) -> Result<PathBuf> {
        let tried: Vec<PathBuf> = dirs.iter().map(|d| d.join(&self.file)).collect();
        if let Some(found) = tried.iter().find(|p| p.is_file()) {
            return Ok(found.clone());
        }
        let list: String = tried.iter().map(|p| format!("\n    {}", p.display())).collect();
        bail!("model data set {:?}: file {} not found; looked at:{list}\n{}", self.name, self.file, self.how_to_get())
    }

    /// As [`Self::locate`], and where the file is in none of `dirs` but the directory [`fetch`]
    /// fills by default ([`default_fetch_dir`]) is among them, downloads it there first (a one-line
    /// notice on stderr): a fresh machine with network runs a named model as it is. Without
    /// network the error lists the paths tried, how to get the file, and why the download failed.
    pub fn locate_or_fetch(&self, dirs: &[PathBuf]) -> Result<PathBuf> {
        self.locate_or_fetch_into(dirs, &default_fetch_dir())
    }

    /// As [`Self::locate_or_fetch`], downloading into `into` (fetched only where it is among `dirs`).
    pub fn locate_or_fetch_into(&self, dirs: &[PathBuf], into: &Path) -> Result<PathBuf> {
        let missing = match self.locate(dirs) {
            Ok(path) => return Ok(path),
            Err(e) => e,
        };
        if !dirs.iter().any(|d| d == into) {
            return Err(missing);
        }
        eprintln!(
            "notice: model data set {:?} not found; downloading {} ({:.1} MB) into {} and checking its SHA-256",
            self.name,
            self.url,
            self.bytes as f64 / 1e6,
            into.display()
        );
        fetch_from(self, &self.url, into).map_err(|e| anyhow::anyhow!("{missing:#}\nDownloading it failed: {e:#}"))
    }

    /// Locates the file among `dirs` (fetching it where [`Self::locate_or_fetch`] does), checks
    /// size and SHA-256, and reads it (m/s).
    pub fn load(&self, dirs: &[PathBuf]) -> Result<VelocityVolume> {
        self.load_planes(dirs, None)
    }

    /// As [`Self::load`], keeping only the model's z-indices `held_z` (see [`FileSpec::read_planes`]).
    pub fn load_planes(&self, dirs: &[PathBuf], held_z: Option<std::ops::Range<usize>>) -> Result<VelocityVolume> {
        let path = self.locate_or_fetch(dirs)?;
        self.check_file(&path)?;
        self.spec(&path).read_planes(held_z)
    }

    /// Writes the data set (located among `dirs`, fetched where [`Self::locate_or_fetch`] does) as
    /// a SEG-Y model to `out` ([`super::segy::write_model`]: m/s, IEEE floats, rev 1), as the public
    /// models ship: `format = "segy"` reads it back to the same velocities.
    pub fn write_segy(&self, dirs: &[PathBuf], out: &Path) -> Result<()> {
        let v = self.load(dirs)?;
        let text = vec![
            format!("{}: {}", self.name, self.description),
            "P-wave velocity, m/s; one trace per x, samples down in depth".to_string(),
            format!(
                "x spacing {} m (cdp x, scalar -100); depth step {} m = sample interval in mm",
                v.spacing[0], v.spacing[2]
            ),
            format!("from {} (written by seismic-run fetch-model --segy)", self.url),
        ];
        let mut bytes = Vec::new();
        super::segy::write_model(&v, &text, &mut bytes)?;
        crate::output::safe::write_file(out, &bytes).with_context(|| format!("writing {}", out.display()))?;
        Ok(())
    }

    /// The data set's z-axis: samples and spacing (m).
    pub fn z_axis(&self) -> Result<(usize, f64)> {
        self.spec(Path::new(&self.file)).z_axis()
    }

    /// Size, then SHA-256, of a candidate data file; errors say how to replace it.
    pub fn check_file(&self, path: &Path) -> Result<()> {
        let size = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?.len();
        let fix = format!("Delete it and run `seismic-run fetch-model {}` (or see {}).", self.name, self.url);
        ensure!(
            size == self.bytes,
            "model data set {:?}: {} holds {size} bytes, expected {}: the file is incomplete or a different one. {fix}",
            self.name,
            path.display(),
            self.bytes
        );
        let mut file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let actual = sha256_of(&mut file).with_context(|| format!("cannot read {}", path.display()))?;
        ensure!(
            actual == self.sha256,
            "model data set {:?}: {} has SHA-256 {actual}, expected {}: the file is corrupt. {fix}",
            self.name,
            path.display(),
            self.sha256
        );
        Ok(())
    }
}

/// Downloads data set `name` into `dest_dir` (usually [`default_fetch_dir`]) from its public
/// address, checks it and returns its path. A file already there and intact is kept.
pub fn fetch(name: &str, dest_dir: &Path) -> Result<PathBuf> {
    let d = descriptor(name)?;
    fetch_from(&d, &d.url, dest_dir)
}

/// [`fetch`] from another address (a mirror, or a `file://` URL): `curl -fL` into a temporary
/// name beside the destination, size and SHA-256 checked, then renamed into place, so an
/// interrupted or corrupt download never sits where the loader looks.
pub fn fetch_from(d: &Descriptor, url: &str, dest_dir: &Path) -> Result<PathBuf> {
    let dest = dest_dir.join(&d.file);
    if dest.is_file() && d.check_file(&dest).is_ok() {
        return Ok(dest);
    }
    let dir = dest.parent().expect("a file under a directory");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
    let file_name = dest.file_name().expect("a file name").to_string_lossy();
    let partial = dir.join(format!(".{file_name}.partial-{}", std::process::id()));
    let manual = format!("Download {url} by hand and save it as {}.", dest.display());
    let output = Command::new("curl")
        .args(["-fL", "--silent", "--show-error", "--connect-timeout", "20", "-o"])
        .arg(&partial)
        .arg(url)
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) => bail!("cannot run curl ({e}). {manual}"),
    };
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        bail!(
            "could not download model data set {:?}: curl {}: {}\nNo network here? {manual}",
            d.name,
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    if let Err(e) = d.check_file(&partial) {
        let _ = std::fs::remove_file(&partial);
        return Err(e.context(format!("the download from {url} is not the expected file")));
    }
    std::fs::rename(&partial, &dest).with_context(|| format!("cannot move the download to {}", dest.display()))?;
    Ok(dest)
}
