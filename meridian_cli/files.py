"""meridian.io/v1 documents on disk: reading files and directories for ``apply``, ``diff``,
``delete`` (and the workloads and pods other commands take), and where and how ``export``
writes them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click
import yaml

from .resources import dig

SUFFIXES = (".yaml", ".yml", ".json")


def read_documents(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Every document in the files and directories given (recursively, *.yaml/*.yml/*.json, in
    name order; ``-`` is stdin); empty documents are skipped, anything else must be a mapping."""
    documents: list[dict[str, Any]] = []
    for path in paths:
        for source, text in _sources(path):
            try:
                loaded = list(yaml.safe_load_all(text))
            except yaml.YAMLError as exc:
                raise click.UsageError(f"{source}: not valid YAML: {exc}") from exc
            for number, document in enumerate(loaded, 1):
                if document is None:
                    continue
                if not isinstance(document, dict):
                    raise click.UsageError(f"{source}: document {number} is not a mapping (apiVersion, kind, metadata, spec)")
                documents.append(document)
    if not documents:
        raise click.UsageError("No documents found in " + ", ".join(paths))
    return documents


def _sources(path: str) -> Iterable[tuple[str, str]]:
    if path == "-":
        yield "<stdin>", click.get_text_stream("stdin").read()
        return
    where = Path(path)
    if where.is_dir():
        files = sorted(p for p in where.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    elif where.is_file():
        files = [where]
    else:
        raise click.UsageError(f"{path}: no such file or directory")
    for file in files:
        try:
            yield str(file), file.read_text()
        except OSError as exc:
            raise click.UsageError(f"{file}: {exc}") from exc


def document_file(document: Mapping[str, Any]) -> Path:
    """Where export writes a document: ``<kinds>/[<namespace>/][<qualifier>.]<name>.yaml``, the
    qualifier being what else names the object (a target's type, a federated object's kind)."""
    kind, meta = document["kind"], document["metadata"]
    parts = [kind.lower()[:-1] + "ies" if kind.endswith("y") else kind.lower() + "s"]
    if meta.get("namespace"):
        parts.append(meta["namespace"])
    qualifier = {"ConfigTarget": dig(document, "spec.type"), "FederatedObject": dig(document, "spec.template.kind")}.get(kind)
    parts.append(f"{qualifier}.{meta['name']}.yaml" if qualifier else f"{meta['name']}.yaml")
    return Path(*parts)


def canonical(document: Mapping[str, Any], *, resource_version: bool = True) -> dict[str, Any]:
    """A document as export writes it: apiVersion, kind, metadata, spec in that order, keys
    sorted below them (so two exports of the same configuration are byte-identical)."""
    metadata = {k: v for k, v in document["metadata"].items() if resource_version or k != "resourceVersion"}
    return {"apiVersion": document["apiVersion"], "kind": document["kind"], "metadata": _sorted(metadata),
            "spec": _sorted(document.get("spec") or {})}


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
