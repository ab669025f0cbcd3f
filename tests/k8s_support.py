"""Kubernetes manifests checked against the real Kubernetes API schema, for every test that writes one.

``kubernetes-validate`` (PyPI; installed by scripts/test) ships the OpenAPI-derived JSON schemas of
each Kubernetes release; ``strict`` also rejects fields the schema does not define (a misspelt key is
an error, not silently dropped by the API server). Manifests are validated for KUBERNETES_VERSION.
"""

from __future__ import annotations

import os

import pytest
import yaml

KUBERNETES_VERSION = "1.33"
"""The Kubernetes release the manifests are validated for (Indexed Jobs' backoffLimitPerIndex is GA in it)."""


def schema_problems(text: str, version: str = KUBERNETES_VERSION) -> list[str]:
    """Every schema error of every document in ``text`` (empty when all are valid)."""
    try:
        import kubernetes_validate
    except ImportError:
        message = "kubernetes-validate is not installed (pip install kubernetes-validate)"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
    problems = []
    for index, doc in enumerate(d for d in yaml.safe_load_all(text) if d is not None):
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            problems.append(f"document {index} ({doc.get('kind')}): {where}: {exc.message}")
    return problems
