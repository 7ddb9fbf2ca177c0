"""The scheduling mutating webhook under load, through uvicorn and the ASGI fast path.

Prints figures (not pass/fail): decisions/s and p50/p99 latency at 64 concurrent callers,
paced at 500/s (open loop; goal p99 ≤30 ms) and saturated (closed loop: capacity), for pods
that get the seed's ``resource-pool-example`` by annotation (render + JSONPatch) and pods
that get a template through a SchedulerConfigBinding, among 200 templates and 200 bindings;
plus the same client against a bare ASGI endpoint. Every answer is checked to be an allowed
JSONPatch review.

    python bench/bench_scheduling_webhook.py [--seconds 5] [--callers 64] [--rate 500]

Runs on a fresh SQLite database under a temporary directory, or on ``BENCH_DATABASE_URL``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from django_setup import add_sizes, setup_from_command_line  # noqa: E402
from http_load import CpuShares, bare_baseline, load, serve  # noqa: E402


def populate(templates: int) -> None:
    from core.context import acting_as
    from scheduling import services
    from tests.scheduling.test_templates import SEED_NSC_YAML  # the seed's template, verbatim

    docs = [SEED_NSC_YAML]
    for i in range(templates):
        docs.append(SEED_NSC_YAML.replace("resource-pool-example", f"pool-{i}"))
        docs.append(f"""apiVersion: sched.cloud.ctrip.com/v1
kind: SchedulerConfigBinding
metadata:
  name: app-{i}
  namespace: ns-{i % 20}
spec:
  selector:
    matchLabels:
      app: app-{i}
  priority: {i % 5}
  nodeSchedulerConfig:
    name: pool-{i}
    args:
      DefaultPool: B
      PrefferredPool: A
""")
    with acting_as("system:bench"):
        services.import_manifests("---\n".join(docs), reason="bench")


def requests(token: str, prefix: str, templates: int) -> list[bytes]:
    out = []
    for i in range(20_000):
        metadata: dict = {"name": f"{prefix}-{i}", "namespace": f"ns-{i % 20}", "labels": {"app": f"app-{i % templates}"}}
        if i % 2 == 0:  # half by annotation, half through a binding
            metadata = {"name": f"{prefix}-{i}", "namespace": "web", "labels": {"app": "web"}, "annotations": {
                "scb.sched.cloud.ctrip.com/nsc": "resource-pool-example",
                "scb.sched.cloud.ctrip.com/nsc-args": '{"DefaultPool":"B","PrefferredPool":"A"}'}}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": f"{prefix}-{i}", "operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": metadata["namespace"],
            "name": metadata["name"], "object": {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {
                "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}).encode()
        out.append(b"POST /api/admission/v1/scheduling/mutate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   b"Content-Type: application/json\r\nAuthorization: Bearer " + token.encode() +
                   b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return out


def check_answers(port: int, token: str, templates: int) -> None:
    """A few calls answered in full: allowed, with the JSONPatch, uid echoed."""
    import http.client

    for raw in requests(token, "check", templates)[:4]:
        head, body = raw.split(b"\r\n\r\n", 1)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/api/admission/v1/scheduling/mutate", body=body,
                           headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        answer = json.loads(connection.getresponse().read())["response"]
        assert answer["allowed"] and answer["patchType"] == "JSONPatch", answer
        connection.close()


def main() -> None:
    args = setup_from_command_line(add_sizes(argparse.ArgumentParser(), seconds=5.0, callers=64, rate=500.0, templates=200))
    from django.conf import settings

    from fleet.models import Cluster
    from fleet.tokens import issue_token

    cluster = Cluster.objects.create(name="c1", connector="simulated", connector_config={"node_count": 1, "seed": 1})
    _, token = issue_token(cluster, "webhook")
    populate(args.templates)
    env = dict(os.environ, REDIS_URL=settings.REDIS_URL)
    results, cpu = {}, {}
    server, port = serve("config.asgi:application", env, str(ROOT))
    try:
        check_answers(port, token, args.templates)
        load(port, requests(token, "warm", args.templates), 1.0, args.callers)
        for label, rate in ((f"paced at {args.rate:.0f}/s (open loop)", args.rate), ("saturated (closed loop)", None)):
            shares = CpuShares(server.pid)
            results[label] = load(port, requests(token, label.split()[0], args.templates), args.seconds, args.callers, rate=rate)
            cpu[label] = shares.report()
    finally:
        server.terminate()
        server.wait()
    bare = bare_baseline(env, args.seconds, args.callers)
    engine = "PostgreSQL" if "postgres" in os.environ.get("DATABASE_URL", "") else "SQLite"
    for label, result in results.items():
        print(f"scheduling webhook, {args.callers} concurrent callers, {engine}, {args.templates} templates + bindings, "
              f"{label}: {result.rps:,.0f} decisions/s, p50 {result.p50 * 1000:.1f} ms, p99 {result.p99 * 1000:.1f} ms, "
              f"statuses {result.statuses}" + (" (goal p99 ≤30 ms)" if "paced" in label else ""))
        if cpu.get(label):
            print(f"  {cpu[label]}")
    print(f"  bare ASGI endpoint, same client: {bare.rps:,.0f} requests/s, p99 {bare.p99 * 1000:.1f} ms")


if __name__ == "__main__":
    main()
