"""Memory and stall figures of the attacks of issue 20 (what tests must not assert as timing).

Starts a real ``python -m solver_server serve`` (with a secret, so a peer without it is
"before authentication") on a free loopback port and, for each attack, reports the server's
resident memory after it (``VmRSS``), its peak (``VmHWM``, since the server started) and the
worst ping round trip of a second, authenticated client during the attack (the stall every
client sees):

* ``frame``: one frame of ``--frame-mb`` MiB before Hello;
* ``conns``: 3 connections each sending a ``--conn-mb`` MiB frame before Hello;
* ``frames``: one message of 8 frames of ``--frames-mb`` MiB each before Hello;
* ``objects`` / ``maps``: after Hello, a header of ``--objects-mb`` MiB of small integers in lists,
  and one of ``--maps-mb`` MiB of empty maps;
* ``queue``: 20 Submits of ~``--scene-mb`` MB scenes behind a job that sleeps.

Usage: ``.venv/bin/python scripts/bench_preauth.py [--only frame,conns] [server args ...]``.
Nothing is asserted: the numbers depend on the machine and the limits.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

import msgpack
import numpy as np
import zmq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "protocol"))

from protocol import Client  # noqa: E402
from scenes import make_scene  # noqa: E402

MB = 1024 * 1024
SECRET = "bench-secret-0123456789abcdef"


def status(pid: int) -> dict:
    """VmRSS and VmHWM of a process, MiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


class Pinger(threading.Thread):
    """An authenticated client pinging the server; keeps the worst round trip (s)."""

    def __init__(self, address: str):
        super().__init__(daemon=True)
        self.address, self.worst, self.failed = address, 0.0, 0
        self.stop_ev = threading.Event()

    def run(self) -> None:
        with Client(self.address, secret=SECRET, timeout=300.0, context=zmq.Context()) as c:
            c.connect()
            while not self.stop_ev.is_set():
                try:
                    self.worst = max(self.worst, c.ping())
                except Exception:
                    self.failed += 1
                time.sleep(0.05)


def raw_send(address: str, frames: list, hello: bool = False, wait: float = 30.0) -> str:
    """Send ``frames`` on a fresh DEALER (after a Hello with the secret when ``hello``); returns
    what happened: "reply", "dropped" (the server disconnected) or "silent"."""
    from protocol import Hello
    from protocol.messages import encode_message
    from zmq.utils.monitor import recv_monitor_message
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    mon = s.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    s.connect(address)
    try:
        if hello:
            s.send_multipart(encode_message(Hello("bench", "0", secret=SECRET)))
            assert s.poll(10000)
            s.recv_multipart()
        s.send_multipart(frames, copy=False)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if s.poll(100):
                s.recv_multipart()
                return "reply"
            if mon.poll(0) and recv_monitor_message(mon)["event"] == zmq.EVENT_DISCONNECTED:
                return "dropped"
        return "silent"
    finally:
        s.disable_monitor()
        mon.close(0)
        s.close(0)
        ctx.term()


def header(body: dict) -> bytes:
    return msgpack.packb({"id": "b" * 32, "type": "status", "version": [1, 0], "parent": None, "timestamp": 0.0,
                          "body": body, "arrays": []}, use_bin_type=True)


def start_server(server_args: list) -> tuple:
    """A server subprocess with the secret on a free loopback port: (Popen, address)."""
    env = dict(os.environ, PYTHONPATH=ROOT, CLEARANCE_SECRET=SECRET)
    proc = subprocess.Popen([sys.executable, "-m", "solver_server", "serve", "--bind", "tcp://127.0.0.1:0",
                             *server_args], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.split()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="frame,conns,frames,objects,maps,queue")
    ap.add_argument("--frame-mb", type=int, default=1024)
    ap.add_argument("--conn-mb", type=int, default=512)
    ap.add_argument("--frames-mb", type=int, default=256)
    ap.add_argument("--objects-mb", type=int, default=57)
    ap.add_argument("--maps-mb", type=int, default=19)
    ap.add_argument("--scene-mb", type=float, default=52.5)
    args, server_args = ap.parse_known_args()
    tmp = tempfile.mkdtemp(prefix="clearance_bench_preauth_")
    print(f"server {' '.join(server_args) or '(defaults)'}", flush=True)
    proc = None
    try:
        for attack in args.only.split(","):
            proc, address = start_server(server_args)   # a fresh server per attack: VmHWM is its own
            # headers are packed before the pinger starts: packing millions of objects here would hold
            # this process's GIL and show up as the pinger's stall, not the server's
            if attack == "objects":
                n = args.objects_mb * MB // 2
                head = header({"job_id": "j", "x": [[1] * 1000] * (n // 1000)})
            elif attack == "maps":
                head = header({"job_id": "j", "x": [{}] * (args.maps_mb * MB)})
            pinger = Pinger(address)
            pinger.start()
            time.sleep(0.3)
            if attack == "frame":
                what = raw_send(address, [memoryview(np.zeros(args.frame_mb * MB, np.uint8))])
            elif attack == "conns":
                threads = [threading.Thread(target=raw_send, args=(address, [memoryview(
                    np.zeros(args.conn_mb * MB, np.uint8))])) for _ in range(3)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                what = "3 sent"
            elif attack == "frames":
                big = memoryview(np.zeros(args.frames_mb * MB, np.uint8))
                what = raw_send(address, [header({"job_id": "j"})] + [big] * 8)
            elif attack in ("objects", "maps"):
                what = raw_send(address, [head], hello=True, wait=300)
            elif attack == "queue":
                n_vertices = int(args.scene_mb * 1e6 / 120)   # 72 B of vertices + 48 B of animation per vertex per body
                refused = 0
                with Client(address, secret=SECRET, timeout=120.0, context=zmq.Context()) as c:
                    c.connect()
                    c.submit(make_scene(n_frames=4, debug_frame_delay=60.0), os.path.join(tmp, "sleeper"))
                    for i in range(20):
                        try:
                            c.submit(make_scene(n_frames=2, n_vertices=n_vertices), os.path.join(tmp, f"q{i}"))
                        except Exception as e:
                            refused += 1
                            last = str(e)
                what = f"{20 - refused} queued, {refused} refused" + (f" ({last[:160]})" if refused else "")
            else:
                raise SystemExit(f"unknown attack {attack}")
            time.sleep(1.0)
            pinger.stop_ev.set()
            pinger.join(310)
            print(f"{attack}: {what}; server {status(proc.pid)}; worst ping {pinger.worst * 1000:.0f} ms, "
                  f"failed pings {pinger.failed}, server alive {proc.poll() is None}", flush=True)
            proc.terminate()
            proc.wait(10)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
