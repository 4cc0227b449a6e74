//! Reading a finished result file back: the run's grid, time axis, source, receivers and
//! snapshot series, for the files derived from it (SEG-Y, XDMF, pictures) and for
//! `seismic-run export`. Everything derived is computed from the file itself, so a derived file
//! says what the HDF5 holds, whether it is written right after the run or later.
//!
//! rust-hdf5 reads string attributes of the root and numeric attributes of datasets, so the grid
//! comes from /model/vp's attributes, the time axis from /receivers/pressure's and
//! /snapshots/time, and the source position from the input TOML stored in the root attribute
//! `input` (the text the run was made from).

use crate::config::{Config, ShotNumber};
use anyhow::{Context, Result, anyhow, bail, ensure};
use rust_hdf5::{H5Dataset, H5File};
use std::path::{Path, PathBuf};

/// One dataset under /snapshots: (nsnap, ...) with the section's axes slowest first.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotSeries {
    /// Dataset name under /snapshots, e.g. "pressure" or "pressure_xz".
    pub name: String,
    /// "zyx" (volume), "zx" (xz plane), "yx" (xy plane) or "zy" (yz plane).
    pub axes: String,
    /// Shape of one snapshot, slowest axis first.
    pub shape: Vec<usize>,
    /// Planes: coordinate (m) of the plane along its normal, and its grid index there.
    pub at: Option<f64>,
    pub index: Option<usize>,
}

impl SnapshotSeries {
    /// The plane's normal axis (0 = x, 1 = y, 2 = z), None for a volume.
    pub fn normal(&self) -> Option<usize> {
        match self.axes.as_str() {
            "zx" => Some(1),
            "yx" => Some(2),
            "zy" => Some(0),
            _ => None,
        }
    }
}

/// A result file opened for reading, with its metadata read.
pub struct ResultFile {
    pub path: PathBuf,
    file: H5File,
    /// The input TOML the run was made from, and the run's configuration parsed from it.
    pub input: String,
    pub config: Config,
    pub version: String,
    pub backend: String,
    pub device: String,
    /// [nx, ny, nz] points.
    pub shape: [usize; 3],
    /// [dx, dy, dz] and the position of point (0, 0, 0), m.
    pub spacing: [f64; 3],
    pub origin: [f64; 3],
    pub dt: f64,
    pub steps: usize,
    /// Receiver positions (m) and the time of the first trace sample (s); empty without receivers.
    pub receivers: Vec<[f64; 3]>,
    pub trace_t0: f64,
    /// The shot's SEG-Y numbering (a single run's: shot 1, traces from 1).
    pub numbering: ShotNumber,
    /// Snapshot times (s) and series; empty without snapshots.
    pub snapshot_times: Vec<f64>,
    pub snapshots: Vec<SnapshotSeries>,
}

fn h5(what: String) -> impl FnOnce(rust_hdf5::Hdf5Error) -> anyhow::Error {
    move |e| anyhow!("{what}: {e}")
}

fn attr_f64s(ds: &H5Dataset, path: &str, name: &str) -> Result<Vec<f64>> {
    ds.attr(name).and_then(|a| a.read_numeric_as::<f64>()).map_err(h5(format!("{path}: attribute {name}")))
}

fn attr_f64x3(ds: &H5Dataset, path: &str, name: &str) -> Result<[f64; 3]> {
    let v = attr_f64s(ds, path, name)?;
    <[f64; 3]>::try_from(v.as_slice())
        .map_err(|_| anyhow!("{path}: attribute {name} has {} values, expected 3", v.len()))
}

/// A one-value numeric attribute.
fn attr_f64(ds: &H5Dataset, path: &str, name: &str) -> Result<f64> {
    match attr_f64s(ds, path, name)?[..] {
        [v] => Ok(v),
        ref v => bail!("{path}: attribute {name} has {} values, expected 1", v.len()),
    }
}

/// Errors unless `v` is finite and within `lo..=hi`, naming `what`.
fn in_range(what: &str, v: f64, lo: f64, hi: f64) -> Result<f64> {
    ensure!(v.is_finite() && (lo..=hi).contains(&v), "{what} = {v}, expected a finite value in {lo:e}..{hi:e}");
    Ok(v)
}

/// A snapshot section's axes and the grid's shape along them (slowest first), its normal axis's
/// length for planes.
fn section_shape(axes: &str, [nx, ny, nz]: [usize; 3]) -> Option<(Vec<usize>, Option<usize>)> {
    Some(match axes {
        "zyx" => (vec![nz, ny, nx], None),
        "zx" => (vec![nz, nx], Some(ny)),
        "yx" => (vec![ny, nx], Some(nz)),
        "zy" => (vec![nz, ny], Some(nx)),
        _ => return None,
    })
}

/// Bytes of host memory that reading `elements` f32 values (`copies` times) would take: an error
/// naming `what` when the host has not that much available, so that a file claiming absurd
/// dimensions fails with a message rather than an aborted allocation.
fn check_read_size(what: &str, elements: usize, copies: usize) -> Result<()> {
    let bytes = elements as f64 * 4.0 * copies as f64;
    if let Some(available) = crate::resources::available_host_memory() {
        ensure!(
            bytes <= available as f64,
            "{what}: {elements} values need about {:.1} GiB of host memory, only {:.1} GiB is available",
            bytes / (1u64 << 30) as f64,
            available as f64 / (1u64 << 30) as f64
        );
    }
    Ok(())
}

impl ResultFile {
    /// Opens `path` and reads its metadata, checked for consistency (shapes against the grid,
    /// finite spacings and times), so that the writers never index past what the file holds.
    /// Errors name the file and the dataset or attribute that is missing or malformed.
    pub fn open(path: &Path) -> Result<ResultFile> {
        // A FIFO or device would block or stream: only a regular file (or a link to one) is read.
        let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        ensure!(
            meta.is_file(),
            "{} is not a regular file (a result file is the HDF5 file `seismic-run run` writes)",
            path.display()
        );
        ResultFile::read(path).with_context(|| format!("{} is not a readable seismic-run result file", path.display()))
    }

    fn read(path: &Path) -> Result<ResultFile> {
        use crate::config::{MAX_LENGTH, MAX_TIME, MIN_SPACING};
        let file = H5File::open(path).map_err(|e| anyhow!("cannot open {} as HDF5: {e}", path.display()))?;
        let ctx = |what: &str| format!("{}: {what}", path.display());
        let root_str = |name: &str| file.attr_string(name).map_err(h5(ctx(&format!("root attribute {name}"))));
        let input = root_str("input")?;
        let config = Config::from_toml(&input).map_err(|e| anyhow!("{}: root attribute input: {e}", path.display()))?;
        let version = root_str("version")?;
        let backend = root_str("backend")?;
        let device = root_str("device")?;

        // The grid: /model/vp's, or, in a file written with `output.model = false`, the input's.
        let (shape, spacing, origin) = match file.dataset("model/vp") {
            Ok(vp) => {
                let s = vp.shape();
                ensure!(
                    s.len() == 3,
                    "{}: /model/vp has {} dimensions, expected 3 (nz, ny, nx)",
                    path.display(),
                    s.len()
                );
                let spacing = attr_f64x3(&vp, "/model/vp", "spacing").with_context(|| path.display().to_string())?;
                let origin = attr_f64x3(&vp, "/model/vp", "origin").with_context(|| path.display().to_string())?;
                ([s[2], s[1], s[0]], spacing, origin)
            }
            Err(_) if !config.output.model => {
                let region = config.model_region();
                (region.shape, config.grid.spacing, region.origin)
            }
            Err(e) => return Err(h5(ctx("/model/vp"))(e)),
        };
        ensure!(
            shape.iter().all(|&n| n > 0) && shape.iter().try_fold(1usize, |p, &n| p.checked_mul(n)).is_some(),
            "{}: /model/vp has shape {:?}, expected positive dimensions of an addressable grid",
            path.display(),
            [shape[2], shape[1], shape[0]]
        );
        for a in 0..3 {
            in_range(&ctx(&format!("/model/vp spacing[{a}]")), spacing[a], MIN_SPACING, MAX_LENGTH)?;
            in_range(&ctx(&format!("/model/vp origin[{a}]")), origin[a], -MAX_LENGTH, MAX_LENGTH)?;
        }

        let stats = file.dataset("stats/seconds").map_err(h5(ctx("/stats/seconds")))?;
        let steps = stats.shape().first().copied().unwrap_or(0);
        ensure!(steps > 0, "{}: /stats/seconds is empty, expected one value per time step", path.display());

        let names = file.dataset_names();
        let has = |n: &str| names.iter().any(|m| m.trim_start_matches('/') == n);
        let (mut receivers, mut dt, mut trace_t0) = (Vec::new(), None, 0.0);
        let mut numbering = ShotNumber::default();
        if has("receivers/pressure") {
            let p = file.dataset("receivers/pressure").map_err(h5(ctx("/receivers/pressure")))?;
            let d = attr_f64(&p, "/receivers/pressure", "dt").with_context(|| path.display().to_string())?;
            dt = Some(in_range(&ctx("/receivers/pressure dt"), d, f64::MIN_POSITIVE, MAX_TIME)?);
            let t0 = attr_f64(&p, "/receivers/pressure", "t0").with_context(|| path.display().to_string())?;
            trace_t0 = in_range(&ctx("/receivers/pressure t0"), t0, -MAX_TIME, MAX_TIME)?;
            // A survey shot's numbering; i32 header fields hold it.
            let number = |name: &str| match p.attr(name).and_then(|a| a.read_numeric_as::<u64>()) {
                Ok(v) if v.len() == 1 && (1..=i32::MAX as u64).contains(&v[0]) => Ok(Some(v[0])),
                Ok(v) => bail!(
                    "{}: /receivers/pressure: attribute {name} = {v:?}, expected one number in 1..2^31",
                    path.display()
                ),
                Err(_) => Ok(None),
            };
            if let (Some(shot), Some(first_trace)) = (number("shot")?, number("first_trace")?) {
                numbering = ShotNumber { shot, first_trace };
            }
            let pos = file.dataset("receivers/position").map_err(h5(ctx("/receivers/position")))?;
            let n = match pos.shape()[..] {
                [n, 3] => n,
                ref s => bail!("{}: /receivers/position has shape {s:?}, expected [receivers, 3]", path.display()),
            };
            ensure!(
                p.shape() == [n, steps],
                "{}: /receivers/pressure has shape {:?}, expected [{n}, {steps}] (receivers, time steps)",
                path.display(),
                p.shape()
            );
            check_read_size(&ctx("/receivers/pressure"), n.saturating_mul(steps), 3)?;
            let v: Vec<f64> = pos.read_raw().map_err(h5(ctx("/receivers/position")))?;
            ensure!(
                v.len() == 3 * n,
                "{}: /receivers/position holds {} values, expected {}",
                path.display(),
                v.len(),
                3 * n
            );
            ensure!(
                v.iter().all(|c| c.is_finite()),
                "{}: /receivers/position holds a value that is not finite",
                path.display()
            );
            receivers = v.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        }

        let (mut snapshot_times, mut snapshots) = (Vec::new(), Vec::new());
        if has("snapshots/time") {
            let t = file.dataset("snapshots/time").map_err(h5(ctx("/snapshots/time")))?;
            snapshot_times = t.read_raw::<f64>().map_err(h5(ctx("/snapshots/time")))?;
            ensure!(
                snapshot_times.iter().all(|t| t.is_finite()),
                "{}: /snapshots/time holds a value that is not finite",
                path.display()
            );
            let mut series: Vec<&String> = names
                .iter()
                .filter(|n| {
                    let n = n.trim_start_matches('/');
                    n.starts_with("snapshots/pressure")
                })
                .collect();
            series.sort();
            for full in series {
                let name = full.trim_start_matches('/').trim_start_matches("snapshots/").to_string();
                let dpath = format!("/snapshots/{name}");
                let ds = file.dataset(&format!("snapshots/{name}")).map_err(h5(ctx(&dpath)))?;
                let axes = ds
                    .attr("axes")
                    .and_then(|a| a.read_string())
                    .map_err(h5(ctx(&format!("{dpath}: attribute axes"))))?;
                let Some((section, normal)) = section_shape(&axes, shape) else {
                    bail!("{}: {dpath} has axes \"{axes}\", expected zyx, zx, yx or zy", path.display());
                };
                let s = ds.shape();
                ensure!(
                    s.len() == section.len() + 1 && s[0] == snapshot_times.len() && s[1..] == section[..],
                    "{}: {dpath} has shape {s:?}, expected {} snapshots of {section:?} (axes {axes})",
                    path.display(),
                    snapshot_times.len()
                );
                let (at, index) = match normal {
                    Some(n) => {
                        let at = attr_f64(&ds, &dpath, "at").with_context(|| path.display().to_string())?;
                        let index = match ds.attr("index").and_then(|a| a.read_numeric_as::<u64>()) {
                            Ok(v) if v.len() == 1 => v[0],
                            Ok(v) => {
                                bail!("{}: {dpath}: attribute index has {} values, expected 1", path.display(), v.len())
                            }
                            Err(e) => bail!("{}: {dpath}: attribute index: {e}", path.display()),
                        };
                        ensure!(
                            index < n as u64,
                            "{}: {dpath}: attribute index = {index}, outside the grid's {n} points",
                            path.display()
                        );
                        (
                            Some(in_range(&ctx(&format!("{dpath} at")), at, -MAX_LENGTH, MAX_LENGTH)?),
                            Some(index as usize),
                        )
                    }
                    None => (None, None),
                };
                snapshots.push(SnapshotSeries { name, axes, shape: s[1..].to_vec(), at, index });
            }
        }
        // Without receivers, dt is the snapshot times' step over their step numbers.
        let dt = match dt {
            Some(dt) => dt,
            None if has("snapshots/step") && !snapshot_times.is_empty() => {
                let st = file.dataset("snapshots/step").map_err(h5(ctx("/snapshots/step")))?;
                let steps: Vec<u64> = st.read_raw().map_err(h5(ctx("/snapshots/step")))?;
                ensure!(
                    steps.len() == snapshot_times.len(),
                    "{}: /snapshots/step holds {} values and /snapshots/time {}",
                    path.display(),
                    steps.len(),
                    snapshot_times.len()
                );
                let dt = snapshot_times[0] / steps[0].max(1) as f64;
                in_range(&ctx("the time step (/snapshots/time over /snapshots/step)"), dt, f64::MIN_POSITIVE, MAX_TIME)?
            }
            None => 0.0,
        };
        Ok(ResultFile {
            path: path.to_path_buf(),
            file,
            input,
            config,
            version,
            backend,
            device,
            shape,
            spacing,
            origin,
            dt,
            steps,
            receivers,
            trace_t0,
            numbering,
            snapshot_times,
            snapshots,
        })
    }

    /// The digest of everything that determined the file (root attribute `provenance`, written
    /// for survey shots), if it has one.
    pub fn provenance(&self) -> Option<String> {
        self.file.attr_string("provenance").ok()
    }

    /// Whether the writer recorded the datasets' checksums (it does last, once the file is whole).
    pub fn checksums_recorded(&self) -> Result<()> {
        let text = self
            .file
            .attr_string("checksums")
            .map_err(|e| anyhow!("{}: no dataset checksums: {e}", self.path.display()))?;
        super::checksum::parse(&text).map(|_| ())
    }

    /// Reads every dataset back and checks it against the checksums the writer recorded (root
    /// attribute `checksums`): an error says which dataset differs, or that there are none.
    pub fn verify(&self) -> Result<()> {
        super::checksum::verify(&self.file)
            .map(|_| ())
            .with_context(|| format!("{} does not verify", self.path.display()))
    }

    /// The (first) source's position (m), from the input the run was made from.
    pub fn source_position(&self) -> [f64; 3] {
        self.config.source.first().position
    }

    /// Receiver traces, (nreceivers, steps) row-major.
    pub fn traces(&self) -> Result<Vec<f32>> {
        if self.receivers.is_empty() {
            bail!("{}: the run recorded no receivers (no /receivers/pressure)", self.path.display());
        }
        let ds = self
            .file
            .dataset("receivers/pressure")
            .map_err(h5(format!("{}: /receivers/pressure", self.path.display())))?;
        ds.read_raw().map_err(h5(format!("{}: /receivers/pressure", self.path.display())))
    }

    /// Whether the file holds the model (`/model/vp`; not with `output.model = false`).
    pub fn has_model(&self) -> bool {
        self.file.dataset("model/vp").is_ok()
    }

    /// The model's xz-plane at y index `iy`, (nz, nx) row-major; None where the file holds no model.
    pub fn model_xz(&self, iy: usize) -> Result<Option<Vec<f32>>> {
        let [nx, _, nz] = self.shape;
        let Ok(ds) = self.file.dataset("model/vp") else { return Ok(None) };
        ds.read_slice(&[0, iy, 0], &[nz, 1, nx]).map(Some).map_err(h5(format!("{}: /model/vp", self.path.display())))
    }

    /// An xz view of the snapshots for pictures: the first xz plane series, else the volume cut
    /// at the y index nearest the source. Returns the series and the y index.
    pub fn xz_view(&self) -> Option<(&SnapshotSeries, usize)> {
        if let Some(s) = self.snapshots.iter().find(|s| s.axes == "zx") {
            return Some((s, s.index.unwrap_or(0)));
        }
        let vol = self.snapshots.iter().find(|s| s.axes == "zyx")?;
        let ny = self.shape[1];
        let u = ((self.source_position()[1] - self.origin[1]) / self.spacing[1]).round().max(0.0) as usize;
        Some((vol, u.min(ny - 1)))
    }

    /// Snapshot `k` of `series` on the xz view at y index `iy`, (nz, nx) row-major.
    pub fn xz_frame(&self, series: &SnapshotSeries, iy: usize, k: usize) -> Result<Vec<f32>> {
        let [nx, _, nz] = self.shape;
        let dpath = format!("snapshots/{}", series.name);
        let ds = self.file.dataset(&dpath).map_err(h5(format!("{}: /{dpath}", self.path.display())))?;
        let r = if series.axes == "zyx" {
            ds.read_slice(&[k, 0, iy, 0], &[1, nz, 1, nx])
        } else {
            ds.read_slice(&[k, 0, 0], &[1, nz, nx])
        };
        r.map_err(h5(format!("{}: /{dpath}", self.path.display())))
    }
}

/// `<stem>.<ext>` beside the result file.
pub fn sibling(h5: &Path, ext: &str) -> PathBuf {
    let stem = h5.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "output".into());
    h5.with_file_name(format!("{stem}.{ext}"))
}
