"""Issue 8 items 4 and 9: inputs that cannot be baked are refused at submit, naming the object
and the field, before any solve.

A real ``python -m solver_server serve`` subprocess on tcp loopback; each bad scene is sent by a
real client, refused with ``RemoteError`` (code ``scene``), and the server keeps serving (a
good scene bakes afterwards on the same server).
"""
import dataclasses

import pytest

from protocol import Client, Done, RemoteError
from scenes import make_scene


def _refusal(address: str, scene, folder) -> RemoteError:
    """The RemoteError with which the server refuses ``scene`` (the test fails if accepted)."""
    with Client(address, timeout=10.0) as c:
        c.connect()
        with pytest.raises(RemoteError) as e:
            c.submit(scene, str(folder))
        c.ping()   # the server is still serving
        return e.value


def _bakes(address: str, scene, folder) -> str:
    with Client(address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(folder))
        return [ev for ev in c.events(job, timeout=30.0) if isinstance(ev, Done)][-1].state


def _renamed(scene, i: int, name: str):
    bodies = list(scene.bodies)
    bodies[i] = dataclasses.replace(bodies[i], name=name)
    return dataclasses.replace(scene, bodies=tuple(bodies))


@pytest.mark.parametrize("name", ["Cube.001\0", "Cube\n001", "\x7f", "x" * 1025])
def test_body_names_with_control_characters_are_refused(server, tmp_path, name):
    # Before: "a" and "a\0" collapsed into one entry of the frame cache (numpy strips the NUL).
    scene = _renamed(make_scene(), 1, name)
    err = _refusal(server.address, scene, tmp_path / "c")
    assert err.code == "scene" and err.field == "name" and err.obj == name, err
    assert not (tmp_path / "c").exists()                      # refused before anything was written


def test_names_that_clean_alike_stay_apart_in_the_frame_cache(server, tmp_path):
    scene = make_scene()
    scene = _renamed(_renamed(scene, 0, "Cube.001"), 1, "Cube_001")
    with Client(server.address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "c"))
        frames = {ev.frame: ev for ev in c.events(job, timeout=30.0) if type(ev).__name__ == "Frame"}
    last = frames[max(frames)]
    assert list(last.names) == ["Cube.001", "Cube_001"]
    assert (last.positions[0] != last.positions[1]).any()
