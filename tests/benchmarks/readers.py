"""Benchmark (not a test): what the readers' limits cost, as a ratio to plain PyYAML and json.

    python tests/benchmarks/readers.py [--rounds 21]

YAML: every shipped recipe, kernel, model and target file, read by ``optkit.catalog.yamlio``
(the events pass for depth and aliases, the line walk with duplicate keys, the guarded
constructor) against libyaml's plain ``compose`` + ``construct`` with the line walk optkit always
had. JSON: the flagship bundle's lock (written to a temporary directory), read by
``optkit.catalog.jsonio`` against ``json.loads``. Each round times both sides back to back, so
they see the same machine load; the figure is the median of the per-round ratios. Only a cold
load pays this: a warm ``optkit plan`` reads the catalog from its cache and parses no YAML.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from optkit.catalog.jsonio import load_json_text  # noqa: E402
from optkit.catalog.yamlio import load_yaml_text  # noqa: E402

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _plain_yaml(text: str) -> None:
    """libyaml's compose + construct and a line walk: the reader before the limits."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        lines: dict = {}
        stack = [(node, ())]
        while stack:
            current, path = stack.pop()
            lines[path] = current.start_mark.line
            if isinstance(current, yaml.MappingNode):
                stack += [(value, path + (key.value,)) for key, value in current.value]
            elif isinstance(current, yaml.SequenceNode):
                stack += [(item, path + (i,)) for i, item in enumerate(current.value)]
        loader.construct_document(node)
    finally:
        loader.dispose()


def _time(function, texts) -> float:
    started = time.perf_counter()
    for text in texts:
        function(text)
    return time.perf_counter() - started


def _lock_text() -> str:
    from optkit.bundle.writer import write_bundle
    from optkit.resolve.plan import load_workspace, plan
    from optkit.resolve.request import Request

    workspace = load_workspace()
    with tempfile.TemporaryDirectory() as tmp:
        write_bundle(plan(Request(model="qwen3.5-35b", mtp=True), workspace), workspace, Path(tmp) / "b")
        return (Path(tmp) / "b" / "optkit.lock.json").read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    rounds = parser.parse_args().rounds
    files = sorted([*ROOT.glob("recipes/*/recipe.yaml"), *ROOT.glob("kernels/*/kernel.yaml"),
                    *ROOT.glob("models/**/*.yaml"), *ROOT.glob("targets/*.yaml")])
    texts = [path.read_text(encoding="utf-8") for path in files]
    lock = _lock_text()
    yaml_ratios, json_ratios, yaml_ms = [], [], []
    for _ in range(rounds):
        plain = _time(_plain_yaml, texts)
        guarded = _time(lambda text: load_yaml_text(text, "f.yaml"), texts)
        yaml_ratios.append(guarded / plain)
        yaml_ms.append(guarded * 1e3)
        plain = _time(json.loads, [lock] * 20)
        guarded = _time(lambda text: load_json_text(text, "f.json"), [lock] * 20)
        json_ratios.append(guarded / plain)
    print(f"YAML: {len(files)} files, {sum(map(len, texts)) / 1024:.0f} KiB; optkit's reader "
          f"{statistics.median(yaml_ms):.1f} ms, ratio to plain libyaml {statistics.median(yaml_ratios):.2f}")
    print(f"JSON: the flagship lock, {len(lock) / 1024:.0f} KiB; ratio to json.loads {statistics.median(json_ratios):.2f}")


if __name__ == "__main__":
    main()
