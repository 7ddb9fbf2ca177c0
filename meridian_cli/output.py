"""Printing: ``-o table|wide|json|yaml|name`` for objects, errors with their field messages,
and ``describe``'s readable layout. Machine formats (json, yaml, name) go to stdout exactly
as the API answered, so a pipeline can parse them back; people get aligned columns."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from .resources import Resource

FORMATS = ("table", "wide", "json", "yaml", "name")

out = Console(soft_wrap=True, highlight=False)
err = Console(stderr=True, soft_wrap=True, highlight=False)


def _dumper() -> type[yaml.SafeDumper]:
    class Dumper(yaml.SafeDumper):
        """Block style, multi-line strings as literal blocks, keys in the API's order."""

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


DUMPER = _dumper()


def to_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=DUMPER, sort_keys=False, allow_unicode=True, default_flow_style=False)


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)


def write(text: str) -> None:
    """Raw text to stdout (machine formats: no markup, no wrapping)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, header: bool = True) -> None:
    """kubectl-style columns: no borders, left-aligned, never wrapped."""
    grid = Table(box=None, show_header=header, header_style="bold", pad_edge=False, padding=(0, 3, 0, 0))
    for name in headers:
        grid.add_column(name, no_wrap=True, overflow="ignore")
    for row in rows:
        grid.add_row(*row)
    wide = Console(soft_wrap=True, highlight=False, width=max(out.width, 1000) if not out.is_terminal else None)
    wide.print(grid, crop=False)


def items(resource: Resource, rows: Sequence[Mapping[str, Any]], fmt: str, *, header: bool = True) -> None:
    """A list in the chosen format (json/yaml: ``{"items": [...]}``, as kubectl prints a list)."""
    if fmt == "json":
        write(to_json({"items": list(rows)}))
    elif fmt == "yaml":
        write(to_yaml({"items": list(rows)}))
    elif fmt == "name":
        for row in rows:
            write(f"{resource.singular}/{resource.display(row)}")
    else:
        columns = [c for c in resource.columns if fmt == "wide" or not c.wide]
        if not rows and header:
            err.print(f"No {resource.name} found.")
            return
        table([c.header for c in columns], ([c.of(row) for c in columns] for row in rows), header=header)


def one(resource: Resource, item: Mapping[str, Any], fmt: str) -> None:
    if fmt == "json":
        write(to_json(item))
    elif fmt == "yaml":
        write(to_yaml(item))
    else:
        items(resource, [item], fmt)


def error(detail: str, errors: Mapping[str, Sequence[str]] | None = None, *, code: str = "") -> None:
    """The one error body for people: the detail, then each field's messages."""
    err.print(f"[bold red]error[/]{f' ({code})' if code and code != 'error' else ''}: {detail}", markup=True,
              highlight=False)
    for where, messages in (errors or {}).items():
        for message in messages:
            err.print(f"  {where}: {message}", markup=False)


def describe(title: str, item: Mapping[str, Any], sections: Mapping[str, Any] | None = None) -> None:
    """``Key: value`` lines for scalars, nested values as indented YAML, then extra sections."""
    out.print(f"[bold]{title}[/]")
    for key, value in item.items():
        _field(key, value)
    for name, value in (sections or {}).items():
        out.print(f"[bold]{name}:[/]")
        if isinstance(value, str):
            out.print(_indent(value), markup=False)
        else:
            out.print(_indent(to_yaml(value).rstrip()), markup=False)


def _field(key: str, value: Any) -> None:
    label = key.replace("_", " ").capitalize() + ":"
    if isinstance(value, (Mapping, list)) and value:
        out.print(label, markup=False)
        out.print(_indent(to_yaml(value).rstrip()), markup=False)
    else:
        shown = "<none>" if value in (None, "", [], {}) else (str(value).lower() if isinstance(value, bool) else value)
        out.print(f"{label:<26} {shown}", markup=False)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
