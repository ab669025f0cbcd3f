"""Stage 2, tree: pristine vllm-ascend source trees and the patches applied to them.

Owns fetching a release's sdist from PyPI (download, safe extraction, the cache), inspecting a
tree (version, digests; ``digest``: the pristine digest that tells which source a run used),
patch sets (a bundle's lock + series, read through ``schema`` and hash-checked), where optkit
may write in a tree (``safety``), and ``optkit apply`` / ``revert`` / ``status`` with their
journal and lock. It knows patch files and
trees, not plans: a patch set is a list of ``PatchSpec`` wherever it came from.

May import: ``optkit.errors``, ``optkit.catalog``.
"""
