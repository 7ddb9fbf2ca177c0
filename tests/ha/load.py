"""Steady load through the proxy while the HA tests break things: the REST API (reads and
requested syncs), node agents (config polls with ETags, status reports), the quota webhook,
and websocket clients that reconnect as ``live.js`` does and account for every event by its
sequence number."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from dataclasses import dataclass, field

import httpx
import websockets


@dataclass
class Result:
    kind: str
    sent: float
    took: float
    status: int | None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and self.status < 500


def review(uid: str) -> dict:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": f"ha-{uid[:8]}", "namespace": "ha", "labels": {"biz.group.resource.quota": "ha"}},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
                           "template": {"metadata": {"labels": {"app": "x"}},
                                        "spec": {"containers": [{"name": "c", "image": "x",
                                                                 "resources": {"limits": {"cpu": "10m", "memory": "8Mi"}}}]}}}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "operation": "CREATE",
        "namespace": "ha", "name": deployment["metadata"]["name"], "object": deployment, "userInfo": {"username": "kube"}}}


class Load:
    """``threads`` callers, each cycling through the kinds of request, and websocket clients."""

    def __init__(self, base: str, *, token: str, agent_token: str, webhook_token: str, cluster: str, node: str,
                 threads: int = 6, sockets: int = 2, syncs: bool = True) -> None:
        self.base, self.token, self.agent, self.webhook = base, token, agent_token, webhook_token
        self.cluster, self.node, self.syncs = cluster, node, syncs
        self.results: list[Result] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.sockets = [Subscriber(base, token, [f"cluster-{cluster}", "system"]) for _ in range(sockets)]
        self.threads = [threading.Thread(target=self._caller, args=(n,), daemon=True) for n in range(threads)]

    def _calls(self):
        api = {"Authorization": f"Token {self.token}"}
        agent = {"Authorization": f"Bearer {self.agent}"}
        config = f"/api/agent/v1/clusters/{self.cluster}/nodes/{self.node}/config"
        calls = [
            ("rest-read", "GET", "/api/v1/fleet/clusters/", api, None),
            ("agent-poll", "GET", config, agent, None),
            ("agent-status", "POST", config.replace("/config", "/status"), agent, {"applied": {}}),
            ("webhook", "POST", "/api/admission/v1/quotas/validate", {"Authorization": f"Bearer {self.webhook}"}, "review"),
            ("page", "GET", "/healthz", {}, None),
        ]
        if self.syncs:
            calls.append(("rest-write", "POST", f"/api/v1/fleet/clusters/{self.cluster}/sync/", api, None))
        return calls

    def _caller(self, n: int) -> None:
        calls = self._calls()
        with httpx.Client(base_url=self.base, timeout=30) as client:
            i = n
            while not self._stop.is_set():
                kind, method, path, headers, body = calls[i % len(calls)]
                i += 1
                payload = review(str(uuid.uuid4())) if body == "review" else body
                sent = time.monotonic()
                try:
                    response = client.request(method, path, headers=headers, json=payload)
                    status, detail = response.status_code, (response.text[:200] if response.status_code >= 400 else "")
                    if kind == "webhook" and status == 200 and response.json()["response"]["uid"] != payload["request"]["uid"]:
                        status, detail = 599, "answered another review"
                except httpx.HTTPError as exc:
                    status, detail = None, repr(exc)
                with self._lock:
                    self.results.append(Result(kind, sent, time.monotonic() - sent, status, detail))
                time.sleep(0.05)

    def __enter__(self) -> Load:
        for subscriber in self.sockets:
            subscriber.start()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self.threads:
            thread.join(timeout=60)
        for subscriber in self.sockets:
            subscriber.stop()

    def between(self, start: float, end: float) -> list[Result]:
        with self._lock:
            return [r for r in self.results if start <= r.sent < end]

    def failures(self, start: float = 0, end: float = float("inf")) -> list[Result]:
        return [r for r in self.between(start, end) if not r.ok]


@dataclass
class Subscriber:
    """A websocket client as ``live.js``: reconnects with backoff, resubscribes, and accounts for
    each topic's sequence numbers — every one received, or announced missed by the ``subscribed``
    answer after a reconnect (the page then refreshes); never silently lost."""

    base: str
    token: str
    topics: list[str]
    connects: int = 0
    received: dict[str, list[int]] = field(default_factory=dict)
    announced_missing: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    silent_gaps: list[tuple[str, int, int]] = field(default_factory=list)
    counter_restarts: list[tuple[str, int, int]] = field(default_factory=list)
    arrivals: dict[str, list[float]] = field(default_factory=dict)
    disconnected_at: list[float] = field(default_factory=list)
    reconnected_at: list[float] = field(default_factory=list)

    def start(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def last(self, topic: str) -> int | None:
        seen = self.received.get(topic)
        return seen[-1] if seen else None

    async def _run(self) -> None:
        url = self.base.replace("http", "ws", 1) + "/ws/"
        backoff = 0.2
        while not self._stop.is_set():
            try:
                async with websockets.connect(url, origin="http://localhost", open_timeout=5,
                                              additional_headers={"Authorization": f"Token {self.token}"}) as ws:
                    assert json.loads(await ws.recv())["type"] == "hello"
                    for topic in self.topics:
                        await ws.send(json.dumps({"type": "subscribe", "topic": topic}))
                    self.connects += 1
                    if self.connects > 1:
                        self.reconnected_at.append(time.monotonic())
                    backoff = 0.2
                    while not self._stop.is_set():
                        try:
                            message = json.loads(await asyncio.wait_for(ws.recv(), timeout=0.5))
                        except TimeoutError:
                            continue
                        for each in message["events"] if message["type"] == "batch" else [message]:
                            self._account(each)
            except Exception:  # noqa: BLE001 - any close or refusal: reconnect, as the page does
                if not self._stop.is_set():
                    self.disconnected_at.append(time.monotonic())
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 3.0)

    def _account(self, message: dict) -> None:
        topic, seq = message.get("topic"), message.get("seq")
        if seq is None or topic not in self.topics:
            return
        last = self.last(topic)
        if message["type"] == "subscribed":
            if last is not None and seq > last:
                self.announced_missing.setdefault(topic, []).append((last + 1, seq))
            if last is None or seq > last:
                self.received.setdefault(topic, []).append(seq)  # the point to go on from
        elif message["type"] == "event":
            self.arrivals.setdefault(topic, []).append(time.monotonic())
            if last is not None and seq > last + 1:
                self.silent_gaps.append((topic, last, seq))
            elif last is not None and seq <= last:  # Redis lost its counter (a failover): live.js refreshes
                self.counter_restarts.append((topic, last, seq))
            self.received.setdefault(topic, []).append(seq)
