"""Command line: ``clearance-server serve`` (the socket server), ``clearance-server bake``
(a scene file to .pc2 files without sockets), ``clearance-server warmup`` (compile the solver
kernels ahead, :mod:`solver_server.runtime.warmup`) and ``clearance-server keygen`` (the server's
CurveZMQ keypair). Also ``python -m solver_server ...``."""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Optional


def _serve(args: argparse.Namespace) -> int:
    from protocol import keys
    from protocol.codec import Limits
    from solver_server.runtime.security import resolve_secret
    from solver_server.runtime.server import Server
    if args.secret:
        print("clearance-server: warning: --secret is visible to every user of this machine (ps, /proc); use "
              "--secret-file FILE or $CLEARANCE_SECRET", file=sys.stderr, flush=True)
    if not (args.max_array_mb > 0 and args.max_message_mb > 0 and args.max_queued_mb > 0 and args.max_queued_jobs > 0):
        print("clearance-server: --max-array-mb, --max-message-mb, --max-queued-mb and --max-queued-jobs must be "
              "positive", file=sys.stderr, flush=True)
        return 2
    limits = Limits(max_array_bytes=int(args.max_array_mb * 1024 * 1024),
                    max_message_bytes=int(args.max_message_mb * 1024 * 1024))
    try:
        secret = resolve_secret(args.secret, args.secret_file)
        curve_key = keys.read_secret_key(args.key_file) if args.key_file else keys.secret_key_from_env()
        server = Server(args.bind, secret=secret, workers=args.workers, limits=limits, curve_key=curve_key,
                        plaintext=args.plaintext, authorized_keys=args.authorized_keys,
                        max_held_bytes=int(args.max_queued_mb * 1024 * 1024), max_held_jobs=args.max_queued_jobs)
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
    if server.encrypted:
        print(f"clearance-server: encrypted (CurveZMQ), server public key {server.public_key}", file=sys.stderr,
              flush=True)
    if args.authorized_keys:
        print(f"clearance-server: admitting only the {server.authorized} client keys in {args.authorized_keys}",
              file=sys.stderr, flush=True)
    print(f"clearance-server listening on {server.address}", flush=True)
    server.serve_forever()
    return 0


def _bake(args: argparse.Namespace) -> int:
    from protocol.errors import ProtocolError
    from protocol.scene import SceneError
    from protocol.scenefile import load_scene
    from solver_server.runtime.bake import bake
    try:
        scene = load_scene(args.scene_file)
    except (OSError, ProtocolError) as e:
        print(f"clearance-server bake: cannot read {args.scene_file}: {e}", file=sys.stderr, flush=True)
        return 1
    try:
        return bake(scene, args.out, tuple(args.frames) if args.frames else None, args.resume,
                    solver_quality=args.solver_quality, integrator=args.integrator)
    except SceneError as e:
        print(f"clearance-server bake: {e}", file=sys.stderr, flush=True)
        return 1


def _keygen(args: argparse.Namespace) -> int:
    from protocol import keys
    try:
        public_path, secret_path = keys.generate(args.out, force=args.force, name=args.client or "server")
        public = keys.read_public_key(public_path).decode("ascii")
    except (OSError, ValueError) as e:
        print(f"clearance-server keygen: {e}", file=sys.stderr, flush=True)
        return 1
    if args.client:
        print(f"client secret key: {secret_path} (mode 0600; the client's client_key / $CLEARANCE_CLIENT_KEY_FILE)")
        print(f"client public key: {public_path} (copy it into the server's --authorized-keys folder)")
        print(f"client public key: {public}")
        return 0
    print(f"secret key: {secret_path} (mode 0600; serve with --key-file {secret_path})")
    print(f"public key: {public_path} (give it to the clients)")
    print(f"server public key: {public}")
    return 0


def _warmup(args: argparse.Namespace) -> int:
    from .runtime import warmup
    return warmup.run(args)


def build_parser() -> argparse.ArgumentParser:
    """The ``clearance-server`` argument parser (``serve``, ``bake``, ``warmup``, ``keygen``)."""
    from .runtime import warmup
    from protocol.scene import INTEGRATORS, SOLVER_QUALITIES
    p = argparse.ArgumentParser(prog="clearance-server", description="Clearance solver server")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve bake jobs over ZeroMQ")
    s.add_argument("--bind", default="tcp://127.0.0.1:5555",
                   help="endpoint (default tcp://127.0.0.1:5555; port 0 picks a free port)")
    s.add_argument("--secret-file", default=None,
                   help="file whose first line is the shared secret (or $CLEARANCE_SECRET / $CLEARANCE_SECRET_FILE); "
                        "required off loopback")
    s.add_argument("--secret", default=None, help=argparse.SUPPRESS)   # kept working; visible in ps, warned
    s.add_argument("--key-file", default=None,
                   help="the server's secret key file from 'clearance-server keygen' (or $CLEARANCE_KEY_FILE / "
                        "$CLEARANCE_CURVE_SECRET_KEY): encrypts every connection (CurveZMQ); required off loopback")
    s.add_argument("--authorized-keys", default=None, metavar="DIR",
                   help="admit only the clients whose public keys (*.key from 'clearance-server keygen --client "
                        "NAME') are in DIR; needs --key-file")
    s.add_argument("--plaintext", action="store_true",
                   help="allow a non-loopback bind without a key (only behind an SSH tunnel or a VPN)")
    s.add_argument("--workers", type=int, default=1, help="jobs running at once (default 1)")
    s.add_argument("--max-array-mb", type=float, default=512.0, help="largest array accepted, MiB (default 512)")
    s.add_argument("--max-message-mb", type=float, default=512.0,
                   help="largest message accepted (all its arrays together), MiB (default 512); ZeroMQ drops the "
                        "connection of a peer sending a bigger frame before storing it, and a bigger message is "
                        "refused from its header before anything is allocated for it")
    s.add_argument("--max-queued-mb", type=float, default=1024.0,
                   help="queue budget: scene data held for queued and running jobs together, MiB (default 1024); "
                        "a submit beyond it is refused with code busy")
    s.add_argument("--max-queued-jobs", type=int, default=64,
                   help="most jobs queued or running at once (default 64)")
    s.set_defaults(func=_serve)
    k = sub.add_parser("keygen", help="write the server's CurveZMQ keypair (server.key, server.key_secret), or "
                                      "a client's (--client NAME)")
    k.add_argument("--out", required=True, help="folder for server.key (public) and server.key_secret (mode 0600)")
    k.add_argument("--force", action="store_true", help="replace existing keys")
    k.add_argument("--client", default=None, metavar="NAME",
                   help="write a client's keypair NAME.key / NAME.key_secret instead of the server's")
    k.set_defaults(func=_keygen)
    b = sub.add_parser("bake", help="bake a .clrscene file to .pc2 files (no sockets)")
    b.add_argument("scene_file")
    b.add_argument("--out", required=True, help="output folder (pc2 files, stats.json, frame/state cache)")
    b.add_argument("--frames", type=int, nargs=2, metavar=("A", "B"), help="bake frames A..B only")
    b.add_argument("--resume", action="store_true", help="continue from the cache in --out")
    b.add_argument("--solver-quality", choices=SOLVER_QUALITIES, default=None,
                   help="IPC solver: fast (block descent, the default of new scenes) or accurate (Newton IPC "
                        "converged to the tolerance); default: the scene file's setting")
    b.add_argument("--integrator", choices=INTEGRATORS, default=None,
                   help="IPC time integrator: implicit_euler (damps bounces; fewer substeps lose more) or bdf2 "
                        "(second order: bounces keep their height at any substep count); default: the scene file's")
    b.set_defaults(func=_bake)
    w = sub.add_parser("warmup", help="compile the solver kernels ahead of the first bake (a farm node's "
                                      "install step)", description=warmup.DESCRIPTION)
    warmup.add_arguments(w)
    w.set_defaults(func=_warmup)
    return p


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
