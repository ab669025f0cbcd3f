"""Kubernetes manifests checked against the real Kubernetes API schema, for every test that writes one,
and LeaderWorkerSets against the LeaderWorkerSet CRD's schema.

``kubernetes-validate`` (PyPI; a test dependency installed by scripts/test) ships the
OpenAPI-derived JSON schemas of each Kubernetes release; ``strict`` also rejects fields the schema
does not define (a misspelt key is an error, not silently dropped by the API server). Manifests are
validated for ``KUBERNETES_VERSION``, the version the bundle writes for (``optkit.bundle.k8s``). A
``LeaderWorkerSet`` is checked with ``jsonschema`` against the CRD schema vendored in
``tests/fixtures/k8s/`` (README.md there: its source and what was cut), made strict, and what the CRD
embeds of core Kubernetes (pod templates, claims, the object's metadata) with ``kubernetes-validate``.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path

import pytest
import yaml

from optkit.bundle.k8s import KUBERNETES_VERSION, LWS_API_VERSION

LWS_SCHEMA = Path(__file__).parent / "fixtures" / "k8s" / "leaderworkerset-v1.schema.yaml"
TRIMMED = "x-optkit-trimmed"
"""The marker of an embedded core type whose schema was cut from the CRD (fixtures/k8s/README.md)."""


def _validator():
    try:
        import kubernetes_validate
    except ImportError:
        message = "kubernetes-validate is not installed (pip install kubernetes-validate)"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
    return kubernetes_validate


def _problem(doc: dict, version: str) -> tuple[str, str] | None:
    """(field path, message) of the first schema error of ``doc``, or None."""
    kubernetes_validate = _validator()
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return ".".join(str(p) for p in exc.path), exc.message
    return None


def schema_problems(text: str, version: str = KUBERNETES_VERSION) -> list[str]:
    """Every schema error of every document in ``text`` (empty when all are valid)."""
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    return [f"document {i} ({doc.get('kind')}): {p[0]}: {p[1]}"
            for i, doc in enumerate(documents) if (p := _problem(doc, version))]


def validate_manifest(data: dict, version: str = KUBERNETES_VERSION) -> None:
    """Raise ``AssertionError`` naming the field if ``data`` is not a valid object of its kind."""
    if data.get("kind") == "LeaderWorkerSet":
        validate_leaderworkerset(data, version)
        return
    problem = _problem(data, version)
    if problem:
        raise AssertionError(f"{data.get('kind')} {problem[0]}: {problem[1]}")


def validate_file(path: Path, version: str = KUBERNETES_VERSION) -> list[str]:
    """Validate every document of a YAML manifest file; the kinds validated, in order."""
    documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    for document in documents:
        validate_manifest(document, version)
    return [d["kind"] for d in documents]


@functools.cache
def lws_schema() -> dict:
    """The vendored CRD schema as it stands (markers included)."""
    return yaml.safe_load(LWS_SCHEMA.read_text(encoding="utf-8"))


@functools.cache
def strict_lws_schema() -> dict:
    """The CRD schema with ``additionalProperties: false`` on every object node that lists properties
    (none of them has x-kubernetes-preserve-unknown-fields), and every marker accepting anything
    (what sits there is validated by kubernetes-validate)."""

    def strict(node):
        if isinstance(node, list):
            return [strict(item) for item in node]
        if not isinstance(node, dict):
            return node
        if TRIMMED in node:
            return {"type": node.get("type", "object")}
        out = {key: strict(value) for key, value in node.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out

    return strict(copy.deepcopy(lws_schema()))


def trimmed_paths(schema: dict | None = None, path: tuple = ()) -> dict[tuple, str]:
    """Every marker of the schema: its path (property names, ``[]`` for array items) → the core type."""
    schema = lws_schema() if schema is None else schema
    if TRIMMED in schema:
        return {path: schema[TRIMMED]}
    out = {}
    for name, sub in schema.get("properties", {}).items():
        out.update(trimmed_paths(sub, path + (name,)))
    if isinstance(schema.get("items"), dict):
        out.update(trimmed_paths(schema["items"], path + ("[]",)))
    return out


def validate_leaderworkerset(data: dict, version: str = KUBERNETES_VERSION) -> None:
    """Raise ``AssertionError`` naming the field if ``data`` is not a valid LeaderWorkerSet: the CRD
    schema (strict) for its own fields, kubernetes-validate for the core types embedded in it."""
    import jsonschema

    if data.get("apiVersion") != LWS_API_VERSION:
        raise AssertionError(f"LeaderWorkerSet apiVersion: {data.get('apiVersion')!r}, the schema is {LWS_API_VERSION}")
    error = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(strict_lws_schema()).iter_errors(data))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path)
        raise AssertionError(f"LeaderWorkerSet {where}: {error.message}")
    _validate_embedded("ObjectMeta", ("metadata",), data.get("metadata", {}), data, version)
    for path, kind in trimmed_paths().items():
        for where, value in _at(data, path):
            _validate_embedded(kind, where, value, data, version)


def _at(data, path: tuple, where: tuple = ()):
    """(where, value) of every value at ``path`` in ``data`` (``[]`` walks a list)."""
    if not path:
        yield where, data
        return
    head, rest = path[0], path[1:]
    if head == "[]":
        for index, item in enumerate(data if isinstance(data, list) else []):
            yield from _at(item, rest, where + (index,))
    elif isinstance(data, dict) and head in data:
        yield from _at(data[head], rest, where + (head,))


def _validate_embedded(kind: str, where: tuple, value, data: dict, version: str) -> None:
    """A pod spec is validated with its template (metadata and spec) as a PodTemplateSpec, a claim as a
    PersistentVolumeClaim, the object's metadata as the ObjectMeta of any core kind (a ConfigMap's)."""
    if kind == "ObjectMeta":
        wrapped = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": value}
    elif kind == "PodSpec":
        template = _parent(data, where)
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "lws"}, "template": template}
    elif kind == "PersistentVolumeClaim":
        wrapped = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **value}
    else:
        raise AssertionError(f"{LWS_SCHEMA.name}: unknown trimmed type {kind!r}")
    try:
        validate_manifest(wrapped, version)
    except AssertionError as exc:
        raise AssertionError(f"LeaderWorkerSet {'.'.join(map(str, where))}: {exc}") from None


def _parent(data, where: tuple):
    for key in where[:-1]:
        data = data[key]
    return data
