"""Benchmark (not a test): resolution time on synthetic catalogs of 100, 1,000 and 10,000 recipes.

    python tests/benchmarks/resolve_scaling.py [--sizes 100,1000,10000] [--repeat 3]

The catalogs imitate the real one's structure: recipes come in families of 8 (alternatives that
conflict with each other under some facts, some lifted by an `unless`), requirements point inside
the family or at one of a few shared "base" recipes, and every link carries a `when` over real
facts, as do the preconditions. Gains are random reported TPOT numbers at c1/c4/c8, some
negative. Timed: classification + clause building + exact solve (``optkit.resolve.resolver.resolve``),
with the catalog already loaded (loading is measured separately).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from optkit.catalog.loader import Catalog
from optkit.resolve.facts import compute_facts
from optkit.resolve.plan import load_workspace
from optkit.resolve.request_record import parse_request
from optkit.resolve.resolver import resolve
from optkit.catalog.frozen import freeze
from optkit.catalog.schema import RECORDS, Recipe

CONDITIONS = ["parallel.tp == 2", "spec.mtp", "not spec.async_spec_decode", "workload.decode_rows_max <= 40",
              "model.is_moe", "target.generation == 'A3'", "versions.vllm_ascend < '0.26'", "workload.greedy"]
FAMILY = 8
BASES = 5


def synthetic_recipe(i: int, n: int, rng: random.Random) -> dict:
    family = i // FAMILY
    members = [f"s{j:05d}" for j in range(family * FAMILY, min(n, family * FAMILY + FAMILY)) if j != i]
    bases = [f"s{j:05d}" for j in range(min(BASES, n)) if j != i]
    cond = lambda: rng.choice(CONDITIONS)  # noqa: E731
    requires = [{"recipe": rng.choice(members or bases), "msg": "needs it", "when": cond()}
                for _ in range(rng.randint(0, 1)) if members or bases]
    if bases and rng.random() < 0.2:
        requires.append({"recipe": rng.choice(bases), "msg": "needs a base"})
    conflicts = [{"recipe": rng.choice(members), "msg": "alternative", "when": cond(),
                  "unless": [rng.choice(members)] if rng.random() < 0.2 else []}
                 for _ in range(rng.randint(0, 2)) if members]
    gains = [{"metric": "tpot", "concurrency": c, "delta": round(rng.uniform(-0.6, 0.1), 3), "unit": "ms",
              "quote": "synthetic"} for c in (1, 4, 8) if rng.random() < 0.5]
    return {
        "id": f"s{i:05d}", "title": "synthetic", "summary": "a synthetic recipe", "kind": "config",
        "provenance": {"article": {"part": 2, "section": "synthetic", "quote": "synthetic"}, "seed_map": "none",
                       "upstream": {"status": "new", "evidence": "synthetic"}},
        "versions": {"vllm_ascend": ">=0.23.0"},
        "preconditions": [{"when": cond(), "msg": "synthetic"}] if rng.random() < 0.3 else [],
        "requires": [l for l in requires if l["recipe"] != f"s{i:05d}"],
        "conflicts": conflicts, "gains": gains,
        "verification": {"level": "declared", "needs_npu": True},
    }


def synthetic_catalog(n: int, seed: int = 0) -> Catalog:
    rng = random.Random(seed)
    recipes = {}
    for i in range(n):
        recipe = freeze(Recipe.model_validate(synthetic_recipe(i, n, rng)), RECORDS)
        recipes[recipe.id] = recipe
    return Catalog(Path("."), recipes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ws = load_workspace()
    facts = compute_facts(parse_request({"model": "qwen3.5-35b", "mtp": True, "async_scheduling": False}),
                          ws.models["qwen3.5-35b-a3b"], ws.targets["910c"])
    print(f"{'recipes':>8} {'build s':>9} {'resolve s (median)':>19} {'selected':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        t0 = time.perf_counter()
        catalog = synthetic_catalog(n)
        build = time.perf_counter() - t0
        times, result = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            result = resolve(catalog, facts, [], [], lambda c: None)
            times.append(time.perf_counter() - t0)
        print(f"{n:>8} {build:>9.2f} {statistics.median(times):>19.3f} {len(result.selected):>9}")


if __name__ == "__main__":
    main()
