"""The accuracy prompts: the fixed set shipped with optkit, and the client that runs it on a server.

``run_prompts`` sends each prompt once, one at a time (a batch of one, so batching cannot change
the numerics between steps), as a non-streaming ``/v1/completions`` request at temperature 0 with
``max_tokens`` and, when the plan's clients set min_tokens, ``min_tokens = max_tokens`` (so the
MinTokens path the benchmark exercises runs here too), asking vLLM for the generated token ids
(``return_token_ids``; no logprobs, which would take the sampler off its greedy fast path). It
returns the data ``run-ladder.sh`` saves as ``accuracy.json`` next to the benchmark results.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from optkit.measure import MeasureError

ACCURACY_VERSION = 1
PROMPTS = Path(__file__).resolve().parent / "prompts.yaml"
_INTEGER = re.compile(r"-?\d+")


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9-]+$", description="Stable id; the gate names a divergence by it.")
    prompt: str = Field(min_length=1, description="The completion prompt.")
    answer: Optional[str] = Field(None, description="The expected integer, for exact-match accuracy.")


class PromptSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int = Field(ge=1, le=4096, description="Tokens generated per prompt.")
    prompts: list[Prompt] = Field(min_length=1, description="The prompts, in the order they are sent.")

    @field_validator("prompts")
    @classmethod
    def _unique_ids(cls, prompts: list[Prompt]) -> list[Prompt]:
        ids = [p.id for p in prompts]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"prompt ids must be unique: {', '.join(twice)}")
        return prompts


def load_prompt_set(path: Path = PROMPTS) -> PromptSet:
    """The prompt set in ``path`` (YAML, or the JSON copy a ladder carries)."""
    from optkit.catalog.loader import parse_model
    from optkit.catalog.yamlio import load_yaml

    data, lines = load_yaml(Path(path))
    return parse_model(PromptSet, data, lines)


def prompt_set_bytes(prompts: PromptSet) -> bytes:
    """The JSON copy a ladder carries (``accuracy/prompts.json``; YAML reads it too)."""
    return (json.dumps(prompts.model_dump(mode="json", exclude_none=True), indent=2, sort_keys=True,
                       ensure_ascii=False) + "\n").encode("utf-8")


def correct(prompt: Prompt, text: str) -> bool:
    """Exact match: the first integer of the completion is the prompt's answer."""
    found = _INTEGER.search(text)
    return found is not None and found.group(0) == prompt.answer


def run_prompts(base_url: str, served_name: str, prompts: PromptSet, *, min_tokens: bool,
                timeout: float = 600.0) -> dict[str, Any]:
    """Every prompt through ``base_url``/v1/completions (see the module docstring); the data of accuracy.json."""
    n = prompts.max_tokens
    outputs = []
    for prompt in prompts.prompts:
        body = {"model": served_name, "prompt": prompt.prompt, "max_tokens": n, "temperature": 0,
                "return_token_ids": True, **({"min_tokens": n} if min_tokens else {})}
        choice = _post(f"{base_url.rstrip('/')}/v1/completions", body, timeout)["choices"][0]
        outputs.append({"id": prompt.id, "text": choice.get("text", ""), "token_ids": choice.get("token_ids"),
                        "finish_reason": choice.get("finish_reason")})
    digest = hashlib.sha256(prompt_set_bytes(prompts)).hexdigest()
    return {"accuracy_version": ACCURACY_VERSION, "max_tokens": n, "min_tokens": min_tokens,
            "prompts_sha256": digest, "outputs": outputs}


def _post(url: str, body: dict, timeout: float) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:300]
        raise MeasureError(f"{url}: HTTP {exc.code} for the accuracy prompt: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise MeasureError(f"{url}: the accuracy prompt failed: {exc}") from None
    if not isinstance(data, dict) or not data.get("choices"):
        raise MeasureError(f"{url}: the response has no choices: {str(data)[:300]}")
    return data


__all__ = ["Prompt", "PromptSet", "load_prompt_set", "prompt_set_bytes", "run_prompts", "correct", "PROMPTS"]
