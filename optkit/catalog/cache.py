"""The compiled catalog cache: what a loader validated last time, if nothing it depends on changed.

Parsing and validating every YAML file costs more than planning from them, so a loader stores
its result (records of what it validated, ``optkit.catalog.frozen``, and line maps, pickled) in
``cache_dir()/catalog/<name>.pickle`` and uses it again while its key still matches; a warm load
therefore imports neither pydantic nor YAML. The key is a sha256 of the bytes and relative path
of every file under the loader's folder, of optkit's own validating code, and of Python's version
and the installed files of pydantic, pydantic-core, PyYAML and packaging (their names, sizes and
modification times, read without importing them): an edited, added or removed data file, another
optkit or another library version never meets an old entry. Reading every file for the key costs a
tenth of a warm plan, so the key last computed for a folder is kept beside its entry (signed, like
the entries) under a digest of the files' names, sizes, inodes and modification and change times:
while none of those moved, the key is taken from there without reading the files. A file changed
in the last two seconds is always read (its times may not show a second change within their
resolution), and the change time cannot be set back, so an edit that keeps size and modification
time is still seen.

An entry is trusted only if it is whole and was written by optkit with this cache's secret (an
HMAC-SHA256 over key and payload; the secret is a random file beside the entries, readable by its
owner only), and it is unpickled by a loader that can build optkit's records, enums and
dataclasses, dates, plain containers and the validator functions registered with
``schema_function``, nothing else. Whatever is wrong with the cache (missing, stale, corrupt,
truncated, foreign, unreadable, unwritable) the loader validates the files as if there were none:
the cache is never needed for correctness, and since only a successful load is stored, errors
always come from validating the files themselves.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import io
import os
import pickle
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

from optkit.catalog.paths import cache_dir

T = TypeVar("T")
F = TypeVar("F", bound=Callable)
MAGIC = b"optkit catalog cache 2\n"
_DIGEST = 32  # bytes of a sha256 key and of its HMAC
_DATES = {"date", "datetime", "time", "timedelta", "timezone"}
_CONTAINERS = {"list": list, "dict": dict, "tuple": tuple, "set": set, "frozenset": frozenset}  # default factories
_LIBRARIES = ("pydantic", "pydantic_core", "yaml", "packaging")  # what validates, besides optkit
_PACKAGE = Path(__file__).resolve().parent.parent  # optkit/
_SCHEMA_FUNCTIONS: set = set()


def schema_function(function: F) -> F:
    """Register a validator function (or callable validator class) that a cached pydantic-core
    schema may refer to (by name)."""
    _SCHEMA_FUNCTIONS.add(function)
    return function


def cached(name: str, folder: Path | None, build: Callable[[], T], code: tuple[str, ...] = (),
           inputs: bytes = b"") -> T:
    """``build()``, or the value it returned before for the same files under ``folder``.

    ``name`` is the entry (one per loader; a new key replaces the old value). ``code`` names
    further optkit source files (relative to the package) that ``build`` validates with, besides
    ``optkit/catalog/``; ``inputs`` is whatever else ``build`` reads (the key covers its bytes);
    with no ``folder`` the key is the code and the inputs alone. Exceptions of ``build``
    propagate, and nothing is stored.
    """
    try:
        stats = _stat_digest(folder, code, inputs)
        known = _known_key(name, stats)
        key = known or folder_key(folder, code, inputs)
    except OSError:  # an unreadable file: validating reports it
        return build()
    found = _read(name, key)
    if found is not None:
        if known is None:
            _remember_key(name, stats, key)
        return found
    value = build()
    if _unchanged(folder, code, inputs, key):  # else the value may mix old and new files: do not store it
        _write(name, key, value)
        _remember_key(name, stats, key)
    return value


_SETTLED_NS = 2_000_000_000
"""A file changed less than this long ago may change again within its timestamps' resolution: it is read."""


def _stat_digest(folder: Path | None, code: tuple[str, ...], inputs: bytes) -> bytes | None:
    """sha256 of what names the files under ``folder`` without reading them (path, type, size, inode,
    modification and change times), of the code fingerprint and of ``inputs``; None without a folder or
    when a file changed in the last two seconds. A shortcut to ``folder_key`` only (``_known_key``):
    the key itself is always computed from the files' bytes."""
    if folder is None or not os.path.isdir(folder):
        return None
    now = time.time_ns()
    digest = hashlib.sha256(b"stat\0" + _fingerprint(code) + hashlib.sha256(inputs).digest())
    for rel, st in _stats(str(folder), ""):
        if now - max(st.st_mtime_ns, st.st_ctime_ns) < _SETTLED_NS:
            return None
        digest.update(f"{rel}\0{st.st_mode >> 12}\0{st.st_size}\0{st.st_ino}\0{st.st_dev}\0{st.st_mtime_ns}\0"
                      f"{st.st_ctime_ns}\0".encode(errors="surrogateescape"))
    return digest.digest()


def _stats(folder: str, prefix: str):
    """(relative path, lstat) of every entry under ``folder`` (directories too: an added or removed
    entry changes its directory's times), sorted, symlinks not followed; plain strings, no ``Path``s,
    since this runs on every warm load."""
    with os.scandir(folder) as found:
        entries = sorted(found, key=lambda entry: entry.name)
    for entry in entries:
        rel = prefix + entry.name
        st = entry.stat(follow_symlinks=False)
        yield rel, st
        if entry.is_dir(follow_symlinks=False):
            yield from _stats(entry.path, rel + "/")


def _known_key(name: str, stats: bytes | None) -> bytes | None:
    """The content key last computed for files with these ``stats``, if this cache signed it."""
    if stats is None:
        return None
    try:
        data = (_folder() / f"{name}.key").read_bytes()
        secret = _secret(create=False)
    except OSError:
        return None
    stored, key, mac = data[:_DIGEST], data[_DIGEST:2 * _DIGEST], data[2 * _DIGEST:]
    if secret is None or len(data) != 3 * _DIGEST or stored != stats:
        return None
    return key if hmac.compare_digest(mac, hmac.new(secret, b"key\0" + stats + key, "sha256").digest()) else None


def _remember_key(name: str, stats: bytes | None, key: bytes) -> None:
    """Sign and keep ``stats`` → ``key`` for the next load (no error if the cache cannot be written)."""
    if stats is None:
        return
    try:
        secret = _secret(create=False)
        if secret is None:
            return
        mac = hmac.new(secret, b"key\0" + stats + key, "sha256").digest()
        temporary = _folder() / f".{name}.key.{os.getpid()}.tmp"
        try:
            temporary.write_bytes(stats + key + mac)
            os.replace(temporary, _folder() / f"{name}.key")
        finally:
            temporary.unlink(missing_ok=True)
    except OSError:
        return


def _unchanged(folder: Path | None, code: tuple[str, ...], inputs: bytes, key: bytes) -> bool:
    try:
        return folder_key(folder, code, inputs) == key
    except OSError:
        return False


def folder_key(folder: Path | None, code: tuple[str, ...] = (), inputs: bytes = b"") -> bytes:
    """sha256 of the code fingerprint, ``inputs``, and every file under ``folder`` (relative path and
    bytes; a symlink by its target, since the loaders refuse symlinks)."""
    digest = hashlib.sha256(_fingerprint(code))
    digest.update(hashlib.sha256(inputs).digest())
    for path in _files(folder) if folder is not None else ():
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            digest.update(f"{rel}\0symlink\0{os.readlink(path)}\0".encode(errors="surrogateescape"))
            continue
        data = path.read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode(errors="surrogateescape"))
        digest.update(data)
    return digest.digest()


def _files(folder: Path) -> list[Path]:
    """Every file under ``folder``, sorted, and every symlink (to a file or a directory, not followed)."""
    if not folder.is_dir():
        return []
    found = []
    for parent, dirs, files in os.walk(folder):
        dirs.sort()
        found += [Path(parent, name) for name in sorted(files + [d for d in dirs if Path(parent, d).is_symlink()])]
    return found


@lru_cache(maxsize=None)
def _fingerprint(code: tuple[str, ...]) -> bytes:
    """What, besides the files, decides a loader's result: optkit's validating code and its libraries."""
    digest = hashlib.sha256(_common_fingerprint())
    _add_sources(digest, [_PACKAGE / name for name in code])
    return digest.digest()


@lru_cache(maxsize=None)
def _common_fingerprint() -> bytes:
    """The part every entry shares: the libraries, ``optkit/catalog/``, the package face."""
    digest = hashlib.sha256(_libraries())
    sources = sorted((_PACKAGE / "catalog").glob("*.py")) + [_PACKAGE / "__init__.py", _PACKAGE / "errors.py"]
    _add_sources(digest, sources)
    return digest.digest()


def _add_sources(digest, paths: list[Path]) -> None:
    for path in paths:
        digest.update(f"{path.relative_to(_PACKAGE).as_posix()}\0".encode())
        digest.update(path.read_bytes())


@lru_cache(maxsize=None)
def _libraries() -> bytes:
    """Python's version and the installed files of the libraries that validate (importing none)."""
    from importlib.util import find_spec

    found = [sys.version]
    for name in _LIBRARIES:
        spec = find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            with os.scandir(folder) as entries:
                files = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in entries if e.is_file())
            found.append((name, files))
    return repr(found).encode()


# --------------------------------------------------------------------------- entries


def _read(name: str, key: bytes):
    """The value stored under ``key``, or None when there is no usable entry."""
    try:
        data = (_folder() / f"{name}.pickle").read_bytes()
        secret = _secret(create=False)
    except OSError:
        return None
    body = data[len(MAGIC):]
    stored_key, mac, payload = body[:_DIGEST], body[_DIGEST:2 * _DIGEST], body[2 * _DIGEST:]
    if secret is None or not data.startswith(MAGIC) or stored_key != key:
        return None
    if not hmac.compare_digest(mac, hmac.new(secret, key + payload, "sha256").digest()):
        return None
    return _unpickle(payload)


def _write(name: str, key: bytes, value) -> None:
    """Store ``value`` under ``key``; a cache that cannot be written is no cache (and no error)."""
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return
    if _unpickle(payload) is None:  # holds something the restricted loader refuses: never readable
        return
    try:
        folder = _folder()
        folder.mkdir(parents=True, exist_ok=True)
        secret = _secret(create=True)
        mac = hmac.new(secret, key + payload, "sha256").digest()
        temporary = folder / f".{name}.{os.getpid()}.tmp"
        try:
            temporary.write_bytes(MAGIC + key + mac + payload)
            os.replace(temporary, folder / f"{name}.pickle")  # readers see the old entry or the new one, whole
        finally:
            temporary.unlink(missing_ok=True)
    except OSError:
        return


def _folder() -> Path:
    try:
        return cache_dir() / "catalog"
    except (RuntimeError, KeyError) as exc:  # no home directory to put ~/.cache in
        raise OSError(str(exc)) from None


def _secret(create: bool) -> bytes | None:
    """This cache's HMAC secret; None if there is none. ``create`` makes one (or replaces a damaged one)."""
    path = _folder() / "secret"
    try:
        secret = path.read_bytes()
    except FileNotFoundError:
        secret = b""
    if len(secret) == _DIGEST or not create:
        return secret if len(secret) == _DIGEST else None
    secret = os.urandom(_DIGEST)
    temporary = path.with_name(f".secret.{os.getpid()}.tmp")
    with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        out.write(secret)
    os.replace(temporary, path)  # a racing writer's entries then fail their HMAC once and are rebuilt
    return secret


class _DataOnly(pickle.Unpickler):
    """Builds optkit's records and data classes, dates, containers and registered validator
    functions, and refuses any other global (other functions, os, …)."""

    def find_class(self, module: str, name: str):
        if module == "datetime" and name in _DATES:
            return getattr(datetime, name)
        if module == "builtins" and name in _CONTAINERS:
            return _CONTAINERS[name]
        if module.startswith("optkit.") and module in sys.modules:
            found = getattr(sys.modules[module], name, None)
            if (isinstance(found, type) and _is_data_class(found)) or _is_schema_function(found):
                return found
        raise pickle.UnpicklingError(f"the catalog cache may not build {module}.{name}")


def _is_data_class(cls: type) -> bool:
    import enum

    from optkit.catalog.frozen import Record, Shape
    from optkit.value import is_value

    # a dataclass has __dataclass_fields__ (what dataclasses.is_dataclass reads; importing dataclasses
    # here would cost the warm plan the module it otherwise never imports)
    return is_value(cls) or issubclass(cls, (Record, Shape, enum.Enum)) or hasattr(cls, "__dataclass_fields__")


def _is_schema_function(found) -> bool:
    try:
        return found in _SCHEMA_FUNCTIONS
    except TypeError:  # unhashable: not a function
        return False


def _unpickle(payload: bytes):
    try:
        return _DataOnly(io.BytesIO(payload)).load()
    except Exception:  # noqa: BLE001 - any failure means "no usable entry", never an error
        return None
