"""A text layout for the add-on's panels: every panel's real ``draw()`` (and the functions appended to
it, such as the preset menus) run against a layout that writes text instead of pixels (bpy in
background mode cannot draw or screenshot the user interface; see scripts/panel_diagram.py).
Used by test_panel_diagram.py (the README's picture must match the draw code) and by
scripts/panel_diagram.py (which prints it or writes it into the README)."""
from __future__ import annotations

WIDTH = 78
BEGIN, END = "<!-- panel-diagram:begin -->", "<!-- panel-diagram:end -->"


def _value(data, name: str) -> str:
    """The property's value as the panel shows it: enum item names, checkboxes, numbers with units."""
    prop = data.bl_rna.properties[name]
    value = getattr(data, name)
    if prop.type == "ENUM":
        items = {i.identifier: i.name for i in prop.enum_items}
        return f"[{items.get(value, value)} v]"
    if prop.type == "BOOLEAN":
        return "[x]" if value else "[ ]"
    if prop.type == "STRING":
        return f"[{value or ' ' * 12}]"
    if getattr(prop, "is_array", False) or getattr(prop, "array_length", 0):
        return "(" + ", ".join(f"{v:g}" for v in value) + ")"
    if prop.type == "FLOAT":
        unit = {"LENGTH": " m", "VELOCITY": " m/s", "ACCELERATION": " m/s²"}.get(prop.unit, "")
        return f"{value:g}{unit}"
    return str(value)


def _op_label(idname: str) -> str:
    module, name = idname.split(".")
    import bpy
    return getattr(getattr(bpy.ops, module), name).get_rna_type().name


class TextLayout:
    """Records what a panel draws as lines of text; rows put their items side by side."""

    def __init__(self, lines: list, indent: str = "", in_row: bool = False, parent: "TextLayout | None" = None):
        self.lines, self.indent, self.in_row, self.parent = lines, indent, in_row, parent
        self.items: list = []
        self.use_property_split = False
        self.enabled = self.active = True
        self.operator_context = "INVOKE_DEFAULT"

    def dimmed(self) -> bool:
        """Greyed out (``enabled`` or ``active`` False here or in a parent layout)."""
        return not (self.enabled and self.active) or (self.parent is not None and self.parent.dimmed())

    def _emit(self, text: str) -> None:
        if self.dimmed():
            text += "  (greyed out)"
        if self.in_row:
            self.items.append(text)
        else:
            self.lines.append(self.indent + text)

    def row(self, **_):
        child = TextLayout(self.lines, self.indent, in_row=True, parent=self)
        self.lines.append(child)          # placeholder, replaced by the row's items when rendered
        return child

    def column(self, **_):
        return TextLayout(self.lines, self.indent, parent=self)

    def box(self, **_):
        return TextLayout(self.lines, self.indent + "| ", parent=self)

    split = column

    def prop(self, data, name: str, text=None, expand=False, **_):
        prop = data.bl_rna.properties[name]
        label = prop.name if text is None else text
        if expand and prop.type == "ENUM":
            current = getattr(data, name)
            value = " ".join(f"({'*' if i.identifier == current else ' '}) {i.name}" for i in prop.enum_items)
        else:
            value = _value(data, name)
        self._emit(f"{label:<28} {value}" if label else value)

    def prop_search(self, data, name: str, _search_data, _search_name, text=None, **_):
        self._emit(f"{text or data.bl_rna.properties[name].name:<28} [{getattr(data, name) or ' ' * 12}]")

    def label(self, text: str = "", **_):
        self._emit(text)

    def operator(self, idname: str, text=None, **_):
        self._emit(f"[ {text if text is not None else _op_label(idname)} ]" if (text or text is None) else "[ ]")
        return type("OperatorProperties", (), {})()

    def operator_menu_enum(self, _idname: str, _prop: str, text: str = "", **_):
        self._emit(f"[{text} v]")

    def progress(self, factor: float = 0.0, text: str = "", **_):
        done = int(round(20 * factor))
        self._emit(f"[{'#' * done}{'.' * (20 - done)}] {text}")


def _render(lines: list) -> list:
    out = []
    for item in lines:
        if isinstance(item, TextLayout):
            if item.items:
                out.append(item.indent + "  ".join(item.items))
        else:
            out.append(item)
    return out


def draw_panels(context) -> list:
    """Lines of every Clearance panel of the Physics tab that polls true, children nested."""
    import bpy
    panels = [getattr(bpy.types, n) for n in dir(bpy.types) if n.startswith("CLEARANCE_PT_")]
    order = {"CLEARANCE_PT_object": 0, "CLEARANCE_PT_material": 1, "CLEARANCE_PT_pins": 2, "CLEARANCE_PT_bake": 3,
             "CLEARANCE_PT_bake_settings": 4, "CLEARANCE_PT_server": 5}
    panels.sort(key=lambda p: order.get(p.__name__, 99))
    out = []
    for cls in panels:
        if hasattr(cls, "poll") and not cls.poll(context):
            continue
        child = bool(getattr(cls, "bl_parent_id", ""))
        closed = "DEFAULT_CLOSED" in getattr(cls, "bl_options", set())
        indent = "    " if child else ""
        title = f"{'>' if closed else 'v'} {cls.bl_label}"
        out.append(indent + title + " " + "-" * max(0, WIDTH - len(indent) - len(title) - 1))
        if closed:
            continue
        lines: list = []
        layout = TextLayout(lines, indent + "    ")
        proxy = type("PanelProxy", (), {"layout": layout})()
        cls.draw(proxy, context)          # with appended functions (the preset menus), Blender's draw_ls runs them
        out += _render(lines)
    return out


def readme_block(text: str) -> str:
    return f"{BEGIN}\n```text\n{text}\n```\n{END}"
