"""Deterministic bakes (issue 23): the same scene gives byte-identical .pc2 files whatever the thread
count, the load-aware thread policy's choice, and the frame a bake was killed (SIGKILL) and resumed at.

Every bake here is a real ``clearance-server bake`` process (tests/server/bake_child.py, which adds the
two test hooks: the thread policy forced one way, and a SIGKILL right after a frame's state is on disk);
the resume is the runtime's own (``--resume``: the cache's last complete frame and its state file).
One test per solver path: Fast (block descent: cloth over a sphere, a soft cube, a stiff body) and
Accurate (Newton), each with implicit Euler and BDF-2.
"""
import ast
import os
import subprocess
import sys

import numpy as np
import pytest

from protocol import save_scene
from protocol.scene import Body, Material, Scene, Settings
from solver_server.model.primitives import box, grid_sheet, icosphere
from solver_server.solvers.mpm.materials import preset
from tests.mpm.scenes import collider_box, granular, scene as mpm_scene

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD = os.path.join(ROOT, "tests", "server", "bake_child.py")
KILL_AFTER = 4


def _floor(friction=0.4):
    V, T, _ = grid_sheet((2.0, 2.0), (2, 2))
    return Body("Floor", "collider", V, T, material=Material(friction=friction))


def fast_scene() -> Scene:
    """A 10x10 cloth falling onto a sphere (contact from frame 3), a soft cube and a stiff box thrown
    sideways onto a floor with friction: every state the block-descent stepper carries between steps."""
    V, T, E = grid_sheet((0.6, 0.6), (10, 10), center=(0.0, 0.0, 0.3))
    cloth = Body("Cloth", "cloth", V, T, E, material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5,
                                                               bending_stiffness=1e-6, friction=0.3))
    S, ST = icosphere(0.2, center=(0.0, 0.0, 0.05), subdivisions=2)
    CV, CT = box((0.12, 0.12, 0.12), center=(-0.6, 0.0, 0.1))
    cube = Body("Soft Cube", "solid", CV, CT, material=Material(youngs_modulus=1e5), initial_velocity=(0.5, 0, -0.5))
    BV, BT = box((0.1, 0.1, 0.1), center=(0.6, 0.0, 0.08))
    stiff = Body("Stiff Box", "stiff", BV, BT, initial_velocity=(-0.6, 0.2, -0.3))
    return Scene(Settings(frame_start=1, frame_end=10, solver_quality="fast"),
                 (cloth, Body("Ball", "collider", S, ST, material=Material(friction=0.3)), cube, stiff, _floor()),
                 name="determinism fast")


def accurate_scene() -> Scene:
    """A soft cube thrown onto a floor with friction (it lands, slides and tips) beside a stiff box."""
    CV, CT = box((0.2, 0.2, 0.2), center=(0.0, 0.0, 0.15))
    cube = Body("Soft Cube", "solid", CV, CT, material=Material(youngs_modulus=1e5), initial_velocity=(0.3, 0, -1.0))
    BV, BT = box((0.1, 0.1, 0.1), center=(0.5, 0.0, 0.08))
    stiff = Body("Stiff Box", "stiff", BV, BT, initial_velocity=(-0.6, 0.2, -0.3))
    return Scene(Settings(frame_start=1, frame_end=9, solver_quality="accurate"), (cube, stiff, _floor()),
                 name="determinism accurate")


def bodies_scene() -> Scene:
    """Only stiff bodies on a floor (the Newton path with body-block contact and the step's Verlet candidate
    list, issue 19): a box dropped turned onto another, a third sliding into them (still moving at the end)."""
    A, AT = box((0.1, 0.1, 0.1), center=(0.0, 0.0, 0.0505), divisions=2)
    c, s_ = np.cos(0.4), np.sin(0.4)
    B, BT = box((0.1, 0.1, 0.1), center=(0.0, 0.0, 0.0), divisions=2)
    B = B @ np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]]).T + [0.01, 0.0, 0.16]
    C, CT = box((0.08, 0.08, 0.08), center=(0.5, 0.0, 0.045), divisions=2)
    bodies = (Body("Cube Base", "stiff", A, AT, material=Material(friction=0.4)),
              Body("Cube Top", "stiff", B, BT, material=Material(friction=0.4)),
              Body("Box Sliding", "stiff", C, CT, material=Material(friction=0.2), initial_velocity=(-1.5, 0.0, 0.0)))
    return Scene(Settings(frame_start=1, frame_end=9, solver_quality="accurate"), bodies + (_floor(),),
                 name="determinism bodies")


def mpm_scenes() -> dict:
    """Small MPM scenes (about 1,000 particles, 8 frames), one per material family: sand dropped on a rough
    rock in a walled box, snow thrown onto a slab in the open (automatic) domain, a water column collapsing
    in a walled box around a pillar, an elastic cube thrown against a wall of the open domain."""
    sp = 0.02
    sand = mpm_scene([granular("Sand", (0.3, 0.3, 0.25), (0.5, 0.5, 0.45), preset("sand", particle_spacing=sp)),
                      collider_box("Rock", (0.35, 0.35, 0.0), (0.45, 0.45, 0.15), friction=0.6)], frames=8)
    snow = mpm_scene([granular("Snow", (0.0, 0.0, 0.1), (0.2, 0.2, 0.3), preset("snow", particle_spacing=sp),
                               velocity=(1.0, 0.2, -0.5)),
                      collider_box("Slab", (-0.2, -0.2, -0.05), (0.6, 0.4, 0.05), friction=0.4)],
                     frames=8, domain=None)
    water = mpm_scene([granular("Water", (0.05, 0.05, 0.05), (0.25, 0.25, 0.3), preset("water", particle_spacing=sp)),
                       collider_box("Pillar", (0.35, 0.1, 0.0), (0.42, 0.17, 0.3))],
                      frames=8, domain=((0, 0, 0), (0.6, 0.4, 0.4)))
    elastic = mpm_scene([granular("Jelly", (0.0, 0.0, 0.2), (0.2, 0.2, 0.4), preset("elastic", particle_spacing=sp),
                                  velocity=(2.0, 0.0, 0.5)),
                         collider_box("Wall", (0.3, -0.2, -0.1), (0.4, 0.4, 0.6), friction=0.2),
                         collider_box("Ground", (-0.2, -0.2, -0.1), (0.4, 0.4, 0.0), friction=0.5)],
                        frames=8, domain=None)
    return {"sand": sand, "snow": snow, "water": water, "elastic": elastic}


def _bake(scene_file, out, threads: int, policy: str, *extra, kill_after=None, timeout=600):
    env = dict(os.environ)
    env.pop("CLEARANCE_SECRET", None)
    env["PYTHONPATH"] = ROOT
    env["NUMBA_NUM_THREADS"] = str(threads)
    env.pop("CLEARANCE_TEST_THREADS", None)
    if policy:
        env["CLEARANCE_TEST_THREADS"] = policy
    env.pop("CLEARANCE_TEST_KILL_AFTER", None)
    if kill_after is not None:
        env["CLEARANCE_TEST_KILL_AFTER"] = str(kill_after)
    return subprocess.run([sys.executable, CHILD, str(scene_file), "--out", str(out), *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _pc2_bytes(out) -> dict:
    files = sorted(p for p in os.listdir(out) if p.endswith(".pc2"))
    assert files
    return {p: open(os.path.join(out, p), "rb").read() for p in files}


def _check_same(a: dict, b: dict, what: str) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        if a[name] != b[name]:
            x = np.frombuffer(a[name][32:], np.float32)
            y = np.frombuffer(b[name][32:], np.float32)
            raise AssertionError(f"{what}: {name} differs, by up to {float(np.abs(x - y).max()):.3g} m")


def _check_same_states(a, b, what: str) -> None:
    """The float64 resume states (cache folder state/state_*.npz) of two bakes, array by array: differences
    the .pc2's float32 positions round away, and that a longer bake would amplify."""
    files = sorted(os.listdir(os.path.join(a, "state")))
    assert files and files == sorted(os.listdir(os.path.join(b, "state")))
    for name in files:
        with np.load(os.path.join(a, "state", name)) as x, np.load(os.path.join(b, "state", name)) as y:
            assert sorted(x.files) == sorted(y.files)
            for key in x.files:
                if not np.array_equal(x[key], y[key]):
                    raise AssertionError(f"{what}: {name} {key} differs, by up to "
                                         f"{float(np.abs(x[key] - y[key]).max()):.3g}")


_ARRAY_REDUCTIONS = {"sum", "mean", "prod", "dot", "vdot", "cumsum", "nansum", "nanmean", "average", "std", "var",
                     "einsum", "norm"}
_FOLD_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
"""s = s + ... across a prange is a parallel reduction like s += .... Extrema are not listed: max and min
(a.min() over per-chunk results, m = max(m, ...)) give the same value in any order (one of the operands,
NaN and the sign of a zero aside), as the CCD kernels' best.min() over a fixed chunk count relies on."""


def _parallel_kernel_reductions(tree, where_prefix: str) -> tuple:
    """(kernels, bad): the names of the parallel=True kernels of a parsed module, and the thread-count
    dependent reductions in them (see the test below)."""
    kernels, bad = [], []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef) or not any(
                "parallel=True" in ast.unparse(d) for d in func.decorator_list):
            continue
        kernels.append(func.name)
        where = f"{where_prefix}:{func.name}"
        for node in ast.walk(func):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in _ARRAY_REDUCTIONS:
                    bad.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.For) and "prange" in ast.unparse(node.iter):
                def folds(n):
                    # s = s + ..., s = 0.5 * (s - x): arithmetic on the assignment's own target
                    return (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                            and any(isinstance(b, ast.BinOp) and isinstance(b.op, _FOLD_OPS)
                                    and any(isinstance(r, ast.Name) and r.id == n.targets[0].id for r in ast.walk(b))
                                    for b in ast.walk(n.value)))
                acc = {id(n.target) for n in ast.walk(node) if isinstance(n, ast.AugAssign)}
                acc |= {id(n.targets[0]) for n in ast.walk(node) if folds(n)}
                local = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                         and isinstance(n.ctx, ast.Store) and id(n) not in acc}   # set afresh in the loop
                for n in ast.walk(node):
                    if (isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
                            and n.target.id not in local):
                        bad.append(f"{where}:{n.lineno}: {ast.unparse(n)} across a prange")
                    elif folds(n) and n.targets[0].id not in local:
                        bad.append(f"{where}:{n.lineno}: {ast.unparse(n)} across a prange")
    return kernels, bad


def test_parallel_kernels_total_in_an_order_independent_of_the_thread_count():
    """In a parallel=True kernel numba turns an array reduction (out.sum(), np.dot, ...) and a scalar folded
    across a prange (s += ... or s = s + ... inside the loop) into parallel reductions,
    one partial result per thread: their rounding changes with the thread count (the elastic energies'
    out.sum() did, and through the energy guard's velocity scale moved a Fast bake's cloth by 8 cm between
    1 and 2 threads). Such kernels total with solver_server.threads.ordered_sum or per-chunk sums over a
    fixed chunk count instead. Every module under solver_server/ is scanned, the mesh solvers' and the MPM
    solver's kernels (P2G, grid update, G2P, binning, distance fields, sampling) alike."""
    bad, scanned = [], {}
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, "solver_server")):
        for fn in files:
            if not fn.endswith(".py"):
                continue
            path = os.path.join(dirpath, fn)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            rel = os.path.relpath(path, ROOT)
            kernels, found = _parallel_kernel_reductions(tree, rel)
            scanned[rel.replace(os.sep, "/")] = kernels
            bad += found
    mpm = "solver_server/solvers/mpm/"
    assert {"p2g", "grid_update", "g2p", "init_stress", "zero_active"} <= set(scanned.get(mpm + "transfer.py", ()))
    assert "particle_blocks" in scanned.get(mpm + "grid.py", ())
    assert "finish_field" in scanned.get(mpm + "sdf.py", ())
    assert not bad, "thread-count dependent reductions:\n" + "\n".join(bad)


def test_the_reduction_scan_finds_each_kind_of_reduction():
    """The scan above on kernels that reduce in each way it forbids, and on ones that do not (a serial kernel,
    accumulators set afresh in each prange iteration, extrema)."""
    src = """
@njit(parallel=True)
def a(x):
    return x.sum()

@njit(parallel=True)
def b(x):
    p = 1.0
    for i in prange(x.shape[0]):
        p = x[i] * p
    return p

@njit(parallel=True)
def c(x):
    s = 0.0
    for i in prange(x.shape[0]):
        s += x[i]
    return s

@njit(parallel=True)
def d(x):
    s = 0.0
    for i in prange(x.shape[0]):
        s = s + x[i]
    return s

@njit(parallel=True)
def e(x):
    s = 0.0
    for i in prange(x.shape[0]):
        s = 0.5 * (s - x[i])
    return s

@njit(parallel=True)
def extrema(x):
    m = 0.0
    for i in prange(x.shape[0]):
        m = max(m, x[i])
    return min(m, np.max(x), x.min())

@njit(parallel=True)
def fine(x, out):
    for i in prange(x.shape[0]):
        s = 0.0
        m = 0.0
        for k in range(3):
            s += x[i, k]
            s = s + 1.0
            m = max(m, min(x[i, k], 2.0))
        out[i] = s + m

@njit
def serial(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return x.sum() + s
"""
    kernels, bad = _parallel_kernel_reductions(ast.parse(src), "t")
    assert kernels == ["a", "b", "c", "d", "e", "extrema", "fine"]
    assert sorted({line.split(":")[1] for line in bad}) == ["a", "b", "c", "d", "e"], bad


def test_elastic_energy_has_the_same_bits_on_one_and_two_threads():
    """The Fast scene's elastic energy (membranes, cloth bending, tets) at a perturbed state, its kernels on
    one and on two threads: the same float, bit for bit."""
    import numba

    from solver_server.model.system import build_system

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here")
    s = build_system(fast_scene(), affine=True)
    x = s.x0[:s.n] + np.random.default_rng(7).normal(0.0, 2e-3, (s.n, 3))
    old = numba.get_num_threads()
    try:
        e = []
        for nt in (1, 2):
            numba.set_num_threads(nt)
            e.append(s.elastic._energy(x))     # the kernels themselves, without threads_for's policy
    finally:
        numba.set_num_threads(old)
    assert np.isfinite(e[0]) and e[0] > 0.0
    assert e[0] == e[1], (e[0], e[1])


# four real bake processes each: 26-107 s with a warm kernel cache on the loaded 2-core dev machine; the
# Fast ones (the longest) are slow-marked, test_resume_state_through_the_cache_file_* covers them quickly
PATHS = [pytest.param("fast", "implicit_euler", id="fast-implicit_euler", marks=pytest.mark.slow),
         pytest.param("fast", "bdf2", id="fast-bdf2", marks=pytest.mark.slow),
         pytest.param("accurate", "implicit_euler", id="accurate-implicit_euler"),
         pytest.param("accurate", "bdf2", id="accurate-bdf2"),
         pytest.param("bodies", "implicit_euler", id="accurate-bodies-implicit_euler")]


@pytest.mark.parametrize("integrator", ["implicit_euler", "bdf2"])
def test_resume_state_through_the_cache_file_gives_the_same_fast_steps(tmp_path, integrator):
    """In process, quickly: a Fast backend built afresh from the state file of frame 5 (written and read
    by the job cache, as a resume does) takes the same steps as the one that wrote it, bit for bit."""
    import dataclasses

    from solver_server.backends.mesh_backend import MeshBackend
    from solver_server.runtime.cache import JobCache

    scene = fast_scene()
    scene = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, integrator=integrator,
                                                                    frame_end=9))
    a = MeshBackend(scene)
    for _ in range(KILL_AFTER):
        a.advance()
    cache = JobCache(str(tmp_path / "c"))
    cache.create()
    cache.ensure()
    cache.write_state(a.frame, a.get_state())
    b = MeshBackend(scene)
    b.set_state(cache.read_state(a.frame), a.frame)
    while a.frame < scene.settings.frame_end:
        ra, rb = a.advance(), b.advance()
        for name in ra.positions:
            assert np.array_equal(ra.positions[name], rb.positions[name]), (ra.frame, name)
    assert np.array_equal(a.stepper.x, b.stepper.x)


@pytest.mark.parametrize("quality,integrator", PATHS)
def test_bakes_are_byte_identical_across_threads_policies_and_kill_resume(tmp_path, quality, integrator):
    scene = {"fast": fast_scene, "accurate": accurate_scene, "bodies": bodies_scene}[quality]()
    f = tmp_path / "s.clrscene"
    save_scene(f, scene)
    args = ("--integrator", integrator)
    # uninterrupted, one thread
    r = _bake(f, tmp_path / "t1", 1, "serial", *args)
    assert r.returncode == 0, r.stderr
    ref = _pc2_bytes(tmp_path / "t1")
    first = np.frombuffer(next(iter(ref.values()))[32:], np.float32)
    assert np.isfinite(first).all()
    # two threads, every guarded kernel forced onto them (an idle machine)
    r = _bake(f, tmp_path / "t2", 2, "parallel", *args)
    assert r.returncode == 0, r.stderr
    _check_same(ref, _pc2_bytes(tmp_path / "t2"), "2 threads (parallel policy) vs 1 thread")
    # killed after frame KILL_AFTER on two threads, resumed on two threads with the serial policy (the load
    # changed): the runtime's resume from the state file of that frame
    out = tmp_path / "killed"
    r = _bake(f, out, 2, "parallel", *args, kill_after=scene.settings.frame_start + KILL_AFTER)
    assert r.returncode == -9, (r.returncode, r.stderr)
    assert not any(p.endswith(".pc2") for p in os.listdir(out))
    r = _bake(f, out, 2, "serial", *args, "--resume")
    assert r.returncode == 0, r.stderr
    assert f"resuming after frame {scene.settings.frame_start + KILL_AFTER}" in r.stdout
    _check_same(ref, _pc2_bytes(out), f"killed after frame {scene.settings.frame_start + KILL_AFTER} and resumed "
                                      "vs uninterrupted")
    # the bake really moved: not a trivially identical rest state
    frames = np.frombuffer(ref[sorted(ref)[0]][32:], np.float32).reshape(scene.settings.n_frames, -1, 3)
    assert np.abs(frames[-1] - frames[KILL_AFTER]).max() > 1e-3


def _server_and_bake_give_the_same_frames(server_factory, tmp_path, scene, threads=2, policy="", server_env=None,
                                          states=False):
    from protocol import Client, Done

    f = tmp_path / "s.clrscene"
    save_scene(f, scene)
    r = _bake(f, tmp_path / "cli", threads, policy)
    assert r.returncode == 0, r.stderr
    srv = server_factory(env=server_env)
    with Client(srv.address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "srv"))
        events = list(c.events(job, timeout=600.0))
    assert isinstance(events[-1], Done) and events[-1].state == "done", events[-1]
    s = scene.settings
    for k in range(s.frame_start, s.frame_end + 1):
        name = f"frame_{k:05d}.npz"
        with np.load(tmp_path / "cli" / "frames" / name) as a, np.load(tmp_path / "srv" / "frames" / name) as b:
            assert sorted(a.files) == sorted(b.files)
            for key in a.files:
                assert np.array_equal(a[key], b[key]), (k, key)
    if states:
        _check_same_states(tmp_path / "cli", tmp_path / "srv", "server job vs clearance-server bake")


@pytest.mark.slow   # a server and a bake process: ~50 s on the loaded dev machine
def test_the_server_and_the_bake_command_give_the_same_frames(server_factory, tmp_path):
    """The same Fast scene through a server job (a spawned child process, frames streamed) and through
    ``clearance-server bake`` (in process): the same positions in every frame, bit for bit."""
    _server_and_bake_give_the_same_frames(server_factory, tmp_path, fast_scene())


def test_the_server_and_the_bake_command_give_the_same_mpm_frames(server_factory, tmp_path):
    """An MPM scene (an elastic cube thrown at a wall) through a server job on one numba thread and through
    ``clearance-server bake`` on two threads with the threaded MPM kernels: the same particles in every
    frame and the same float64 resume states, bit for bit."""
    _server_and_bake_give_the_same_frames(server_factory, tmp_path, mpm_scenes()["elastic"], threads=2,
                                          policy="parallel", server_env={"NUMBA_NUM_THREADS": "1"}, states=True)


@pytest.mark.parametrize("material", ["sand", "snow", "water", "elastic"])
def test_mpm_bakes_are_byte_identical_across_threads_policies_and_kill_resume(tmp_path, material):
    """The MPM backend (solver_server/solvers/mpm): one thread on the single-threaded kernels, two threads on
    the colour-blocked parallel ones (bake_child's "parallel" policy takes every MPM scene onto them), and a
    bake killed after frame KILL_AFTER + 1 and resumed with the other policy: the same .pc2 bytes and the same
    float64 resume states. (p2g_serial scattering in particle order made every state differ from frame 2 on,
    by up to 2e-15 m at frame 9, and the elastic scene's .pc2 bytes.)"""
    scene = mpm_scenes()[material]
    f = tmp_path / "s.clrscene"
    save_scene(f, scene)
    r = _bake(f, tmp_path / "t1", 1, "serial")
    assert r.returncode == 0, r.stderr
    ref = _pc2_bytes(tmp_path / "t1")
    r = _bake(f, tmp_path / "t2", 2, "parallel")
    assert r.returncode == 0, r.stderr
    _check_same(ref, _pc2_bytes(tmp_path / "t2"), "2 threads (parallel kernels) vs 1 thread")
    _check_same_states(tmp_path / "t1", tmp_path / "t2", "2 threads (parallel kernels) vs 1 thread")
    out = tmp_path / "killed"
    kill = scene.settings.frame_start + KILL_AFTER
    r = _bake(f, out, 2, "parallel", kill_after=kill)
    assert r.returncode == -9, (r.returncode, r.stderr)
    assert not any(p.endswith(".pc2") for p in os.listdir(out))
    r = _bake(f, out, 2, "serial", "--resume")
    assert r.returncode == 0, r.stderr
    assert f"resuming after frame {kill}" in r.stdout
    _check_same(ref, _pc2_bytes(out), f"killed after frame {kill} and resumed vs uninterrupted")
    _check_same_states(tmp_path / "t1", out, f"killed after frame {kill} and resumed vs uninterrupted")
    frames = np.frombuffer(ref[sorted(ref)[0]][32:], np.float32).reshape(scene.settings.n_frames, -1, 3)
    assert np.isfinite(frames).all()
    assert np.abs(frames[-1] - frames[KILL_AFTER]).max() > 1e-3
