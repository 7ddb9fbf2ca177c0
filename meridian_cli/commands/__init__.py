"""The commands, by area; each module lists its top-level commands in ``COMMANDS``.

Shared here: the session of the running command and the options several commands take
(``-o``, ``--wait``/``--timeout``, ``--reason``, ``--dry-run``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..output import FORMATS
from ..resources import RESOURCES, Resource, resource


def session() -> Any:
    """The ``main.Session`` of the running command."""
    return click.get_current_context().find_root().obj


def kind_argument(value: str) -> Resource:
    try:
        return resource(value)
    except Exception as exc:  # noqa: BLE001 - an unknown kind is a usage error
        raise click.BadParameter(str(exc)) from exc


def complete_kinds(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    return [r.name for r in RESOURCES if r.name.startswith(incomplete)]


def output_option(default: str = "table", choices: tuple[str, ...] = FORMATS) -> Callable[[Any], Any]:
    return click.option("-o", "--output", "fmt", type=click.Choice(choices), default=default, show_default=True,
                        help="Output format.")


def wait_options(function: Callable[..., Any]) -> Callable[..., Any]:
    function = click.option("--timeout", default=600.0, show_default=True, metavar="SECONDS",
                            help="With --wait: give up (exit 5) after this long.")(function)
    return click.option("--wait", is_flag=True, help="Wait until the work is done, with live progress.")(function)


def reason_option(required: bool = False) -> Callable[[Any], Any]:
    return click.option("--reason", default="", required=required, help="Why: recorded in the audit log (and revisions).")


def dry_run_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--dry-run", is_flag=True,
                        help="Validate on the server and show what would happen; store nothing.")(function)
