#!/usr/bin/env python3
"""Checks a seismic-run result file with the standard reader (h5py).

Usage: check_output.py RESULT.h5 [--analytic] [--tolerance 0.1]

Checks the layout (every dataset and attribute docs/outputs.md documents: shapes, dtypes, values that
must agree with each other). For a homogeneous model without a free surface it also compares each
receiver trace with the free-space solution of (1/c^2) p_tt - lap p = s(t) delta(x - xs):

    p(r, t) = s(t - r / c) / (4 pi r)

with s the Ricker wavelet of /source. `--analytic` makes that comparison mandatory (the run must
be homogeneous). Exits non-zero, listing every failure, when anything is wrong.
"""

import argparse
import sys
import tomllib

import h5py
import numpy as np

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def attr(obj, name):
    if check(name in obj.attrs, f"{obj.name}: attribute {name!r} missing"):
        return obj.attrs[name]
    return None


def dataset(f, path, shape, dtype):
    if not check(path in f, f"{path}: dataset missing"):
        return None
    ds = f[path]
    check(ds.shape == tuple(shape), f"{path}: shape {ds.shape}, expected {tuple(shape)}")
    check(ds.dtype == np.dtype(dtype), f"{path}: dtype {ds.dtype}, expected {dtype}")
    return ds


def grid_attrs(ds):
    for name in ("spacing", "origin"):
        v = attr(ds, name)
        if v is not None:
            check(np.shape(v) == (3,), f"{ds.name}: attribute {name} has shape {np.shape(v)}, expected (3,)")


def ricker(t, frequency, amplitude, delay):
    a = (np.pi * frequency * (t - delay)) ** 2
    return amplitude * (1.0 - 2.0 * a) * np.exp(-a)


def check_layout(f):
    for name in ("input", "version", "backend", "device", "kernel"):
        v = attr(f, name)
        check(v is None or isinstance(v, str), f"root attribute {name} is not a string")
    for name in ("radius", "steps", "dt", "shape", "spacing", "origin", "run_shape", "run_origin"):
        attr(f, name)
    if failures:
        return None
    steps = int(f.attrs["steps"])
    dt = float(f.attrs["dt"])
    nx, ny, nz = (int(n) for n in f.attrs["shape"])
    check(f.attrs["backend"] in ("cpu", "cuda", "hip"), f"backend {f.attrs['backend']!r}")
    check(1 <= int(f.attrs["radius"]) <= 8, "radius outside 1..8")
    check(dt > 0 and steps > 0, "dt and steps must be positive")
    cfg = tomllib.loads(f.attrs["input"])
    # A 2D grid's input gives [nx, nz] (ny = 1).
    given = list(cfg["grid"]["shape"])
    given = [given[0], 1, given[1]] if len(given) == 2 else given
    check(given == [nx, ny, nz], "input TOML grid.shape differs from the shape attribute")
    # The run grid holds the model's grid, and the absorbing layers where they lie outside it.
    run_points = int(np.prod(f.attrs["run_shape"]))
    check(all(int(r) >= n for r, n in zip(f.attrs["run_shape"], (nx, ny, nz))), "run_shape smaller than shape")

    vp = dataset(f, "/model/vp", (nz, ny, nx), "float32")
    if vp is not None:
        grid_attrs(vp)
        v = vp[...]
        check(np.all(np.isfinite(v)) and v.min() > 0, "/model/vp: velocities must be finite and positive")

    if "snapshots" in f:
        g = f["snapshots"]
        step = dataset(f, "/snapshots/step", (len(g["step"]),), "uint64") if "step" in g else None
        check(step is not None, "/snapshots/step missing")
        if step is not None:
            nsnap = step.shape[0]
            time = dataset(f, "/snapshots/time", (nsnap,), "float64")
            if time is not None:
                check(np.allclose(time[...], step[...] * dt), "/snapshots/time != step * dt")
            check(np.all(np.diff(step[...].astype(np.int64)) > 0), "/snapshots/step not increasing")
            check(step[-1] <= steps, "/snapshots/step beyond the run")
            shapes = {"zyx": (nz, ny, nx), "zx": (nz, nx), "yx": (ny, nx), "zy": (nz, ny)}
            for name, ds in g.items():
                if name in ("step", "time"):
                    continue
                axes = attr(ds, "axes")
                if axes is None or not check(axes in shapes, f"{ds.name}: axes {axes!r}"):
                    continue
                dataset(f, ds.name, (nsnap, *shapes[axes]), "float32")
                grid_attrs(ds)
                if axes != "zyx":
                    attr(ds, "at")
                    attr(ds, "index")
                check(np.all(np.isfinite(ds[-1])), f"{ds.name}: non-finite values")

    if "receivers" in f:
        p = f["/receivers/pressure"]
        nrec = p.shape[0]
        dataset(f, "/receivers/pressure", (nrec, steps), "float32")
        dataset(f, "/receivers/position", (nrec, 3), "float64")
        for name in ("dt", "t0"):
            v = attr(p, name)
            check(v is not None and np.isclose(v, dt), f"/receivers/pressure: {name} should be dt")
        check(np.all(np.isfinite(p[...])), "/receivers/pressure: non-finite values")

    for name in ("step", "seconds", "effective_gbps", "full_step_gbps", "gpts_per_s"):
        ds = dataset(f, f"/stats/{name}", (steps,), "uint64" if name == "step" else "float64")
        if ds is not None and name != "step":
            check(np.all(np.isfinite(ds[...])) and np.all(ds[...] > 0), f"/stats/{name}: must be positive")
    if "stats" in f:
        st = f["stats"]
        for name in ("mean_effective_gbps", "median_effective_gbps", "mean_full_step_gbps", "median_full_step_gbps",
                     "mean_gpts_per_s", "median_gpts_per_s", "step_bytes", "full_step_bytes", "points", "wall_seconds"):
            attr(st, name)
        if not failures:
            sec = st["seconds"][...]
            gbps = st["effective_gbps"][...]
            check(np.allclose(gbps, st.attrs["step_bytes"] / sec / 1e9), "/stats/effective_gbps != step_bytes / seconds")
            full = st["full_step_gbps"][...]
            check(np.allclose(full, st.attrs["full_step_bytes"] / sec / 1e9),
                  "/stats/full_step_gbps != full_step_bytes / seconds")
            check(st.attrs["full_step_bytes"] >= st.attrs["step_bytes"], "/stats: full_step_bytes < step_bytes")
            check(int(st.attrs["points"]) == run_points, "/stats: points differs from the run grid's")
            check(np.allclose(st["gpts_per_s"][...], run_points / sec / 1e9), "/stats/gpts_per_s != points / seconds")

    if check("source" in f, "/source missing"):
        for name in ("position", "frequency", "amplitude", "delay", "wavelet"):
            attr(f["source"], name)
    return cfg


def check_analytic(f, tolerance):
    vp = f["/model/vp"][...]
    c = float(vp.flat[0])
    if not check(np.all(vp == c), "analytic comparison needs a homogeneous model"):
        return
    if not check(not f.attrs.get("free_surface", 0), "analytic comparison needs no free surface"):
        return
    if not check("receivers" in f, "analytic comparison needs receivers"):
        return
    src = f["source"].attrs
    xs = np.asarray(src["position"])
    p = f["/receivers/pressure"]
    dt, t0 = float(p.attrs["dt"]), float(p.attrs["t0"])
    t = t0 + dt * np.arange(p.shape[1])
    h = max(f.attrs["spacing"])
    for i, (trace, xr) in enumerate(zip(p[...], f["/receivers/position"][...])):
        r = float(np.linalg.norm(xr - xs))
        if r < 4 * h:
            print(f"receiver {i}: {r:.1f} m from the source, too close to compare")
            continue
        exact = ricker(t - r / c, src["frequency"], src["amplitude"], src["delay"]) / (4 * np.pi * r)
        err = np.linalg.norm(trace - exact) / np.linalg.norm(exact)
        peak = np.abs(trace).max() / np.abs(exact).max()
        print(f"receiver {i}: r = {r:.1f} m, relative L2 error {err:.4f}, peak ratio {peak:.4f}")
        check(err < tolerance, f"receiver {i}: relative error {err:.4f} above {tolerance}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--analytic", action="store_true", help="require the comparison with the analytic solution")
    ap.add_argument("--tolerance", type=float, default=0.05, help="relative L2 error allowed per trace")
    args = ap.parse_args()
    with h5py.File(args.file, "r") as f:
        check_layout(f)
        homogeneous = "model" in f and np.ptp(f["/model/vp"][...]) == 0
        compared = not failures and (args.analytic or (homogeneous and not f.attrs.get("free_surface", 0)))
        if compared:
            check_analytic(f, args.tolerance)
    if failures:
        print(f"{args.file}: {len(failures)} problem(s):")
        for m in failures:
            print("  " + m)
        sys.exit(1)
    print(f"{args.file}: layout OK" + (", analytic comparison OK" if compared else ""))


if __name__ == "__main__":
    main()
