"""The package layout's rules, checked on the source tree (issue 22; docs/architecture.md):

- no import cycle between modules, in the solver server, the protocol or the add-on (lazy imports inside
  functions count: a cycle hidden in a function is still a cycle);
- no underscore-private name imported from another package (shared kernels have public names);
- solvers never import each other: ``solver_server/solvers/<a>`` imports nothing of ``solvers/<b>``;
- the shared packages (model, energies, contact, bodies, integrators) never import a solver, a backend or
  the runtime; ``energies`` and ``bodies`` import no other part of the server but ``threads``.
"""
from __future__ import annotations

import ast
import os
from collections import defaultdict

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPS = ("solver_server", "protocol", "blender_addon")


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _modules() -> dict:
    """{module name: (path, is package)} of every module under the three top-level packages."""
    out = {}
    for top in TOPS:
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            if "__pycache__" in dirpath or "vendor" in dirpath:
                continue
            for fn in files:
                if fn.endswith(".py"):
                    p = os.path.join(dirpath, fn)
                    out[_module_name(p)] = (p, fn == "__init__.py")
    return out


MODULES = _modules()


def _imports(mod: str):
    """Yield (imported module, imported name or None) for every import in ``mod``, relative ones resolved."""
    path, is_pkg = MODULES[mod]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    pkg = mod if is_pkg else mod.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = base + ("." + node.module if node.module else "")
            else:
                target = node.module or ""
            for a in node.names:
                yield target, a.name


def _resolve(target: str, name) -> str | None:
    """The project module an import binds: ``from pkg import sub`` binds pkg.sub when it is a module."""
    if name and f"{target}.{name}" in MODULES:
        return f"{target}.{name}"
    return target if target in MODULES else None


def _graph() -> dict:
    g = defaultdict(set)
    for mod in MODULES:
        for target, name in _imports(mod):
            dep = _resolve(target, name)
            if dep and dep != mod and not mod.startswith(dep + "."):  # a package's own __init__ is not a cycle edge
                g[mod].add(dep)
    return g


def _package(mod: str) -> str:
    return mod if MODULES[mod][1] else mod.rpartition(".")[0]


def test_no_import_cycle():
    g = _graph()
    seen, stack, on_stack, cycles = set(), [], set(), []

    def visit(m):
        seen.add(m)
        stack.append(m)
        on_stack.add(m)
        for d in sorted(g[m]):
            if d in on_stack:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in seen:
                visit(d)
        stack.pop()
        on_stack.discard(m)

    for m in sorted(MODULES):
        if m not in seen:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_private_name_across_packages():
    bad = []
    for mod in MODULES:
        for target, name in _imports(mod):
            if not name or not name.startswith("_") or name.startswith("__"):
                continue
            src = _resolve(target, None)
            if src and _package(src) != _package(mod):
                bad.append(f"{mod} imports {target}.{name}")
    assert not bad, "private names used across packages (give the shared kernel a public name): " + "; ".join(bad)


def _deps_of(prefix: str):
    for mod in MODULES:
        if mod == prefix or mod.startswith(prefix + "."):
            for target, name in _imports(mod):
                dep = _resolve(target, name)
                if dep:
                    yield mod, dep


SOLVERS = sorted({m.split(".")[2] for m in MODULES if m.startswith("solver_server.solvers.") and m.count(".") >= 2})


def test_solvers_found():
    assert {"newton", "block_descent", "mpm"} <= set(SOLVERS)


@pytest.mark.parametrize("solver", SOLVERS)
def test_solvers_never_import_each_other(solver):
    own = f"solver_server.solvers.{solver}"
    bad = [f"{m} imports {d}" for m, d in _deps_of(own)
           if d.startswith("solver_server.solvers.") and not (d == own or d.startswith(own + "."))
           and d != "solver_server.solvers"]
    assert not bad, bad


@pytest.mark.parametrize("shared,allowed", [
    ("solver_server.energies", {"solver_server.energies", "solver_server.threads"}),
    ("solver_server.bodies", {"solver_server.bodies", "solver_server.threads"}),
    ("solver_server.integrators", {"solver_server.integrators", "solver_server.model", "solver_server.energies",
                                   "solver_server.bodies", "solver_server.threads"}),
    ("solver_server.contact", {"solver_server.contact", "solver_server.model", "solver_server.energies",
                               "solver_server.bodies", "solver_server.threads"}),
    ("solver_server.model", {"solver_server.model", "solver_server.energies", "solver_server.bodies",
                             "solver_server.threads"}),
])
def test_shared_packages_stay_below_the_solvers(shared, allowed):
    bad = []
    for m, d in _deps_of(shared):
        if d.startswith("solver_server") and d != "solver_server" and not any(
                d == a or d.startswith(a + ".") for a in allowed):
            bad.append(f"{m} imports {d}")
    assert not bad, bad


def test_checker_sees_a_cycle(tmp_path, monkeypatch):
    """The cycle finder is not vacuous: two modules importing each other are reported."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from solver_server import b\n")
    b.write_text("import solver_server.a\n")
    monkeypatch.setitem(MODULES, "solver_server.a", (str(a), False))
    monkeypatch.setitem(MODULES, "solver_server.b", (str(b), False))
    with pytest.raises(AssertionError, match="solver_server.a"):
        test_no_import_cycle()
