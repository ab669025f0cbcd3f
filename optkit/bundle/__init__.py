"""Stage 5, bundle: a plan as a runnable launch bundle, and the checks of one.

Owns the bundle writer (lock, env.sh, serve.sh, preflight.sh, apply.sh, build-kernels.sh,
bench.sh, README, k8s manifest), its templates, ``optkit bundle check`` and the vLLM argument
parser probe that runs in a subprocess (vLLM is never imported by optkit itself).

May import: ``optkit.errors``, ``optkit.catalog``, ``optkit.tree``, ``optkit.versions``,
``optkit.resolve``.
"""
