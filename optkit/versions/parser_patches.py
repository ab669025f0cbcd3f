"""What a vllm-ascend release's platform patches change in vLLM's own argument validation, as data.

vllm-ascend patches vLLM when its platform plugin loads (``vllm_ascend/patch/platform/``), before ``vllm serve``
parses its arguments. Two of these patches widen what vLLM's validation accepts, from 0.29.0rc1:
``patch_indexer_kv_dtype.py`` adds ``"int8"`` to the ``Literal`` of ``AttentionConfig.indexer_kv_dtype``
(DeepSeek-V4's sparse-attention indexer cache, ``--attention_config.indexer_kv_dtype int8`` in its pages), and
``patch_kv_cache_dtype.py`` adds ``"int8"`` (and from 0.30.0rc1 ``"mxfp8"``) to ``CacheConfig.cache_dtype``
(``--kv-cache-dtype int8`` in the DeepSeek-V4 and GLM5 pages). ``--kv-cache-dtype`` is also an argparse choice,
built from the ``Literal`` before the patch runs: from 0.30.0rc1 vllm-ascend's ``pre_register_and_update``
appends the widened values to those choices (``platform.py:333-339``); 0.29.0rc1 does not, so there vLLM's parser
refuses ``--kv-cache-dtype int8`` even with vllm-ascend installed, and optkit's check does too. The
parser ``bundle check`` runs is vLLM's alone (``optkit.bundle.vllm_probe``: importing vllm-ascend needs
torch_npu), so it applies each widening of the bundle's release the same way first (the class's field type and
annotation, then pydantic's schema rebuilt), and says so in its answer. ``tests/test_parser_patches.py`` reads
every cited line on the release's tree, and checks that no other release ships the patch.
"""

from __future__ import annotations

from optkit.value import valueclass

PATCH = "vllm_ascend/patch/platform/patch_indexer_kv_dtype.py"


@valueclass(frozen=True)
class Widening:
    """Values a release's platform patch adds to the ``Literal`` type of one field of one vLLM config class."""

    module: str  # 'vllm.config.attention'
    cls: str  # 'AttentionConfig'
    field: str  # 'indexer_kv_dtype'
    added: tuple[str, ...]  # ('int8',)
    source: str  # file:line(s) in the release's tree where the values are added
    option: str  # the serve option that sets the field ('--kv-cache-dtype', '--attention-config')
    choices_source: str = ""  # file:lines where the release widens the option's argparse choices too ('' it does not)

    def data(self) -> dict:
        return {"module": self.module, "class": self.cls, "field": self.field, "added": list(self.added),
                "source": self.source, "option": self.option, "choices_source": self.choices_source}


KV_PATCH = "vllm_ascend/patch/platform/patch_kv_cache_dtype.py"
CHOICES = "vllm_ascend/platform.py:333-339"
INDEXER_INT8 = Widening("vllm.config.attention", "AttentionConfig", "indexer_kv_dtype", ("int8",), f"{PATCH}:60",
                        "--attention-config")

PARSER_WIDENINGS: dict[str, tuple[Widening, ...]] = {
    "0.29.0rc1": (INDEXER_INT8, Widening("vllm.config.cache", "CacheConfig", "cache_dtype", ("int8",),
                                         f"{KV_PATCH}:70", "--kv-cache-dtype")),
    "0.30.0rc1": (INDEXER_INT8, Widening("vllm.config.cache", "CacheConfig", "cache_dtype", ("int8", "mxfp8"),
                                         f"{KV_PATCH}:71-72", "--kv-cache-dtype", CHOICES)),
    "0.30.0rc2": (INDEXER_INT8, Widening("vllm.config.cache", "CacheConfig", "cache_dtype", ("int8", "mxfp8"),
                                         f"{KV_PATCH}:71-72", "--kv-cache-dtype", CHOICES)),
}
"""Release → the widenings its platform patches make (releases not named make none)."""


def widenings(release: str, argv: list[str] | None = None) -> list[dict]:
    """The widenings of ``release`` as ``optkit.bundle.vllm_probe`` takes them; with ``argv``, those whose option
    it sets (``--attention-config`` also as ``--attention-config.<field>``)."""
    return [w.data() for w in PARSER_WIDENINGS.get(release, ())
            if argv is None or any(a == w.option or a.startswith(f"{w.option}.") for a in argv)]
