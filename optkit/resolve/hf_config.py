"""A model profile derived from a user's own Hugging Face ``config.json``.

``profile_from_hf_config`` reads the language-model fields (under ``text_config`` for multimodal
configs, else the top level) and validates a ``ModelProfile`` of family ``custom``, returned as a
record; every missing or mistyped key becomes one located problem, all reported together.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from optkit.catalog.frozen import freeze
from optkit.catalog.linemap import dotted
from optkit.errors import Location, Problem, ValidationFailed
from optkit.resolve.profile_records import ModelProfileRecord
from optkit.resolve.profiles import RECORDS, ModelProfile


def profile_from_hf_config(path: Path) -> ModelProfileRecord:
    """Derive a ModelProfile (family 'custom') from a Hugging Face ``config.json``.

    ``path`` is the file or the checkpoint directory holding it. Multimodal configs keep the
    language-model fields under ``text_config``; those are read first, then the top level.
    """
    path = path / "config.json" if path.is_dir() else path
    text, config = _read_json(path)
    reader = _ConfigReader(str(path), text, config)
    fields = reader.profile_fields()
    reader.raise_problems()
    fields.update(id=_derived_id(config, path), family="custom", source="config.json")
    fields["sources"] = [f"derived from {path.name} of checkpoint {fields['id']}"]
    try:
        return freeze(ModelProfile(**fields), RECORDS)
    except ValidationError as exc:
        raise ValidationFailed([_config_problem(err, str(path)) for err in exc.errors()]) from None


def _read_json(path: Path) -> tuple[str, dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationFailed([Problem(Location(str(path)), f"cannot read: {exc.strerror}")]) from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        raise ValidationFailed([Problem(Location(str(path), exc.lineno), message)]) from None
    if not isinstance(config, dict):
        raise ValidationFailed([Problem(Location(str(path), 1), "config.json must hold a JSON object")])
    return text, config


def _derived_id(config: dict, path: Path) -> str:
    name_or_path = config.get("_name_or_path")
    raw = str(name_or_path).rstrip("/").split("/")[-1] if name_or_path else path.resolve().parent.name
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", raw.lower()).strip("-._")
    return cleaned or "custom-model"


def _config_problem(err: dict, file: str) -> Problem:
    return Problem(Location(file, None, dotted(err["loc"])), err["msg"].removeprefix("Value error, "))


class _ConfigReader:
    """Reads typed values from a config.json, collecting one Problem per bad or missing key."""

    def __init__(self, file: str, text: str, config: dict):
        self.file, self.text, self.top = file, text, config
        nested = config.get("text_config")
        self.lm = nested if isinstance(nested, dict) else config
        self.prefix = "text_config." if self.lm is not config else ""
        self.problems: list[Problem] = []

    def raise_problems(self) -> None:
        """Raise every collected problem at once."""
        if self.problems:
            raise ValidationFailed(self.problems)

    def profile_fields(self) -> dict[str, Any]:
        """Every ModelProfile field that config.json determines."""
        hidden, heads = self.integer("hidden_size"), self.integer("num_attention_heads")
        num_layers = self.integer("num_hidden_layers")
        fields = dict(
            hf_id=self._hf_id(),
            hf_model_type=self.text_value("model_type", top=True),
            text_model_type=self.text_value("model_type", default=""),
            architecture=self._architecture(),
            num_layers=num_layers,
            hidden_size=hidden,
            vocab_size=self.integer("vocab_size"),
            num_attention_heads=heads,
            num_kv_heads=self.integer("num_key_value_heads", default=heads),
            head_dim=self.integer("head_dim", default=hidden // heads if heads else 0),
            mtp_layers=self.integer("mtp_num_hidden_layers", "num_nextn_predict_layers", default=0),
            is_vl="vision_config" in self.top,
            dtype=self.text_value("dtype", "torch_dtype", default="unknown"),
        )
        fields.update(self._layer_split(num_layers))
        fields.update(self._moe())
        return fields

    def value(self, *keys: str, top: bool = False) -> tuple[str, Any]:
        """The first of ``keys`` present (language-model config first, then top level)."""
        scopes = [self.top] if top else [self.lm, self.top]
        for scope in scopes:
            for key in keys:
                if scope.get(key) is not None:
                    return key, scope[key]
        return keys[0], None

    def integer(self, *keys: str, default: int | None = None) -> int:
        """An integer; a missing key with no default, or a non-integer, is a problem (and reads as 0)."""
        key, value = self.value(*keys)
        if value is None and default is not None:
            return default
        if value is None:
            self._missing(key)
        elif isinstance(value, bool) or not isinstance(value, int):
            self._bad(key, f"must be an integer (got {value!r})")
        else:
            return value
        return 0

    def text_value(self, *keys: str, default: str | None = None, top: bool = False) -> str:
        """A string; a missing key with no default, or a non-string, is a problem (and reads as '')."""
        key, value = self.value(*keys, top=top)
        if value is None and default is not None:
            return default
        if value is None:
            self._missing(key, top)
        elif not isinstance(value, str):
            self._bad(key, f"must be a string (got {value!r})", top)
        else:
            return value
        return ""

    def _hf_id(self) -> str:
        name = self.top.get("_name_or_path")
        return name if isinstance(name, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", name) else ""

    def _architecture(self) -> str:
        architectures = self.top.get("architectures") or self.lm.get("architectures")
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
            return architectures[0]
        if architectures is None:
            self._missing("architectures", top=True)
        else:
            self._bad("architectures", "must be a non-empty list of class names", top=True)
        return ""

    def _layer_split(self, num_layers: int) -> dict[str, int]:
        """GDN vs full-attention layer counts from ``layer_types`` or ``full_attention_interval``."""
        layer_types = self.lm.get("layer_types")
        if isinstance(layer_types, list):
            if num_layers and len(layer_types) != num_layers:
                message = f"has {len(layer_types)} entries but num_hidden_layers is {num_layers}"
                self._bad("layer_types", message)
            return {
                "gdn_layers": layer_types.count("linear_attention"),
                "full_attention_layers": layer_types.count("full_attention"),
            }
        interval = self.integer("full_attention_interval", default=0)
        full = num_layers // interval if interval > 0 else num_layers
        return {"gdn_layers": num_layers - full, "full_attention_layers": full}

    def _moe(self) -> dict[str, Any]:
        experts = self.integer("num_experts", "num_local_experts", "n_routed_experts", default=0)
        if experts <= 0:
            return {"is_moe": False, "num_experts": 0, "experts_per_token": 0, "shared_experts": False}
        shared_width = self.integer("shared_expert_intermediate_size", default=0)
        shared = shared_width > 0 or self.integer("n_shared_experts", default=0) > 0
        return {
            "is_moe": True,
            "num_experts": experts,
            "experts_per_token": self.integer("num_experts_per_tok"),
            "shared_experts": shared,
        }

    def _missing(self, key: str, top: bool = False) -> None:
        prefix = "" if top else self.prefix
        owner = ("text_config",) if prefix else ()
        location = Location(self.file, self._line(*owner), prefix + key)
        self.problems.append(Problem(location, "required key is missing"))

    def _bad(self, key: str, message: str, top: bool = False) -> None:
        in_lm = not top and key in self.lm
        owner = ("text_config",) if in_lm and self.prefix else ()
        path = (self.prefix if in_lm else "") + key
        self.problems.append(Problem(Location(self.file, self._line(*owner, key), path), message))

    def _line(self, *keys: str) -> int:
        """Line of the JSON key path ``keys`` (each searched after the previous); 1 if not found."""
        position, line = 0, 1
        for key in keys:
            match = re.compile(rf'"{re.escape(key)}"\s*:').search(self.text, position)
            if not match:
                break
            position = match.end()
            line = self.text.count("\n", 0, match.start()) + 1
        return line
