"""Smoke-test a running Meridian as a newcomer would: ready, log in, overview, one live event.

Usage: python scripts/smoke.py http://127.0.0.1:8000 USERNAME PASSWORD
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time

import httpx
import websockets


def wait_ready(client: httpx.Client, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            response = client.get("/readyz")
            last = response.text
            if response.status_code == 200:
                return response.json()
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(1)
    raise SystemExit(f"not ready after {timeout}s: {last}")


def log_in(client: httpx.Client, username: str, password: str) -> None:
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/"},
        headers={"Referer": str(client.base_url) + "/accounts/login/"},
    )
    if response.status_code != 302 or "sessionid" not in client.cookies:
        raise SystemExit(f"login failed: HTTP {response.status_code}")


async def one_event(base: str, cookies: httpx.Cookies, timeout: float = 60) -> dict:
    url = base.replace("http", "ws", 1) + "/ws/"
    cookie = "; ".join(f"{name}={value}" for name, value in cookies.items())
    async with websockets.connect(url, additional_headers={"Cookie": cookie}, origin=base) as ws:
        hello = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        assert hello["type"] == "hello", hello
        await ws.send(json.dumps({"type": "subscribe", "topic": "system"}))
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), timeout))
            if message["type"] == "batch":  # events that came close together
                return message["events"][0]
            if message["type"] == "event":
                return message


def check_quotas(client: httpx.Client, username: str, password: str) -> None:
    """The demo quota tree is seeded, and a member cluster's API server gets decisions."""
    token = client.post("/api/v1/auth/token/", json={"username": username, "password": password}).json()["token"]
    api = {"Authorization": f"Token {token}"}
    groups = client.get("/api/v1/quotas/groups/", headers=api).json()["results"]
    assert {g["name"] for g in groups} >= {"vision", "vision-ocr", "ads-serving"}, groups
    cluster = client.get("/api/v1/fleet/clusters/", headers=api).json()["results"][0]["name"]
    hook = client.post(f"/api/v1/fleet/clusters/{cluster}/webhook-tokens/", json={}, headers=api).json()["token"]
    workload = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "smoke", "namespace": "default", "labels": {"biz.group.resource.quota": "ads-serving"}},
                "spec": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "app", "resources": {"limits": {"cpu": "100000"}}}]}}}}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "smoke-1", "operation": "CREATE", "dryRun": True, "name": "smoke", "namespace": "default",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "object": workload}}
    answer = client.post("/api/admission/v1/quotas/validate", json=review, headers={"Authorization": f"Bearer {hook}"})
    assert answer.status_code == 200, answer.text
    response = answer.json()["response"]
    assert response["uid"] == "smoke-1" and response["allowed"] is False and "ads-serving" in response["status"]["message"]
    print(f"quotas: {len(groups)} demo groups; webhook denied a 100000-core workload: {response['status']['message']}")


def check_federation(client: httpx.Client, username: str, password: str, timeout: float = 120) -> None:
    """The demo storefront is spread over the fleet, and a scale through the API is carried out
    by the Celery workers (the reconcile runs on its shard queue, not in the request)."""
    token = client.post("/api/v1/auth/token/", json={"username": username, "password": password}).json()["token"]
    api = {"Authorization": f"Token {token}"}
    objects = client.get("/api/v1/federation/objects/?search=storefront", headers=api).json()["results"]
    web = next(o for o in objects if o["name"] == "storefront")
    assert sum(web["placement"].values()) == 300, web["placement"]
    answer = client.patch(f"/api/v1/federation/objects/{web['id']}/", json={"object": {"spec": {"replicas": 320}}}, headers=api)
    assert answer.status_code == 200, answer.text
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        placement = client.get(f"/api/v1/federation/objects/{web['id']}/", headers=api).json()["placement"]
        if sum(placement.values()) == 320:
            print(f"federation: storefront 300 → 320 replicas placed by the workers: {placement}")
            return
        time.sleep(1)
    raise AssertionError(f"the workers did not reschedule the storefront: {placement}")


def main(base: str, username: str, password: str) -> None:
    with httpx.Client(base_url=base, timeout=30) as client:
        ready = wait_ready(client)
        print("ready:", json.dumps(ready["checks"]["workers"]))
        anonymous = client.get("/")
        assert anonymous.status_code == 302 and "/accounts/login/" in anonymous.headers["location"], anonymous
        log_in(client, username, password)
        overview = client.get("/")
        assert overview.status_code == 200 and 'id="live-indicator"' in overview.text, overview.status_code
        print("overview: HTTP 200 after login")
        check_quotas(client, username, password)
        check_federation(client, username, password)
        event = asyncio.run(one_event(base, client.cookies))
        print(f"websocket event: topic={event['topic']} seq={event['seq']} event={event['event']} data={json.dumps(event['data'])}")
    print("smoke: passed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
