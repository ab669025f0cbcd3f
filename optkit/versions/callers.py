"""Which callers of the code a patch changes are new in the release it is ported to (``optkit port``).

A three-way merge sees lines, not contracts. A patch may change what a function returns or does to
its arguments, and the new release may have a new caller that depends on the old behaviour: the
merge is clean and the port is wrong (0.30.0rc1's DeepSeek-V4 DSpark ropes ``kv`` in place through
``ComplexExpRotaryEmbedding.forward`` and drops the return value; the 0.23 patch of
``rope-dsv4-return-view`` removes that in-place copy). This module finds such callers for a person
to read; it does not judge them.

1. The changed definitions: for each changed old line of each hunk (``Hunk.changed_old_lines``)
   against the ``--from`` file, the innermost def or class around it (``optkit.versions.moved``).
2. How each is called (``ast`` ``Call`` nodes by the name of their ``func``, a ``Name`` or an
   ``Attribute``): a function ``f`` as ``f(`` or ``mod.f(``; a method ``C.m`` as ``.m(``; ``C.__init__``
   and a class ``C`` as ``C(``; ``C.forward`` and ``C.__call__`` (a module is called, not its forward)
   also as a call of every name the release assigns a ``C(…)`` to (``self.rotary_emb = C(…)`` makes
   ``rotary_emb(`` and ``self.rotary_emb(`` callers).
3. The call sites of those names in the ``--to`` tree's package (the top folder of the patched file,
   ``vllm_ascend/``; ``tests`` folders and ``test_*.py`` files left out: they do not run when serving)
   whose file and enclosing definition (by name, not line) have no such call in the ``--from`` tree:
   the new callers. A caller that returns the call's value as it is (``return f(…)``) is a wrapper that
   passes the contract on, so the wrapper's new callers are listed too (``via``; one level: the wrapper
   may itself be old).

Noise, cut where it is principled: a method name defined more than ``COMMON_DEFS`` times in the
``--to`` package (``forward``, ``apply``, ``__init__``) says nothing about which class ``.m(`` calls,
so its attribute calls are not searched and the review says so (``not_searched``); dunder methods other
than ``__init__`` and ``__call__`` are called by Python itself and are not searched either.
"""

from __future__ import annotations

import ast
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from optkit.catalog.patchfile import Section
from optkit.versions.moved import Definition, definitions, innermost, parse

COMMON_DEFS = 3
"""A method name with more definitions than this in the ``--to`` package is too common to search as ``.name(``."""
MAX_CALLERS = 10
"""Callers listed per patch; the rest are counted."""
INSTANCE_CALLS = ("forward", "__call__")


@dataclass(frozen=True)
class Caller:
    """A call site in the ``--to`` tree of a definition the patch changes, new in that release."""

    path: str
    line: int
    enclosing: str
    """The definition the call is in (qualified name), or ``<module>``."""
    changed: str
    """The changed definition it calls (qualified name)."""
    calls: str
    """The name called (``forward`` via an instance: the instance's name)."""
    use: str
    """What the caller does with the result: ``dropped`` (a statement of its own), ``returned`` or ``used``."""
    via: str = ""
    """The wrapper it calls the changed definition through (a new caller that returns its result)."""

    def words(self) -> str:
        how = f"calls {self.calls}()" + (", result unused" if self.use == "dropped" else "")
        via = f" via {self.via}" if self.via else ""
        return f"{self.path}:{self.line} ({self.enclosing}{via}; {how})"


@dataclass(frozen=True)
class Review:
    """What a patch changes and who newly calls it in the ``--to`` release."""

    changed: tuple[str, ...]
    callers: tuple[Caller, ...]
    """The first ``MAX_CALLERS`` new callers, sorted (path, line)."""
    more: int = 0
    """New callers not listed."""
    not_searched: tuple[str, ...] = ()
    """Changed definitions whose calls were not searched, and why."""

    @property
    def flagged(self) -> bool:
        return bool(self.callers)

    def words(self, target: str) -> str:
        if not self.callers:
            return ""
        names = ", ".join(sorted({c.changed for c in self.callers}))
        more = f"; and {self.more} more" if self.more else ""
        return f"review: new callers of {names} in {target}: " + "; ".join(c.words() for c in self.callers) + more


# --------------------------------------------------------------------------- one tree's calls


@dataclass(frozen=True)
class _Site:
    path: str
    line: int
    enclosing: str
    use: str


@dataclass(frozen=True)
class _Index:
    calls: dict[tuple[str, str], tuple[_Site, ...]]
    """(``name`` or ``attr``, called name) → call sites."""
    defs: Counter
    """Function and method names → how many definitions."""
    holds: dict[tuple[str, str], frozenset[str]]
    """(file, name) → the called names whose results the file assigns to that name (``self.x = C()``)."""
    files: frozenset[str]

    def instance_names(self, cls: str) -> list[str]:
        """The names some file assigns a ``cls(…)`` to."""
        return sorted({name for (_, name), called in self.holds.items() if cls in called})


def _skipped(rel: str) -> bool:
    parts = rel.split("/")
    return "tests" in parts or parts[-1].startswith("test_")


@lru_cache(maxsize=8)
def _index(root: Path, top: str) -> _Index:
    calls: dict[tuple[str, str], list[_Site]] = defaultdict(list)
    defs: Counter = Counter()
    holds: dict[tuple[str, str], set[str]] = defaultdict(set)
    files = set()
    for path in sorted((root / top).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or _skipped(rel):
            continue
        try:
            tree = parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        files.add(rel)
        _File(rel, calls, defs, holds).visit(tree)
    return _Index({k: tuple(v) for k, v in calls.items()}, defs, {k: frozenset(v) for k, v in holds.items()},
                  frozenset(files))


def _called(func: ast.AST) -> tuple[str, str] | None:
    if isinstance(func, ast.Name):
        return "name", func.id
    if isinstance(func, ast.Attribute):
        return "attr", func.attr
    return None


class _File(ast.NodeVisitor):
    def __init__(self, rel: str, calls, defs, holds):
        self.rel, self.calls, self.defs, self.holds = rel, calls, defs, holds
        self.scope: list[str] = []
        self.use: dict[int, str] = {}

    def _define(self, node) -> None:
        if not isinstance(node, ast.ClassDef):
            self.defs[node.name] += 1
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _define

    def visit_Expr(self, node: ast.Expr) -> None:
        self.use[id(node.value)] = "dropped"
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.use[id(node.value)] = "returned"
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign([node.target], node.value)
        self.generic_visit(node)

    def _assign(self, targets, value) -> None:
        called = _called(value.func) if isinstance(value, ast.Call) else None
        for target in targets:
            if isinstance(target, (ast.Name, ast.Attribute)):
                name = target.id if isinstance(target, ast.Name) else target.attr
                self.holds[(self.rel, name)].add(called[1] if called else "")

    def visit_Call(self, node: ast.Call) -> None:
        called = _called(node.func)
        if called is not None:
            site = _Site(self.rel, node.lineno, ".".join(self.scope) or "<module>", self.use.get(id(node), "used"))
            self.calls[called].append(site)
        self.generic_visit(node)


# --------------------------------------------------------------------------- a patch's review


@dataclass(frozen=True)
class _Pattern:
    """One way a changed definition is called: ``kind`` (``name`` or ``attr``) and the name; ``instance_of``
    for a call through an instance of that class."""

    kind: str
    name: str
    instance_of: str = ""


def changed_definitions(section: Section, base_text: str) -> list[Definition]:
    """The innermost def or class around each changed old line of the section's hunks, in file order."""
    defs = definitions(base_text, section.path)
    found = {}
    for hunk in section.hunks:
        for line in hunk.changed_old_lines:
            d = innermost(defs, line)
            if d is not None:
                found[d.qualname] = d
    return sorted(found.values(), key=lambda d: (d.start, d.qualname))


def _both(name: str, instance_of: str = "") -> list[_Pattern]:
    return [_Pattern("name", name, instance_of), _Pattern("attr", name, instance_of)]


def _patterns(qualname: str, is_class: bool, classes: set[str], index: _Index) -> tuple[list[_Pattern], str]:
    """How a definition is called, and why some of its calls are not searched."""
    parent, _, name = qualname.rpartition(".")
    if is_class:
        return _both(name), ""
    if parent not in classes:
        return ([_Pattern("name", name)] if parent else _both(name)), ""
    owner = parent.rpartition(".")[2]
    if name == "__init__":
        return _both(owner), ""
    out = [p for n in index.instance_names(owner) for p in _both(n, owner)] if name in INSTANCE_CALLS else []
    if name.startswith("__") and name.endswith("__") and name not in INSTANCE_CALLS:
        return out, f"{qualname}: Python calls {name} itself"
    if index.defs[name] > COMMON_DEFS:
        return out, (f"{qualname}: .{name}() calls not searched ({index.defs[name]} definitions of {name} in the "
                     "release: too common to tell which one a call means)")
    return out + [_Pattern("attr", name)], ""


def review(sections: list[tuple[Section, str]], source_tree: Path, target_tree: Path) -> Review:
    """The review of a patch whose sections (with their ``--from`` file texts) carry over to ``target_tree``."""
    changed, found, skipped = [], [], []
    for section, base_text in sections:
        if not section.path.endswith(".py") or section.old_path is None:
            continue
        top = section.path.split("/", 1)[0] if "/" in section.path else "."
        new, old = _index(target_tree.resolve(), top), _index(source_tree.resolve(), top)
        classes = {d.qualname for d in definitions(base_text, section.path) if d.is_class}
        for d in changed_definitions(section, base_text):
            changed.append(d.qualname)
            patterns, why = _patterns(d.qualname, d.is_class, classes, new)
            skipped += [why] if why else []
            found += [Caller(s.path, s.line, s.enclosing, d.qualname, p.name, s.use) for p, s in _new_sites(patterns, new, old)]
            for p in patterns:  # wrappers: ``return f(…)`` passes the contract on to the wrapper's callers
                for s in _sites(p, new):
                    if s.use == "returned" and s.enclosing != "<module>":
                        found += _via(s, d.qualname, new, old)
    unique = sorted(set(found), key=lambda c: (c.path, c.line, c.changed, c.calls, c.via))
    return Review(tuple(dict.fromkeys(changed)), tuple(unique[:MAX_CALLERS]), max(0, len(unique) - MAX_CALLERS),
                  tuple(dict.fromkeys(skipped)))


def _sites(pattern: _Pattern, index: _Index):
    """The call sites of ``pattern``; for a call through an instance name, not in a file that assigns that
    name only from other calls (there it holds something else)."""
    for site in index.calls.get((pattern.kind, pattern.name), ()):
        held = index.holds.get((site.path, pattern.name))
        if pattern.instance_of and held and pattern.instance_of not in held:
            continue
        yield site


def _new_sites(patterns: list[_Pattern], new: _Index, old: _Index):
    """Call sites of ``patterns`` in ``new`` whose file and enclosing definition make no such call in ``old``
    (for a file ``old`` does not have: whose enclosing definition makes none anywhere, since files move)."""
    for pattern in patterns:
        before = list(_sites(pattern, old))
        here, anywhere = {(s.path, s.enclosing) for s in before}, {s.enclosing for s in before}
        for site in _sites(pattern, new):
            moved = site.path not in old.files and site.enclosing in anywhere and site.enclosing != "<module>"
            if (site.path, site.enclosing) not in here and not moved:
                yield pattern, site


def _via(wrapper: _Site, changed: str, new: _Index, old: _Index) -> list[Caller]:
    """New callers of a wrapper (a definition that returns the changed definition's result)."""
    name = wrapper.enclosing.rpartition(".")[2]
    if "." not in wrapper.enclosing:
        patterns = _both(name)
    else:
        patterns = [_Pattern("attr", name)] if new.defs[name] <= COMMON_DEFS else []
    return [Caller(s.path, s.line, s.enclosing, changed, p.name, s.use, via=wrapper.enclosing)
            for p, s in _new_sites(patterns, new, old) if s.enclosing != wrapper.enclosing]
