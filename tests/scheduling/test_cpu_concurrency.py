"""200 concurrent exclusive allocations against one node of a running server.

uvicorn serves the real ASGI app in a thread (as the browser tests do), sharing the test
database; 200 real HTTP POSTs from 32 threads race for the seed host's 96 sellable CPUs.
Each allocation locks the node's row (``select_for_update``: PostgreSQL serialises per node;
SQLite's IMMEDIATE transactions serialise every writer) and the claims table is unique per
(node, CPU), so no CPU is ever handed out twice; the losers get a clear 409. The state the
database ends with is then delivered as annotations and rebuilt from them: the same.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.models import APIToken
from fleet.services import connector_for
from scheduling.cpu import delivery, store
from scheduling.cpu.cpuset import parse_cpuset
from scheduling.cpu.state import CPU_SHAREPOOL, rebuild_state
from scheduling.models import CPUAllocation, CPUClaim, NodeCPU
from tests.servers import asgi_server  # noqa: F401 (fixture)

from .cpu_fixtures import SEED_RESERVED, cpus_of, instance_pod, synced_host

REQUESTS = 200
THREADS = 32


@pytest.fixture
def server(asgi_server):  # noqa: F811 (tests.servers.asgi_server, imported above)
    return asgi_server


def post(url: str, token: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_200_concurrent_allocations_never_share_a_cpu(server, operator):
    cluster, name, node = synced_host()
    version = node.version
    _, token = APIToken.issue(operator)
    rng = random.Random(4)
    bodies = [{"namespace": "db", "name": f"inst-{i:03d}", "app": f"app-{i:03d}", "reason": "load test",
               "request": 65 if i % 50 == 7 else rng.randint(1, 4),
               "strategy": ("SameCoreFirst", "Spread")[i % 2]} for i in range(REQUESTS)]
    url = f"{server}/api/v1/scheduling/cpu/nodes/{node.pk}/allocate/"
    started = time.monotonic()
    with ThreadPoolExecutor(THREADS) as pool:
        answers = list(pool.map(lambda body: post(url, token, body), bodies))
    elapsed = time.monotonic() - started

    statuses = [status for status, _ in answers]
    assert set(statuses) <= {201, 409}, [a for a in answers if a[0] not in (201, 409)][:3]
    granted = [body for status, body in answers if status == 201]
    refused = [body for status, body in answers if status == 409]
    assert granted and refused and len(granted) + len(refused) == REQUESTS
    for body in refused:  # clear refusals: a code, the rule's reason, the field at fault
        assert body["code"] in ("insufficient_cpu", "instance_cap") and body["errors"]["request"] == [body["detail"]]
    assert sum(1 for b in refused if b["code"] == "instance_cap") == 4

    # no CPU double-booked, nothing reserved handed out, within the sellable CPUs
    held = [cpu for body in granted for cpu in body["cpus"]]
    assert len(held) == len(set(held))
    assert not set(held) & set(parse_cpuset(SEED_RESERVED))
    node = NodeCPU.objects.get(pk=node.pk)
    assert node.exclusive_used == len(held) <= 96
    assert node.version == version + len(granted)  # one guarded bump per allocation, none lost
    rows = list(CPUAllocation.objects.filter(node_cpu=node, mode="exclusive"))
    assert sorted(r.instance for r in rows) == sorted(f"db/{b['name']}" for b in granted)
    assert CPUClaim.objects.filter(node_cpu=node).count() == len(held)
    # the requests that lost lost for want of CPUs: the smallest refused one did not fit what was left
    smallest = min(b["request"] for b, (status, _) in zip(bodies, answers) if status == 409 and b["request"] < 65)
    assert smallest > 96 - len(held)

    # delivered as annotations, the node's state rebuilds to exactly the database's
    with connector_for(cluster) as connector:
        for body in granted:
            connector.apply(instance_pod("db", body["name"], name, cpu=str(len(body["cpus"]))))
        report = delivery.deliver(node.pk, connector)
        assert report.pods == len(granted) and not report.errors
        pods = [p for p in connector.list_pods().items if p["spec"].get("nodeName") == name]
        annotations = connector.get("v1", "Node", name)["metadata"]["annotations"]
    for body in granted:
        pod = next(p for p in pods if p["metadata"]["name"] == body["name"])
        assert cpus_of(pod["metadata"]["annotations"]) == body["cpus"]
    state = store.current_state(node)
    rebuilt = rebuild_state(state.topology, pods, node_annotations=annotations)
    assert rebuilt.ok and not rebuilt.conflicts
    assert {k: a.cpus for k, a in rebuilt.state.exclusive.items()} == {k: a.cpus for k, a in state.exclusive.items()}
    assert set(json.loads(annotations[CPU_SHAREPOOL])["cpuIDs"]) == state.share_pool
    print(f"\n{REQUESTS} concurrent POSTs from {THREADS} threads in {elapsed:.2f}s: {len(granted)} granted "
          f"({len(held)} CPUs), {len(refused)} refused")
