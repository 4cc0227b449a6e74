//! The HDF5 result file's writer ([`super::result`] reads it back; the two are the only modules
//! that use rust-hdf5).
//!
//! A [`Hdf5Writer`] owns a thread that owns the file: the model and the layout go in while the
//! first steps run, snapshots arrive through a bounded channel (their buffers come back for the
//! next one), and the traces and statistics come at the end. The file is written to a temporary
//! file beside `<path>` ([`super::safe::TempFile`]: unpredictable name, created exclusively) and
//! renamed to `<path>` only once it is complete, closed and synced, so an interrupted or failed
//! run never leaves a file that looks finished. Layout (README "Output file"):
//!
//! - root attributes: input (the TOML text), version, backend, device, kernel, radius, dt, steps,
//!   shape, spacing, origin (the model's), run_shape, run_origin (the run grid's), provenance
//!   (survey shots), checksums (the CRC-32 of every dataset, [`super::checksum`], written last: a
//!   file without it is not complete);
//! - /model/vp (nz, ny, nx) f32 with attributes spacing, origin (x, y, z order, m), axes = "zyx"
//!   (absent with `output.model = false`); it and the snapshots cover the model only
//!   ([`super::crop`]: no absorbing layer outside it); /model/rho beside it, alike, where the
//!   density varies (a run holding the whole model);
//! - /snapshots/pressure (nsnap, nz, ny, nx) or /snapshots/pressure_xz (nsnap, nz, nx) and
//!   friends, /snapshots/step, /snapshots/time;
//! - /receivers/pressure (nreceivers, nt), /receivers/position (nreceivers, 3), /receivers/taps
//!   (nreceivers), attributes dt, t0, interpolation (and, for a survey's shot, shot and
//!   first_trace: its SEG-Y numbering);
//! - /source (the first source's attributes: position, frequency, amplitude, delay, wavelet, taps,
//!   injection and, for sinc, sinc_half_width; and count, the number of sources);
//! - /stats/step, /stats/seconds, /stats/effective_gbps, /stats/gpts_per_s with summary attributes
//!   (and /stats/exchange_seconds, the halo exchange's part of each step, for a decomposed run).

use super::checksum::{self, Entry, PartsCrc, bytes_of};
use super::crop;
use super::safe::TempFile;
use crate::backend::DeviceInfo;
use crate::grid::Section;
use crate::output::plan::OutputPlan;
use crate::problem::{Positioning, Problem};
use crate::solver::{RunRecord, SnapshotSink, StepStats};
use anyhow::{Result, anyhow, bail, ensure};
use attrs::{attr_f64, attr_string, dataset_1d, grid_attrs, h5};
use rust_hdf5::H5File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::{Scope, ScopedJoinHandle};

mod attrs;

/// Everything the file says about the run besides the fields.
#[derive(Clone, Debug)]
pub struct RunMetadata {
    /// The input file's text, stored verbatim.
    pub input_toml: String,
    pub version: String,
    pub device: DeviceInfo,
    /// Deflate level (1-9, after the shuffle filter) for the snapshot datasets; 0 stores them
    /// uncompressed.
    pub compression: u32,
    /// The digest of everything that determines the file (a survey shot's, `survey::provenance`),
    /// stored as the root attribute `provenance`.
    pub provenance: Option<String>,
    /// A survey shot's SEG-Y numbering (attributes shot and first_trace of /receivers/pressure).
    pub shot: Option<crate::config::ShotNumber>,
}

/// Bytes a compressed snapshot chunk aims at: whole rows of one snapshot, about 1 MiB.
const CHUNK_BYTES: usize = 1 << 20;

/// Chunk shape of a snapshot dataset (nsnap, section...): one snapshot, whole rows of the section's
/// fastest axes, as many of its slowest axis as fit in [`CHUNK_BYTES`].
fn snapshot_chunk(section: &[usize]) -> Vec<usize> {
    let row: usize = section[1..].iter().product::<usize>() * std::mem::size_of::<f32>();
    let mut chunk = vec![1, (CHUNK_BYTES / row.max(1)).clamp(1, section[0])];
    chunk.extend(&section[1..]);
    chunk
}

/// What the writer reports once the file is complete.
#[derive(Debug)]
pub struct Written {
    pub path: PathBuf,
}

/// A result file fully written under its temporary name, to be synced and renamed.
pub struct Commit {
    tmp: TempFile,
    path: PathBuf,
}

impl Commit {
    /// Where the file goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The finished file under its temporary name (to make the derived files from it).
    pub fn temp(&self) -> &TempFile {
        &self.tmp
    }

    /// The file synced, to be renamed with the files derived from it
    /// ([`super::safe::commit_set`]).
    pub fn into_synced(self) -> Result<TempFile> {
        match self.tmp.sync() {
            Ok(()) => Ok(self.tmp),
            Err(e) => Err(disk_full_hint(e, &self.path).context(format!("writing {}", self.path.display()))),
        }
    }

    /// Syncs the file and renames it to its destination (dropping a `Commit` removes the file).
    pub fn commit(self) -> Result<Written> {
        let path = self.path;
        match self.tmp.commit() {
            Ok(path) => Ok(Written { path }),
            Err(e) => Err(disk_full_hint(e, &path).context(format!("writing {}", path.display()))),
        }
    }
}

enum Message {
    Snapshot {
        index: usize,
        step: usize,
        field: Vec<f32>,
    },
    /// Velocity of z-planes `first..` (dense), for a problem that holds only part of the model.
    ModelPlanes {
        first: usize,
        values: Vec<f32>,
    },
    /// z-planes `first..` of volume section `section` of snapshot `index`.
    VolumeSlab {
        index: usize,
        step: usize,
        section: usize,
        first: usize,
        values: Vec<f32>,
    },
    Finish(Box<(RunRecord, StepStats)>),
}

/// How volume snapshots reach the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Volumes {
    /// Whole, in the snapshot's buffer with the plane sections.
    Whole,
    /// Slab by slab through [`SnapshotSink::volume_slab`] (a decomposed run's: no process holds a
    /// whole volume).
    Slabs,
}

/// The writer thread's handle; also the run's [`SnapshotSink`].
pub struct Hdf5Writer<'scope> {
    /// Volume snapshots come slab by slab ([`Volumes::Slabs`]).
    volume_slabs: bool,
    messages: Option<SyncSender<Message>>,
    free: Receiver<Vec<f32>>,
    thread: Option<ScopedJoinHandle<'scope, Result<Commit>>>,
}

impl<'scope> Hdf5Writer<'scope> {
    /// Creates the temporary file (errors come back here, before the run starts) and starts the
    /// writer thread in `scope`. `snapshot_buffers` buffers (each holding every snapshot section,
    /// or the plane sections only where `volumes` come as slabs) are allocated now, once.
    pub fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        path: &Path,
        problem: &'env Problem,
        plan: &'env OutputPlan,
        meta: RunMetadata,
        snapshot_buffers: usize,
        volumes: Volumes,
    ) -> Result<Hdf5Writer<'scope>> {
        let volume_slabs = volumes == Volumes::Slabs;
        let path = path.to_path_buf();
        let (messages, inbox) = sync_channel::<Message>(snapshot_buffers.max(1));
        let buffers = if plan.snapshot_steps.is_empty() { 0 } else { snapshot_buffers.max(1) };
        let (free_tx, free) = sync_channel::<Vec<f32>>(buffers.max(1));
        for _ in 0..buffers {
            let volumes = if volume_slabs { plan.volume_len(problem.shape()) } else { 0 };
            free_tx.send(vec![0.0f32; plan.snapshot_len(problem.shape()) - volumes]).expect("receiver alive");
        }
        let (ready_tx, ready) = sync_channel::<Result<()>>(1);
        let thread = scope.spawn(move || {
            let tmp = match TempFile::create(&path, "") {
                Ok(t) => t,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.context(format!("cannot write {}", path.display()))));
                    bail!("not started");
                }
            };
            // rust-hdf5 opens files by name: it gets a name that leads to the file just created.
            let file = match H5File::create(tmp.open_path()).map_err(h5).and_then(|f| tmp.check_identity().map(|_| f)) {
                Ok(f) => f,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.context(format!("cannot create {}", tmp.path().display()))));
                    bail!("not started");
                }
            };
            let _ = ready_tx.send(Ok(()));
            let target = ResultFile { h5: file, handle: tmp.file_handle() };
            match write_file(target, problem, plan, &meta, inbox, free_tx, volume_slabs) {
                Ok(()) => Ok(Commit { tmp, path }),
                // Dropping the temporary file removed it.
                Err(e) => Err(disk_full_hint(e, &path).context(format!("writing {}", path.display()))),
            }
        });
        let mut writer = Hdf5Writer { volume_slabs, messages: Some(messages), free, thread: Some(thread) };
        match ready.recv() {
            Ok(Ok(())) => Ok(writer),
            Ok(Err(e)) => {
                writer.messages = None;
                if let Some(t) = writer.thread.take() {
                    let _ = t.join();
                }
                Err(e)
            }
            Err(_) => Err(writer.thread_error()),
        }
    }

    /// Velocity of the model's z-planes from `first` on, dense (planes, ny, nx): the parts of
    /// `/model/vp` the problem did not hold ([`Problem::build_part`]); the file is complete only
    /// once every plane has come.
    pub fn model_planes(&mut self, first: usize, values: Vec<f32>) -> Result<()> {
        let tx = self.messages.as_ref().ok_or_else(|| anyhow!("the HDF5 writer stopped"))?;
        tx.send(Message::ModelPlanes { first, values }).map_err(|_| self.thread_error())
    }

    /// Hands over traces and statistics, waits for the file to be complete and renamed.
    pub fn finish(self, record: RunRecord, stats: StepStats) -> Result<Written> {
        self.finish_unsynced(record, stats)?.commit()
    }

    /// Hands over traces and statistics and waits for them to be written, but not for the file to
    /// be synced and renamed: [`Commit::commit`] does that, on any thread (a survey syncs one
    /// shot's file while the next shot runs).
    pub fn finish_unsynced(mut self, record: RunRecord, stats: StepStats) -> Result<Commit> {
        let tx = self.messages.take().expect("not finished twice");
        if tx.send(Message::Finish(Box::new((record, stats)))).is_err() {
            return Err(self.thread_error());
        }
        drop(tx);
        match self.thread.take().expect("thread").join() {
            Ok(r) => r,
            Err(_) => Err(anyhow!("the HDF5 writer thread panicked")),
        }
    }

    /// The writer thread's own error, once it has stopped early.
    fn thread_error(&mut self) -> anyhow::Error {
        self.messages = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Err(e))) => e,
            Some(Err(_)) => anyhow!("the HDF5 writer thread panicked"),
            _ => anyhow!("the HDF5 writer stopped"),
        }
    }
}

impl SnapshotSink for Hdf5Writer<'_> {
    fn buffer(&mut self) -> Result<Vec<f32>> {
        self.free.recv().map_err(|_| self.thread_error())
    }

    fn takes_volume_slabs(&self) -> bool {
        self.volume_slabs
    }

    fn volume_slab(&mut self, index: usize, step: usize, section: usize, first: usize, values: Vec<f32>) -> Result<()> {
        ensure!(self.volume_slabs, "this writer takes whole volume snapshots");
        let tx = self.messages.as_ref().ok_or_else(|| anyhow!("the HDF5 writer stopped"))?;
        tx.send(Message::VolumeSlab { index, step, section, first, values }).map_err(|_| self.thread_error())
    }

    fn submit(&mut self, index: usize, step: usize, field: Vec<f32>) -> Result<()> {
        let tx = self.messages.as_ref().ok_or_else(|| anyhow!("the HDF5 writer stopped"))?;
        tx.send(Message::Snapshot { index, step, field }).map_err(|_| self.thread_error())
    }
}

impl Drop for Hdf5Writer<'_> {
    fn drop(&mut self) {
        // Closing the channel without a Finish tells the thread to discard the partial file; the
        // scope joins it.
        self.messages = None;
    }
}

/// Puts "the disk is full" first when a write failed for want of space, rather than the HDF5
/// crate's own wording.
fn disk_full_hint(e: anyhow::Error, path: &Path) -> anyhow::Error {
    let full = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.raw_os_error() == Some(libc::ENOSPC))
            || c.to_string().contains("No space left on device")
    });
    if full {
        let dir = super::safe::parent_dir(path);
        let free = crate::resources::free_disk_bytes(&dir).map(|b| format!(" ({b} bytes free)")).unwrap_or_default();
        e.context(format!("the file system holding {} is full{free}", dir.display()))
    } else {
        e
    }
}

/// The temporary result file as rust-hdf5 writes it, and a second handle on it (for
/// [`super::safe::start_writeback`]).
struct ResultFile {
    h5: H5File,
    handle: Option<std::fs::File>,
}

fn write_file(
    target: ResultFile,
    problem: &Problem,
    plan: &OutputPlan,
    meta: &RunMetadata,
    inbox: Receiver<Message>,
    free: SyncSender<Vec<f32>>,
    volume_slabs: bool,
) -> Result<()> {
    let ResultFile { h5: file, handle } = target;
    // The file covers the model: fields of the run grid are cut to it (`crop`) where they differ.
    let (run, region) = (problem.shape(), plan.region(problem));
    let grid = region.shape;
    let [nx, ny, nz] = grid;
    let root = file.root_group();
    root.set_attr_string("input", &meta.input_toml).map_err(h5)?;
    root.set_attr_string("version", &meta.version).map_err(h5)?;
    root.set_attr_string("backend", meta.device.backend).map_err(h5)?;
    root.set_attr_string("device", &meta.device.name).map_err(h5)?;
    root.set_attr_string("kernel", &meta.device.kernel).map_err(h5)?;
    root.set_attr_numeric("radius", &(problem.stencil.radius as u64)).map_err(h5)?;
    root.set_attr_numeric("dt", &problem.dt).map_err(h5)?;
    root.set_attr_numeric("steps", &(problem.steps as u64)).map_err(h5)?;
    root.set_attr_array_numeric("shape", &grid.map(|n| n as u64)).map_err(h5)?;
    root.set_attr_array_numeric("spacing", &problem.spacing).map_err(h5)?;
    root.set_attr_array_numeric("origin", &region.origin).map_err(h5)?;
    root.set_attr_array_numeric("run_shape", &run.map(|n| n as u64)).map_err(h5)?;
    root.set_attr_array_numeric("run_origin", &problem.origin).map_err(h5)?;
    let boundary = format!("{:?}", problem.boundary.kind).to_lowercase();
    root.set_attr_string("boundary", &boundary).map_err(h5)?;
    root.set_attr_numeric("boundary_width", &(problem.boundary.width as u64)).map_err(h5)?;
    root.set_attr_numeric("free_surface", &(problem.boundary.free_surface as u8)).map_err(h5)?;
    if let Some(p) = &meta.provenance {
        root.set_attr_string("provenance", p).map_err(h5)?;
    }
    // Every dataset's checksum, listed in the root attribute `checksums` once the file is whole.
    let mut sums: Vec<Entry> = Vec::new();

    let source = file.create_group("source").map_err(h5)?;
    let (first, w) = (problem.source(), &problem.source().wavelet);
    source.set_attr_numeric("count", &(problem.sources.len() as u64)).map_err(h5)?;
    source.set_attr_string("wavelet", w.name()).map_err(h5)?;
    source.set_attr_array_numeric("position", &first.position).map_err(h5)?;
    source.set_attr_numeric("frequency", &w.frequency()).map_err(h5)?;
    source.set_attr_numeric("amplitude", &w.amplitude()).map_err(h5)?;
    source.set_attr_numeric("delay", &w.delay()).map_err(h5)?;
    source.set_attr_numeric("taps", &(first.taps.len() as u64)).map_err(h5)?;
    source.set_attr_string("injection", first.injection.name()).map_err(h5)?;
    if let Positioning::Sinc { half_width } = first.injection {
        source.set_attr_numeric("sinc_half_width", &(half_width as u64)).map_err(h5)?;
    }

    // Snapshot datasets are laid out in full now and filled in place as snapshots arrive.
    let nsnap = plan.snapshot_steps.len();
    let mut snapshot_sets = Vec::new();
    // Per series: its checksum, over planes of the two fastest axes (a volume's z-planes).
    let mut snapshot_sums = Vec::new();
    if nsnap > 0 {
        let snaps = file.create_group("snapshots").map_err(h5)?;
        snaps.set_attr_numeric("every", &(plan.snapshot_every as u64)).map_err(h5)?;
        let steps: Vec<u64> = plan.snapshot_steps.iter().map(|&s| s as u64).collect();
        dataset_1d(&mut sums, (&snaps, "snapshots"), "step", &steps)?;
        let times: Vec<f64> = plan.snapshot_steps.iter().map(|&s| s as f64 * problem.dt).collect();
        dataset_1d(&mut sums, (&snaps, "snapshots"), "time", &times)?;
        for spec in &plan.snapshots {
            let mut shape = vec![nsnap];
            shape.extend(spec.section.shape(grid));
            let builder = snaps.new_dataset::<f32>().shape(&shape);
            let builder = if meta.compression > 0 {
                builder.chunk(&snapshot_chunk(&shape[1..])).shuffle_deflate(meta.compression)
            } else {
                builder
            };
            let ds = builder.create(&spec.name).map_err(h5)?;
            // A plane's index in the model's grid.
            let (axes, index) = match spec.section {
                Section::Volume => ("zyx", None),
                Section::Xz { iy } => ("zx", Some(iy - region.first[1])),
                Section::Xy { iz } => ("yx", Some(iz - region.first[2])),
                Section::Yz { ix } => ("zy", Some(ix - region.first[0])),
            };
            grid_attrs(&ds, problem, region.origin, axes)?;
            if let (Some(at), Some(i)) = (spec.at, index) {
                attr_f64(&ds, "at", at)?;
                ds.new_attr::<u64>().shape(()).create("index").map_err(h5)?.write_numeric(&(i as u64)).map_err(h5)?;
            }
            snapshot_sets.push(ds);
            let plane: usize = shape[shape.len() - 2..].iter().product();
            let units = shape.iter().product::<usize>() / plane.max(1);
            snapshot_sums.push(PartsCrc::new(&format!("snapshots/{}", spec.name), units, plane * 4));
        }
    }

    // `output.model = false`: no /model group (the root attributes keep the grid).
    let model = if plan.model { Some(file.create_group("model").map_err(h5)?) } else { None };
    let vp = match &model {
        Some(model) => Some(model.new_dataset::<f32>().shape([nz, ny, nx]).create("vp").map_err(h5)?),
        None => None,
    };
    let mut vp_sum = PartsCrc::new("model/vp", nz, nx * ny * 4);
    // Which z-planes of the model are written: all at once from a whole model, else as they come.
    let mut vp_written = vec![!plan.model; nz];
    let mut vp_cropped = Vec::new();
    // `first`: the run grid's z-plane of `values`.
    let mut write_vp = |first: usize, values: &[f32]| -> Result<()> {
        let Some(vp) = &vp else { return Ok(()) };
        let Some((first, values)) = crop::model_planes(&region, first, values, &mut vp_cropped)? else {
            return Ok(());
        };
        let planes = values.len() / (nx * ny).max(1);
        ensure!(
            values.len() == planes * nx * ny && first + planes <= nz,
            "model planes {first}..{} of {nz}",
            first + planes
        );
        if planes == nz {
            vp.write_raw(values).map_err(h5)?;
        } else if planes > 0 {
            vp.write_slice(&[first, 0, 0], &[planes, ny, nx], values).map_err(h5)?;
        }
        vp_written[first..first + planes].fill(true);
        vp_sum.add(first, bytes_of(values))
    };
    write_vp(problem.vp_first, &problem.vp)?;
    let density = problem.density.as_ref().filter(|d| d.first == 0 && d.rho.len() == problem.vp.len());
    if let (Some(model), Some(d)) = (&model, density) {
        let mut cropped = Vec::new();
        let rho = crop::model_planes(&region, 0, &d.rho, &mut cropped)?.map_or(&d.rho[..], |(_, v)| v);
        attrs::model_density(&mut sums, model, [nz, ny, nx], rho, problem, region.origin)?;
    }
    // The model is most of a large run's file: its pages start for the disk now, while the run
    // steps, and each snapshot's after it, so that the sync after the last step has little left
    // to wait for.
    let writeback = || {
        if let Some(f) = &handle {
            super::safe::start_writeback(f);
        }
    };
    writeback();

    let mut cropped = Vec::new();
    // z-planes of each (snapshot, volume section) that came as slabs.
    let mut slab_planes = vec![0usize; plan.snapshot_steps.len() * plan.snapshots.len()];
    let (record, stats) = loop {
        match inbox.recv() {
            Ok(Message::Snapshot { index, step, field }) => {
                if plan.snapshot_steps.get(index) != Some(&step) {
                    bail!("snapshot {index} arrived for step {step}, planned for {:?}", plan.snapshot_steps.get(index));
                }
                // The buffer holds the sections one after the other, in the plan's order (the
                // volumes not, when they come as slabs).
                let mut rest = &field[..];
                for ((spec, ds), sum) in plan.snapshots.iter().zip(&snapshot_sets).zip(&mut snapshot_sums) {
                    if volume_slabs && spec.section == Section::Volume {
                        continue;
                    }
                    let (part, tail) = rest.split_at(spec.section.len(run));
                    rest = tail;
                    let part = crop::model_section(&region, &spec.section, part, &mut cropped)?;
                    let mut starts = vec![index];
                    let mut counts = vec![1];
                    for n in spec.section.shape(grid) {
                        starts.push(0);
                        counts.push(n);
                    }
                    ds.write_slice(&starts, &counts, part).map_err(h5)?;
                    // A volume is nz units (its z-planes), a plane one.
                    let per_snapshot = if spec.section == Section::Volume { nz } else { 1 };
                    sum.add(index * per_snapshot, bytes_of(part))?;
                }
                // The run may have finished taking snapshots: then nobody waits for the buffer.
                let _ = free.send(field);
                writeback();
            }
            Ok(Message::ModelPlanes { first, values }) => write_vp(first, &values)?,
            Ok(Message::VolumeSlab { index, step, section, first, values }) => {
                let Some((first, values)) = crop::model_planes(&region, first, &values, &mut cropped)? else {
                    continue;
                };
                let planes = values.len() / (nx * ny).max(1);
                ensure!(
                    plan.snapshot_steps.get(index) == Some(&step)
                        && plan.snapshots.get(section).is_some_and(|s| s.section == Section::Volume)
                        && values.len() == planes * nx * ny
                        && first + planes <= nz,
                    "volume slab of planes {first}..{} for snapshot {index} (step {step}), section {section}",
                    first + planes
                );
                snapshot_sets[section].write_slice(&[index, first, 0, 0], &[1, planes, ny, nx], values).map_err(h5)?;
                snapshot_sums[section].add(index * nz + first, bytes_of(values))?;
                slab_planes[index * plan.snapshots.len() + section] += planes;
            }
            Ok(Message::Finish(b)) => break *b,
            Err(_) => bail!("the run stopped before it finished; no output written"),
        }
    };
    if volume_slabs {
        for index in 0..plan.snapshot_steps.len() {
            for (k, spec) in plan.snapshots.iter().enumerate() {
                let got = slab_planes[index * plan.snapshots.len() + k];
                ensure!(
                    spec.section != Section::Volume || got == nz,
                    "volume snapshot {index} got {got} of its {nz} z-planes; no output written"
                );
            }
        }
    }
    if let Some(z) = vp_written.iter().position(|&w| !w) {
        bail!("the model's z-plane {z} never reached the writer; no output written");
    }
    if let Some(vp) = &vp {
        grid_attrs(vp, problem, region.origin, "zyx")?;
        attr_string(vp, "units", "m/s")?;
        sums.push(vp_sum.finish()?);
    }
    for s in snapshot_sums {
        sums.push(s.finish()?);
    }

    let nrec = problem.receivers.len();
    if nrec > 0 {
        let rec = file.create_group("receivers").map_err(h5)?;
        let pressure = rec.new_dataset::<f32>().shape([nrec, problem.steps]).create("pressure").map_err(h5)?;
        pressure.write_raw(&record.traces).map_err(h5)?;
        sums.push(checksum::whole("receivers/pressure", bytes_of(&record.traces)));
        attr_f64(&pressure, "dt", problem.dt)?;
        attr_f64(&pressure, "t0", problem.dt)?;
        if let Some(n) = meta.shot {
            for (name, v) in [("shot", n.shot), ("first_trace", n.first_trace)] {
                pressure.new_attr::<u64>().shape(()).create(name).map_err(h5)?.write_numeric(&v).map_err(h5)?;
            }
        }
        let positions: Vec<f64> = problem.receivers.iter().flat_map(|r| r.position).collect();
        let pos = rec.new_dataset::<f64>().shape([nrec, 3]).create("position").map_err(h5)?;
        pos.write_raw(&positions).map_err(h5)?;
        sums.push(checksum::whole("receivers/position", bytes_of(&positions)));
        attr_string(&pos, "columns", "x, y, z (m)")?;
        let taps: Vec<u64> = problem.receivers.iter().map(|r| r.taps.len() as u64).collect();
        dataset_1d(&mut sums, (&rec, "receivers"), "taps", &taps)?;
        let mut methods: Vec<String> = Vec::new();
        for r in &problem.receivers {
            let m = match r.interpolation {
                Positioning::Sinc { half_width } => format!("sinc (half-width {half_width})"),
                other => other.name().to_string(),
            };
            if !methods.contains(&m) {
                methods.push(m);
            }
        }
        rec.set_attr_string("interpolation", &methods.join(", ")).map_err(h5)?;
        rec.set_attr_numeric("dt", &problem.dt).map_err(h5)?;
        rec.set_attr_numeric("t0", &problem.dt).map_err(h5)?;
    }

    let st = file.create_group("stats").map_err(h5)?;
    let stg = (&st, "stats");
    dataset_1d(&mut sums, stg, "step", &(0..problem.steps as u64).collect::<Vec<_>>())?;
    dataset_1d(&mut sums, stg, "seconds", &stats.seconds)?;
    dataset_1d(&mut sums, stg, "effective_gbps", &stats.effective_gbps)?;
    dataset_1d(&mut sums, stg, "full_step_gbps", &stats.full_step_gbps)?;
    dataset_1d(&mut sums, stg, "gpts_per_s", &stats.gpts_per_s)?;
    if let Some(x) = &stats.exchange_seconds {
        dataset_1d(&mut sums, stg, "exchange_seconds", x)?;
    }
    st.set_attr_numeric("mean_effective_gbps", &stats.mean_gbps).map_err(h5)?;
    st.set_attr_numeric("median_effective_gbps", &stats.median_gbps).map_err(h5)?;
    st.set_attr_numeric("mean_full_step_gbps", &stats.mean_full_step_gbps).map_err(h5)?;
    st.set_attr_numeric("median_full_step_gbps", &stats.median_full_step_gbps).map_err(h5)?;
    st.set_attr_numeric("mean_gpts_per_s", &stats.mean_gpts).map_err(h5)?;
    st.set_attr_numeric("median_gpts_per_s", &stats.median_gpts).map_err(h5)?;
    st.set_attr_numeric("step_bytes", &problem.step_bytes()).map_err(h5)?;
    st.set_attr_numeric("full_step_bytes", &problem.full_step_bytes()).map_err(h5)?;
    st.set_attr_numeric("points", &(problem.layout.points() as u64)).map_err(h5)?;
    st.set_attr_numeric("total_step_seconds", &stats.seconds.iter().sum::<f64>()).map_err(h5)?;
    st.set_attr_numeric("wall_seconds", &record.wall_seconds).map_err(h5)?;
    root.set_attr_string("checksums", &checksum::listing(&sums)).map_err(h5)?;

    file.close().map_err(h5)?;
    Ok(())
}
