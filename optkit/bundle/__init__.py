"""Stage 6, bundle: a plan as a runnable launch bundle, and the checks of one.

Owns the bundle writer (lock, env.sh, serve.sh, preflight.sh, apply.sh, build-kernels.sh,
bench.sh, README, k8s manifests), its templates, ``optkit bundle check`` and the vLLM argument
parser probe that runs in a subprocess (vLLM is never imported by optkit itself).

Modules: ``writer`` (``write_bundle``, ``bundle_files``), ``launch`` (the serve command),
``lock`` (``optkit.lock.json`` and ``--from-lock``), ``scripts``, ``readme`` and ``k8s`` (the data
of the shell scripts, README.md + expected.json, the Deployment or LeaderWorkerSet), ``render`` (Jinja2 and the
quoting filter; the only module that imports Jinja2), ``check``, ``vllm_probe`` and ``engine_probe`` (run in the
paired vLLM's Python), ``engine_check``. The files' shape
is in ``templates/``. ``BundleWriteError`` lives here so that every module can raise it.

May import: ``optkit.errors``, ``optkit.catalog``, ``optkit.tree``, ``optkit.versions``,
``optkit.profile``, ``optkit.resolve``.
"""

from optkit.errors import OptkitError


class BundleWriteError(OptkitError):
    """A bundle that cannot be written (occupied directory, missing patch file, changed catalog)."""
