"""Stage 4, profile: the Ascend profiler's output of a vLLM + vllm-ascend deployment, read and decomposed.

Owns finding the ranks of a capture (``locate``: the ``*_ascend_pt`` folders and their
``ASCEND_PROFILER_OUTPUT``), reading them into one normalized form (``trace``; the text form in
``text_reader``: ``trace_view.json``, ``kernel_details.csv``, ``op_statistic.csv``,
``step_trace_time.csv``; the database form in ``db_reader``: ``ascend_pytorch_profiler*.db``),
cutting the decode steps and decomposing them (``steps``), matching the catalog's recipe
signatures against them and finding what no signature explains (``signatures``), the whole
analysis of a capture and its JSON form (``analysis``) and the timeline chart of one step
(``timeline``, the only module of this stage that imports matplotlib). It reads recipe signatures
from the catalog; it knows nothing of requests, plans or the resolver (the resolver reads its
estimates: ``optkit.resolve.profiled``). docs/profile.md documents every file, column and event it reads.

May import: ``optkit.errors``, ``optkit.catalog``, ``optkit.tree``, ``optkit.versions``.
"""

from optkit.errors import OptkitError


class ProfileError(OptkitError):
    """A profile directory that cannot be read: not a capture, a missing or broken file, a foreign format."""
