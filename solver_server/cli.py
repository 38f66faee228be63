"""Command line: ``clearance-server serve`` (the socket server) and ``clearance-server bake``
(a scene file to .pc2 files without sockets). Also ``python -m solver_server ...``."""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Optional


def _serve(args: argparse.Namespace) -> int:
    from protocol.codec import Limits
    from .server.security import resolve_secret
    from .server.server import Server
    secret = resolve_secret(args.secret)
    limits = Limits(max_array_bytes=int(args.max_array_mb * 1024 * 1024))
    try:
        server = Server(args.bind, secret=secret, workers=args.workers, limits=limits)
    except ValueError as e:
        print(f"clearance-server: {e}", file=sys.stderr, flush=True)
        return 2
    except Exception as e:  # zmq bind errors (address in use ...)
        print(f"clearance-server: cannot listen on {args.bind}: {e}", file=sys.stderr, flush=True)
        return 2

    def stop(signum, frame):
        server.stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"clearance-server listening on {server.address}", flush=True)
    server.serve_forever()
    return 0


def _bake(args: argparse.Namespace) -> int:
    from protocol.errors import ProtocolError
    from protocol.scene import SceneError
    from protocol.scenefile import load_scene
    from .server.bake import bake
    try:
        scene = load_scene(args.scene_file)
    except (OSError, ProtocolError) as e:
        print(f"clearance-server bake: cannot read {args.scene_file}: {e}", file=sys.stderr, flush=True)
        return 1
    try:
        return bake(scene, args.out, tuple(args.frames) if args.frames else None, args.resume,
                    solver_quality=args.solver_quality)
    except SceneError as e:
        print(f"clearance-server bake: {e}", file=sys.stderr, flush=True)
        return 1


def build_parser() -> argparse.ArgumentParser:
    """The ``clearance-server`` argument parser (``serve`` and ``bake`` sub-commands)."""
    from protocol.scene import SOLVER_QUALITIES
    p = argparse.ArgumentParser(prog="clearance-server", description="Clearance solver server")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve bake jobs over ZeroMQ")
    s.add_argument("--bind", default="tcp://127.0.0.1:5555",
                   help="endpoint (default tcp://127.0.0.1:5555; port 0 picks a free port)")
    s.add_argument("--secret", default=None, help="shared secret (default $CLEARANCE_SECRET); required off loopback")
    s.add_argument("--workers", type=int, default=1, help="jobs running at once (default 1)")
    s.add_argument("--max-array-mb", type=float, default=2048.0, help="largest array accepted, MiB (default 2048)")
    s.set_defaults(func=_serve)
    b = sub.add_parser("bake", help="bake a .clrscene file to .pc2 files (no sockets)")
    b.add_argument("scene_file")
    b.add_argument("--out", required=True, help="output folder (pc2 files, stats.json, frame/state cache)")
    b.add_argument("--frames", type=int, nargs=2, metavar=("A", "B"), help="bake frames A..B only")
    b.add_argument("--resume", action="store_true", help="continue from the cache in --out")
    b.add_argument("--solver-quality", choices=SOLVER_QUALITIES, default=None,
                   help="IPC solver: fast (block descent, the default of new scenes) or accurate (Newton IPC "
                        "converged to the tolerance); default: the scene file's setting")
    b.set_defaults(func=_bake)
    return p


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
