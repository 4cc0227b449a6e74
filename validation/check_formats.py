#!/usr/bin/env python3
"""Reads the files seismic-run derives from a result file with independent readers and compares
them with h5py's reading of the result file itself.

Usage: check_formats.py RESULT.h5
       check_formats.py --survey STEM_shot00000.h5 STEM_shot00001.h5 ...

- <stem>.sgy with segyio (strict: the geometry inferred, the gather keyed by field record and
  source point, its traces the offsets) and with
  obspy.read() without a format argument: rev 1, format 5, the sample interval an exact whole
  number of microseconds in both headers, the first sample at t = 0 (no delay), the traces equal to
  /receivers/pressure after the leading zero (or, where dt is no whole number of microseconds, to
  this script's own 8-point Lagrange resampling of it), and every trace header: numbering (field
  record, source point, trace sequence), inline/crossline and ensemble, coordinates with their
  scalar, midpoints, elevations and offsets;
- --survey: each shot's SEG-Y as above, field record and source point = the shot's number and the
  trace sequence numbers within the line running on from one shot's file to the next;
- <stem>.xdmf with VTK's XDMF reader: the grids' dimensions, origins and spacings (x, y, z), the
  time steps equal to /snapshots/time, and every point value at every time equal to the dataset;
- <stem>.snapshots.gif with Pillow: one frame per snapshot, the size of <stem>.snapshot.png; the
  PNGs decode, and their title rows hold text.

Exits non-zero, listing every failure, when anything is wrong.
"""

import struct
import sys
import tomllib
from pathlib import Path

import h5py
import numpy as np

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def scaled(value, scalar):
    """A SEG-Y integer with its scalar applied: negative scalars divide, positive multiply."""
    if scalar < 0:
        return value / -scalar
    return value * (scalar if scalar > 0 else 1)


def lagrange_resampled(traces, dt, t0, interval):
    """The traces (sample j at t0 + j dt, zero before) at k * interval up to the last sample's time,
    by 8-point Lagrange interpolation (4 samples each side); beyond the end, the last sample."""
    steps = traces.shape[1]
    n = int(np.floor((t0 + (steps - 1) * dt) / interval + 1e-9)) + 1
    u = (np.arange(n) * interval - t0) / dt
    j = np.floor(u).astype(np.int64)[:, None] - 3 + np.arange(8)[None, :]
    w = np.ones((n, 8))
    for m in range(8):
        for k in range(8):
            if k != m:
                w[:, m] *= (u - j[:, k]) / (m - k)
    data = np.where(j < 0, 0.0, traces[:, np.clip(j, 0, steps - 1)].astype(np.float64))
    return (data * w[None, :, :]).sum(axis=-1)


def expected_lines(receivers):
    """(inline, crossline) per receiver from the input's [[receivers]], as the writer numbers them."""
    out, widths, line = [], [], 1
    for r in receivers:
        if "line" in r:
            width, rows = r["line"]["count"], 1
        elif "grid" in r:
            g = r["grid"]
            width, rows = g["count_a"], g["count_b"] * g.get("count_c", 1)
        else:
            width, rows = 1, 1
        for k in range(rows):
            widths.append(width)
            out += [(line + k, c + 1) for c in range(width)]
        line += rows
    if len(set(widths)) > 1:
        return [(1, i + 1) for i in range(len(out))]
    return out


def check_segy(path, f, config, shot, first_trace):
    import obspy
    import segyio

    source = config["source"]["position"]
    traces = f["receivers/pressure"][...]
    positions = f["receivers/position"][...]
    dt = float(f["receivers/pressure"].attrs["dt"])
    t0 = float(f["receivers/pressure"].attrs["t0"])
    nrec, steps = traces.shape
    us = dt * 1e6
    if abs(us - round(us)) <= 1e-9 * us and abs(t0 - dt) <= 1e-12 * dt:
        interval = round(us)
        want = np.concatenate([np.zeros((nrec, 1), np.float32), traces], axis=1)
        exact = True
    else:
        interval = int(np.floor(us))
        want = lagrange_resampled(traces, dt, t0, interval * 1e-6)
        exact = False
    ns = want.shape[1]
    lines = expected_lines(config.get("receivers", []))
    check(len(lines) == nrec, f"{path}: {len(lines)} receivers in the input, {nrec} traces in the HDF5")
    per_line = max(c for _, c in lines)
    T = segyio.TraceField
    # segyio's geometry is a cube of (inline, crossline, offset) cells: a shot gather is one cell,
    # keyed by its field record and source point numbers, its traces the offsets (which must then
    # differ). Bytes 189-196 number the receivers' own grid, checked below.
    with segyio.open(str(path), iline=T.FieldRecord, xline=T.EnergySourcePoint, strict=True) as s:
        b = s.bin
        check(b[segyio.BinField.Format] == 5, f"{path}: format code {b[segyio.BinField.Format]}, expected 5")
        rev = (b[segyio.BinField.SEGYRevision], b[segyio.BinField.SEGYRevisionMinor])
        check(rev == (1, 0), f"{path}: revision {rev}, expected (1, 0)")
        check(b[segyio.BinField.TraceFlag] == 1, f"{path}: fixed-length flag not set")
        check(b[segyio.BinField.ExtendedHeaders] == 0, f"{path}: extended textual headers present")
        check(b[segyio.BinField.Samples] == ns, f"{path}: {b[segyio.BinField.Samples]} samples, expected {ns}")
        check(b[segyio.BinField.Interval] == interval, f"{path}: interval {b[segyio.BinField.Interval]} us, expected {interval}")
        check(s.tracecount == nrec, f"{path}: {s.tracecount} traces, expected {nrec}")
        check(np.allclose(s.samples, np.arange(ns) * interval / 1000.0), f"{path}: segyio's sample times (ms) do not start at 0")
        # Strict mode inferred a geometry: one gather (the shot), every trace an offset.
        offsets = [seg_offset(positions[i], source) for i in range(nrec)]
        check((list(s.ilines), list(s.xlines), list(s.offsets)) == ([shot], [shot], offsets),
              f"{path}: segyio's geometry {list(s.ilines)} x {list(s.xlines)} x {list(s.offsets)}, expected one gather "
              f"of shot {shot} with offsets {offsets}")
        text = s.text[0]
        text = text.decode("ascii", "replace") if isinstance(text, bytes) else str(text)
        check("SEG Y REV1" in text[38 * 80 : 39 * 80], f"{path}: textual line 39 is not SEG Y REV1")
        check("END TEXTUAL HEADER" in text[39 * 80 :], f"{path}: textual line 40 is not END TEXTUAL HEADER")
        for i in range(nrec):
            tr = s.trace[i]
            if exact:
                check(np.array_equal(tr, want[i]), f"{path}: trace {i} differs from a zero then /receivers/pressure")
            else:
                err = np.abs(tr - want[i]).max()
                tol = 1e-6 * max(np.abs(want[i]).max(), 1e-30)
                check(err <= tol, f"{path}: trace {i} differs from the Lagrange resampling by {err} (> {tol})")
            h = s.header[i]
            inline, crossline = lines[i] if i < len(lines) else (0, 0)
            for field, want_v in ((T.TRACE_SEQUENCE_LINE, first_trace + i), (T.TRACE_SEQUENCE_FILE, i + 1),
                                  (T.FieldRecord, shot), (T.EnergySourcePoint, shot), (T.ShotPoint, shot),
                                  (T.TraceNumber, i + 1), (T.INLINE_3D, inline), (T.CROSSLINE_3D, crossline),
                                  (T.CDP, (inline - 1) * per_line + crossline), (T.CoordinateUnits, 1),
                                  (T.DelayRecordingTime, 0), (T.TRACE_SAMPLE_COUNT, ns),
                                  (T.TRACE_SAMPLE_INTERVAL, interval)):
                check(h[field] == want_v, f"{path}: trace {i} header {field} = {h[field]}, expected {want_v}")
            cs, es = h[T.SourceGroupScalar], h[T.ElevationScalar]
            got = [scaled(h[k], cs) for k in (T.SourceX, T.SourceY, T.GroupX, T.GroupY, T.CDP_X, T.CDP_Y)]
            mid = [(positions[i, 0] + source[0]) / 2, (positions[i, 1] + source[1]) / 2]
            want_xy = [source[0], source[1], positions[i, 0], positions[i, 1], *mid]
            # Exact where a power-of-ten scalar (at most 1/10000) makes them integers, else rounded
            # to the scalar's unit.
            unit = 1.0 / max(-cs, 1)
            check(np.allclose(got, want_xy, rtol=0, atol=0.5 * unit + 1e-9),
                  f"{path}: trace {i} coordinates {got}, expected {want_xy} within {unit / 2}")
            eunit = 1.0 / max(-es, 1)
            check(np.isclose(scaled(h[T.ReceiverGroupElevation], es), -positions[i, 2], rtol=0, atol=0.5 * eunit + 1e-9),
                  f"{path}: trace {i} receiver elevation differs from -z")
            check(np.isclose(scaled(h[T.SourceDepth], es), source[2], rtol=0, atol=0.5 * eunit + 1e-9),
                  f"{path}: trace {i} source depth")
            dx, dy = positions[i, 0] - source[0], positions[i, 1] - source[1]
            # Whole metres, halves away from zero.
            off = int(np.floor(np.hypot(dx, dy) + 0.5)) * (-1 if dx < 0 else 1)
            check(h[T.offset] == off, f"{path}: trace {i} offset {h[T.offset]}, expected {off}")
        seg = np.stack([s.trace[i] for i in range(nrec)])
    # obspy recognises the file by itself (no format argument) and reads the same.
    st = obspy.read(str(path))
    check(len(st) == nrec, f"{path}: obspy reads {len(st)} traces, expected {nrec}")
    bh = st.stats.binary_file_header
    check(bh.sample_interval_in_microseconds == interval, f"{path}: obspy's binary interval {bh.sample_interval_in_microseconds}")
    for i, tr in enumerate(st):
        h = tr.stats.segy.trace_header
        check(abs(tr.stats.delta - interval * 1e-6) <= 1e-12, f"{path}: obspy trace {i} delta {tr.stats.delta}")
        check(h.delay_recording_time == 0, f"{path}: obspy trace {i} delay {h.delay_recording_time}, expected 0")
        check(h.original_field_record_number == shot, f"{path}: obspy trace {i} field record {h.original_field_record_number}")
        check(h.trace_sequence_number_within_line == first_trace + i,
              f"{path}: obspy trace {i} sequence {h.trace_sequence_number_within_line}, expected {first_trace + i}")
        off = h.distance_from_center_of_the_source_point_to_the_center_of_the_receiver_group
        check(off == seg_offset(positions[i], source), f"{path}: obspy trace {i} offset {off}")
        check(np.array_equal(tr.data, seg[i]), f"{path}: obspy trace {i} samples differ from segyio's")
    return nrec


def seg_offset(position, source):
    dx, dy = position[0] - source[0], position[1] - source[1]
    return int(np.floor(np.hypot(dx, dy) + 0.5)) * (-1 if dx < 0 else 1)


def check_xdmf(path, f):
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline as Pipeline
    from vtkmodules.vtkIOXdmf2 import vtkXdmfReader

    vp = f["model/vp"]
    spacing = tuple(float(v) for v in vp.attrs["spacing"])
    origin = np.array(vp.attrs["origin"], dtype=float)
    nz, ny, nx = vp.shape
    times = f["snapshots/time"][...] if "snapshots" in f else np.array([])
    r = vtkXdmfReader()
    r.SetFileName(str(path))
    r.UpdateInformation()
    info = r.GetOutputInformation(0)
    steps = np.array(info.Get(Pipeline.TIME_STEPS()) if info.Has(Pipeline.TIME_STEPS()) else [])
    check(np.array_equal(steps, times), f"{path}: time steps {steps}, expected /snapshots/time {times}")
    series = {n: f["snapshots"][n] for n in f["snapshots"] if n.startswith("pressure")} if len(times) else {}
    for k, t in enumerate(times if len(times) else [0.0]):
        r.UpdateTimeStep(t)
        out = r.GetOutputDataObject(0)
        blocks = {out.GetMetaData(b).Get(out.NAME()): out.GetBlock(b) for b in range(out.GetNumberOfBlocks())}
        check(set(blocks) == {"model", *series}, f"{path}: grids {sorted(blocks)}, expected model and {sorted(series)}")
        for name, blk in blocks.items():
            dims, o = [nx, ny, nz], origin.copy()
            vp_ref = vp[...]
            if name != "model":
                ds = series[name]
                normal = {"zx": 1, "yx": 2, "zy": 0}.get(ds.attrs["axes"])
                ref = ds[k]
                if normal is not None:
                    dims[normal] = 1
                    o[normal] = float(ds.attrs["at"])
                    i = int(ds.attrs["index"])
                    vp_ref = np.take(vp_ref, [i], axis=2 - normal)
                    check(np.isclose(o[normal], origin[normal] + i * spacing[normal]),
                          f"{path}: {name} at {o[normal]} is not grid index {i}")
                got = vtk_to_numpy(blk.GetPointData().GetArray("pressure"))
                check(np.array_equal(got, ref.ravel()), f"{path}: {name} at t = {t}: pressure differs from h5py")
            got_vp = vtk_to_numpy(blk.GetPointData().GetArray("vp"))
            check(np.array_equal(got_vp, vp_ref.ravel()), f"{path}: {name}: vp differs from h5py")
            check(list(blk.GetDimensions()) == dims, f"{path}: {name} dimensions {blk.GetDimensions()}, expected {dims}")
            check(np.allclose(blk.GetOrigin(), o), f"{path}: {name} origin {blk.GetOrigin()}, expected {o}")
            check(np.allclose(blk.GetSpacing(), spacing), f"{path}: {name} spacing {blk.GetSpacing()}, expected {spacing}")


def has_text(img, box):
    """Whether the box (left, top, right, bottom) of an RGB image holds dark pixels (text)."""
    a = np.asarray(img.convert("L").crop(box))
    return (a < 100).sum() > 50


def check_pictures(stem, f):
    from PIL import Image

    nsnap = len(f["snapshots/time"]) if "snapshots" in f else 0
    png = Path(f"{stem}.snapshot.png")
    gif = Path(f"{stem}.snapshots.gif")
    gather = Path(f"{stem}.gather.png")
    if check(png.exists() and gif.exists(), f"{stem}: snapshot picture or animation missing"):
        with Image.open(png) as p:
            size = p.size
            check(has_text(p, (0, 0, p.size[0], 60)), f"{png}: no title text")
            check(has_text(p, (0, p.size[1] - 40, p.size[0], p.size[1])), f"{png}: no x axis label")
        with Image.open(gif) as g:
            check(g.format == "GIF", f"{gif}: format {g.format}")
            check(g.n_frames == nsnap, f"{gif}: {g.n_frames} frames, expected {nsnap}")
            check(g.size == size, f"{gif}: size {g.size}, expected {size} (the snapshot picture's)")
            g.seek(g.n_frames - 1)
            check(has_text(g.convert("RGB"), (0, 0, g.size[0], 60)), f"{gif}: last frame has no title text")
    if "receivers" in f and check(gather.exists(), f"{gather}: missing"):
        with Image.open(gather) as p:
            check(has_text(p, (0, 0, p.size[0], 60)), f"{gather}: no title text")


def main():
    if sys.argv[1] == "--survey":
        # The shots in the survey's order: numbers 1, 2, ..., trace sequence running on.
        first = 1
        for k, name in enumerate(sys.argv[2:]):
            result = Path(name)
            with h5py.File(result, "r") as f:
                config = tomllib.loads(f.attrs["input"])
                first += check_segy(result.with_suffix(".sgy"), f, config, k + 1, first)
        report(f"{len(sys.argv) - 2} survey shots' SEG-Y (segyio strict, obspy) agree with their HDF5 and run on")
        return
    result = Path(sys.argv[1])
    stem = result.with_suffix("")
    with h5py.File(result, "r") as f:
        config = tomllib.loads(f.attrs["input"])
        check_segy(stem.with_suffix(".sgy"), f, config, 1, 1)
        check_xdmf(stem.with_suffix(".xdmf"), f)
        check_pictures(stem, f)
    report(f"{result}: SEG-Y (segyio strict, obspy), XDMF (VTK) and pictures (Pillow) agree with the HDF5")


def report(ok):
    if failures:
        print(f"{len(failures)} failures")
        for x in failures:
            print("  " + x)
        sys.exit(1)
    print(ok)


if __name__ == "__main__":
    main()
