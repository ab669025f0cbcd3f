"""The request as the run-time holds it: validated on every run by ``Request``'s own validator.

``optkit.resolve.request.Request`` (pydantic) is the schema of request files and flags. Building
its validator means importing pydantic and generating the schema, which costs more than a plan,
so the validator's pydantic-core schema (the fields of ``Request.__pydantic_core_schema__``,
without JSON-schema metadata) is kept in the catalog cache, keyed by the code that defines it,
and a ``SchemaValidator`` is built from it: the same validator, the same checks, on every input,
without pydantic. Its output becomes a ``RequestRecord``.

Errors keep pydantic's wording: when the fast validator rejects an input, ``Request.model_validate``
validates it again and raises its own ``ValidationError`` (a validator that accepted what the
model rejects, or the reverse, is an ``InternalError``).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from optkit.catalog.cache import cached, schema_function
from optkit.catalog.frozen import Record, Shape
from optkit.errors import InternalError

DEFAULT_VLLM_ASCEND = "0.23.0"
MAX_PARALLEL = 1024
"""Largest TP or DP size accepted (a 910C SuperPoD has 384 cards, 768 dies)."""
MAX_CONCURRENCY = 65536
"""Largest concurrency level accepted (vLLM's max_num_seqs defaults to a few hundred)."""
MAX_TOKENS = 1 << 20
"""Longest input or output accepted, in tokens (Qwen3.5 reads 262,144 natively, ~1M with YaRN)."""
LATENCY_GOAL_MAX_CONCURRENCY = 8
"""The article's range (c <= 8): the default goal is latency up to it, throughput above."""
MAX_PD_INSTANCES = 64
"""Most prefill (or decode) instances ``--pd`` accepts."""
_CODE = ("resolve/request.py", "resolve/request_record.py", "resolve/profiles.py", "resolve/overrides.py")  # what defines the validator
SpecMethod = Literal["mtp", "eagle3", "suffix", "dspark", "dflash"]
"""The speculative decoding methods a request may ask for (``--spec-method``)."""
DEFAULT_SPECULATIVE_TOKENS = {"mtp": 4, "eagle3": 3, "suffix": 3, "dspark": 5, "dflash": 15}
"""k unless ``--num-speculative-tokens`` says: the article's 4 with MTP; 3 with eagle3, as every eagle3 command of
vllm-ascend 0.30.0rc2's Qwen3 pages writes it (e.g. docs/source/tutorials/models/Qwen3-235B-A22B.md:814), 3
with suffix, as its feature page does (docs/source/tutorials/features/suffix_speculative_decoding.md:92), and 5
with dspark, the DeepSeek-V4 pages' value ("For DSpark, use the value declared by the checkpoint; the example uses
five speculative tokens", 0.30.0rc2 DeepSeek-V4-Pro.md:571), and 15 with dflash, as the one DFlash command of the
tutorials writes it (0.30.0rc2 Kimi-K2.6.md:185)."""


class RequestBehaviour:
    """What a request derives from its fields."""

    __slots__ = ()

    @property
    def speculative_method(self) -> str | None:
        """The speculative decoding method asked for: ``spec_method``, or mtp when ``mtp`` is on; None when off."""
        return self.spec_method or ("mtp" if self.mtp else None)

    @property
    def k(self) -> int:
        """Speculative tokens per step (0 without speculative decoding)."""
        method = self.speculative_method
        return (self.num_speculative_tokens or DEFAULT_SPECULATIVE_TOKENS[method]) if method else 0

    @property
    def weight_format(self) -> str:
        """The weight format served: ``quantization`` (filled in from the checkpoint by ``optkit.resolve.quantization``),
        bf16 when unset."""
        return self.quantization or "bf16"

    @property
    def quantized(self) -> bool:
        """The weights are quantized (any format but bf16): the fact ``runtime.quantized``."""
        return self.weight_format != "bf16"

    @property
    def objective_goal(self) -> str:
        """The goal asked for, else latency up to concurrency ``LATENCY_GOAL_MAX_CONCURRENCY``, throughput above."""
        if self.goal:
            return self.goal
        return "latency" if max(self.concurrency) <= LATENCY_GOAL_MAX_CONCURRENCY else "throughput"

    @property
    def lengths(self):
        """The request's length classes (``optkit.resolve.length_mix.LengthMix``): its mix, else the one class
        ``input_len`` in, ``output_len`` out."""
        from optkit.resolve.length_mix import parse_length_mix, single

        return parse_length_mix(self.length_mix) if self.length_mix else single(self.input_len, self.output_len)

    @property
    def pd_instances(self) -> tuple[int, int] | None:
        """(prefill, decode) instances of ``--pd P:D``; None for one server."""
        return None if self.pd is None else tuple(int(n) for n in self.pd.split(":"))

    @property
    def prefill_shape(self) -> tuple[int, int]:
        """(TP, DP) of a PD plan's prefill instances: ``--prefill-tp`` / ``--prefill-dp``, else the decode
        instances' ``--tp`` / ``--dp``."""
        return self.prefill_tp or self.tp, self.prefill_dp or self.dp

    @property
    def asymmetric_pd(self) -> bool:
        """A PD plan whose prefill instances have another shape than its decode instances (TP, DP, a pipeline of
        their own, ``--prefill-pp``, or a DCP size of their own, ``--prefill-dcp``)."""
        return self.pd is not None and (self.prefill_shape != (self.tp, self.dp)
                                        or (self.prefill_pp or 1) != (self.pp or 1)
                                        or self.prefill_dcp not in (None, self.dcp or 1))


class RequestRecord(RequestBehaviour, Record):
    """A validated request (``optkit.resolve.request.Request``)."""

    __slots__ = ()


@schema_function
class Bounded:
    """The before-validator of an int field from ``low`` to ``high``: a bool is none (YAML reads
    ``true`` as one), nor is ``"4"``. A class, not a closure, so the cached validator can hold it."""

    __slots__ = ("low", "high")

    def __init__(self, low: int, high: int):
        self.low, self.high = low, high

    def __reduce__(self):
        return type(self), (self.low, self.high)

    def __call__(self, value: Any) -> Any:
        low, high = self.low, self.high
        if isinstance(value, bool) or not isinstance(value, int):
            shown = str(value).lower() if isinstance(value, bool) else repr(value)
            raise ValueError(f"expected an integer from {low} to {high}, got {shown}")
        if not low <= value <= high:
            raise ValueError(f"{value} is out of range: give an integer from {low} to {high}")
        return value


@schema_function
class DpSize(Bounded):
    """The before-validator of ``dp``: an int from ``low`` to ``high``, or ``"auto"`` (optkit.resolve.choices)."""

    __slots__ = ()

    def __call__(self, value: Any) -> Any:
        if value == "auto":
            return value
        if isinstance(value, str):
            raise ValueError(f"expected an integer from {self.low} to {self.high} or 'auto', got {value!r}")
        return super().__call__(value)


@schema_function
def comma_separated(value: Any) -> Any:
    """Concurrency levels: ``1,4,8`` as the command line takes it, or one level alone, besides a list."""
    if isinstance(value, bool):
        raise ValueError(f"expected levels such as [1, 4, 8], one level, or '1,4,8', got {str(value).lower()}")
    if isinstance(value, str):
        return parse_levels(value)
    return [value] if isinstance(value, int) else value


@schema_function
def canonical_slo(value: str) -> str:
    """An SLO text in its canonical form (``optkit.resolve.slo``); a text that does not parse is refused."""
    from optkit.resolve.slo import SloError, parse_slo

    try:
        return parse_slo(value, where="SLO").text()
    except SloError as exc:
        raise ValueError(str(exc).removeprefix("SLO: ")) from None


@schema_function
def canonical_set_values(value: Any) -> Any:
    """``--set`` values in their canonical text (``optkit.resolve.overrides.canonical_set``)."""
    from optkit.resolve.overrides import canonical_set

    return canonical_set(value)


@schema_function
def canonical_length_mix(value: str) -> str:
    """A length mix in its canonical text (``optkit.resolve.length_mix``); a text that does not parse is refused."""
    from optkit.resolve.length_mix import LengthMixError, parse_length_mix

    try:
        return parse_length_mix(value, where="length mix", max_tokens=MAX_TOKENS).text()
    except LengthMixError as exc:
        raise ValueError(str(exc).removeprefix("length mix: ")) from None


@schema_function
def literal_path(value: str) -> str:
    """A draft model named as it is: serve.sh writes it inside --speculative-config's single-quoted JSON, where a
    shell expression ($VAR, ${VAR}, `cmd`) would reach vLLM unexpanded, as a path that does not exist."""
    if "$" in value or "`" in value:
        raise ValueError(f"{value!r} holds a shell expression, which serve.sh would pass to vLLM unexpanded inside "
                         "--speculative-config: give the draft model's path or Hub id itself")
    return value


@schema_function
def sorted_levels(value: list[int]) -> list[int]:
    """Concurrency levels, deduplicated and sorted."""
    return sorted(set(value))


@schema_function
def pd_shape(value: Any) -> Any:
    """``--pd P:D``: prefill and decode instances, each from 1 to ``MAX_PD_INSTANCES``; kept as ``"P:D"``
    (None: one server)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else ""
    parts = text.split(":")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 4 for p in parts) \
            or not all(1 <= int(p) <= MAX_PD_INSTANCES for p in parts):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        if isinstance(value, int) and not isinstance(value, bool):  # YAML 1.1 reads 1:1 as base 60 (61)
            shown += f" (a YAML file reads an unquoted P:D as a base-60 number: quote it, pd: '{value // 60}:{value % 60}')"
        raise ValueError(f"expected P:D, prefill and decode instances from 1 to {MAX_PD_INSTANCES} each "
                         f"(e.g. 1:1 or 2:1), got {shown}")
    return f"{int(parts[0])}:{int(parts[1])}"


def parse_levels(text: str) -> list[int]:
    """Concurrency levels written ``1,4,8`` (the flag and a request file take the same form)."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > 1 and "" in parts:  # '1,,4' or '1,4,': a level left out, not a separator to skip
        raise ValueError(f"{text!r}: level {parts.index('') + 1} is empty (a stray comma?); e.g. 1,4,8")
    # ASCII digits only (int() would take '١'), and no more than int() converts
    if not parts[0] or not all(part.isascii() and part.isdigit() and len(part) <= 20 for part in parts):
        raise ValueError(f"{text!r}: give comma-separated integers, e.g. 1,4,8")
    return [int(part) for part in parts]


def as_request_record(request) -> RequestRecord:
    """The run-time form of a request: a record as it is, a validated ``Request`` model frozen."""
    if isinstance(request, RequestRecord):
        return request
    from optkit.catalog.frozen import freeze
    from optkit.resolve.request import RECORDS

    return freeze(request, RECORDS)


@lru_cache(maxsize=None)
def core():
    """pydantic-core's compiled module (``SchemaValidator``, ``ValidationError``), loaded on its own.

    Importing the ``pydantic_core`` package also imports ``core_schema`` and ``typing_extensions``
    (about 20 ms of CPU, a fifth of a warm plan) for the schema-building types the cached validator
    never needs. The extension module is what the package re-exports, so a later ``import
    pydantic_core`` finds this same module in ``sys.modules`` and the classes are the same.
    """
    name = "pydantic_core._pydantic_core"
    if name not in sys.modules:
        from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
        from importlib.util import find_spec, module_from_spec, spec_from_loader

        package = find_spec("pydantic_core")
        folders = list(package.submodule_search_locations or ()) if package else []
        found = [Path(f) / f"_pydantic_core{suffix}" for f in folders for suffix in EXTENSION_SUFFIXES]
        path = next((str(f) for f in found if f.is_file()), None)
        if path is None:  # not laid out as expected: the ordinary import
            import pydantic_core._pydantic_core  # noqa: F401
        else:
            loader = ExtensionFileLoader(name, path)
            module = module_from_spec(spec_from_loader(name, loader))
            loader.exec_module(module)
            sys.modules[name] = module
    return sys.modules[name]


def parse_request(data: Any) -> RequestRecord:
    """``data`` (a mapping of request fields, by name or alias) validated as a ``Request``.

    Raises pydantic's ``ValidationError`` (the model's own, with its wording) if it is invalid.
    """
    validator, shape = _validator()
    _refuse_replaced_fields(data)
    try:
        fields, _, given = validator.validate_python(data)
    except core().ValidationError:
        from optkit.resolve.request import Request

        Request.model_validate(data)  # raises the model's own error, in its words
        raise InternalError(f"the cached request validator rejects what Request accepts: {data!r}") from None
    _check_one_length_form(fields, given, data)
    _one_speculative_method(fields)
    return RequestRecord(shape, {name: fields[name] for name in shape.fields})


REPLACED_FIELDS = {"quantized": "quantization: give the weight format (quantization: w8a8 for what quantized: true "
                                "meant; formats: {formats})"}
"""Request fields that are gone, and what replaced them."""


def _refuse_replaced_fields(data: Any) -> None:
    """A field that is gone (``REPLACED_FIELDS``) is refused at its key, naming what replaced it."""
    for key, instead in REPLACED_FIELDS.items():
        if isinstance(data, dict) and key in data:
            from optkit.resolve.profiles import QUANTIZATIONS  # only when refusing: the profile schema is pydantic's

            instead = instead.format(formats=", ".join(QUANTIZATIONS))
            raise _field_error(key, data[key], f"{key} was replaced by {instead}")


def _one_speculative_method(fields: dict) -> None:
    """``mtp: true`` is the spelling of ``spec_method: mtp`` (the record keeps that spelling); with another method
    it asks for two at once, which vLLM's one ``--speculative-config`` cannot hold."""
    if fields.get("spec_method") == "mtp":
        fields.update(mtp=True, spec_method=None)
    elif fields.get("spec_method") and fields.get("mtp"):
        raise _field_error("spec_method", fields["spec_method"], f"mtp: true (--mtp) and spec_method "
                           f"{fields['spec_method']} ask for two speculative methods; give one (vLLM's "
                           "--speculative-config takes one method)")


def _field_error(key: str, value: Any, message: str):
    """A ``ValidationError`` of the request at ``key`` (so the flag or the file's line is named)."""
    return core().ValidationError.from_exception_data("Request", [
        {"type": "value_error", "loc": (key,), "input": value, "ctx": {"error": ValueError(message)}}])


def _check_one_length_form(fields: dict, given: set, data: Any) -> None:
    """A mix holds the lengths: with ``length_mix``, ``input_len`` and ``output_len`` are its longest input and
    output (a dumped request replays alike); given otherwise, they are refused (a ``ValidationError`` at
    ``length_mix``, so the flag or the file's line is named)."""
    if fields.get("length_mix") is None:
        return
    from optkit.resolve.length_mix import parse_length_mix

    mix = parse_length_mix(fields["length_mix"])
    implied = {"input_len": mix.input_len_max, "output_len": mix.output_len_max}
    clash = [f"{key} {fields[key]} (the mix's longest is {implied[key]})" for key in implied
             if key in given and fields[key] != implied[key]]
    if clash:
        raise _field_error("length_mix", fields["length_mix"], "a length mix holds the input and output lengths; "
                           f"drop {' and '.join(clash)}, or drop the mix for one length")
    fields.update(implied)


def request_keys() -> tuple[tuple[str, str], ...]:
    """Each request field as ``(name, alias)``: a mapping of request fields may name it either way."""
    shape = _validator()[1]
    return tuple(zip(shape.fields, shape.aliases))


def load_request(path: Path) -> RequestRecord:
    """Read a YAML request file (the same fields as the CLI flags); problems are located."""
    from pydantic_core import ValidationError

    from optkit.catalog.loader import expect_mapping, validation_problems
    from optkit.catalog.yamlio import load_yaml
    from optkit.errors import ValidationFailed

    data, lines = load_yaml(path)
    expect_mapping(data, lines)
    try:
        return parse_request(data)
    except ValidationError as exc:
        from optkit.resolve.request import Request

        raise ValidationFailed(validation_problems(exc, lines, Request)) from None


@lru_cache(maxsize=None)
def _validator():
    """The request validator and the record shape (from the cache, else compiled and stored)."""
    SchemaError, SchemaValidator = core().SchemaError, core().SchemaValidator
    schema, config, shape = cached("request", None, _compile, code=_CODE)
    try:
        return SchemaValidator(schema, config), shape
    except SchemaError:  # an entry this pydantic-core cannot build: compile afresh
        schema, config, shape = _compile()
        return SchemaValidator(schema, config), shape


def _compile() -> tuple[dict, dict, Shape]:
    """The core schema of ``Request``'s fields, its core config, and its records' shape."""
    from optkit.catalog.frozen import shape_of
    from optkit.resolve.request import Request

    model = Request.__pydantic_core_schema__
    if model.get("type") != "model" or model["schema"].get("type") != "model-fields":
        raise InternalError(f"Request's core schema is a {model.get('type')!r} of {model['schema'].get('type')!r}, "
                            "not a model of model-fields: teach optkit.resolve.request_record")
    return _without_metadata(model["schema"]), dict(model.get("config", {})), shape_of(Request)


def _without_metadata(schema: Any) -> Any:
    """A copy of a core schema without the JSON-schema ``metadata`` of its nodes (validation never reads it)."""
    if isinstance(schema, dict):
        node = isinstance(schema.get("type"), str)
        return {key: _without_metadata(value) for key, value in schema.items() if not (node and key == "metadata")}
    if isinstance(schema, list):
        return [_without_metadata(item) for item in schema]
    return schema
