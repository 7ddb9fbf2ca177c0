"""The console's verbs on the command line: ``rollout``, ``downgrade``, ``quota``,
``federation``, ``sched``, ``cpu`` and ``job``. Asynchronous ones take ``--wait`` and follow
the work live (``live.wait_until``: the websocket's events, REST reads as the backstop)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from .. import output
from ..exitcodes import ExitCode
from ..files import read_documents
from ..live import wait_until
from ..resources import NotFoundError, Resource, resource
from ..waiting import job_state, object_state, target_state, wait_object, wait_target
from . import dry_run_option, output_option, reason_option, session, wait_options

ROLLOUT_KINDS = ("targets", "federatedobjects")


def _rollout_kind(kind: str) -> Resource:
    found = resource(kind)
    if found.name not in ROLLOUT_KINDS:
        raise click.BadParameter(f"rollouts are of targets or federatedobjects, not {found.name}")
    return found


def _base(found: Resource, item: Mapping[str, Any]) -> str:
    return found.detail_path(item)


# ---------------------------------------------------------------------------- rollout

@click.group()
def rollout() -> None:
    """Follow and steer the rollout of a config target or a federated object.

    \b
    Examples:
      meridian rollout status target AdminQoSConfiguration/hybrid-for-disk-hdd
      meridian rollout pause fo shop/Deployment/storefront --reason "canary looks bad"
      meridian rollout undo target AdminQoSConfiguration/hybrid-for-disk-hdd --reason "revert INC-4711" --wait
    """


@rollout.command("status")
@click.argument("kind")
@click.argument("ref", metavar="TYPE/NAME|[NAMESPACE/]KIND/NAME")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until the rollout completes.")
@click.option("--timeout", default=600.0, show_default=True, metavar="SECONDS", help="Give up (exit 5) after this long.")
def rollout_status(kind: str, ref: str, wait: bool, timeout: float) -> None:
    """Show a rollout's progress (acknowledged / targeted nodes, or ready / desired replicas) and
    wait until it completes; exits 1 when it pauses on failures, 5 on timeout."""
    found = _rollout_kind(kind)
    client = session().client
    item = found.find(client, ref, {})
    if found.name == "targets":
        state = wait_target(client, item, timeout, verify=session().verify) if wait else target_state(client.get(_base(found, item) + "progress/"))
    else:
        state = wait_object(client, item, timeout, verify=session().verify) if wait else object_state(item)
    output.write(f"{found.singular}/{found.display(item)}: {state.done}/{state.total} {state.text}"
                 + (" — complete" if state.finished else ""))


def _verb(kind: str, ref: str, verb: str, body: Mapping[str, Any], dry_run: bool) -> tuple[Resource, dict[str, Any]]:
    found = _rollout_kind(kind)
    client = session().client
    item = found.find(client, ref, {})
    return found, client.post(_base(found, item) + f"{verb}/", dict(body), dry_run=dry_run) | {"id": item["id"]}


@rollout.command("pause")
@click.argument("kind")
@click.argument("ref")
@reason_option()
@dry_run_option
def rollout_pause(kind: str, ref: str, reason: str, dry_run: bool) -> None:
    """Hold a paced rollout where it is (nodes and clusters keep what they run)."""
    found, item = _verb(kind, ref, "pause", {"reason": reason}, dry_run)
    output.write(f"{found.singular}/{found.display(item)} paused{' (dry run)' if dry_run else ''}")


@rollout.command("resume")
@click.argument("kind")
@click.argument("ref")
@reason_option()
@dry_run_option
@wait_options
def rollout_resume(kind: str, ref: str, reason: str, dry_run: bool, wait: bool, timeout: float) -> None:
    """Let a paused rollout go on; --wait follows it to the end."""
    found, item = _verb(kind, ref, "resume", {"reason": reason}, dry_run)
    output.write(f"{found.singular}/{found.display(item)} resumed{' (dry run)' if dry_run else ''}")
    if wait and not dry_run:
        _follow(found, item, timeout)


def _follow(found: Resource, item: Mapping[str, Any], timeout: float) -> None:
    client = session().client
    fresh = client.get(found.detail_path(item))
    (wait_target if found.name == "targets" else wait_object)(client, fresh, timeout, verify=session().verify)


@rollout.command("undo")
@click.argument("kind")
@click.argument("ref")
@click.option("--to-revision", type=int, default=0, help="The revision to go back to (default: the one before the current).")
@reason_option()
@dry_run_option
@wait_options
def rollout_undo(kind: str, ref: str, to_revision: int, reason: str, dry_run: bool, wait: bool, timeout: float) -> None:
    """Roll back to an earlier revision: a new revision equal to it, validated like any change."""
    found = _rollout_kind(kind)
    client = session().client
    item = found.find(client, ref, {})
    base = _base(found, item)
    if not to_revision:
        current = int(item.get("revision") or 0)
        earlier = [r["number"] for r in client.get(base + "revisions/")
                   if r["number"] < current and r.get("action") not in ("delete", "restore")]
        if not earlier:
            raise NotFoundError(f"{found.display(item)} has no revision before {current} to go back to.")
        to_revision = max(earlier)
    revision = client.post(base + "rollback/", {"revision": to_revision, "reason": reason}, dry_run=dry_run)
    output.write(f"{found.singular}/{found.display(item)} rolled back to revision {to_revision} "
                 f"(new revision {revision.get('number')}){' (dry run)' if dry_run else ''}")
    if wait and not dry_run:
        _follow(found, item, timeout)


@rollout.command("history")
@click.argument("kind")
@click.argument("ref")
@output_option(choices=("table", "json", "yaml"))
def rollout_history(kind: str, ref: str, fmt: str) -> None:
    """List a target's or federated object's revisions, newest first."""
    found = _rollout_kind(kind)
    client = session().client
    rows = client.get(_base(found, found.find(client, ref, {})) + "revisions/")
    if fmt != "table":
        output.write(output.to_json(rows) if fmt == "json" else output.to_yaml(rows))
        return
    output.table(["REVISION", "ACTION", "ROLLBACK-OF", "BY", "CREATED", "REASON"],
                 [[str(r["number"]), r.get("action", ""), str(r.get("rollback_of") or ""), r.get("created_by", ""),
                   r.get("created", ""), r.get("reason", "")] for r in rows])


# ---------------------------------------------------------------------------- emergency downgrade

def _scope_name(cluster: str, selector: str) -> str:
    """What the console asks a user to type for a scope: "fleet", the cluster's name, or the selector."""
    return selector.strip() if selector.strip() else cluster or "fleet"


def _confirm(expected: str, what: str, yes: bool) -> None:
    if yes:
        return
    typed = click.prompt(f"{what}\nType {expected!r} to confirm", default="", show_default=False, err=True)
    if typed.strip() != expected:
        raise click.UsageError(f"The confirmation {typed.strip()!r} is not {expected!r}; nothing was done.")


@click.group()
def downgrade() -> None:
    """The emergency co-location downgrade, and its restore.

    Reclaim goes off for the fleet, a cluster or a label scope at once, bypassing rollout
    pacing; restore ends it.

    As on the overview page, it asks you to type the scope's name ("fleet", the cluster's
    name, or the label selector); --yes skips that for scripts.

    \b
    Examples:
      meridian downgrade create --cluster bj-1 --reason "INC-4711 latency" --wait
      meridian downgrade create --selector pool=online --reason drill --yes
      meridian downgrade restore emergency-downgrade-bj-1 --reason "INC-4711 over" --wait
    """


@downgrade.command("create")
@click.option("--cluster", default="", help="Only this member cluster (default: the whole fleet).")
@click.option("--selector", default="", help="Only nodes matching this label selector.")
@reason_option(required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for the scope's name.")
@dry_run_option
@wait_options
def downgrade_create(cluster: str, selector: str, reason: str, yes: bool, dry_run: bool, wait: bool, timeout: float) -> None:
    """Downgrade a scope now; --wait follows the nodes' acknowledgements live."""
    scope = _scope_name(cluster, selector)
    what = "the whole fleet" if scope == "fleet" else f"cluster {cluster}" if not selector else \
        f"nodes matching {selector}" + (f" in {cluster}" if cluster else "")
    _confirm(scope, f"Emergency downgrade of {what}: co-location reclaim goes off at once.", yes or dry_run)
    client = session().client
    body = client.post("nodeconfig/emergency-downgrade/", {"cluster": cluster or None, "selector": selector,
                                                           "reason": reason, "confirm": "DOWNGRADE"}, dry_run=dry_run)
    state = target_state(body["progress"])
    verb = "created" if body.get("created") else "already active"
    output.write(f"downgrade/{body['name']} {verb}{' (dry run)' if dry_run else ''}: "
                 f"{state.done}/{state.total} {state.text}")
    if wait and not dry_run:
        wait_target(client, body, timeout, title=f"downgrade/{body['name']}", verify=session().verify)


@downgrade.command("restore")
@click.argument("ref", metavar="NAME|ID")
@reason_option(required=True)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for the scope's name.")
@dry_run_option
@wait_options
def downgrade_restore(ref: str, reason: str, yes: bool, dry_run: bool, wait: bool, timeout: float) -> None:
    """End a downgrade: every node returns to exactly what it ran before; --wait follows it."""
    client = session().client
    item = resource("downgrades").find(client, ref, {})
    _confirm(_scope_name(item.get("cluster") or "", item.get("node_label_selector") or ""),
             f"Restore {item['name']}: nodes return to their regular config.", yes or dry_run)
    body = client.post(f"nodeconfig/emergency-downgrade/{item['id']}/restore/", {"reason": reason}, dry_run=dry_run)
    output.write(f"downgrade/{item['name']} restored{' (dry run)' if dry_run else ''}")
    if wait and not dry_run:
        wait_target(client, body, timeout, title=f"restore/{item['name']}", verify=session().verify)


# ---------------------------------------------------------------------------- quotas

@click.group()
def quota() -> None:
    """Quota-group what-ifs and moves between siblings.

    \b
    Examples:
      meridian quota check -f training-job.yaml --group vision-ocr
      meridian quota move vision-ocr vision-detection --amount limits.cpu=4 --reason "Q3 plan"
    """


@quota.command("check")
@click.option("-f", "--filename", "path", required=True, metavar="FILE", help="The workload (Deployment, Job, ...) as YAML.")
@click.option("--group", default="", help="Check against this group (default: the group its labels name).")
@output_option("text", ("text", "json", "yaml"))
def quota_check(path: str, group: str, fmt: str) -> None:
    """Would this workload be admitted now? Exit 0 when it would, 3 when it would be denied."""
    workload = read_documents([path])[0]
    decision = session().client.post("quotas/groups/check/", {"workload": workload, "group": group})
    if fmt != "text":
        output.write(output.to_json(decision) if fmt == "json" else output.to_yaml(decision))
    else:
        output.write(f"{'allowed' if decision['allowed'] else 'denied'}: {decision.get('message') or ''}".rstrip(": "))
    if not decision["allowed"]:
        raise SystemExit(ExitCode.REFUSED)


@quota.command("move")
@click.argument("source")
@click.argument("target")
@click.option("--amount", multiple=True, required=True, metavar="RESOURCE=QUANTITY", help="What to move (repeatable).")
@reason_option()
@dry_run_option
def quota_move(source: str, target: str, amount: tuple[str, ...], reason: str, dry_run: bool) -> None:
    """Move part of SOURCE's hard quota to its sibling TARGET, atomically."""
    moved = {}
    for pair in amount:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.UsageError(f"--amount takes RESOURCE=QUANTITY, not {pair!r}")
        moved[key.strip()] = value.strip()
    groups = session().client.post(f"quotas/groups/{source}/move/", {"target": target, "amount": moved, "reason": reason},
                                   dry_run=dry_run)
    output.items(resource("quotagroups"), groups, "table")


# ---------------------------------------------------------------------------- federation

@click.group()
def federation() -> None:
    """Why a federated object landed where it did, and scheduling it afresh.

    \b
    Examples:
      meridian federation explain shop/Deployment/storefront
      meridian federation reschedule shop/Deployment/storefront --reason "bj-1 back" --wait
    """


@federation.command("explain")
@click.argument("ref", metavar="[NAMESPACE/][KIND/]NAME")
@click.option("-n", "--namespace", default="")
@output_option("text", ("text", "json", "yaml"))
def federation_explain(ref: str, namespace: str, fmt: str) -> None:
    """Each cluster filtered or scored, and how the replicas were split."""
    client = session().client
    item = resource("fo").find(client, ref, {"namespace": namespace})
    explained = client.get(f"federation/objects/{item['id']}/explain/")
    if fmt != "text":
        output.write(output.to_json(explained) if fmt == "json" else output.to_yaml(explained))
        return
    output.table(["CLUSTER", "REPLICAS"], [[c, output_cell(n)] for c, n in (explained.get("placement") or {}).items()])
    for line in explained.get("explanation") or []:
        output.write(str(line))


def output_cell(value: Any) -> str:
    return "full copy" if value is None else str(value)


@federation.command("reschedule")
@click.argument("ref", metavar="[NAMESPACE/][KIND/]NAME")
@click.option("-n", "--namespace", default="")
@reason_option()
@dry_run_option
@wait_options
def federation_reschedule(ref: str, namespace: str, reason: str, dry_run: bool, wait: bool, timeout: float) -> None:
    """Schedule an object afresh (it may move replicas); --wait follows it until Ready."""
    client = session().client
    item = resource("fo").find(client, ref, {"namespace": namespace})
    client.post(f"federation/objects/{item['id']}/reschedule/", {"reason": reason}, dry_run=dry_run)
    output.write(f"federatedobject/{resource('fo').display(item)} rescheduling{' (dry run)' if dry_run else ''}")
    if wait and not dry_run:
        wait_object(client, item, timeout, verify=session().verify)


# ---------------------------------------------------------------------------- scheduling

@click.group()
def sched() -> None:
    """Scheduling templates rendered into a pod, and placements simulated.

    \b
    Examples:
      meridian sched render -f pod.yaml
      meridian sched simulate --cluster bj-1 -f pod.yaml --replicas 50 --policy binpack --compare-with default
    """


def _pod(path: str) -> dict[str, Any]:
    return read_documents([path])[0]


@sched.command("render")
@click.option("-f", "--filename", "path", required=True, metavar="FILE", help="The pod as YAML or JSON.")
@click.option("-n", "--namespace", default="", help="The pod's namespace (default: its own).")
@output_option("yaml", ("yaml", "json"))
def sched_render(path: str, namespace: str, fmt: str) -> None:
    """What the mutating webhook would do to this pod now: the merged affinity and the patch, or the denial."""
    result = session().client.post("scheduling/preview/", {"pod": _pod(path), "namespace": namespace})
    output.write(output.to_json(result) if fmt == "json" else output.to_yaml(result))


@sched.command("simulate")
@click.option("--cluster", required=True, help="The cluster whose inventory is the snapshot.")
@click.option("-f", "--filename", "path", required=True, metavar="FILE", help="The pod as YAML or JSON.")
@click.option("--replicas", default=10, show_default=True)
@click.option("--policy", default="", help="The scheduling policy (default: the pod's, else the default).")
@click.option("--compare-with", default="", help="A second policy run on the same snapshot.")
@output_option("yaml", ("yaml", "json"))
def sched_simulate(cluster: str, path: str, replicas: int, policy: str, compare_with: str, fmt: str) -> None:
    """Place N replicas on a snapshot of a cluster's inventory; nothing is written."""
    result = session().client.post("scheduling/simulate/", {"cluster": cluster, "pod": _pod(path), "replicas": replicas,
                                                            "policy": policy, "compare_with": compare_with})
    output.write(output.to_json(result) if fmt == "json" else output.to_yaml(result))


# ---------------------------------------------------------------------------- CPU co-location

@click.group()
def cpu() -> None:
    """CPU co-location: which nodes could take an exclusive instance.

    \b
    Examples:
      meridian cpu what-if --cpus 16
      meridian cpu what-if --cpus 32 --strategy Spread --cluster bj-1 -o json
    """


@cpu.command("what-if")
@click.option("--cpus", type=int, required=True, help="Exclusive CPUs the instance needs.")
@click.option("--strategy", type=click.Choice(["SameCoreFirst", "Spread", "BindAllCPUs"]), default="SameCoreFirst",
              show_default=True)
@click.option("--cluster", default="", help="Only this cluster's nodes.")
@click.option("--app", default="", help="The instance's app (anti-affinity with its own instances).")
@click.option("--limit", default=20, show_default=True, help="At most this many candidate nodes.")
@output_option("table", ("table", "json", "yaml"))
def cpu_what_if(cpus: int, strategy: str, cluster: str, app: str, limit: int, fmt: str) -> None:
    """Best-fitting nodes for an exclusive instance of N CPUs now; exit 3 when none fits."""
    answer = session().client.post("scheduling/cpu/what-if/", {"request": cpus, "strategy": strategy, "cluster": cluster,
                                                              "app": app, "limit": limit})
    if fmt != "table":
        output.write(output.to_json(answer) if fmt == "json" else output.to_yaml(answer))
    else:
        output.table(["CLUSTER", "NODE", "FITS", "CPUSET", "LARGEST-EXCLUSIVE", "REASON"],
                     [[n["cluster"], n["node"], "yes" if n["ok"] else "no", n.get("cpuset") or "", str(n["largest_exclusive"]),
                       n.get("reason") or ""] for n in answer["nodes"]])
        output.err.print(f"{answer['count']} nodes could take {cpus} exclusive CPUs"
                         + (f"; {answer['reason']}" if answer.get("reason") else ""))
    if not answer["ok"]:
        raise SystemExit(ExitCode.REFUSED)


# ---------------------------------------------------------------------------- jobs

@click.group()
def job() -> None:
    """Background jobs: cancel one, or wait for one to finish.

    \b
    Examples:
      meridian get jobs --field-selector status=running
      meridian job cancel 4211
      meridian job wait 4212 --timeout 120
    """


@job.command("cancel")
@click.argument("job_id", type=int)
@dry_run_option
def job_cancel(job_id: int, dry_run: bool) -> None:
    """Cancel a job that has not finished and revoke its task (exit 4 when it already finished)."""
    body = session().client.post(f"core/jobs/{job_id}/cancel/", dry_run=dry_run)
    output.write(f"job/{job_id} {body['status']}{' (dry run)' if dry_run else ''}")


@job.command("wait")
@click.argument("job_id", type=int)
@click.option("--timeout", default=600.0, show_default=True, metavar="SECONDS")
def job_wait(job_id: int, timeout: float) -> None:
    """Wait until a job succeeds (exit 1 when it fails or is canceled, 5 on timeout)."""
    client = session().client
    state = wait_until(client, title=f"job/{job_id}", topics=[f"job-{job_id}"],
                       read=lambda: job_state(client.get(f"core/jobs/{job_id}/")), timeout=timeout, verify=session().verify)
    output.write(f"job/{job_id} {state.text}")


COMMANDS = [rollout, downgrade, quota, federation, sched, cpu, job]
