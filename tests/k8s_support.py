"""Validate generated Kubernetes manifests against the real Kubernetes API schema.

``kubernetes-validate`` (a test dependency, see pyproject.toml) ships the OpenAPI schemas of every
Kubernetes release; ``validate_manifest`` checks one manifest strictly (unknown fields are errors)
for ``KUBERNETES_VERSION``, the version the bundle writes for (``optkit.bundle.k8s``).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from optkit.bundle.k8s import KUBERNETES_VERSION


def validate_manifest(data: dict, version: str = KUBERNETES_VERSION) -> None:
    """Raise ``AssertionError`` naming the field if ``data`` is not a valid object of its kind."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(data, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path)
        raise AssertionError(f"{data.get('kind')} {where}: {exc.message}") from None


def validate_file(path: Path, version: str = KUBERNETES_VERSION) -> list[str]:
    """Validate every document of a YAML manifest file; the kinds validated, in order."""
    documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    for document in documents:
        validate_manifest(document, version)
    return [d["kind"] for d in documents]
