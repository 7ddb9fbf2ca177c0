"""The access matrix: every URL and every websocket topic × every kind of caller.

Generated, not listed by hand: the URL resolver is walked (``tests.test_access.all_routes``)
and the topic kinds come from ``core.events``. Each caller — anonymous, viewer, operator,
admin, a quota-group owner without a role, a scoped operator of two clusters out of three
(``x`` and ``y``; cluster ``1`` is outside), a scoped operator of the quota subtree ``owned``,
a node agent's token, an admission webhook's token — asks for every page and API read, tries
every API write (with a stale ``If-Match`` and an empty body, so a write that passes the
permission check changes nothing: 412 or 400), and subscribes to every topic kind. The quota
group routes are also asked about ``owned`` (inside the quota operator's subtree) and ``1``
(its parent, outside it): the scoped-quota rows. The result is compared with the committed
``docs/access-matrix.md``: any change of who may do what shows up as a diff to review
(``MERIDIAN_WRITE_ACCESS_MATRIX=1 pytest tests/test_access_matrix.py`` rewrites it), and a
URL or topic without a row there — a rule nobody reviewed — fails by name.
Invariants are asserted whatever the file says: no 5xx; anonymous callers and machine
tokens reach nothing but the public and machine endpoints; a user without a role reads no
data; viewers never pass a write; scoped operators never pass a write or a subscription on
what lies outside their scope. ``tests/test_scoped_roles.py`` checks what the answers hold.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group
from django.test import Client

from core import bindings, events
from core.models import APIToken, Job, ObjectChange, RoleBinding
from core.roles import OPERATOR
from core.worker_signals import beat_once
from federation.models import FederatedObject
from fleet.models import Cluster, Node
from fleet.tokens import issue_token
from nodeconfig.models import ConfigTarget, ConfigType
from quotas.models import QuotaGroup
from scheduling.models import (
    CPUAllocation,
    NodeCPU,
    NodeSchedulerConfig,
    PodSchedulerConfig,
    SchedulerConfigBinding,
    SchedulingPolicy,
)
from tests.conftest import PASSWORD
from tests.test_access import MACHINE_PREFIXES, PUBLIC, SKIPPED_PREFIXES, UNSAFE, _is_api, all_routes

pytestmark = pytest.mark.once  # minutes, and the same on every database: CI runs it on PostgreSQL only

MATRIX = Path(__file__).resolve().parent.parent / "docs" / "access-matrix.md"
PERSONAS = ("anonymous", "viewer", "operator", "admin", "quota-owner", "scoped-operator", "quota-operator", "agent-token",
            "webhook-token")
#: The scoped operator's clusters (cluster "1" is outside), and the quota operator's subtree.
SCOPED_CLUSTERS, QUOTA_SUBTREE = ("x", "y"), "owned"
#: Quota group routes asked again about a group inside the quota operator's subtree and its parent.
QUOTA_GROUP_SAMPLES = ("owned", "1")
STALE = '"stale-etag-for-the-access-matrix"'


def _after_explicit_ids(*models) -> None:
    """Rows created with explicit ids leave PostgreSQL's sequences behind: move them past."""
    from django.core.management.color import no_style
    from django.db import connection

    with connection.cursor() as cursor:
        for sql in connection.ops.sequence_reset_sql(no_style(), models):
            cursor.execute(sql)


def _world(django_user_model) -> dict[str, dict]:
    """Objects the sampled URLs name (ids 1, names "1" and "x"), and one caller per persona."""
    for pk, name in enumerate(("1", "x", "y"), start=1):
        cluster = Cluster.objects.create(name=name, connector=Cluster.ConnectorKind.SIMULATED)
        Node.objects.create(pk=pk, cluster=cluster, name="x", labels={})
    Job.objects.create(pk=1, kind="probe", triggered_by="test")
    config_type = ConfigType.objects.create(name="x", resource="xs")
    ConfigTarget.objects.create(pk=1, config_type=config_type, name="x", config={})
    FederatedObject.objects.create(pk=1, name="x", api_version="v1", kind="ConfigMap",
                                   template={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
                                   template_hash="x")
    ObjectChange.objects.create(pk=1, actor="test", action="action", object_repr="probe")
    SchedulingPolicy.objects.create(name="1", config={})
    NodeSchedulerConfig.objects.create(name="1", spec={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]}]}}})
    PodSchedulerConfig.objects.create(name="1", spec={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}})
    SchedulerConfigBinding.objects.create(pk=1, name="x", spec={"selector": {}, "nodeSchedulerConfig": {"name": "1"}})
    node = Node.objects.get(cluster__name="x", name="x")
    node_cpu = NodeCPU.objects.create(pk=1, node=node, cluster=node.cluster, name="x", topology=[[0, 0, 0, 0], [1, 0, 0, 0]],
                                      cpus=2, cores=1)
    CPUAllocation.objects.create(pk=1, node_cpu=node_cpu, namespace="x", pod_name="x", mode=CPUAllocation.Mode.SHARED)
    _after_explicit_ids(Node, Job, ConfigTarget, FederatedObject, ObjectChange, SchedulerConfigBinding, NodeCPU, CPUAllocation)
    root = QuotaGroup.objects.create(name="1", path="/1/", hard={"limits.cpu": "10"})
    QuotaGroup.objects.create(name="owned", parent=root, path="/1/owned/", depth=1, hard={"limits.cpu": "5"})
    users = {}
    for persona, role in (("viewer", "viewer"), ("operator", "operator"), ("admin", "admin"), ("quota-owner", None),
                          ("scoped-operator", None), ("quota-operator", None)):
        # user 1 of the sampled URLs is the viewer, whatever ids earlier tests used
        user = django_user_model.objects.create_user(username=f"matrix-{persona}", password=PASSWORD, id=1 if persona == "viewer" else None)
        if persona == "viewer":
            _after_explicit_ids(django_user_model)
        if role:
            user.groups.add(Group.objects.get(name=role))
        users[persona] = user
    QuotaGroup.objects.get(name="owned").owners.add(users["quota-owner"])
    bindings.grant(users["scoped-operator"], bindings.Grant(OPERATOR, RoleBinding.Scope.CLUSTERS, SCOPED_CLUSTERS))
    bindings.grant(users["quota-operator"], bindings.Grant(OPERATOR, RoleBinding.Scope.QUOTA, (QUOTA_SUBTREE,)))
    cluster = Cluster.objects.get(name="x")
    headers = {"anonymous": {}, "agent-token": {"HTTP_AUTHORIZATION": f"Bearer {issue_token(cluster, 'agent')[1]}"},
               "webhook-token": {"HTTP_AUTHORIZATION": f"Bearer {issue_token(cluster, 'webhook')[1]}"}}
    for persona, user in users.items():
        token, raw = APIToken.issue(user)
        if persona == "viewer":  # token 1 of the sampled URLs is the viewer's, whatever ids earlier tests used
            APIToken.objects.filter(pk=token.pk).update(id=1)
        headers[persona] = {"HTTP_AUTHORIZATION": f"Token {raw}", "user": user}
    _after_explicit_ids(APIToken)
    return headers


def _client(persona: str, headers: dict, api: bool) -> tuple[Client, dict]:
    client = Client(enforce_csrf_checks=False)
    extra = {k: v for k, v in headers[persona].items() if k != "user"}
    if "user" in headers[persona]:
        if api:
            return client, extra
        client.force_login(headers[persona]["user"])
        extra.pop("HTTP_AUTHORIZATION", None)
    return client, extra


def _cell(response) -> str:
    if response.status_code in (301, 302):
        return "login" if "/accounts/login/" in response.get("Location", "") else f"{response.status_code}"
    return str(response.status_code)


def _write_cell(response) -> str:
    code = response.status_code
    return "refused" if code in (401, 403) else ("absent" if code in (404, 405) else "passes")


def sampled_routes():
    """Every route, and the quota group routes again for the scoped-quota samples."""
    for path, callback in all_routes():
        yield path, callback
        if path.startswith("/api/v1/fleet/clusters/1/"):  # the API samples cluster "1" (outside the scope): "x" too
            yield path.replace("/clusters/1/", "/clusters/x/", 1), callback
        if path.startswith("/api/v1/quotas/groups/1/"):  # the API samples group "1" (the subtree's parent): "owned" too
            yield path.replace("/groups/1/", f"/groups/{QUOTA_SUBTREE}/", 1), callback
        if path.startswith("/quotas/groups/x/"):  # the pages sample a group that does not exist: both
            for name in QUOTA_GROUP_SAMPLES:
                yield path.replace("/groups/x/", f"/groups/{name}/", 1), callback


def _reads(headers) -> dict[tuple[str, str], str]:
    cells = {}
    for path, callback in sampled_routes():
        if path.startswith(SKIPPED_PREFIXES) or path == "/accounts/logout/":
            continue
        beat_once("matrix-worker@host")  # /readyz is ready: a worker's heartbeat is fresh
        for persona in PERSONAS:
            client, extra = _client(persona, headers, _is_api(callback) or path.startswith(MACHINE_PREFIXES))
            cells[(f"GET {path}", persona)] = _cell(client.get(path, **extra))
    return cells


def _writes(headers) -> dict[tuple[str, str], str]:
    cells = {}
    for path, callback in sampled_routes():
        if not _is_api(callback) or path.startswith(SKIPPED_PREFIXES) or path in PUBLIC:
            continue
        actions = getattr(callback, "actions", None)
        for method in UNSAFE:
            if not (method in actions if actions else hasattr(callback.cls, method)):
                continue
            for persona in PERSONAS:
                client, extra = _client(persona, headers, True)
                response = getattr(client, method)(path, data="{}", content_type="application/json", HTTP_IF_MATCH=STALE,
                                                   **extra)
                assert response.status_code < 500, f"{method.upper()} {path} as {persona}: {response.status_code}"
                cells[(f"{method.upper()} {path}", persona)] = _write_cell(response)
    return cells


async def _topics(headers) -> dict[tuple[str, str], str]:
    """Every topic kind × persona, subscribing through the real ASGI application."""
    from config.asgi import application

    cells = {}
    for kind in sorted(events.kinds(), key=lambda k: k.name):
        samples = ["x", "1"] if kind.name == "cluster" else ["1"]  # a cluster inside the scoped operator's scope, one outside
        for topic in [kind.name] if kind.lookup is None else [f"{kind.name}-{s}" for s in samples]:
            for persona in PERSONAS:
                cells[(f"WS {topic}", persona)] = await _subscribe(application, topic, headers[persona])
    return cells


async def _subscribe(application, topic: str, persona: dict) -> str:
    headers = [(b"origin", b"http://localhost")]
    if "user" in persona:
        headers.append((b"authorization", persona["HTTP_AUTHORIZATION"].encode()))
    elif persona.get("HTTP_AUTHORIZATION"):
        headers.append((b"authorization", persona["HTTP_AUTHORIZATION"].encode()))
    communicator = WebsocketCommunicator(application, "/ws/", headers=headers)
    connected, _ = await communicator.connect()
    if not connected:
        return "closed"
    try:
        hello = await communicator.receive_json_from(timeout=5)
        assert hello["type"] == "hello"
        await communicator.send_json_to({"type": "subscribe", "topic": topic})
        answer = await communicator.receive_json_from(timeout=5)
        return "subscribed" if answer["type"] == "subscribed" else answer.get("code", "error")
    finally:
        await communicator.disconnect()


def render(cells: dict[tuple[str, str], str], title: str, legend: list[str]) -> str:
    rows = sorted({row for row, _ in cells}, key=lambda r: (r.split(" ", 1)[1], r))
    lines = [f"## {title}", "", *legend, "", "| request | " + " | ".join(PERSONAS) + " |", "|---|" + "---|" * len(PERSONAS)]
    for row in rows:
        lines.append(f"| `{row}` | " + " | ".join(cells[(row, p)] for p in PERSONAS) + " |")
    return "\n".join(lines) + "\n"


HEADER = ["# Access matrix", "",
          "Generated by `tests/test_access_matrix.py` (`MERIDIAN_WRITE_ACCESS_MATRIX=1` rewrites it); the tests fail",
          "when behaviour and this file disagree, so a change of who may do what is a reviewed diff, and when a",
          "URL or topic has no row here: a new one needs its rule decided.", "",
          "Callers: `quota-owner` owns the quota group `owned` and holds no role; `scoped-operator` is an operator",
          "of the clusters `x` and `y` only (cluster `1` is outside: the API rows sample `1`, the pages `x`, and the",
          "cluster API rows are asked again about `x`); `quota-operator` is an operator of the quota subtree `owned`",
          "only (the scoped-quota rows ask about `owned` and about its parent `1`).", ""]
HTTP_LEGEND = ["Reads show the HTTP status (`login`: sent to the login page). Writes are sent with a stale",
               "`If-Match` and an empty body: `passes` = the caller got past the permission check (412/400/…,",
               "nothing changed), `refused` = 401/403, `absent` = 404/405."]
WS_LEGEND = ["Subscribing on `/ws/`: `subscribed`, `forbidden`, `unknown_topic`, or `closed` (refused at the handshake).",
             "A kind-wide topic carries every object's events: it needs the role fleet-wide; callers who may view some",
             "objects only (scoped roles, quota owners) subscribe to their objects' own topics."]


def committed_rows(title: str) -> set[str]:
    """The requests the committed file has a row for in one section."""
    current = MATRIX.read_text() if MATRIX.exists() else ""
    section = current.partition(f"## {title}\n")[2].split("\n## ", 1)[0]
    return {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}


def every_request_has_a_rule(title: str, cells: dict[tuple[str, str], str]) -> None:
    """A URL or topic the resolver or the event bus knows and the committed matrix does not is a
    rule nobody reviewed: fail naming it (before the whole-section comparison)."""
    if os.environ.get("MERIDIAN_WRITE_ACCESS_MATRIX"):
        return
    missing = sorted({row for row, _ in cells} - committed_rows(title))
    assert not missing, (f"no rule in docs/access-matrix.md ({title}) for: {', '.join(missing)} — decide who may, then "
                         "rewrite it with MERIDIAN_WRITE_ACCESS_MATRIX=1 and review the diff")


def check_section(title: str, text: str) -> None:
    """Compare (or, with MERIDIAN_WRITE_ACCESS_MATRIX, rewrite) one section of the matrix file."""
    current = MATRIX.read_text() if MATRIX.exists() else "\n".join(HEADER) + "\n"
    head, _, rest = current.partition(f"## {title}\n")
    tail = ("## " + rest.split("\n## ", 1)[1]) if "\n## " in rest else ""
    mine = current[len(head):len(current) - len(tail)] if rest else ""
    if os.environ.get("MERIDIAN_WRITE_ACCESS_MATRIX"):
        if not rest:
            head, tail = current.rstrip("\n") + "\n\n", ""
        MATRIX.write_text(head + text + ("\n" + tail if tail else ""))
        return
    assert mine.strip() == text.strip(), f"who may do what changed ({title}): review and rewrite docs/access-matrix.md"


@pytest.mark.django_db(transaction=True)
def test_the_http_access_matrix(django_user_model):
    headers = _world(django_user_model)
    cells = _reads(headers) | _writes(headers)
    for (row, persona), cell in cells.items():
        assert not cell.startswith("5"), f"{row} as {persona}: {cell}"
        path = row.split(" ", 1)[1]
        if persona == "anonymous" and path not in PUBLIC and not path.startswith(MACHINE_PREFIXES):
            assert cell in ("login", "401", "403", "refused", "absent", "405"), f"{row} as anonymous: {cell}"
        if persona in ("agent-token", "webhook-token") and not path.startswith(MACHINE_PREFIXES) and path not in PUBLIC:
            assert not cell.startswith("2") and cell != "passes", f"{row} as {persona}: {cell}"
        if persona == "viewer" and row.split(" ", 1)[0] in ("POST", "PUT", "PATCH", "DELETE") \
                and not path.startswith("/api/v1/auth/tokens/"):
            assert cell != "passes", f"a viewer passed {row}"
    assert cells[("GET /", "quota-owner")] == "200" and cells[("GET /api/v1/core/jobs/", "quota-owner")] == "403"
    for persona in ("scoped-operator", "quota-operator"):  # nothing outside the scope, whatever the file says
        for row in ("GET /api/v1/fleet/clusters/1/", "POST /api/v1/fleet/clusters/1/cordon/", "GET /api/v1/quotas/groups/1/",
                    "PATCH /api/v1/quotas/groups/1/"):
            assert not cells[(row, persona)].startswith("2") and cells[(row, persona)] != "passes", (row, persona)
    assert cells[("GET /fleet/clusters/x/", "scoped-operator")] == "200"
    assert cells[("POST /api/v1/fleet/clusters/x/cordon/", "scoped-operator")] == "passes"
    assert cells[("GET /api/v1/quotas/groups/owned/", "quota-operator")] == "200"
    every_request_has_a_rule("HTTP", cells)
    check_section("HTTP", render(cells, "HTTP", HTTP_LEGEND))


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_access_matrix(django_user_model):
    from asgiref.sync import sync_to_async
    from django.db import connections

    try:
        headers = await sync_to_async(_world)(django_user_model)
        cells = await _topics(headers)
    finally:  # the executor thread keeps its connection for the whole session otherwise
        await sync_to_async(connections.close_all)()
    for (row, persona), cell in cells.items():
        if persona in ("anonymous", "agent-token", "webhook-token"):
            assert cell == "closed", f"{row} as {persona}: {cell}"
    # Kind-wide topics carry every object's events: fleet-wide roles only; scoped callers use per-object topics.
    assert cells[("WS job-1", "quota-owner")] == "forbidden" and cells[("WS quotas", "quota-owner")] == "forbidden"
    assert cells[("WS job-1", "viewer")] == "subscribed" and cells[("WS audit", "viewer")] == "subscribed"
    for kind in ("fleet", "nodeconfig", "federation", "quotas", "audit", "water-levels", "scheduling"):
        assert cells[(f"WS {kind}", "scoped-operator")] == "forbidden", kind
    assert cells[("WS cluster-x", "scoped-operator")] == "subscribed"
    assert cells[("WS cluster-1", "scoped-operator")] == "forbidden"
    every_request_has_a_rule("Websocket", cells)
    await sync_to_async(check_section)("Websocket", render(cells, "Websocket", WS_LEGEND))
