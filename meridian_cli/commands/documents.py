"""Configuration as code: ``apply``, ``diff``, ``delete`` and ``export`` of ``meridian.io/v1``
documents. The server does the work (``POST /api/v1/apply/``, ``?dry_run=true`` for the diff,
``POST /api/v1/delete/``, ``GET /api/v1/export/``); this module reads and writes the files."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from .. import output
from ..exitcodes import ExitCode
from ..files import SUFFIXES, canonical, document_file, read_documents
from ..resources import dig, resource
from ..waiting import wait_object, wait_target
from . import dry_run_option, reason_option, session, wait_options


def files_option(function: Any) -> Any:
    return click.option("-f", "--filename", "paths", multiple=True, required=True, metavar="FILE|DIR",
                        help="Files or directories of meridian.io/v1 documents (repeatable; - is stdin).")(function)


def _label(result: Mapping[str, Any]) -> str:
    kind = str(result["kind"]).lower()
    name = result["name"]
    return f"{kind}/{result['namespace']}/{name}" if result.get("namespace") else f"{kind}/{name}"


# ---------------------------------------------------------------------------- apply, diff, delete

@click.command()
@files_option
@dry_run_option
@reason_option()
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True,
              help="Output format of the results.")
@wait_options
def apply(paths: tuple[str, ...], dry_run: bool, reason: str, fmt: str, wait: bool, timeout: float) -> None:
    """Create or update configuration from meridian.io/v1 documents.

    All documents or none: a refused one refuses the whole apply (exit 3) and its field is
    named. Applying the same files again changes nothing (each reports "unchanged": no
    revision, no audit entry). A document whose metadata.resourceVersion is stale (the object
    changed since it was exported) is refused with exit 4.

    \b
    Examples:
      meridian apply -f config/
      meridian apply -f target.yaml --reason "INC-4711: reclaim off on A4" --wait
      meridian export --kind ConfigTarget | meridian apply -f - --dry-run
    """
    documents = read_documents(paths)
    client = session().client
    body = client.post("apply/", {"documents": documents, "reason": reason}, dry_run=dry_run)
    _print_results(body["results"], fmt, dry_run=dry_run)
    if wait and not dry_run:
        _wait_for(body["results"], documents, timeout)


@click.command()
@files_option
def diff(paths: tuple[str, ...]) -> None:
    """Show what applying the documents would change.

    The server computes it: the apply runs as a dry run and reports each document's changes.

    Exit code 0 when nothing would change, 6 when something would, 3 when the server would
    refuse the documents, 4 when one is stale.

    \b
    Examples:
      meridian diff -f config/
      meridian diff -f config/ || echo "drift between Git and Meridian"
    """
    results = session().client.post("apply/", {"documents": read_documents(paths)}, dry_run=True)["results"]
    changed = [r for r in results if r["action"] != "unchanged"]
    for result in changed:
        output.out.print(f"[bold]{_label(result)}[/] ({result['action']})")
        for change in result["changes"]:
            sign, colour = {"add": ("+", "green"), "remove": ("-", "red")}.get(change["op"], ("~", "yellow"))
            old, new = json.dumps(change["old"], ensure_ascii=False), json.dumps(change["new"], ensure_ascii=False)
            shown = new if change["op"] == "add" else old if change["op"] == "remove" else f"{old} -> {new}"
            output.out.print(f"  [{colour}]{sign} {change['path']}: {shown}[/]", highlight=False)
    if changed:
        raise SystemExit(ExitCode.CHANGES)
    output.err.print(f"No changes: {len(results)} documents match the server.")


@click.command()
@files_option
@dry_run_option
@reason_option()
@click.option("--ignore-not-found", is_flag=True, help="An object that is not there is not an error.")
def delete(paths: tuple[str, ...], dry_run: bool, reason: str, ignore_not_found: bool) -> None:
    """Delete what meridian.io/v1 documents name.

    All or nothing, children before parents (a quota group's children, a template's bindings).

    \b
    Examples:
      meridian delete -f config/quotagroups/vision-ocr.yaml --reason "team merged"
      meridian delete -f old/ --dry-run
    """
    documents = read_documents(paths)
    body = session().client.post("delete/", {"documents": documents, "reason": reason}, dry_run=dry_run)
    _print_results(body["results"], "text", dry_run=dry_run)
    absent = [r for r in body["results"] if r["action"] == "absent"]
    if absent and not ignore_not_found:
        output.error(f"{len(absent)} of the objects were not there: " + ", ".join(_label(r) for r in absent))
        raise SystemExit(ExitCode.REFUSED)


def _print_results(results: list[dict[str, Any]], fmt: str, *, dry_run: bool) -> None:
    if fmt == "json":
        output.write(output.to_json({"dry_run": dry_run, "results": results}))
        return
    if fmt == "yaml":
        output.write(output.to_yaml({"dry_run": dry_run, "results": results}))
        return
    suffix = " (dry run)" if dry_run else ""
    for result in results:
        output.write(f"{_label(result)} {result['action']}{suffix}")


# ---------------------------------------------------------------------------- waiting after apply

def _wait_for(results: list[dict[str, Any]], documents: list[dict[str, Any]], timeout: float) -> None:
    """``apply --wait``: each changed target's rollout, then each changed federated object."""
    client, verify = session().client, session().verify
    for result in results:
        if result["action"] not in ("created", "configured"):
            continue
        document = documents[result["index"]]
        if result["kind"] == "ConfigTarget":
            ref = f"{dig(document, 'spec.type')}/{result['name']}"
            wait_target(client, resource("targets").find(client, ref, {}), timeout, verify=verify)
        elif result["kind"] == "FederatedObject":
            ref = f"{result['namespace'] or ''}/{dig(document, 'spec.template.kind')}/{result['name']}".lstrip("/")
            wait_object(client, resource("fo").find(client, ref, {}), timeout, verify=verify)


# ---------------------------------------------------------------------------- export

@click.command("export")
@click.option("-d", "--directory", type=click.Path(file_okay=False), default=None,
              help="Write one file per object under this directory (by kind).")
@click.option("--kind", "kinds", multiple=True, metavar="KIND", help="Only this kind (repeatable), e.g. ConfigTarget.")
@click.option("--force", is_flag=True, help="Replace the YAML files an earlier export left in the directory.")
@click.option("--without-resource-version", is_flag=True,
              help="Leave metadata.resourceVersion out (templates for other installations; no stale check on apply).")
def export(directory: str | None, kinds: tuple[str, ...], force: bool, without_resource_version: bool) -> None:
    """Export the whole configuration as meridian.io/v1 documents.

    One file per object under DIRECTORY (<kinds>/[<namespace>/][<qualifier>.]<name>.yaml), or one
    YAML stream on stdout.

    Clusters are exported without their credentials (kubeconfigs never leave Meridian). What
    is exported is what `apply` takes: export → an empty Meridian → apply gives the same
    configuration.

    \b
    Examples:
      meridian export -d config/
      meridian export --kind QuotaGroup > quotas.yaml
    """
    body = session().client.get("export/", kind=list(kinds) or None)
    documents = [canonical(d, resource_version=not without_resource_version) for d in body["documents"]]
    if directory is None:
        output.write("".join("---\n" + output.to_yaml(document) for document in documents) or "# no objects\n")
        return
    root = Path(directory)
    existing = [p for p in root.rglob("*") if p.is_file() and p.suffix in SUFFIXES] if root.exists() else []
    if existing and not force:
        raise click.UsageError(f"{root} already holds {len(existing)} YAML files; use --force to replace them.")
    for path in existing:
        path.unlink()
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True) if root.exists() else ():
        if not any(folder.iterdir()):
            shutil.rmtree(folder)
    for document in documents:
        target = root / document_file(document)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(output.to_yaml(document))
    output.err.print(f"Exported {len(documents)} objects to {root}/")


COMMANDS = [apply, diff, delete, export]
