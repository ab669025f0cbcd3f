"""The knob registry of a vllm-ascend tree, read statically (``ast``): nothing is imported or run.

Three kinds of knob:

- **env vars**: the keys of ``env_variables`` in ``vllm_ascend/envs.py``, and the names the rest
  of ``vllm_ascend/`` reads directly (``os.getenv("X")``, ``os.environ["X"]``, ``"X" in os.environ``);
- **additional_config keys**, nested ones too, and whether unknown keys are ignored or rejected:
  up to 0.26 ``AscendConfig.__init__`` reads the dict with ``.get`` and hands sub-dicts to config
  classes (``Cls(**sub)`` takes the ``__init__`` parameters, and swallows the rest when it has
  ``**kwargs``; ``Cls(sub)`` reads ``sub.get(...)``); from 0.27.1rc1 the classes are pydantic
  dataclasses (``@config``, ``extra="forbid"``) whose fields are the keys, plus the keys the
  factory ``init_ascend_config`` strips before validation (``_NON_USER_INPUT_KEYS``);
- **compilation keys**: the ``ascend_compilation_config`` section of the above.

``scan_knobs(root)`` returns plain data (``Registry``), which ``optkit.versions.scan`` writes
into ``versions/<version>.yaml``. Every entry names the file and line it was read from.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
ASCEND_CONFIG = "vllm_ascend/ascend_config.py"
ENVS = "vllm_ascend/envs.py"


@dataclass
class Section:
    """One level of additional_config: its keys (a key is a source string or a nested Section)."""

    source: str
    unknown_keys: str = "ignored"
    """What the release does with a key it does not know here: ``ignored`` or ``rejected``."""
    keys: dict[str, "str | Section"] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    """Keys that fall back to an env var when unset (key → env var name)."""
    factory: list[str] = field(default_factory=list)
    """Keys the factory consumes before validation (strict releases only)."""

    def add(self, key: str, source: str) -> None:
        self.keys.setdefault(key, source)

    def section(self, key: str, source: str) -> "Section":
        current = self.keys.get(key)
        if not isinstance(current, Section):
            current = Section(current if isinstance(current, str) else source)
            self.keys[key] = current
        return current


def unread_at(top, dotted: str):
    """Where a release does not read the ``additional_config`` key ``dotted`` (``top``: its ``Section``, or the
    frozen record of one): (depth of the first unknown part, the section it is unknown in), or None when the release
    reads the key (a plain key holds its whole value, so what lies below it is read with it). Both a plan (carrying a
    page's keys) and ``bundle check`` decide with it."""
    section, parts = top, dotted.split(".")
    for depth, key in enumerate(parts):
        known = section.keys.get(key)
        if known is None:
            return depth, section
        if isinstance(known, str):
            return None
        section = known
    return None


@dataclass
class Registry:
    """Every knob of one tree."""

    env: dict[str, str] = field(default_factory=dict)
    """envs.py entries: name → file:line."""
    env_read: dict[str, str] = field(default_factory=dict)
    """Names read directly elsewhere in vllm_ascend/ (not in envs.py): name → first file:line."""
    additional_config: Section = field(default_factory=lambda: Section(ASCEND_CONFIG))


def scan_knobs(root: Path) -> Registry:
    """The knob registry of the vllm-ascend tree at ``root``."""
    root = Path(root)
    registry = Registry(env=_envs_py(root), env_read=_direct_env_reads(root))
    for name in registry.env:
        registry.env_read.pop(name, None)
    if not (root / ASCEND_CONFIG).is_file():
        return registry
    module = _parse(root, ASCEND_CONFIG)
    classes = _config_classes(module)
    if "AscendConfig" in classes:
        registry.additional_config = _strict_registry(root, module, classes)
        for key, env in _or_env_fallbacks(module).items():  # the legacy reader finds these on the way
            if key in registry.additional_config.keys:
                registry.additional_config.env.setdefault(key, env)
    else:
        registry.additional_config = _legacy_registry(root)
    return registry


def _or_env_fallbacks(module: ast.Module) -> dict[str, str]:
    """Top-level additional_config keys an ``or`` joins with one env var, read as one switch:
    ``validate(additional_config.get("K", False)) or os.getenv("ENV", "0") in ("1", "true")``
    (0.27.1rc1 on: ``enable_flashcomm1`` / VLLM_ASCEND_ENABLE_FLASHCOMM1)."""
    found: dict[str, str] = {}
    for node in ast.walk(module):
        if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)):
            continue
        keys = {got[1] for value in node.values for n in ast.walk(value)
                if (got := _get_key(n)) and _reads_additional_config(got[0])}
        envs = {name for value in node.values for n in ast.walk(value) if (name := _env_read(n))}
        if len(keys) == 1 and len(envs) == 1:
            found.setdefault(keys.pop(), envs.pop())
    return found


def _reads_additional_config(node: ast.AST) -> bool:
    """``additional_config`` itself, or ``(… .additional_config or {})``."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and node.values:
        node = node.values[0]
    return _is_additional_config(node)


def _parse(root: Path, rel: str) -> ast.Module:
    path = root / rel
    return ast.parse(path.read_text(encoding="utf-8", errors="replace"), rel)


def _where(rel: str, node: ast.AST) -> str:
    return f"{rel}:{node.lineno}"


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _name_of(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


# --------------------------------------------------------------------------- env vars


def _envs_py(root: Path) -> dict[str, str]:
    """Keys of the ``env_variables`` dict in envs.py."""
    if not (root / ENVS).is_file():
        return {}
    for node in _parse(root, ENVS).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if _name_of(target) == "env_variables" and isinstance(node.value, ast.Dict):
            return {k: _where(ENVS, key) for key in node.value.keys
                    if (k := _string(key)) is not None}
    return {}


def _env_read(node: ast.AST) -> str | None:
    """The env var name ``node`` reads: os.getenv("X"), os.environ.get("X"), os.environ["X"], "X" in os.environ."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "getenv" and _name_of(func.value) == "os":
            return _string(node.args[0])
        if (isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault")
                and _name_of(func.value) == "environ"):
            return _string(node.args[0])
    if isinstance(node, ast.Subscript) and _name_of(node.value) == "environ":
        return _string(node.slice)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
        if _name_of(node.comparators[0]) == "environ":
            return _string(node.left)
    return None


def _direct_env_reads(root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((root / "vllm_ascend").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "environ" not in text and "getenv" not in text:
            continue
        rel = path.relative_to(root).as_posix()
        try:
            module = ast.parse(text, rel)
        except SyntaxError:
            continue
        for node in ast.walk(module):
            name = _env_read(node)
            if name and ENV_NAME.match(name):
                where = _where(rel, node)
                if name not in found or _sort_key(where) < _sort_key(found[name]):
                    found[name] = where
    return dict(sorted(found.items()))


def _sort_key(where: str) -> tuple[str, int]:
    path, _, line = where.rpartition(":")
    return path, int(line)


# --------------------------------------------------------------------------- additional_config, 0.18 … 0.26


def _is_additional_config(node: ast.AST) -> bool:
    return _name_of(node) == "additional_config"


def _get_key(node: ast.AST) -> tuple[ast.AST, str] | None:
    """``(owner, key)`` of ``owner.get("key", ...)`` or ``owner["key"]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        key = _string(node.args[0])
        return (node.func.value, key) if key is not None else None
    if isinstance(node, ast.Subscript):
        key = _string(node.slice)
        return (node.value, key) if key is not None else None
    return None


def _top_key(node: ast.AST) -> tuple[str, str | None] | None:
    """``(key, env fallback)`` when ``node`` reads a top-level key of additional_config."""
    got = _get_key(node)
    if got and _is_additional_config(got[0]):
        return got[1], None
    if isinstance(node, ast.Call) and (_name_of(node.func) or "").endswith("_get_config_value") and len(node.args) > 1:
        if _is_additional_config(node.args[0]):
            key = _string(node.args[1])
            return (key, _string(node.args[2]) if len(node.args) > 2 else None) if key else None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
        if _is_additional_config(node.comparators[0]) and _string(node.left):
            return _string(node.left), None
    return None


def _legacy_registry(root: Path) -> Section:
    """additional_config as 0.18 … 0.26 read it: every module that names it, ``.get`` by ``.get``."""
    top = Section(_where(ASCEND_CONFIG, _class_node(_parse(root, ASCEND_CONFIG), "AscendConfig") or ast.Module()))
    for path in sorted((root / "vllm_ascend").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "additional_config" not in text:
            continue
        rel = path.relative_to(root).as_posix()
        try:
            _collect_legacy(ast.parse(text, rel), rel, top)
        except SyntaxError:
            continue
    return top


def _class_node(module: ast.AST, name: str) -> ast.ClassDef | None:
    return next((n for n in ast.walk(module) if isinstance(n, ast.ClassDef) and n.name == name), None)


def _collect_legacy(module: ast.Module, rel: str, top: Section) -> None:
    aliases: dict[str, str] = {}  # variable or attribute name -> the top-level key it holds
    for node in ast.walk(module):
        got = _top_key(node)
        if got is not None:
            top.add(got[0], _where(rel, node))
            if got[1]:
                top.env[got[0]] = got[1]
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            held = _top_key(node.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if held is not None and _name_of(target):
                    aliases[_name_of(target)] = held[0]
    classes = {node.name: node for node in ast.walk(module) if isinstance(node, ast.ClassDef)}
    for node in ast.walk(module):
        got = _get_key(node)
        if got and not _is_additional_config(got[0]):
            owner = _top_key(got[0])
            owner_key = owner[0] if owner else aliases.get(_name_of(got[0]) or "")
            if owner_key is not None:
                top.section(owner_key, _where(rel, node)).add(got[1], _where(rel, node))
        if isinstance(node, ast.Call) and _name_of(node.func) in classes:
            _class_keys(node, classes[_name_of(node.func)], aliases, rel, top)


def _held(node: ast.AST, aliases: dict[str, str]) -> str | None:
    got = _top_key(node)
    return got[0] if got else aliases.get(_name_of(node) or "")


def _class_keys(call: ast.Call, cls: ast.ClassDef, aliases: dict[str, str], rel: str, top: Section) -> None:
    """Keys a config class accepts: ``Cls(**sub)`` → its __init__ parameters (and ``kwargs.get``),
    unknown ones swallowed by ``**kwargs`` or a TypeError without it; ``Cls(sub, ...)`` → ``.get``
    / ``[...]`` on that parameter and a class-level ``_defaults`` dict."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return
    params = init.args.args[1:]
    for kw in call.keywords:
        held = _held(kw.value, aliases)
        if kw.arg is None and held is not None:
            section = top.section(held, _where(rel, call))
            section.source = _where(rel, cls)
            for arg in [*params, *init.args.kwonlyargs]:
                section.add(arg.arg, _where(rel, arg))
            if init.args.kwarg is not None:
                for key, where in _gets_on(init, init.args.kwarg.arg, rel).items():
                    section.add(key, where)
            else:
                section.unknown_keys = "rejected"
    for index, arg in enumerate(call.args):
        held = _held(arg, aliases)
        if held is not None and index < len(params):
            section = top.section(held, _where(rel, call))
            section.source = _where(rel, cls)
            for key, where in {**_defaults_keys(cls, rel), **_gets_on(cls, params[index].arg, rel)}.items():
                section.add(key, where)
            if _rejects_unknown(init, params[index].arg):
                section.unknown_keys = "rejected"


def _gets_on(scope: ast.AST, name: str, rel: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in ast.walk(scope):
        got = _get_key(node)
        if got and isinstance(got[0], ast.Name) and got[0].id == name:
            found.setdefault(got[1], _where(rel, node))
    return found


def _defaults_keys(cls: ast.ClassDef, rel: str) -> dict[str, str]:
    for node in cls.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(_name_of(t) == "_defaults" for t in targets) and isinstance(node.value, ast.Dict):
            return {k: _where(rel, key) for key in node.value.keys if (k := _string(key)) is not None}
    return {}


def _rejects_unknown(init: ast.FunctionDef, param: str) -> bool:
    """``for key, value in param.items(): … raise`` — a hand-written unknown-key check."""
    for node in ast.walk(init):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
            owner = node.iter.func.value if isinstance(node.iter.func, ast.Attribute) else None
            if _name_of(owner) == param and any(isinstance(n, ast.Raise) for n in ast.walk(node)):
                return True
    return False


# --------------------------------------------------------------------------- additional_config, 0.27.1rc1 …


def _config_classes(module: ast.Module) -> dict[str, ast.ClassDef]:
    """Classes decorated with ``@config`` / ``@config(...)`` (vllm_ascend.config_utils.config)."""
    out = {}
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if _name_of(target) == "config":
                    out[node.name] = node
    return out


def _forbids_extra(node: ast.AST) -> bool:
    """``ConfigDict(extra="forbid")`` anywhere in ``node``."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and _name_of(call.func) == "ConfigDict":
            if any(kw.arg == "extra" and _string(kw.value) == "forbid" for kw in call.keywords):
                return True
    return False


def _strict_registry(root: Path, module: ast.Module, classes: dict[str, ast.ClassDef]) -> Section:
    """additional_config as the pydantic ``@config`` classes define it (0.27.1rc1 on)."""
    utils = root / "vllm_ascend" / "config_utils.py"
    decorator_forbids = utils.is_file() and _forbids_extra(ast.parse(utils.read_text(encoding="utf-8")))
    top = _config_section(classes["AscendConfig"], classes, decorator_forbids, set())
    for key, where in _factory_keys(module).items():
        if key not in top.keys and not key.startswith("_"):
            top.add(key, where)
            top.factory.append(key)
    top.factory.sort()
    return top


def _config_section(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], decorator_forbids: bool,
                    seen: set[str]) -> Section:
    strict = decorator_forbids or _forbids_extra(cls)
    section = Section(_where(ASCEND_CONFIG, cls), "rejected" if strict else "ignored")
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name.startswith("_") or "ClassVar" in ast.unparse(node.annotation) or _init_false(node.value):
            continue
        nested = next((c for c in _annotation_names(node.annotation) if c in classes and c not in seen), None)
        if nested is not None:
            inner = _config_section(classes[nested], classes, decorator_forbids, seen | {cls.name})
            inner.source = _where(ASCEND_CONFIG, node)
            section.keys[name] = inner
        else:
            section.add(name, _where(ASCEND_CONFIG, node))
    return section


def _annotation_names(annotation: ast.AST) -> list[str]:
    names = [n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)]
    names += [s for n in ast.walk(annotation) if (s := _string(n))]  # "ForwardRef" strings
    return names


def _init_false(value: ast.AST | None) -> bool:
    return (isinstance(value, ast.Call) and _name_of(value.func) == "field"
            and any(kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False
                    for kw in value.keywords))


def _factory_keys(module: ast.Module) -> dict[str, str]:
    """The string set assigned to ``_NON_USER_INPUT_KEYS`` in ``init_ascend_config``."""
    for node in ast.walk(module):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_name_of(t) == "_NON_USER_INPUT_KEYS" for t in targets) and isinstance(node.value, ast.Set):
                return {k: _where(ASCEND_CONFIG, elt) for elt in node.value.elts if (k := _string(elt)) is not None}
    return {}
