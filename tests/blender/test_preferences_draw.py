"""The add-on preferences and the Server panel, drawn against a recording layout (bpy in background
mode has no window, so no real UILayout): the remote fields in order with the Client Key beside the
Server Public Key (greyed out without one), and the shared install-status block in both places."""
import bpy
import pytest

from conftest import addon
from test_addon_solver_quality import _RecordingLayout


class _Layout(_RecordingLayout):
    """Also records labels and operators: ("label", text) and ("op", idname)."""

    def _child(self, *a, **k):
        return _Layout(self.log)

    row = column = box = split = _child

    def label(self, text="", **k):
        self.log.append(("label", text, True))

    def operator(self, idname, **k):
        self.log.append(("op", idname, True))
        return type("Op", (), {})()

    def progress(self, **k):
        self.log.append(("progress", k.get("text", ""), True))


def _draw(draw, context=None):
    log = []
    draw(type("P", (), {"layout": _Layout(log)})(), context or bpy.context)
    return log


def _draw_prefs(prefs):
    """ClearancePreferences.draw on a stand-in carrying the fields draw() reads and a recording layout."""
    fields = {k: getattr(prefs, k) for k in ("server_mode", "server_key")}
    return _draw(lambda panel, ctx: type(prefs).draw(type("S", (), {**fields, "layout": panel.layout})(), ctx))


def test_remote_preferences_show_the_client_key_beside_the_server_key(blender):
    prefs = addon("preferences").get()
    prefs.server_mode = "REMOTE"
    log = _draw_prefs(prefs)
    names = [n for n, _, _ in log]
    assert names == ["server_mode", "remote_address", "secret", "server_key", "client_key", "timeout"]
    assert log[4][1] is False                        # no server key: the client key has no use
    prefs.server_key = "keys/server.key"
    log = _draw_prefs(prefs)
    assert log[4] == ("client_key", True, False)


@pytest.mark.parametrize("where", ["preferences", "server panel"])
def test_install_status_is_drawn_in_both_places(blender, where):
    prefs = addon("preferences").get()
    prefs.server_mode = "EMBEDDED"
    if where == "preferences":
        log = _draw(lambda panel, ctx: addon("preferences").draw_install_status(panel.layout, prefs, 70, full=True))
    else:
        log = _draw(bpy.types.CLEARANCE_PT_server.draw)
    labels = [t for n, t, _ in log if n == "label"]
    ops = [t for n, t, _ in log if n == "op"]
    text = addon("solver_launch").describe(prefs)[1]
    assert " ".join(text.split()) in " ".join(labels)
    assert ops.count("clearance.install_solver") == (2 if where == "preferences" else 1)   # + Reinstall
