"""Who may talk to the server: loopback binds are open, anything else needs a shared secret
and CurveZMQ encryption.

The secret is a shared token compared in constant time; it authenticates clients. CurveZMQ
(keys from ``clearance-server keygen``, protocol/keys.py) encrypts the traffic, the secret
included, and proves the server's identity to a client that holds its public key. A remote
bind without a key needs ``--plaintext`` (for a port that only an SSH tunnel or VPN reaches).
See docs/protocol.md, "Security".
"""
from __future__ import annotations

import hmac
import os
import time
from collections import OrderedDict
from typing import Callable, Optional

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


SECRET_FILE_ENV = "CLEARANCE_SECRET_FILE"
_MAX_SECRET_FILE = 4096


def resolve_secret(secret: Optional[str], secret_file: Optional[str] = None) -> Optional[str]:
    """The secret from the command line, else from ``secret_file`` (its first line), else from
    $CLEARANCE_SECRET, else from the file named by $CLEARANCE_SECRET_FILE, else None. Raises
    ValueError naming an unreadable or empty secret file."""
    if secret:
        return secret
    path = secret_file or (None if os.environ.get(SECRET_ENV) else os.environ.get(SECRET_FILE_ENV))
    if path:
        try:
            with open(path, "rb") as f:
                data = f.read(_MAX_SECRET_FILE + 1)
        except OSError as e:
            raise ValueError(f"cannot read the secret file {path}: {e.strerror or e}") from None
        lines = data[:_MAX_SECRET_FILE].decode("utf-8", "replace").splitlines()
        first = lines[0].strip() if lines else ""
        if not first:
            raise ValueError(f"the secret file {path} is empty; write the secret on its first line")
        return first
    return os.environ.get(SECRET_ENV) or None


def check_bind(address: str, secret: Optional[str], encrypted: bool = False, plaintext: bool = False) -> None:
    """Raise ValueError when a non-loopback bind has no secret, or no encryption key (unless
    ``plaintext`` is asked for explicitly)."""
    if is_loopback(address):
        return
    if not secret:
        raise ValueError(f"refusing to listen on {address} without a secret: anyone who can reach it could run "
                         f"jobs and write files. Write the secret into a file only you can read and pass "
                         f"--secret-file FILE (or set {SECRET_ENV}), or bind tcp://127.0.0.1:PORT")
    if not encrypted and not plaintext:
        raise ValueError(f"refusing to listen on {address} without encryption: the secret and every scene would "
                         "cross the network in clear text. Run 'clearance-server keygen --out DIR', then serve "
                         "with --key-file DIR/server.key_secret (or set CLEARANCE_KEY_FILE) and give clients "
                         "DIR/server.key; or pass --plaintext if only an SSH tunnel or a VPN reaches this port")


def secret_ok(expected: Optional[str], given: Optional[str]) -> bool:
    if not expected:
        return True
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


PREAUTH_MAX_BYTES = 64 * 1024
"""Largest message (one frame, no arrays) decoded from a peer that has not completed Hello:
a Hello is a few hundred bytes, so nothing bigger is parsed for an unauthenticated peer."""


class Sessions:
    """Per-connection handshake state (ZeroMQ identity -> "ok" | "refused"), bounded.

    ROUTER sockets do not report disconnects, so without a bound every connection that ever
    said Hello (or guessed a wrong secret) would stay in memory for good. At most
    ``max_entries`` are kept, least recently used dropped first, except the identities
    ``keep()`` returns: the owners of queued and running jobs, whose clients may do nothing
    but receive frames for hours and must still be able to cancel (4,200 Hellos of others used
    to evict such a client, and its Cancel then failed while the job ran on). Those are at most
    the server's job limit, so the table stays bounded. Dropping is otherwise safe: a dropped
    "refused" peer must still give the right secret, a dropped "ok" peer (idle for longest)
    gets code ``handshake`` and says Hello again.
    """

    def __init__(self, max_entries: int = 4096, keep: Callable[[], set] = set):
        self.max_entries = max(1, int(max_entries))
        self.keep = keep
        self._d: "OrderedDict[bytes, str]" = OrderedDict()

    def get(self, identity: bytes) -> Optional[str]:
        state = self._d.get(identity)
        if state is not None:
            self._d.move_to_end(identity)
        return state

    def set(self, identity: bytes, state: str) -> None:
        self._d[identity] = state
        self._d.move_to_end(identity)
        if len(self._d) <= self.max_entries:
            return
        kept = self.keep()
        for old in list(self._d):   # oldest first; stops at the first one it may drop
            if len(self._d) <= self.max_entries:
                break
            if old not in kept and old != identity:
                del self._d[old]

    def __len__(self) -> int:
        return len(self._d)


class AuthThrottle:
    """Limit wrong-secret guesses per peer (a secret server only).

    A peer is the key the server passes (server._peer_key: a client's listed CurveZMQ key, else
    its ZeroMQ connection), never an IP address: issue 20 found five wrong secrets from one peer
    locking out every client behind the same NAT or SSH tunnel. After ``max_failures`` wrong
    secrets from one peer within ``window`` seconds, every Hello from that peer is refused (code
    ``auth``, the message says for how long) for ``lockout`` seconds, the right secret included.
    (A connection that sent one wrong secret is refused for good anyway; this bounds a listed key
    that reconnects.) At most ``max_addresses`` peers are tracked (oldest dropped).
    """

    def __init__(self, max_failures: int = 5, window: float = 60.0, lockout: float = 60.0,
                 max_addresses: int = 4096, clock: Callable[[], float] = time.monotonic):
        self.max_failures = max_failures
        self.window = window
        self.lockout = lockout
        self.max_addresses = max_addresses
        self.clock = clock
        self._fails: "OrderedDict[str, list]" = OrderedDict()   # address -> failure times
        self._locked: "OrderedDict[str, float]" = OrderedDict()  # address -> locked until

    def locked_for(self, address: Optional[str]) -> float:
        """Seconds left of the peer's lockout (0 when it may try); ``address`` is the peer's key."""
        if address is None:
            return 0.0
        until = self._locked.get(address)
        if until is None:
            return 0.0
        left = until - self.clock()
        if left <= 0:
            del self._locked[address]
            return 0.0
        return left

    def failure(self, address: Optional[str]) -> None:
        """Record a wrong secret from peer ``address``; lock it out after too many."""
        if address is None:
            return
        now = self.clock()
        fails = [t for t in self._fails.pop(address, []) if now - t < self.window] + [now]
        if len(fails) >= self.max_failures:
            self._locked[address] = now + self.lockout
            self._locked.move_to_end(address)
            fails = []
        else:
            self._fails[address] = fails
        for d in (self._fails, self._locked):
            while len(d) > self.max_addresses:
                d.popitem(last=False)


class PreauthRate:
    """Limit what a peer that has not authenticated may send (a secret server only).

    Keyed per peer (its listed CurveZMQ key, else its ZeroMQ connection; issue 20 item 6), not
    per address: 31 junk messages from one peer used to lock every client at that address out
    for 10 s. At most ``max_messages`` messages of one unauthenticated peer in any ``window``
    seconds are parsed (a client needs one or two); beyond that its messages are answered with
    code ``auth`` without being decoded, and nothing is stored for it. At most
    ``max_addresses`` peers are tracked (least recently seen dropped first). What a flood of new
    connections costs is bounded per message instead (one frame of at most PREAUTH_MAX_BYTES,
    decoded within Limits.max_items).
    """

    def __init__(self, max_messages: int = 30, window: float = 10.0, max_addresses: int = 4096,
                 clock: Callable[[], float] = time.monotonic):
        self.max_messages = max_messages
        self.window = window
        self.max_addresses = max_addresses
        self.clock = clock
        self._seen: "OrderedDict[str, list]" = OrderedDict()   # address -> times of its recent messages

    def allow(self, address: Optional[str]) -> float:
        """Record one unauthenticated message from ``address``; returns 0 when it may be handled,
        else the seconds until the address may send again (its oldest recent message expires)."""
        if address is None:
            return 0.0
        now = self.clock()
        times = [t for t in self._seen.pop(address, []) if now - t < self.window]
        if len(times) >= self.max_messages:
            self._seen[address] = times
            return max(self.window - (now - times[0]), 0.001)
        self._seen[address] = times + [now]
        while len(self._seen) > self.max_addresses:
            self._seen.popitem(last=False)
        return 0.0
