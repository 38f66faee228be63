"""CurveZMQ keys of a solver server: generate, write, read (pyzmq's bundled libsodium).

``clearance-server keygen`` writes a keypair as two ZeroMQ certificate files (the format of
``zmq.auth``, readable by other ZeroMQ tools)::

    server.key          the public key: give it (or its 40 characters) to every client
    server.key_secret   the secret key (and the public key), mode 0600: stays with the server

Keys are Z85 text, 40 characters each. A client needs only the server's public key; it
encrypts with a fresh keypair of its own per connection. This module imports only the
standard library and pyzmq, so the Blender add-on can use it.
"""
from __future__ import annotations

import os
from typing import Optional, Tuple

import zmq

PUBLIC_NAME = "server.key"
SECRET_NAME = "server.key_secret"
KEY_FILE_ENV = "CLEARANCE_KEY_FILE"
"""Environment variable with the path of the server's secret key file."""
SECRET_KEY_ENV = "CLEARANCE_CURVE_SECRET_KEY"
"""Environment variable with the server's secret key itself (40 Z85 characters)."""
Z85_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#")
_MAX_KEY_FILE = 64 * 1024


class KeyFileError(ValueError):
    """A key or key file that cannot be used; the message names it and says what to do."""


def curve_available() -> bool:
    """True when this pyzmq/libzmq can encrypt (CurveZMQ with libsodium)."""
    return bool(zmq.has("curve"))


def _check_curve() -> None:
    if not curve_available():
        raise KeyFileError("this pyzmq build has no CurveZMQ support (zmq.has('curve') is False); install the pyzmq "
                        "wheel from PyPI, which bundles libsodium")


def check_key(text: str, what: str) -> bytes:
    """A Z85 key as bytes, or KeyFileError naming ``what`` when it is not 40 Z85 characters."""
    s = text.strip() if isinstance(text, str) else ""
    if len(s) != 40 or not set(s) <= Z85_CHARS:
        shown = s if len(s) <= 60 else s[:57] + "..."
        raise KeyFileError(f"{what} must be a CurveZMQ key of 40 Z85 characters (as written by "
                        f"'clearance-server keygen'), got {shown!r} ({len(s)} characters)")
    return s.encode("ascii")


def generate(directory: str, force: bool = False, name: str = "server") -> Tuple[str, str]:
    """Write a new keypair into ``directory`` (created if missing) as ``NAME.key`` (public) and
    ``NAME.key_secret`` (mode 0600); returns (public path, secret path). Refuses to overwrite
    existing keys unless ``force``. ``name`` "server" is the server's pair; any other name is a
    client's (for a server that admits only listed clients, ``--authorized-keys``)."""
    _check_curve()
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise KeyFileError(f"key name {name!r}: use letters, digits, '-', '_' and '.' only")
    os.makedirs(directory, exist_ok=True)
    pub_path = os.path.join(directory, f"{name}.key")
    sec_path = os.path.join(directory, f"{name}.key_secret")
    if not force:
        for p in (sec_path, pub_path):
            if os.path.lexists(p):
                raise KeyFileError(f"{p} already exists; keep it, or pass --force to replace the server's keys "
                                "(every client then needs the new public key)")
    public, secret = zmq.curve_keypair()
    _write(sec_path, _certificate(public, secret, name), 0o600, force)
    _write(pub_path, _certificate(public, None, name), 0o644, force)
    return pub_path, sec_path


def _certificate(public: bytes, secret: Optional[bytes], name: str = "server") -> str:
    who = "solver server" if name == "server" else f"client {name!r}"
    to = "give it to the clients" if name == "server" else "put it in the server's --authorized-keys folder"
    lines = [f"#   Clearance {who} CurveZMQ " + ("SECRET key: keep private (mode 0600)" if secret else
                                                 f"public key: {to}"),
             "#   ZeroMQ certificate format; the key is the 40 characters in quotes", "metadata", "curve",
             f'    public-key = "{public.decode("ascii")}"']
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode("ascii")}"')
    return "\n".join(lines) + "\n"


def _write(path: str, text: str, mode: int, force: bool) -> None:
    """Write a new file with ``mode`` from the start (a secret is never world-readable, even briefly)."""
    if force and os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(text)
    os.chmod(path, mode)


def _read_certificate(path: str) -> Tuple[Optional[str], Optional[str]]:
    """(public, secret) texts of a certificate file (either may be None)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_KEY_FILE + 1)
    except OSError as e:
        raise KeyFileError(f"cannot read key file {path}: {e.strerror or e}") from None
    if len(data) > _MAX_KEY_FILE:
        raise KeyFileError(f"{path} is not a key file (larger than {_MAX_KEY_FILE} bytes)")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise KeyFileError(f"{path} is not a key file (not ASCII text)") from None
    found: dict = {}
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#") or "=" not in s:
            continue
        k, v = s.split("=", 1)
        if k.strip() in ("public-key", "secret-key"):
            found[k.strip()] = v.strip().strip("'\"")
    if not found and len(text.strip()) == 40:    # a bare key pasted into a file
        return text.strip(), None
    return found.get("public-key"), found.get("secret-key")


def read_secret_key(path: str) -> Tuple[bytes, bytes]:
    """(public, secret) from a secret key file (the server's, or a client's). Refuses a file
    other users can read."""
    _check_curve()
    public, secret = _read_certificate(path)
    if secret is None:
        raise KeyFileError(f"{path} holds no secret-key; give the server the {SECRET_NAME} file written by "
                        "'clearance-server keygen' (the public one goes to the clients)")
    sec = check_key(secret, f"the secret-key in {path}")
    if os.name == "posix":
        mode = os.stat(path).st_mode & 0o777
        if mode & 0o077:
            raise KeyFileError(f"{path} can be read by other users (mode {mode:03o}); run 'chmod 600 {path}'")
    pub = zmq.curve_public(sec)
    if public is not None and check_key(public, f"the public-key in {path}") != pub:
        raise KeyFileError(f"{path}: its public-key does not belong to its secret-key (the file was edited); "
                        "run 'clearance-server keygen' again")
    return pub, sec


def secret_key_from_env(environ: Optional[dict] = None) -> Optional[Tuple[bytes, bytes]]:
    """(public, secret) from $CLEARANCE_CURVE_SECRET_KEY or the file named by $CLEARANCE_KEY_FILE,
    else None."""
    env = os.environ if environ is None else environ
    if env.get(SECRET_KEY_ENV):
        _check_curve()
        sec = check_key(env[SECRET_KEY_ENV], f"${SECRET_KEY_ENV}")
        return zmq.curve_public(sec), sec
    if env.get(KEY_FILE_ENV):
        return read_secret_key(env[KEY_FILE_ENV])
    return None


def read_public_key(text_or_path: str) -> bytes:
    """The server's public key from its 40 characters or from the path of ``server.key`` (a
    secret key file also works: only its public key is taken)."""
    s = (text_or_path or "").strip()
    if len(s) == 40 and set(s) <= Z85_CHARS and not os.path.exists(s):
        return s.encode("ascii")
    path = os.path.expanduser(s)
    if not os.path.isfile(path):
        raise KeyFileError(f"the server public key must be its 40 characters or the path of the {PUBLIC_NAME} file "
                        f"written by 'clearance-server keygen'; {s[:80]!r} is neither")
    public, _ = _read_certificate(path)
    if public is None:
        raise KeyFileError(f"{path} holds no public-key (a ZeroMQ certificate written by 'clearance-server keygen')")
    return check_key(public, f"the public-key in {path}")


CLIENT_KEY_FILE_ENV = "CLEARANCE_CLIENT_KEY_FILE"
"""Environment variable with the path of a client's secret key file (for a server that admits
only listed clients); without it a client makes a fresh keypair per connection."""


def read_authorized_keys(directory: str) -> set:
    """The client public keys of every ``*.key`` file in ``directory`` (a server's
    ``--authorized-keys`` folder). Raises KeyFileError naming a bad file or an empty folder."""
    _check_curve()
    if not os.path.isdir(directory):
        raise KeyFileError(f"--authorized-keys {directory}: not a folder")
    found = set()
    for name in sorted(os.listdir(directory)):
        if name.endswith(".key"):
            public, _ = _read_certificate(os.path.join(directory, name))
            if public is None:
                raise KeyFileError(f"{os.path.join(directory, name)} holds no public-key")
            found.add(check_key(public, f"the public-key in {os.path.join(directory, name)}"))
    if not found:
        raise KeyFileError(f"--authorized-keys {directory} holds no client key (*.key files written by "
                           "'clearance-server keygen --client NAME'); no client could connect")
    return found
