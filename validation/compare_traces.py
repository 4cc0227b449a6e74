#!/usr/bin/env python3
"""Trace-by-trace comparison of two seismic-run result files of the same survey.

    compare_traces.py TEST.h5 REFERENCE.h5 [--max REL]

Prints the relative L2 error ||test - ref|| / ||ref|| of the whole record and of every trace
(its distribution: quantiles and the count above 1%), also for the traces holding more than
1e-4 and 1e-6 of the strongest trace's energy. Made for `run.precision = "f16"` against the f32
run of the same input (docs/numerics.md, "f16 storage"). With --max, exits 1 when a trace holding more than
1e-6 of the strongest trace's energy is further than REL from its reference.
"""

import argparse
import sys

import h5py
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("test")
    ap.add_argument("reference")
    ap.add_argument("--max", type=float, default=None, help="largest relative L2 allowed (traces above 1e-6 energy)")
    args = ap.parse_args()
    with h5py.File(args.test, "r") as f, h5py.File(args.reference, "r") as g:
        a = f["receivers/pressure"][...].astype(np.float64)
        b = g["receivers/pressure"][...].astype(np.float64)
    if a.shape != b.shape:
        sys.exit(f"trace arrays differ in shape: {a.shape} against {b.shape}")
    if not np.all(np.isfinite(a)):
        sys.exit(f"{args.test}: non-finite samples")
    energy = np.sum(b * b, axis=1)
    err = np.sqrt(np.sum((a - b) ** 2, axis=1) / np.where(energy > 0, energy, 1.0))
    whole = np.sqrt(np.sum((a - b) ** 2) / np.sum(b * b))
    print(f"{a.shape[0]} traces x {a.shape[1]} samples; whole record: relative L2 {whole:.3e}")
    strongest = energy.max()
    worst_kept = 0.0
    for label, keep in [
        ("all traces", energy > 0),
        ("energy > 1e-4 of the strongest", energy > 1e-4 * strongest),
        ("energy > 1e-6 of the strongest", energy > 1e-6 * strongest),
    ]:
        e = err[keep]
        if e.size == 0:
            print(f"{label}: none")
            continue
        q = np.quantile(e, [0.0, 0.5, 0.9, 0.99, 1.0])
        print(
            f"{label}: {e.size} traces, relative L2 min {q[0]:.2e} median {q[1]:.2e} p90 {q[2]:.2e} "
            f"p99 {q[3]:.2e} max {q[4]:.2e}; {int(np.sum(e > 0.01))} above 1%"
        )
        if label.endswith("1e-6 of the strongest"):
            worst_kept = q[4]
    if args.max is not None and worst_kept > args.max:
        sys.exit(f"a trace is {worst_kept:.3e} from its reference (allowed {args.max:.1e})")


if __name__ == "__main__":
    main()
