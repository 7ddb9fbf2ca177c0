"""Redis stops for 30 s: pages, the REST API, the agent API, the quota webhook and the
emergency downgrade keep answering truthfully from the database; once Redis is back the
downgrade that was accepted meanwhile is delivered (the outbox sends it again) and live
streaming resumes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid

import httpx
import websockets

from core.models import Job
from fleet.models import Cluster
from quotas.models import QuotaGroup

from .conftest import serving_edge
from .processes import wait_until

OUTAGE_SECONDS = 30


def review(uid: str, group: str, cpu: str) -> dict:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": f"web-{uid[:8]}", "namespace": "shop", "labels": {"biz.group.resource.quota": group}},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}},
                                        "spec": {"containers": [{"name": "c", "image": "x",
                                                                 "resources": {"limits": {"cpu": cpu, "memory": "1Gi"}}}]}}}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "operation": "CREATE",
        "namespace": "shop", "name": deployment["metadata"]["name"], "object": deployment,
        "userInfo": {"username": "kube"}}}


async def next_event(base: str, token: str, topic: str, trigger, timeout: float = 30) -> dict:
    """Connect, subscribe to ``topic``, run ``trigger`` and return the first event that arrives."""
    async with websockets.connect(base.replace("http", "ws") + "/ws/", origin="http://localhost",
                                  additional_headers={"Authorization": f"Token {token}"}) as ws:
        assert json.loads(await ws.recv())["type"] == "hello"
        await ws.send(json.dumps({"type": "subscribe", "topic": topic}))
        assert json.loads(await ws.recv())["type"] == "subscribed"
        await asyncio.get_running_loop().run_in_executor(None, trigger)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(await asyncio.wait_for(ws.recv(), timeout=deadline - time.monotonic()))
            if message["type"] == "batch":
                return message["events"][0]
            if message["type"] == "event":
                return message
    raise AssertionError("no event")


class HeldSocket(threading.Thread):
    """A browser that stays connected through the outage, subscribed to ``topic``: the first
    event whose data names ``cluster`` must still reach it once Redis is back (the web process's
    channel-layer receiver subscribes again by itself; nothing tells the page to reconnect)."""

    def __init__(self, base: str, token: str, topic: str, cluster: str, timeout: float) -> None:
        super().__init__(daemon=True)
        self.base, self.token, self.topic, self.cluster, self.timeout = base, token, topic, cluster, timeout
        self.subscribed = threading.Event()
        self.event: dict | None = None

    def run(self) -> None:
        asyncio.run(self._hold())

    async def _hold(self) -> None:
        async with websockets.connect(self.base.replace("http", "ws") + "/ws/", origin="http://localhost",
                                      additional_headers={"Authorization": f"Token {self.token}"}) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"
            await ws.send(json.dumps({"type": "subscribe", "topic": self.topic}))
            assert json.loads(await ws.recv())["type"] == "subscribed"
            self.subscribed.set()
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                try:
                    message = json.loads(await asyncio.wait_for(ws.recv(), timeout=deadline - time.monotonic()))
                except TimeoutError:
                    return
                for each in message["events"] if message["type"] == "batch" else [message]:
                    if each["type"] == "event" and each["data"].get("cluster") == self.cluster:
                        self.event = each
                        return


def test_machine_endpoints_pages_and_the_downgrade_work_through_a_redis_outage(meridian, private_redis, admin_token):
    api = serving_edge(meridian, admin_token, nodes=20, seed=2, synced=1)
    node = Cluster.objects.get(name="edge").nodes.order_by("name").first().name
    agent = api.post("/api/v1/fleet/clusters/edge/agent-tokens/", json={}).json()["token"]
    webhook = api.post("/api/v1/fleet/clusters/edge/webhook-tokens/", json={}).json()["token"]
    assert api.post("/api/v1/quotas/groups/", json={"name": "shop", "hard": {"limits.cpu": "4"}}).status_code == 201
    config_url = f"/api/agent/v1/clusters/edge/nodes/{node}/config"
    first = httpx.get(meridian.base + config_url, headers={"Authorization": f"Bearer {agent}"})
    assert first.status_code == 200
    etag = first.headers["ETag"]
    login = httpx.Client(base_url=meridian.base, timeout=30)
    login.get("/accounts/login/")
    assert login.post("/accounts/login/", data={"username": "fault-admin", "password": "fault-admin-password-123",
                                                "csrfmiddlewaretoken": login.cookies["csrftoken"]}).status_code == 302

    held = HeldSocket(meridian.base, admin_token, "fleet", "edge-3", timeout=OUTAGE_SECONDS + 240)
    held.start()
    assert held.subscribed.wait(30), "a socket subscribed before the outage"
    private_redis.stop()
    outage_ends = time.monotonic() + OUTAGE_SECONDS
    downgrade = None
    admitted = 0
    while time.monotonic() < outage_ends:
        assert login.get("/nodeconfig/").status_code == 200, "pages answer"
        assert api.get("/api/v1/fleet/clusters/").status_code == 200, "the REST API answers"
        polled = httpx.get(meridian.base + config_url, headers={"Authorization": f"Bearer {agent}", "If-None-Match": etag})
        assert polled.status_code == 304, "agents poll, answered from the database"
        reported = httpx.post(meridian.base + config_url.replace("/config", "/status"), json={"applied": {}},
                              headers={"Authorization": f"Bearer {agent}"})
        assert reported.status_code == 204
        uid = str(uuid.uuid4())
        decided = httpx.post(meridian.base + "/api/admission/v1/quotas/validate", json=review(uid, "shop", "1"),
                             headers={"Authorization": f"Bearer {webhook}"}, timeout=30)
        assert decided.status_code == 200 and decided.json()["response"]["uid"] == uid
        admitted += decided.json()["response"]["allowed"]
        if downgrade is None:
            downgrade = api.post("/api/v1/nodeconfig/emergency-downgrade/",
                                 json={"cluster": "edge", "reason": "incident", "confirm": "DOWNGRADE"})
            assert downgrade.status_code == 201, downgrade.text
            assert downgrade.json()["progress"]["delivery"] == "pending", "shown as pending, not complete"
        ready = httpx.get(meridian.base + "/readyz").json()
        assert ready["status"] == "not ready" and ready["checks"]["redis"]["ok"] is False, "readiness tells the truth"
        time.sleep(2)
    assert admitted == 4, "exactly what fits under hard 4: decisions kept being made, never over-admitted"
    assert QuotaGroup.objects.get(name="shop").used["limits.cpu"] == "4"

    private_redis.start()
    target_id = downgrade.json()["id"]

    def delivered() -> bool:
        body = api.get("/api/v1/nodeconfig/emergency-downgrade/").json()
        mine = [d for d in body if d["id"] == target_id]
        return bool(mine) and mine[0]["progress"]["delivery"] == "delivered" and mine[0]["progress"]["targeted"] > 0

    wait_until(delivered, timeout=90, interval=1, what="the downgrade accepted during the outage to be delivered")
    job = Job.objects.filter(kind="nodeconfig.reconcile_type", object_id=str(target_id)).latest("created")
    assert job.status == Job.Status.SUCCEEDED
    after = httpx.get(meridian.base + config_url, headers={"Authorization": f"Bearer {agent}", "If-None-Match": etag})
    assert after.status_code == 200 and after.json()["configs"]["AdminQoSConfiguration"]["config"][
        "reclaimedResourceConfig"]["enableReclaim"] is False, "the agent gets the downgrade"

    event = asyncio.run(next_event(meridian.base, admin_token, "fleet", lambda: api.post(
        "/api/v1/fleet/clusters/", json={"name": "edge-2", "connector": "simulated", "connector_config": {"node_count": 5}})))
    assert event["event"] == "cluster.registered" and event["data"]["cluster"] == "edge-2", \
        "live streaming works again after the restart"
    assert api.post("/api/v1/fleet/clusters/", json={"name": "edge-3", "connector": "simulated",
                                                     "connector_config": {"node_count": 5}}).status_code == 201
    held.join(60)
    assert held.event is not None and held.event["event"] == "cluster.registered", \
        "a socket that stayed open through the outage gets events again"
