"""Stage 5, resolve: from a request to a plan.

Owns the request, the model and target profiles (and the derivation of a model profile from a
Hugging Face ``config.json``), the facts of a request, the objective (reported gains and
baselines), the exact solver, the resolver that classifies and selects recipes and explains
every decision, and ``plan()`` which merges the selection's launch settings into a ``Plan``
(plus its JSON form). Nothing here prints or writes files.

May import: ``optkit.errors``, ``optkit.catalog``, ``optkit.tree``, ``optkit.versions``, ``optkit.profile``
(a capture's findings, only with ``--profile``: ``profiled``).
"""
