"""Devito's timing of the CPU comparison problem (bench/devito/compare): a constant-density
acoustic step of space order 8 on an n^3 grid with a damping layer, one Ricker source in the
middle and 100 receivers along x, f32. Prints the operator's compile and run seconds and GPts/s.

Usage: python devito_run.py N STEPS DT WIDTH
"""

import sys
import time

import numpy as np
from devito import Eq, Function, Grid, Operator, SparseTimeFunction, TimeFunction, solve

n, steps, dt, width = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
h, vp, f0 = 10.0, 2000.0, 10.0
grid = Grid(shape=(n, n, n), extent=((n - 1) * h,) * 3, dtype=np.float32)
u = TimeFunction(name="u", grid=grid, time_order=2, space_order=8)
m = Function(name="m", grid=grid)
m.data[:] = 1.0 / vp**2

# Damping: a quadratic ramp over the outer `width` points of every face, the sum over the axes.
ramp = np.zeros(n, dtype=np.float32)
depth = (width - np.arange(width)) / width
ramp[:width] = depth**2
ramp[n - width :] = depth[::-1] ** 2
d0 = 3.0 * vp * np.log(1e3) / (2.0 * width * h)
damp = Function(name="damp", grid=grid)
damp.data[:] = d0 * (ramp[:, None, None] + ramp[None, :, None] + ramp[None, None, :])

t = np.arange(steps) * dt
arg = (np.pi * f0 * (t - 1.2 / f0)) ** 2
src = SparseTimeFunction(name="src", grid=grid, npoint=1, nt=steps)
src.coordinates.data[0, :] = (n - 1) * h / 2.0
src.data[:, 0] = (1.0 - 2.0 * arg) * np.exp(-arg)
rec = SparseTimeFunction(name="rec", grid=grid, npoint=100, nt=steps)
rec.coordinates.data[:, 0] = np.linspace(100.0, (n - 1) * h - 100.0, 100)
rec.coordinates.data[:, 1] = (n - 1) * h / 2.0
rec.coordinates.data[:, 2] = 500.0

pde = m * u.dt2 - u.laplace + damp * u.dt
update = Eq(u.forward, solve(pde, u.forward))
op = Operator([update] + src.inject(field=u.forward, expr=src * grid.stepping_dim.spacing**2 / m) + rec.interpolate(expr=u))

start = time.perf_counter()
op.cfunction  # the JIT compile, kept out of the run's time
compiled = time.perf_counter()
op.apply(time_M=steps - 2, dt=dt)
done = time.perf_counter()
run = done - compiled
print(f"devito: compile {compiled - start:.2f} s, {steps - 1} steps in {run:.2f} s, {n**3 * (steps - 1) / run / 1e9:.3f} GPts/s")
