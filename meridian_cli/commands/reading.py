"""``get`` and ``describe``: every kind a user works with, in the formats a pipeline parses."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import click

from .. import output
from ..live import Events
from ..resources import RESOURCES, Resource
from . import complete_kinds, kind_argument, output_option, session


def _params(resource: Resource, selector: str, namespace: str, cluster: str, config_type: str,
            field_selector: tuple[str, ...]) -> dict[str, str]:
    """The list's query: label selector, namespace, cluster, type and ``--field-selector k=v``."""
    params: dict[str, str] = {}
    if selector:
        if not resource.label_selector:
            supported = ", ".join(r.name for r in RESOURCES if r.label_selector)
            raise click.UsageError(f"{resource.name} carry no labels the server filters on; -l works for {supported}.")
        params["labelSelector"] = selector
    if namespace:
        if not resource.namespaced:
            raise click.UsageError(f"{resource.name} have no namespace.")
        params["namespace"] = namespace
    if cluster:
        params["cluster"] = cluster
    if config_type:
        params["type"] = config_type
    for pair in field_selector:
        for item in pair.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise click.UsageError(f"--field-selector takes key=value pairs, not {item!r}.")
            params[key.strip()] = value.strip()
    return params


@click.command()
@click.argument("kind", metavar="KIND[,KIND...]", shell_complete=complete_kinds)
@click.argument("names", nargs=-1, metavar="[NAME]...")
@output_option()
@click.option("-l", "--selector", default="", metavar="SELECTOR", help="Label selector, e.g. env=prod,tier!=cache.")
@click.option("-n", "--namespace", default="", help="Only this namespace (namespaced kinds).")
@click.option("--cluster", default="", help="Only this member cluster (nodes, targets, node configs, ...).")
@click.option("--type", "config_type", default="", help="Only this config type (targets).")
@click.option("--field-selector", multiple=True, metavar="KEY=VALUE[,...]", help="Any filter the REST list takes.")
@click.option("-w", "--watch", is_flag=True, help="After listing, print changes as they happen (live over the websocket).")
@click.option("--watch-timeout", default=0.0, metavar="SECONDS", help="Stop watching after this long (0: until Ctrl-C).")
@click.option("--limit", default=0, metavar="N", help="At most N items (0: all).")
@click.option("--no-headers", is_flag=True, help="Table output without the header line.")
def get(kind: str, names: tuple[str, ...], fmt: str, selector: str, namespace: str, cluster: str, config_type: str,
        field_selector: tuple[str, ...], watch: bool, watch_timeout: float, limit: int, no_headers: bool) -> None:
    """Display one or many objects of a kind (or of several: clusters,targets).

    \b
    Kinds (and short names): clusters (cl), nodes (no), workloads (wl), pods (po),
    configtypes (ct), targets (tg),
    nodeconfigs (nc), downgrades (dg), quotagroups (qg), quotaworkloads (qw),
    federatedobjects (fo), propagationpolicies (pp), overridepolicies (op),
    schedulingpolicies (sp), templates (tpl), nodeschedulerconfigs (nsc),
    podschedulerconfigs (psc), bindings (scb), cpuallocations, jobs, audit, tokens.
    \b
    Examples:
      meridian get clusters
      meridian get nodes --cluster bj-1 -l machineModel=A4 -o wide
      meridian get targets AdminQoSConfiguration/hybrid-for-disk-hdd -o yaml
      meridian get fo -n shop -o name
      meridian get jobs --field-selector status=running --watch
      meridian get clusters,targets,quotagroups -o name
    """
    client = session().client
    if "," in kind:
        if names or watch:
            raise click.UsageError("Several kinds list everything of each; leave names and --watch out.")
        listed = []
        for one in (kind_argument(k) for k in kind.split(",") if k):
            rows = one.list(client, _params(one, selector, namespace, cluster, config_type, field_selector), limit=limit or None)
            listed.append((one, rows))
        if fmt in ("json", "yaml"):  # one list, as kubectl prints several kinds
            every = [row for _, rows in listed for row in rows]
            output.write(output.to_json({"items": every}) if fmt == "json" else output.to_yaml({"items": every}))
            return
        for number, (one, rows) in enumerate(listed):
            if number and fmt != "name":
                output.write("")
            output.items(one, rows, fmt, header=not no_headers)
        return
    resource = kind_argument(kind)
    options = {"namespace": namespace, "cluster": cluster, "type": config_type}
    if names:
        if watch:
            raise click.UsageError("--watch lists a kind; leave the names out.")
        found = [resource.find(client, name, options) for name in names]
        output.one(resource, found[0], fmt) if len(found) == 1 and fmt in ("json", "yaml") else \
            output.items(resource, found, fmt, header=not no_headers)
        return
    params = _params(resource, selector, namespace, cluster, config_type, field_selector)
    rows = resource.list(client, params, limit=limit or None)
    output.items(resource, rows, fmt, header=not no_headers)
    if watch:
        _watch(resource, params, fmt, rows, watch_timeout, limit or None)


def _watch(resource: Resource, params: Mapping[str, str], fmt: str, rows: list[dict[str, Any]], timeout: float,
           limit: int | None) -> None:
    """Print each object that changes (or appears) from now on: on every event of the kind's
    topic at once, and on a REST read every few seconds (kinds without a topic are polled).
    Each read lists what the first did (``--limit`` included: for jobs and the audit log, the
    newest), so watch a fleet-scale kind through a filter."""
    client = session().client
    seen = {_key(resource, row): _fingerprint(row) for row in rows}
    events = Events(client, [resource.topic], verify=session().verify) if resource.topic else None
    live = events.open() if events else False
    deadline = time.monotonic() + timeout if timeout else None
    last = time.monotonic()
    try:
        while deadline is None or time.monotonic() < deadline:
            wait = 2.0 if deadline is None else max(min(2.0, deadline - time.monotonic()), 0.01)
            message = events.next(wait) if live and events else (time.sleep(wait) or None)
            if message is None and time.monotonic() - last < 2.0:
                continue
            last = time.monotonic()
            changed = []
            for row in resource.list(client, params, limit=limit):
                key, print_ = _key(resource, row), _fingerprint(row)
                if seen.get(key) != print_:
                    seen[key] = print_
                    changed.append(row)
            if changed:
                output.items(resource, changed, fmt, header=False)
    except KeyboardInterrupt:
        pass
    finally:
        if events:
            events.close()


def _key(resource: Resource, row: Mapping[str, Any]) -> str:
    return str(row.get("id") or resource.display(row))


def _fingerprint(row: Mapping[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


# ---------------------------------------------------------------------------- describe

def _sections(resource: Resource, item: Mapping[str, Any]) -> dict[str, Any]:
    client = session().client
    detail = resource.detail_path(item)
    if resource.name == "targets":
        revisions = client.get(detail + "revisions/")[:5]
        return {"Progress": client.get(detail + "progress/"),
                "Revisions (newest first)": [{k: r[k] for k in ("number", "action", "created_by", "created", "reason")}
                                             for r in revisions]}
    if resource.name in ("quotagroups", "schedulingpolicies", "nodeschedulerconfigs", "podschedulerconfigs", "bindings"):
        return {"Revisions (newest first)": [{k: r.get(k) for k in ("number", "action", "created_by", "created", "reason")}
                                             for r in client.get(detail + "revisions/")[:5]]}
    if resource.name == "federatedobjects":
        explained = client.get(detail + "explain/")
        return {"Placement": explained.get("placement") or {}, "Scheduling": explained.get("explanation") or []}
    return {}


@click.command()
@click.argument("kind", metavar="KIND", shell_complete=complete_kinds)
@click.argument("name", metavar="NAME")
@click.option("-n", "--namespace", default="", help="The object's namespace (namespaced kinds).")
@click.option("--cluster", default="", help="The object's cluster (nodes).")
@click.option("--type", "config_type", default="", help="The target's config type.")
def describe(kind: str, name: str, namespace: str, cluster: str, config_type: str) -> None:
    """Show one object in detail.

    What goes with it is shown too: a target's progress and revisions, a federated object's
    placement and scheduling explanation, a group's or a template's revisions.

    \b
    Examples:
      meridian describe target AdminQoSConfiguration/hybrid-for-disk-hdd
      meridian describe fo shop/Deployment/storefront
      meridian describe quotagroup vision
    """
    resource = kind_argument(kind)
    item = resource.find(session().client, name, {"namespace": namespace, "cluster": cluster, "type": config_type})
    output.describe(f"{resource.singular} {resource.display(item)}", item, _sections(resource, item))


COMMANDS = [get, describe]
