"""The suite's schedule: the longest test files first.

scripts/test runs two pytest-xdist workers with ``--dist loadfile``: each worker takes whole files, in
collection order, as it finishes the last. A long file handed out last keeps one worker busy while the
other idles, so the files measured longest (``--durations`` of a whole run) are collected first, each
then in its own order; every other file keeps pytest's order after them. Only the order changes, never
what runs. Update the list from a run's durations when a file grows or shrinks.
"""

from __future__ import annotations

LONGEST_FIRST = (
    "tests/measure/test_sweep_e2e.py",  # its module fixture: a five-step ladder with sweeps (~3-4 min)
    "tests/measure/test_ladder_e2e.py",  # a four-step ladder run three times (~2 min)
    "tests/test_compat.py",  # every patch on every release's tree, alone and together
    "tests/test_tutorial_conformance.py",
    "tests/test_versions.py",  # each release's data against a scan of its tree
    "tests/test_export.py",  # git am of each exported series
    "tests/cpu/test_sampler_patches.py",
    "tests/test_port_trees.py",
    "tests/test_throughput_shapes.py",  # the paired vLLM parsers, per shape and release
    "tests/test_pd.py",
    "tests/test_objective.py",
    "tests/test_vllm_paired.py",
    "tests/test_catalog.py",  # the generated docs, regenerated
    "tests/test_packaging.py",
    "tests/profile/test_profile_ladder_e2e.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    where = {id(item): index for index, item in enumerate(items)}

    def key(item):
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank)), where[id(item)]

    items.sort(key=key)
