"""Small scenes and deep equality helpers shared by tests/protocol and tests/server."""
import dataclasses

import numpy as np

from protocol.scene import Body, Material, Scene, Settings


def make_scene(n_frames: int = 5, n_vertices: int = 7, backend: str = "none", seed: int = 0, **settings) -> Scene:
    """Three bodies covering every array field: an animated solid, a pinned cloth and a collider."""
    rng = np.random.default_rng(seed)
    fs = settings.pop("frame_start", 3)
    st = Settings(frame_start=fs, frame_end=fs + n_frames - 1, backend=backend, fps=30.0, substeps=2,
                  gravity=(0.0, 0.5, -9.0), **settings)
    tri = np.array([[0, 1, 2], [2, 3, 4], [4, 5, 6]], np.int32)
    edges = np.array([[0, 1], [1, 2], [5, 6]], np.int32)
    solid = Body("Cube.001", "solid", rng.normal(size=(n_vertices, 3)), tri, edges,
                 Material(density=500.0, youngs_modulus=2e6, model="stvk"), (1.0, 0.0, -0.5),
                 animation=rng.normal(size=(n_frames, n_vertices, 3)).astype(np.float32))
    cloth = Body("Cloth/with spaces é", "cloth", rng.normal(size=(n_vertices, 3)), tri,
                 pin_indices=np.array([0, 3], np.int32),
                 pin_targets=rng.normal(size=(n_frames, 2, 3)).astype(np.float32),
                 material=Material(thickness=0.002, friction=0.1))
    ground = Body("Ground", "collider", rng.normal(size=(n_vertices, 3)), tri,
                  animation=rng.normal(size=(n_frames, n_vertices, 3)).astype(np.float32))
    return Scene(st, (solid, cloth, ground), name="test scene")


def expected_positions(scene: Scene, frame: int) -> dict:
    """What the none backend must return at ``frame`` (independent re-implementation)."""
    k = frame - scene.settings.frame_start
    out = {}
    for b in scene.bodies:
        if b.role == "collider":
            continue
        if b.animation is not None:
            out[b.name] = b.animation[k]
        else:
            p = b.vertices.astype(np.float32)
            if b.pin_targets is not None:
                p[b.pin_indices] = b.pin_targets[k]
            out[b.name] = p
    return out


def assert_deep_equal(a, b, path="value"):
    """Equality of dataclasses, tuples, dicts and numpy arrays (dtype and values)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), path
        assert a.dtype == b.dtype, f"{path}: {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{path}: {a.shape} != {b.shape}"
        assert np.array_equal(a, b), path
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            assert_deep_equal(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_deep_equal(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), path
        for k in a:
            assert_deep_equal(a[k], b[k], f"{path}.{k}")
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"
