"""MPM throughput benchmark: particle-steps per second of the Clearance numba solver against the
same algorithm written in Taichi (CPU backend), on the same scene, in the same run.

Scene: a block of elastic (fixed corotated) or sand (Drucker-Prager) particles, 8 per cell, falling
in the unit box; 10^4, 10^5 and 10^6 particles (``--quick`` skips 10^6). Both solvers are MLS-MPM /
APIC with quadratic B-splines, float64, one SVD per particle per step, the same dt and separating
walls. Taichi is imported here only (``pip install taichi``), never by the product.

Usage: python -m benchmarks [--quick] mpm [taichi=no] [plot=docs/img/mpm_scaling.png]
``run()`` returns the results as a dict, ``section()`` the markdown section.
"""
from __future__ import annotations

import os
import time

import numpy as np

from solver_server.solvers.mpm import materials
from solver_server.solvers.mpm.grid import GridSpec
from solver_server.solvers.mpm.memory import BYTES_PER_PARTICLE
from solver_server.solvers.mpm.solver import MPMSolver
from solver_server.solvers.mpm.timestep import max_dt

from .report import Table, log

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLE = "MPM: particle-steps per second vs Taichi (CPU)"

GRAVITY = (0.0, 0.0, -9.81)


def block(n_target: int, seed: int = 0):
    """Particles (n, 3) filling [0.3, 0.7]^3 at 8 per cell; returns (x, spacing, dx)."""
    side = max(2, int(round(n_target ** (1 / 3))))
    s = 0.4 / side
    g = 0.3 + s * (np.arange(side) + 0.5)
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    x += (np.random.default_rng(seed).random(x.shape) - 0.5) * 0.3 * s
    return x, s, 2 * s


def material(kind: str):
    return materials.preset("elastic" if kind == "elastic" else "sand")


def clearance(kind: str, n: int, steps: int) -> dict:
    x, s, dx = block(n)
    mat = material(kind)
    spec = GridSpec.from_domain((0, 0, 0), (1, 1, 1), dx)
    m = len(x)
    solver = MPMSolver(spec, x, np.zeros_like(x), np.full(m, mat.density * s ** 3), np.full(m, s ** 3),
                       np.zeros(m, np.int32), materials.pack(mat)[None],
                       np.full(m, materials.initial_plastic_state(mat)), gravity=GRAVITY, wall_friction=0.3)
    dt = max_dt(dx, 0.0, materials.wave_speed(mat))
    solver.step(dt)  # compile / warm caches
    t = time.perf_counter()
    for _ in range(steps):
        solver.step(dt)
    sec = time.perf_counter() - t
    return {"n": m, "steps": steps, "seconds": sec, "pps": m * steps / sec, "dt": dt,
            "bytes_per_particle": solver.nbytes() / m, "z_mean": float(solver.x[:, 2].mean())}


def taichi_run(kind: str, n: int, steps: int, threads: int) -> dict:
    """The same MLS-MPM/APIC step in Taichi (CPU, float64)."""
    import taichi as ti

    x0, s, dx = block(n)
    mat = material(kind)
    prm = materials.pack(mat)
    mu0, lam0 = float(prm[materials.P_MU]), float(prm[materials.P_LAMBDA])
    alpha = float(prm[materials.P_ALPHA])
    spec = GridSpec.from_domain((0, 0, 0), (1, 1, 1), dx)
    dt = max_dt(dx, 0.0, materials.wave_speed(mat))
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads, default_fp=ti.f64, log_level=ti.WARN)
    m = len(x0)
    nx, ny, nz = spec.shape
    origin = spec.origin
    x = ti.Vector.field(3, ti.f64, m)
    v = ti.Vector.field(3, ti.f64, m)
    C = ti.Matrix.field(3, 3, ti.f64, m)
    F = ti.Matrix.field(3, 3, ti.f64, m)
    dlj = ti.field(ti.f64, m)
    gv = ti.Vector.field(3, ti.f64, (nx, ny, nz))
    gm = ti.field(ti.f64, (nx, ny, nz))
    x.from_numpy(x0)
    is_sand = kind == "sand"
    p_mass = mat.density * s ** 3
    p_vol = s ** 3
    inv_dx = 1.0 / dx
    lo = ti.Vector(list(spec.domain_min))
    hi = ti.Vector(list(spec.domain_max))
    org = ti.Vector(list(origin))

    @ti.kernel
    def init():
        for p in range(m):
            v[p] = ti.Vector.zero(ti.f64, 3)
            F[p] = ti.Matrix.identity(ti.f64, 3)
            C[p] = ti.Matrix.zero(ti.f64, 3, 3)
            dlj[p] = 0.0

    @ti.kernel
    def substep():
        for I in ti.grouped(gm):
            gm[I] = 0.0
            gv[I] = ti.Vector.zero(ti.f64, 3)
        for p in range(m):
            gpos = (x[p] - org) * inv_dx
            base = ti.cast(ti.floor(gpos - 0.5), ti.i32)
            fx = gpos - ti.cast(base, ti.f64)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            U, sig, V = ti.svd(F[p])
            tau = ti.Matrix.zero(ti.f64, 3, 3)
            if ti.static(is_sand):
                eps = ti.Vector([ti.log(ti.max(sig[d, d], 0.05)) for d in ti.static(range(3))])
                tr = eps.sum()
                D = ti.Matrix.zero(ti.f64, 3, 3)
                for d in ti.static(range(3)):
                    D[d, d] = 2.0 * mu0 * eps[d] + lam0 * tr
                tau = U @ D @ U.transpose()
            else:
                J = sig[0, 0] * sig[1, 1] * sig[2, 2]
                R = U @ V.transpose()
                tau = 2.0 * mu0 * (F[p] - R) @ F[p].transpose() + ti.Matrix.identity(ti.f64, 3) * lam0 * J * (J - 1.0)
            affine = -dt * p_vol * 4.0 * inv_dx * inv_dx * tau + p_mass * C[p]
            for i, j, k in ti.static(ti.ndrange(3, 3, 3)):
                off = ti.Vector([i, j, k])
                dpos = (ti.cast(off, ti.f64) - fx) * dx
                weight = w[i][0] * w[j][1] * w[k][2]
                gv[base + off] += weight * (p_mass * v[p] + affine @ dpos)
                gm[base + off] += weight * p_mass
        for I in ti.grouped(gm):
            if gm[I] > 0:
                vel = gv[I] / gm[I] + dt * ti.Vector([GRAVITY[0], GRAVITY[1], GRAVITY[2]])
                pos = org + ti.cast(I, ti.f64) * dx
                for d in ti.static(range(3)):
                    if pos[d] <= lo[d] and vel[d] < 0:
                        vel[d] = 0.0
                    if pos[d] >= hi[d] and vel[d] > 0:
                        vel[d] = 0.0
                gv[I] = vel
        for p in range(m):
            gpos = (x[p] - org) * inv_dx
            base = ti.cast(ti.floor(gpos - 0.5), ti.i32)
            fx = gpos - ti.cast(base, ti.f64)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
            nv = ti.Vector.zero(ti.f64, 3)
            nC = ti.Matrix.zero(ti.f64, 3, 3)
            for i, j, k in ti.static(ti.ndrange(3, 3, 3)):
                off = ti.Vector([i, j, k])
                dpos = (ti.cast(off, ti.f64) - fx) * dx
                weight = w[i][0] * w[j][1] * w[k][2]
                g = gv[base + off]
                nv += weight * g
                nC += 4.0 * inv_dx * inv_dx * weight * g.outer_product(dpos)
            v[p] = nv
            C[p] = nC
            Fn = (ti.Matrix.identity(ti.f64, 3) + dt * nC) @ F[p]
            if ti.static(is_sand):
                U, sig, V = ti.svd(Fn)
                eps = ti.Vector([ti.log(ti.max(sig[d, d], 0.05)) for d in ti.static(range(3))]) + dlj[p] / 3.0
                tr = eps.sum()
                if tr >= 0:
                    eps = ti.Vector.zero(ti.f64, 3)
                else:
                    eh = eps - tr / 3.0
                    nrm = ti.sqrt(eh.dot(eh) + 1e-8)
                    dg = nrm + (3.0 * lam0 + 2.0 * mu0) / (2.0 * mu0) * tr * alpha
                    if dg > 0:
                        eps -= dg / nrm * eh
                S = ti.Matrix.zero(ti.f64, 3, 3)
                for d in ti.static(range(3)):
                    S[d, d] = ti.exp(eps[d])
                Fr = U @ S @ V.transpose()
                dlj[p] += ti.log(ti.max(Fn.determinant(), 1e-30)) - ti.log(Fr.determinant())
                Fn = Fr
            F[p] = Fn
            x[p] = ti.min(ti.max(x[p] + dt * nv, lo), hi)

    init()
    substep()
    ti.sync()
    t = time.perf_counter()
    for _ in range(steps):
        substep()
    ti.sync()
    sec = time.perf_counter() - t
    out = {"n": m, "steps": steps, "seconds": sec, "pps": m * steps / sec, "z_mean": float(x.to_numpy()[:, 2].mean())}
    ti.reset()
    return out


def steps_for(n: int) -> int:
    return max(3, int(2.0e6 / n))


def run(quick: bool = False, taichi: bool = True, threads: int = 0) -> dict:
    """Benchmark results: {"rows": [...], "threads": int}; each row has kind, n, solver, pps (particle
    steps per second), seconds, steps and bytes_per_particle (Clearance)."""
    import numba
    threads = threads or numba.get_num_threads()
    sizes = [10 ** 4, 10 ** 5] + ([] if quick else [10 ** 6])
    rows = []
    for kind in ("elastic", "sand"):
        for n in sizes:
            steps = steps_for(n)
            r = clearance(kind, n, steps)
            rows.append({"kind": kind, "solver": "clearance-numba", **r})
            if taichi:
                try:
                    t = taichi_run(kind, n, steps, threads)
                    rows.append({"kind": kind, "solver": "taichi-cpu", **t})
                except ImportError:
                    taichi = False
    return {"rows": rows, "threads": threads, "bytes_per_particle_state": BYTES_PER_PARTICLE}


def section(quick: bool = False, taichi: bool = True, threads: int = 0,
            plot: str = os.path.join(ROOT, "docs", "img", "mpm_scaling.png")) -> list:
    res = run(quick=quick, taichi=taichi, threads=threads)
    t = Table(["material", "particles", "solver", "steps", "seconds", "particle-steps/s", "bytes/particle"],
              numeric=[False, True, False, True, True, True, True])
    for r in res["rows"]:
        t.add(r["kind"], f"{r['n']:,}", r["solver"], r["steps"], f"{r['seconds']:.2f}", f"{r['pps']:.3g}",
              f"{r['bytes_per_particle']:.0f}" if "bytes_per_particle" in r else "")
    parts = [t, f"threads: {res['threads']}; particle state: {res['bytes_per_particle_state']} bytes/particle "
                f"(bytes/particle column includes the grid)"]
    if plot:
        try:
            plot_scaling(res, plot)
            parts.append(f"plot: {plot}")
        except ImportError as e:  # matplotlib comes with the bench extra: pip install -e ".[bench]"
            log("mpm", f"no plot: {e}")
    return parts


def plot_scaling(res: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for kind, colour in (("elastic", "tab:blue"), ("sand", "tab:orange")):
        for solver, style in (("clearance-numba", "-o"), ("taichi-cpu", "--s")):
            rs = [r for r in res["rows"] if r["kind"] == kind and r["solver"] == solver]
            if rs:
                ax.plot([r["n"] for r in rs], [r["pps"] for r in rs], style, color=colour, label=f"{kind}, {solver}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("particles")
    ax.set_ylabel("particle-steps per second")
    ax.set_title(f"MPM throughput, {res['threads']} threads")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
