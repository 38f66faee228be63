"""Who may talk to the server: loopback binds are open, anything else needs a shared secret.

The secret is a shared token compared in constant time; it is NOT encryption (traffic is
plain TCP). Across machines use an SSH tunnel or a VPN; see docs/protocol.md, "Security".
"""
from __future__ import annotations

import hmac
import os
from typing import Optional

SECRET_ENV = "CLEARANCE_SECRET"


def is_loopback(address: str) -> bool:
    """True for inproc://, ipc:// and tcp:// endpoints bound to a loopback host."""
    scheme, _, rest = address.partition("://")
    if scheme in ("inproc", "ipc"):
        return True
    if scheme != "tcp":
        return False
    host = rest.rsplit(":", 1)[0]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host in ("localhost", "::1") or host.startswith("127.")


def resolve_secret(secret: Optional[str]) -> Optional[str]:
    """The secret from the command line, else from $CLEARANCE_SECRET, else None."""
    return secret or os.environ.get(SECRET_ENV) or None


def check_bind(address: str, secret: Optional[str]) -> None:
    """Raise ValueError when a non-loopback bind has no secret."""
    if not is_loopback(address) and not secret:
        raise ValueError(f"refusing to listen on {address} without a secret: anyone who can reach it could run "
                         f"jobs and write files. Pass --secret or set {SECRET_ENV}, or bind tcp://127.0.0.1:PORT")


def secret_ok(expected: Optional[str], given: Optional[str]) -> bool:
    if not expected:
        return True
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())
