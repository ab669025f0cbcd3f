"""optkit: declarative optimization recipes for vLLM + vllm-ascend on Ascend NPUs."""

__version__ = "0.1.0"
