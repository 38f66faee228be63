"""A real ``python -m solver_server serve`` subprocess on a free port, killed in teardown."""
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "protocol"))


class ServerProcess:
    def __init__(self, *args, env=None):
        e = dict(os.environ)
        e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
        e.update(env or {})
        # stderr to a file, never an unread pipe: the server logs a line per job and per compiled kernel,
        # and a full pipe would block it
        self.stderr_file = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "solver_server", "serve", *args], cwd=ROOT, env=e,
                                     stdout=subprocess.PIPE, stderr=self.stderr_file, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            try:
                self.proc.wait(30)
                err = self.stderr_text()
            except subprocess.TimeoutExpired:
                err = "(still running)"
            self.stop()
            raise RuntimeError(f"server did not start: {line!r} {err}")
        self.address = line.split()[-1]

    def stderr_text(self) -> str:
        """Everything the server wrote to stderr so far."""
        self.stderr_file.flush()
        self.stderr_file.seek(0)
        return self.stderr_file.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for s in (self.proc.stdout, self.stderr_file):
            if s:
                s.close()


@pytest.fixture
def server_factory():
    started = []

    def start(*args, env=None):
        s = ServerProcess("--bind", "tcp://127.0.0.1:0", *args, env=env)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


@pytest.fixture
def server(server_factory, tmp_path):
    return server_factory(env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
