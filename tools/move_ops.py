# ruff: noqa - the one-shot script that made the move (kept for the record in this commit only)
"""Move core's op definitions from the history-named ``torcia/_ops*.py`` files into the
family modules of ``torcia/_oplib/`` (issue #35), exactly: whole top-level definitions move
with their decorators and comments, each family module gets the imports its code needs, and
references through the old module objects (``_ops.cat``) become plain names.

Run once, from the repository root, on the tree that still holds the old files::

    python tools/move_ops.py ASSIGNMENT.py

``ASSIGNMENT.py`` defines ``A`` (family -> old file -> names), ``ORDER`` (the families in
load order), ``DROP`` (duplicate definitions replaced by another) and ``TABLES`` (the
method/export tables, rewritten by hand in ``_methods.py`` and ``_oplib/__init__.py``).
Private helpers not named in ``A`` go to the one family that uses them, or ``_common``.
A family imports from families before it at the top and from later ones at the bottom
(they import it first), so the package loads in ``ORDER`` without function-local imports.
"""

from __future__ import annotations

import ast
import importlib
import runpy
import symtable
import sys
from collections import defaultdict
from pathlib import Path

CORE = Path("packages/core/src/torcia")
FILES = ["_ops", "_ops_complex", "_ops_extra", "_ops_compat", "_ops_nn", "_ops_nn_top",
         "_ops_compat_more", "_ops_spectral"]


class Unit:
    def __init__(self, file, node, lines, start):
        self.file, self.node = file, node
        self.start = start  # first line, comments and decorators included (1-based)
        self.text_lines = lines[start - 1:node.end_lineno]
        self.names = set()
        self.key = None
        self.refs = set()  # (file, name) identities this unit reads at module level
        self.attr_edits = []  # (lineno, col, end_col, file, name) for ``_ops.name`` spans


def _bound(node):
    if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
        return {node.name}
    out = set()
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    for t in targets:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                out.add(n.id)
    if targets and not out:  # METHODS["x"].__name__ = ...
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    return {"@attr:" + n.id}
    return out


def load(file):
    path = CORE / f"{file}.py"
    src = path.read_text()
    lines = src.splitlines(keepends=True)
    tree = ast.parse(src)
    imports = {}  # local name -> ("module", modname) | ("from", modname, attr)
    units = []
    prev_end = 0
    body = tree.body
    for i, node in enumerate(body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            prev_end = node.end_lineno
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                imports[a.asname or a.name.split(".")[0]] = ("module", a.name if a.asname else a.name.split(".")[0])
            prev_end = node.end_lineno
            continue
        if isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                prev_end = node.end_lineno
                continue
            for a in node.names:
                imports[a.asname or a.name] = ("from", node.module, a.name)
            prev_end = node.end_lineno
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        # comments directly above belong to the unit
        start = first
        while start - 1 > prev_end and lines[start - 2].lstrip().startswith("#"):
            start -= 1
        u = Unit(file, node, lines, start)
        if isinstance(node, ast.For):
            it = ast.unparse(node.iter)
            u.key = ("@alias_loop" if "ALIASES" in it else "@top_loop" if "_TOP_INPLACE" in it
                     else "@loops")
            u.loopvars = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        else:
            u.names = _bound(node)
            if isinstance(node, ast.Assign) and ast.unparse(node) == "_g = globals()":
                u.key = "@_g"
        units.append(u)
        prev_end = node.end_lineno
    return src, tree, imports, units


def main(assignment):
    cfg = runpy.run_path(assignment)
    A, ORDER, DROP, TABLES = cfg["A"], cfg["ORDER"], cfg["DROP"], cfg["TABLES"]
    data = {f: load(f) for f in FILES}
    oldmods = {f"torcia.{f}": f for f in FILES}
    sys.path.insert(0, str(CORE.parent))
    scratch = set()
    for f, (_, _, _, units) in data.items():
        for u in units:
            if isinstance(u.node, ast.For):
                scratch |= {(f, v) for v in u.loopvars}
    # which unit binds each identity
    owner = {}
    for f, (_, _, imports, units) in data.items():
        for u in units:
            for n in u.names:
                owner.setdefault((f, n), u)
    # names the loops bind at import time
    for f, (_, _, imports, units) in data.items():
        mod = importlib.import_module(f"torcia.{f}")
        loops = [u for u in units if isinstance(u.node, ast.For)]
        for n in vars(mod):
            if ((f, n) in owner or n in imports or n.startswith("__") or (f, n) in scratch
                    or n == "annotations"):
                continue
            cands = [u for u in loops if u.key != "@alias_loop" or n in mod.ALIASES]
            if f == "_ops_compat":
                cands = [u for u in loops if (u.key == "@alias_loop") == (n in mod.ALIASES)]
            assert cands, (f, n)
            owner[(f, n)] = cands[0]
            cands[0].names.add(n)

    def resolve(f, name):
        """The identity ``name`` means in old file ``f``, or ("ext", spec)."""
        if (f, name) in DROP:
            return DROP[(f, name)]
        if (f, name) in owner:
            return (f, name)
        imp = data[f][2].get(name)
        if imp is None:
            return None
        if imp[0] == "from" and imp[1] in oldmods:
            return resolve(oldmods[imp[1]], imp[2])
        if imp[0] == "from" and imp[1] == "torcia" and f"torcia.{imp[2]}" in oldmods:
            return ("oldmod", oldmods[f"torcia.{imp[2]}"])
        return ("ext", imp)

    # references of each unit
    for f, (src, tree, imports, units) in data.items():
        st = symtable.symtable(src, f, "exec")
        children = st.get_children()
        for u in units:
            lo, hi = u.start, u.node.end_lineno
            names = set()
            def shallow(node):
                for ch in ast.iter_child_nodes(node):
                    if isinstance(ch, (ast.FunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
                                       ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                        if isinstance(ch, (ast.FunctionDef, ast.ClassDef)):
                            for d in ch.decorator_list:
                                shallow_expr(d)
                            if isinstance(ch, ast.FunctionDef):
                                for d in ch.args.defaults + [k for k in ch.args.kw_defaults if k]:
                                    shallow_expr(d)
                            else:
                                for b in ch.bases + [k.value for k in ch.keywords]:
                                    shallow_expr(b)
                        elif isinstance(ch, ast.Lambda):
                            for d in ch.args.defaults:
                                shallow_expr(d)
                        else:
                            shallow_expr(ch.generators[0].iter)
                        continue
                    if isinstance(ch, ast.Name) and isinstance(ch.ctx, ast.Load):
                        names.add(ch.id)
                    shallow(ch)
            def shallow_expr(e):
                if isinstance(e, ast.Name):
                    names.add(e.id)
                shallow(e)
            shallow(ast.Module(body=[u.node], type_ignores=[]))

            def tglobals(t):
                for s in t.get_symbols():
                    if s.is_referenced() and s.is_global():
                        names.add(s.get_name())
                for c in t.get_children():
                    tglobals(c)
            for c in children:
                if lo <= c.get_lineno() <= hi:
                    tglobals(c)
            for n in names:
                r = resolve(f, n)
                if r is None or r[0] == "oldmod" or (f, n) in scratch:
                    continue
                u.refs.add(r if r[0] != "ext" else ("ext", n, r[1]))
            for node in ast.walk(u.node):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
                    r = resolve(f, node.value.id)
                    if r and r[0] == "oldmod":
                        ident = resolve(r[1], node.attr)
                        assert ident, (f, node.value.id, node.attr)
                        u.refs.add(ident if ident[0] != "ext" else ("ext", node.attr, ident[1]))
                        u.attr_edits.append((node.lineno, node.col_offset, node.end_col_offset,
                                             ident))
    # assign families
    family = {}
    for fam, per in A.items():
        for f, names in per.items():
            for n in names:
                if n == "*":
                    for u in data[f][3]:
                        for m in u.names:
                            if m not in TABLES and not m.startswith("@attr"):
                                family[(f, m)] = fam
                elif n.startswith("@"):
                    for u in data[f][3]:
                        if u.key == n:
                            for m in u.names:
                                family[(f, m)] = fam
                            u.family = fam
                else:
                    assert (f, n) in owner, (f, n)
                    family[(f, n)] = fam
    unit_family = {}
    for f, (_, _, _, units) in data.items():
        for u in units:
            fams = {family[(f, n)] for n in u.names if (f, n) in family}
            if hasattr(u, "family"):
                fams.add(u.family)
            if any(n in TABLES or n.startswith("@attr") for n in u.names):
                unit_family[id(u)] = "TABLES"
                continue
            if any((f, n) in DROP for n in u.names):
                unit_family[id(u)] = "DROP"
                continue
            assert len(fams) <= 1, (f, u.names, fams)
            if fams:
                unit_family[id(u)] = fams.pop()
    # private helpers: the family of their users
    users = defaultdict(set)
    allunits = [u for f in FILES for u in data[f][3]]
    changed = True
    while changed:
        changed = False
        users.clear()
        for u in allunits:
            fu = unit_family.get(id(u))
            for r in u.refs:
                if r[0] != "ext":
                    users[owner[r].__hash__()].add(fu)
        for u in allunits:
            if id(u) in unit_family:
                continue
            fams = users.get(u.__hash__(), set())
            if None in fams:
                continue
            if len(fams) == 1 and "TABLES" not in fams:
                unit_family[id(u)] = fams.pop()
                changed = True
            elif fams:
                fams.discard("TABLES")
                unit_family[id(u)] = "_common" if len(fams) != 1 else fams.pop()
                changed = True
    left = [(u.file, sorted(u.names)) for u in allunits if id(u) not in unit_family]
    for u in allunits:
        if id(u) not in unit_family:
            unit_family[id(u)] = "_common"
    print("unused, put in _common:", left, file=sys.stderr)
    fam_of = {}
    for u in allunits:
        for n in u.names:
            fam_of[(u.file, n)] = unit_family[id(u)]

    # emit
    out = defaultdict(list)
    for f in FILES:
        for u in data[f][3]:
            out[unit_family[id(u)]].append(u)
    report = {}
    for fam in ORDER:
        units = out.get(fam, [])
        local = {}  # name -> identity / ext spec

        def bind(name, what):
            if name in local and local[name] != what:
                raise SystemExit(f"{fam}: {name} means {local[name]} and {what}")
            local[name] = what
        for u in units:
            for n in u.names:
                bind(n, (u.file, n))
        top_imp, bottom_imp, ext = defaultdict(set), defaultdict(set), set()
        chunks = []
        for u in units:
            lines = [ln.encode() for ln in u.text_lines]
            for (ln, c0, c1, ident) in sorted(u.attr_edits, key=lambda e: (-e[0], -e[1])):
                i = ln - u.start
                name = ident[1] if ident[0] != "ext" else ident[1][-1]
                lines[i] = lines[i][:c0] + name.encode() + lines[i][c1:]
            for r in u.refs:
                if r[0] == "ext":
                    _, name, spec = r
                    bind(name, spec)
                    ext.add((name, spec))
                    continue
                g = fam_of[r]
                if g == fam:
                    if r not in {(x.file, n) for x in units for n in x.names}:
                        raise SystemExit(f"{fam}: {r} missing")
                    continue
            text = b"".join(lines).decode()
            # a name read through an old module object, or imported from an old file, keeps
            # its local spelling: import it under that spelling
            chunks.append(text)
        for u in units:
            for r in u.refs:
                if r[0] == "ext" or fam_of[r] == fam:
                    continue
                g = fam_of[r]
                # local spelling: alias of the old import if the unit's file imported it renamed
                spell = r[1]
                for alias, imp in data[u.file][2].items():
                    if imp[0] == "from" and imp[1] in oldmods and resolve(u.file, alias) == r:
                        spell = alias
                bind(spell, r)
                (top_imp if ORDER.index(g) < ORDER.index(fam) else bottom_imp)[g].add(
                    (r[1], spell))
        report[fam] = (units, top_imp, bottom_imp, ext)
        yield fam, chunks, top_imp, bottom_imp, ext, units


def render_imports(ext):
    plain, froms = set(), defaultdict(set)
    for name, spec in ext:
        if spec[0] == "module":
            plain.add(f"import {spec[1]}" + (f" as {name}" if name != spec[1].split('.')[0] else ""))
        else:
            froms[spec[1]].add((spec[2], name))
    lines = sorted(plain)
    for mod in sorted(froms):
        for attr, name in sorted(froms[mod]):
            lines.append(f"from {mod} import {attr}" + (f" as {name}" if name != attr else ""))
    return lines


def render_oplib(imps):
    lines = []
    for g in sorted(imps):
        for attr, name in sorted(imps[g]):
            lines.append(f"from torcia._oplib.{g} import {attr}" + (f" as {name}" if name != attr else ""))
    return lines


if __name__ == "__main__":
    cfg = runpy.run_path(sys.argv[1])
    docs = cfg["DOCS"]
    target = CORE / "_oplib"
    target.mkdir(exist_ok=True)
    for fam, chunks, top, bottom, ext, units in main(sys.argv[1]):
        body = "\n\n".join(c.rstrip("\n") + "\n" for c in chunks)
        head = f'"""{docs[fam]}"""\n\nfrom __future__ import annotations\n\n'
        imps = render_imports(ext) + render_oplib(top)
        text = head + "\n".join(imps) + "\n\n\n" + body
        if bottom:
            text += ("\n\n# the families below import this one first: their names are bound once "
                     "it has loaded\n" + "\n".join(l + "  # noqa: E402" for l in render_oplib(bottom)) + "\n")
        (target / f"{fam}.py").write_text(text)
        print(fam, len(text.splitlines()), "lines;", "bottom:", sorted(bottom))
