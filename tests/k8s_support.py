"""Kubernetes manifests checked against the real Kubernetes API schema, for every test that writes one.

``kubernetes-validate`` (PyPI; a test dependency installed by scripts/test) ships the
OpenAPI-derived JSON schemas of each Kubernetes release; ``strict`` also rejects fields the schema
does not define (a misspelt key is an error, not silently dropped by the API server). Manifests are
validated for ``KUBERNETES_VERSION``, the version the bundle writes for (``optkit.bundle.k8s``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from optkit.bundle.k8s import KUBERNETES_VERSION


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
    problem = _problem(data, version)
    if problem:
        raise AssertionError(f"{data.get('kind')} {problem[0]}: {problem[1]}")


def validate_file(path: Path, version: str = KUBERNETES_VERSION) -> list[str]:
    """Validate every document of a YAML manifest file; the kinds validated, in order."""
    documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    for document in documents:
        validate_manifest(document, version)
    return [d["kind"] for d in documents]
