"""Stage 3, versions: every vllm-ascend release as data, and what a release or a tree contains.

Owns the release data (``versions/<version>.yaml``, written by ``optkit versions scan`` from the
release's own files: paired vLLM, pins, CANN minimum, the knob registry read with ``ast``), the
declared knob moves (``versions/moves.yaml``), knob resolution for a release (present, renamed,
moved, removed, rejected, ignored), the upstream probes run on any tree, the compatibility
matrix (``optkit compat``), and porting recipes' patches to another release (``optkit port``).

May import: ``optkit.errors``, ``optkit.catalog``, ``optkit.tree``.
"""
