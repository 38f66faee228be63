"""Issue 20 item 11: the README's plain-Python client example runs as written (it used undefined names:
``verts``, ``tris``, ``ball_verts``, ``ball_tris``). The block under "The solver server from other tools"
is extracted from README.md and run unchanged in its own Python process against a real
``clearance-server serve`` process on loopback; the sheet falls onto the box and stays on it."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_client_example() -> str:
    """The python code block of README.md's section on the solver server from other tools."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## The solver server from other tools"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_client_example_runs_verbatim_against_a_real_server(tmp_path):
    code = readme_client_example()
    assert "Client(address" in code and "c.submit(scene" in code
    (tmp_path / "example.py").write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT)   # kernels cached in $CLEARANCE_STATE_DIR, as for any bake
    server = subprocess.Popen([sys.executable, "-m", "solver_server", "serve", "--bind", "tcp://127.0.0.1:0"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        assert "listening on" in line, line
        r = subprocess.run([sys.executable, "example.py"], cwd=str(tmp_path), capture_output=True, text=True,
                           timeout=1800, env=dict(env, CLEARANCE_SERVER=line.split()[-1]))
    finally:
        server.terminate()
        server.wait(30)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout.splitlines()
    assert out[-1] == "done: 24 frames", out[-5:]
    centre = [float(re.fullmatch(r"frame \d+: sheet centre at z = ([-\d.]+) m", ln).group(1)) for ln in out[:-1]]
    assert len(centre) == 24 and centre[0] == 0.9
    assert 0.6 < centre[-1] < 0.61, centre     # fallen 0.3 m onto the box top, resting on it (gap + thickness)
    assert (tmp_path / "sheet_cache" / "frames" / "frame_00024.npz").is_file()
