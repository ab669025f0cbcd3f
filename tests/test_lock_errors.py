"""``plan --from-lock`` on a damaged or foreign lock: every problem in optkit's ``file:line: field: …`` form.

Each case writes a small lock (sorted keys, two-space indent, as optkit writes one) with one thing
wrong, and checks the exact message; where the words are JSON's or pydantic's own, only optkit's
part (the location and the advice) is checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from optkit import __version__
from optkit.bundle.lock import catalog_sha256, profiles_sha256, request_from_lock
from optkit.cli.main import cli
from optkit.errors import BundleError
from optkit.resolve.plan import load_workspace
from optkit.resolve.request_record import parse_request
from optkit.tree.patchset import REWRITE

WORKSPACE = load_workspace()
REQUEST = parse_request({"model": "qwen3.5-35b", "mtp": True}).dump(mode="json", by_alias=True)
OTHER = "the lock was written by optkit 9.0.0, this is optkit {}: plan it with that optkit, or write the bundle again " \
        "with this one (`optkit plan ... -o DIR`)".format(__version__)


def good_lock() -> dict:
    return {"lock_version": 1, "request": dict(REQUEST),
            "optkit": {"version": __version__, "catalog_sha256": catalog_sha256(WORKSPACE.root),
                       "profiles_sha256": profiles_sha256(WORKSPACE.root)}}


def _set(**changes):
    """An edit of the lock: ``request__tp="x"`` sets lock["request"]["tp"]; the value ``DELETE`` removes the key."""
    def edit(lock):
        for dotted, value in changes.items():
            *parents, last = dotted.split("__")
            target = lock
            for key in parents:
                target = target[key]
            if value is DELETE:
                del target[last]
            else:
                target[last] = value
        return lock
    return edit


DELETE = object()

# (id, edit of the lock (or the text), the key whose line the message names, the message after "file:line: ")
CASES = [
    ("wrong-type", _set(request__tp="x"), '"tp"', "request.tp: expected an integer from 1 to 1024, got 'x'\n" + REWRITE),
    ("wrong-type-levels", _set(request__concurrency="1,x"), '"concurrency"',
     "request.concurrency: '1,x': give comma-separated integers, e.g. 1,4,8\n" + REWRITE),
    ("unknown-key", _set(request__tpp=4), '"tpp"', "request.tpp: unknown field 'tpp' (did you mean 'tp'?)\n" + REWRITE),
    ("missing-key", _set(request__mtp=DELETE), '"request"', "request.mtp: missing required field 'mtp'\n" + REWRITE),
    ("missing-request", _set(request=DELETE), "{", "request: missing required field 'request'\n" + REWRITE),
    ("missing-catalog-hash", _set(optkit__catalog_sha256=DELETE), '"optkit"',
     "optkit.catalog_sha256: missing required field 'catalog_sha256'\n" + REWRITE),
    ("request-not-a-mapping", _set(request=[1]), '"request"', "request: "),
    ("not-a-mapping", lambda lock: [lock], "[", "expected a mapping of fields at the top level\n" + REWRITE),
    ("bad-json", lambda lock: json.dumps(lock, indent=2, sort_keys=True).replace('1,', '1', 1), '"optkit"',
     "invalid JSON: "),
    ("wrong-lock-version", _set(lock_version=0), '"lock_version"',
     "lock_version: is 0, this optkit reads lock_version 1; write the bundle again with this optkit"),
    ("lock-version-true", _set(lock_version=True), '"lock_version"',
     "lock_version: is True, this optkit reads lock_version 1; write the bundle again with this optkit"),
    ("no-lock-version", _set(lock_version=DELETE), "{",
     "lock_version: missing required field 'lock_version' (this optkit reads lock_version 1); " + REWRITE),
    ("newer-lock-format", _set(lock_version=2, optkit__version="9.0.0"), '"lock_version"',
     f"lock_version: is 2, a lock format newer than this optkit ({__version__}) reads (lock_version 1): it was "
     "written by optkit 9.0.0; use that optkit, or write the bundle again with this one"),
    ("newer-optkit-request-field", _set(optkit__version="9.0.0", request__turbo="max"), '"turbo"',
     "request.turbo: unknown field 'turbo'\n" + OTHER),
]


def _write(tmp_path: Path, edit) -> tuple[Path, str]:
    edited = edit(good_lock())
    text = edited if isinstance(edited, str) else json.dumps(edited, indent=2, sort_keys=True)
    path = tmp_path / "bundle" / "optkit.lock.json"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    return path, text


def _line(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


@pytest.mark.parametrize("edit, key, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_lock_is_located(tmp_path, edit, key, message):
    path, text = _write(tmp_path, edit)
    with pytest.raises(BundleError) as exc:
        request_from_lock(path, WORKSPACE)
    where = f"{path}:{_line(text, key)}: "
    if message.endswith(": "):  # the parser's own words follow
        assert str(exc.value).startswith(where + message)
    else:
        assert str(exc.value) == where + message


def test_a_good_lock_gives_its_request_back(tmp_path):
    path, _ = _write(tmp_path, lambda lock: lock)
    request, options, _ = request_from_lock(path, WORKSPACE)
    assert request.dump(mode="json", by_alias=True) == REQUEST and options == {}


def test_plan_from_a_bad_lock_is_a_user_error(tmp_path):
    path, text = _write(tmp_path, _set(request__tp="x"))
    result = CliRunner().invoke(cli, ["plan", "--from-lock", str(path)])
    assert result.exit_code == 1, result.output
    line = _line(text, '"tp"')
    assert f"optkit: error: {path}:{line}: request.tp: expected an integer" in result.output
    assert "pydantic" not in result.output and "http" not in result.output
