"""gdn-mamba-copy-overlap on CPU: the patched NPUModelRunner._start_mamba_copy_block on fake streams.

On each release the recipe has a patch for (0.23.0; 0.30.0rc2, re-derived), the method is taken out of the
patched ``worker/model_runner_v1.py`` (which cannot be imported here) and run with a fake ``torch.npu``
that logs, in order, which stream records, waits and copies. Checked: the side stream waits on an event
recorded on the current stream before it copies, the copy runs on global_stream and 'copy done' is
recorded there after it; the two events are created once and reused; with nothing to copy the (no-op)
call stays on the current stream and no event is touched. On 0.30.0rc2 also: execute_model issues the
early copy only without a KV transfer group and keeps upstream's connector path otherwise (read from
the patched source's syntax tree). Real stream semantics and any overlap need an NPU.
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from patched_tree import load_method, patched_tree  # noqa: E402  (puts tests/ on sys.path)

pytestmark = [pytest.mark.tree]

RECIPE = "gdn-mamba-copy-overlap"
RUNNER = "vllm_ascend/worker/model_runner_v1.py"
VERSIONS = ["0.23.0", "0.30.0rc2"]


class FakeNpu:
    """torch.npu as far as the method uses it: Event, stream(), current_stream(); every call logged."""

    def __init__(self):
        self.log: list[tuple] = []
        self.current = "main"
        self.events_made = 0
        npu = self

        class Event:
            def __init__(self):
                npu.events_made += 1
                self.name = f"event{npu.events_made}"

            def record(self):
                npu.log.append(("record", self.name, npu.current))

        self.Event = Event

    @contextlib.contextmanager
    def stream(self, stream):
        before, self.current = self.current, stream.name
        try:
            yield
        finally:
            self.current = before


class FakeStream:
    def __init__(self, npu: FakeNpu, name: str):
        self.npu, self.name = npu, name

    def wait_event(self, event):
        self.npu.log.append(("wait", event.name, self.name))


@pytest.fixture(scope="module", params=VERSIONS)
def version(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tree(tmp_path_factory, version) -> Path:
    return patched_tree(tmp_path_factory.mktemp("mamba-copy"), [RECIPE], version)


def runner_and_npu(tree: Path):
    npu = FakeNpu()
    side = FakeStream(npu, "global_stream")
    mamba_utils = SimpleNamespace(do_mamba_copy_block=lambda bufs: npu.log.append(("copy", bufs.offset, npu.current)))
    namespace = {"torch": SimpleNamespace(npu=npu), "global_stream": lambda: side, "mamba_utils": mamba_utils,
                 "Any": object}
    start = load_method(tree / RUNNER, "NPUModelRunner", "_start_mamba_copy_block", namespace)
    runner = SimpleNamespace(_mamba_copy_events=None)
    return (lambda bufs: start(runner, bufs)), npu


def test_copy_runs_on_global_stream_after_the_inputs(tree):
    start, npu = runner_and_npu(tree)
    done = start(SimpleNamespace(offset=3))
    assert npu.log == [("record", "event1", "main"), ("wait", "event1", "global_stream"),
                       ("copy", 3, "global_stream"), ("record", "event2", "global_stream")]
    assert done.name == "event2" and npu.current == "main"


def test_events_are_made_once_and_reused(tree):
    start, npu = runner_and_npu(tree)
    first = start(SimpleNamespace(offset=1))
    second = start(SimpleNamespace(offset=2))
    assert npu.events_made == 2 and first is second
    assert [entry[0] for entry in npu.log] == ["record", "wait", "copy", "record"] * 2


def test_nothing_to_copy_stays_on_the_current_stream(tree):
    start, npu = runner_and_npu(tree)
    assert start(SimpleNamespace(offset=0)) is None
    assert npu.log == [("copy", 0, "main")] and npu.events_made == 0


def _calls_in(node: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None)) == name]


def test_030_early_copy_only_without_kv_transfer(tmp_path_factory):
    tree = patched_tree(tmp_path_factory.mktemp("mamba-copy-0.30"), [RECIPE], "0.30.0rc2")
    module = ast.parse((tree / RUNNER).read_text(encoding="utf-8"))
    runner = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "NPUModelRunner")
    execute = next(n for n in runner.body if getattr(n, "name", None) == "execute_model")
    guards = [n for n in ast.walk(execute) if isinstance(n, ast.If) and _calls_in(n, "_start_mamba_copy_block")
              and not any(_calls_in(b, "_start_mamba_copy_block") for b in n.orelse)]
    early = min(guards, key=lambda n: len(list(ast.walk(n))))
    assert "not has_kv_transfer_group()" in ast.unparse(early.test) and "'align'" in ast.unparse(early.test)
    # With a connector upstream's path is kept: prepare_mamba_state_copy, else the batched copy after the loads.
    connector = next(n for n in ast.walk(execute) if isinstance(n, ast.If) and ast.unparse(n.test) == "has_kv_transfer_group()"
                     and _calls_in(n, "prepare_mamba_state_copy"))
    assert _calls_in(connector, "do_mamba_copy_block") and _calls_in(ast.Module(body=connector.orelse, type_ignores=[]), "wait_event")
