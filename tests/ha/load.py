"""Steady load while a test breaks things: threads cycling through a list of requests (the HA
tests' through the proxy: the REST API, node agents, the quota webhook; the database-outage
test's: pages, REST lists and machine endpoints), and websocket clients that reconnect as
``live.js`` does and account for every event by its sequence number."""

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


#: One kind of request a load thread makes: (kind, method, path, headers, JSON body); the body
#: ``REVIEW`` is a new AdmissionReview each time, whose answer must name its uid.
Call = tuple[str, str, str, dict, object]
REVIEW = "review"


def ha_calls(*, token: str, agent_token: str, webhook_token: str, cluster: str, node: str, syncs: bool = True) -> list[Call]:
    """The REST API (reads and requested syncs), a node agent (config poll, status report), the
    quota webhook and a page."""
    api = {"Authorization": f"Token {token}"}
    agent = {"Authorization": f"Bearer {agent_token}"}
    config = f"/api/agent/v1/clusters/{cluster}/nodes/{node}/config"
    calls: list[Call] = [
        ("rest-read", "GET", "/api/v1/fleet/clusters/", api, None),
        ("agent-poll", "GET", config, agent, None),
        ("agent-status", "POST", config.replace("/config", "/status"), agent, {"applied": {}}),
        ("webhook", "POST", "/api/admission/v1/quotas/validate", {"Authorization": f"Bearer {webhook_token}"}, REVIEW),
        ("page", "GET", "/healthz", {}, None),
    ]
    if syncs:
        calls.append(("rest-write", "POST", f"/api/v1/fleet/clusters/{cluster}/sync/", api, None))
    return calls


class Load:
    """``threads`` callers, each cycling through ``calls`` (pausing ``pause`` seconds between
    requests), and the websocket clients ``sockets``; every answer recorded as a ``Result``
    (its body's start when it is an error)."""

    def __init__(self, base: str, calls: list[Call], *, threads: int = 6, sockets: list[Subscriber] | None = None,
                 pause: float = 0.05) -> None:
        self.base, self.calls, self.pause = base, calls, pause
        self.results: list[Result] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.sockets = sockets or []
        self.threads = [threading.Thread(target=self._caller, args=(n,), daemon=True) for n in range(threads)]

    def _caller(self, n: int) -> None:
        with httpx.Client(base_url=self.base, timeout=30) as client:
            i = n
            while not self._stop.is_set():
                kind, method, path, headers, body = self.calls[i % len(self.calls)]
                i += 1
                payload = review(str(uuid.uuid4())) if body == REVIEW else body
                sent = time.monotonic()
                try:
                    response = client.request(method, path, headers=headers, json=payload)
                    status, detail = response.status_code, (response.text[:300] if response.status_code >= 400 else "")
                    if body == REVIEW and status == 200 and response.json()["response"]["uid"] != payload["request"]["uid"]:
                        status, detail = 599, "answered another review"
                except httpx.HTTPError as exc:
                    status, detail = None, repr(exc)
                with self._lock:
                    self.results.append(Result(kind, sent, time.monotonic() - sent, status, detail))
                if self.pause:
                    time.sleep(self.pause)

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
