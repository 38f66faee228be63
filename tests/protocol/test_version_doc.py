"""docs/protocol.md states the same protocol version as protocol/version.py."""
import os
import re

from protocol.version import PROTOCOL_VERSION, PROTOCOL_VERSION_STR

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "protocol.md")


def test_doc_states_the_code_version():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"Protocol version:\s*\**(\d+)\.(\d+)", text)
    assert m, "docs/protocol.md must state 'Protocol version: X.Y'"
    assert (int(m.group(1)), int(m.group(2))) == PROTOCOL_VERSION
    assert PROTOCOL_VERSION_STR == f"{PROTOCOL_VERSION[0]}.{PROTOCOL_VERSION[1]}"
    # the scene file example version matches too
    assert f'"version": [{PROTOCOL_VERSION[0]}, {PROTOCOL_VERSION[1]}]' in text
