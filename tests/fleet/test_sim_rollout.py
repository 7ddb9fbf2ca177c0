"""Simulated Deployments roll out over ticks like the kube-controller-manager's, honouring
their maxSurge / maxUnavailable, from the history the connector records on apply."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.connectors.simulated import MemoryObjectStore, SimulatedConnector
from fleet.inventory import build_snapshot
from fleet.simulator import (
    REVISION,
    ROLLOUT_FROM,
    ROLLOUT_FROM_TEMPLATE,
    ROLLOUT_START,
    ClusterSpec,
    deployment_strategy,
    rollout_step,
    rollout_ticks,
    template_hash,
)

SPEC = ClusterSpec(name="hz-3", region="hz", node_count=20, seed=17, workloads_per_100_nodes=0)
START = 5_000


class Clock:
    def __init__(self, tick: int = START) -> None:
        self.tick = tick

    def __call__(self) -> float:
        return self.tick * SPEC.tick_seconds + 1.0


def make(tick: int = START) -> tuple[SimulatedConnector, Clock]:
    clock = Clock(tick)
    return SimulatedConnector(SPEC, store=MemoryObjectStore(), clock=clock), clock


def deployment(replicas=10, image="shop/checkout:1", cpu="100m", strategy=None, name="checkout"):
    obj = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": image,
                                                       "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}}},
    }
    if strategy is not None:
        obj["spec"]["strategy"] = strategy
    return obj


def rolling(surge, unavailable):
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}


def status(connector, name="checkout"):
    return connector.get("apps/v1", "Deployment", name, namespace="shop")["status"]


def replica_sets(connector, name="checkout"):
    return [rs for rs in connector.list("apps/v1", "ReplicaSet", namespace="shop").items
            if rs["metadata"]["ownerReferences"][0]["name"] == name]


def pods(connector, name="checkout"):
    return [p for p in connector.list("v1", "Pod", namespace="shop").items if p["metadata"]["labels"].get("app") == name]


def condition(st_, kind):
    return next(c for c in st_["conditions"] if c["type"] == kind)


def roll(connector, clock, n, surge, unavailable, ticks):
    """Status at every tick from the apply's tick on, checking the invariants on the way."""
    seen = []
    for _ in range(ticks):
        s = status(connector)
        assert n - s["availableReplicas"] <= unavailable, s
        assert s["replicas"] <= n + surge, s
        assert s["updatedReplicas"] <= n and s["readyReplicas"] == s["availableReplicas"]
        assert s["replicas"] == len(pods(connector))
        assert s.get("unavailableReplicas", 0) == s["replicas"] - s["availableReplicas"]
        seen.append(s)
        clock.tick += 1
    return seen


def test_a_new_deployment_is_fully_updated_at_once():
    connector, _ = make()
    created = connector.apply(deployment(replicas=6))
    annotations = created["metadata"]["annotations"]
    assert annotations[REVISION] == "1" and ROLLOUT_FROM not in annotations and ROLLOUT_START not in annotations
    s = status(connector)
    assert s["replicas"] == s["updatedReplicas"] == s["availableReplicas"] == s["readyReplicas"] == 6
    assert s["observedGeneration"] == 1 and "unavailableReplicas" not in s
    assert condition(s, "Progressing")["reason"] == "NewReplicaSetAvailable"
    assert condition(s, "Available")["status"] == "True"
    [rs] = replica_sets(connector)
    assert rs["spec"]["replicas"] == 6 and rs["status"]["availableReplicas"] == 6
    rs_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert {p["metadata"]["labels"]["pod-template-hash"] for p in pods(connector)} == {rs_hash}


def test_an_image_change_rolls_over_several_ticks_within_surge_and_unavailability():
    connector, clock = make()
    connector.apply(deployment(replicas=10))
    clock.tick += 3
    updated = connector.apply(deployment(replicas=10, image="shop/checkout:2"))
    meta = updated["metadata"]
    assert meta["generation"] == 2 and meta["annotations"][REVISION] == "2"
    assert meta["annotations"][ROLLOUT_START] == str(clock.tick)
    assert meta["annotations"][ROLLOUT_FROM] == template_hash(deployment(replicas=10)["spec"]["template"])
    assert json.loads(meta["annotations"][ROLLOUT_FROM_TEMPLATE]) == deployment(replicas=10)["spec"]["template"]

    # 10 replicas, 25%/25%: surge 3, unavailable 2, so 5 pods move per tick and it takes 2 ticks.
    seen = roll(connector, clock, 10, 3, 2, 4)
    assert [(s["replicas"], s["updatedReplicas"], s["availableReplicas"]) for s in seen] == [
        (13, 5, 8), (13, 10, 8), (10, 10, 10), (10, 10, 10)]
    assert [condition(s, "Progressing")["reason"] for s in seen] == [
        "ReplicaSetUpdated", "ReplicaSetUpdated", "NewReplicaSetAvailable", "NewReplicaSetAvailable"]
    assert all(s["observedGeneration"] == 2 for s in seen)
    assert seen[0]["unavailableReplicas"] == 5 and "unavailableReplicas" not in seen[-1]
    assert all(condition(s, "Available")["status"] == "True" for s in seen)
    assert rollout_ticks(10, 3, 2) == 2


def test_surge_only_keeps_every_replica_available_and_still_progresses():
    connector, clock = make()
    strategy = rolling(2, 0)
    connector.apply(deployment(replicas=7, strategy=strategy))
    connector.apply(deployment(replicas=7, strategy=strategy, image="shop/checkout:2"))
    seen = roll(connector, clock, 7, 2, 0, 6)
    assert all(s["availableReplicas"] == 7 for s in seen)
    assert [s["updatedReplicas"] for s in seen] == [2, 4, 6, 7, 7, 7]
    assert [s["replicas"] for s in seen] == [9, 9, 9, 8, 7, 7]
    assert condition(seen[3], "Progressing")["reason"] == "ReplicaSetUpdated"
    assert condition(seen[4], "Progressing")["reason"] == "NewReplicaSetAvailable"


@pytest.mark.parametrize(("replicas", "strategy", "expected"), [
    (10, None, (False, 3, 2)),
    (10, rolling("25%", "25%"), (False, 3, 2)),
    (1, None, (False, 1, 0)),
    (3, rolling("0%", "0%"), (False, 0, 1)),
    (3, rolling(0, 0), (False, 0, 1)),
    (7, rolling("50%", "50%"), (False, 4, 3)),
    (7, rolling(2, "10%"), (False, 2, 0)),
    (20, {"type": "RollingUpdate"}, (False, 5, 5)),
    (4, {"type": "Recreate"}, (True, 0, 0)),
])
def test_surge_and_unavailability_resolve_like_kubernetes(replicas, strategy, expected):
    spec = {"replicas": replicas}
    if strategy is not None:
        spec["strategy"] = strategy
    assert deployment_strategy(spec, replicas) == expected


def test_percentages_resolve_in_the_rollout_itself():
    connector, clock = make()
    strategy = rolling("50%", "10%")  # 9 replicas: surge ceil(4.5) = 5, unavailable floor(0.9) = 0
    connector.apply(deployment(replicas=9, strategy=strategy))
    connector.apply(deployment(replicas=9, strategy=strategy, image="shop/checkout:2"))
    seen = roll(connector, clock, 9, 5, 0, 3)
    assert [(s["replicas"], s["updatedReplicas"], s["availableReplicas"]) for s in seen] == [(14, 5, 9), (13, 9, 9), (9, 9, 9)]


def test_a_scale_does_not_start_a_rollout():
    connector, clock = make()
    connector.apply(deployment(replicas=4))
    hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in pods(connector)}
    clock.tick += 1
    scaled = connector.patch("apps/v1", "Deployment", "checkout", {"spec": {"replicas": 9}}, namespace="shop")
    assert scaled["metadata"]["generation"] == 2 and scaled["metadata"]["annotations"][REVISION] == "1"
    assert ROLLOUT_FROM not in scaled["metadata"]["annotations"]
    s = status(connector)
    assert s["replicas"] == s["updatedReplicas"] == s["availableReplicas"] == 9 and s["observedGeneration"] == 2
    assert {p["metadata"]["labels"]["pod-template-hash"] for p in pods(connector)} == hashes
    assert len(replica_sets(connector)) == 1


def test_a_scale_during_a_rollout_keeps_it_going():
    connector, clock = make()
    connector.apply(deployment(replicas=10))
    rolled = connector.apply(deployment(replicas=10, image="shop/checkout:2"))
    clock.tick += 1
    scaled = connector.patch("apps/v1", "Deployment", "checkout", {"spec": {"replicas": 20}}, namespace="shop")
    for key in (ROLLOUT_FROM, ROLLOUT_FROM_TEMPLATE, REVISION):
        assert scaled["metadata"]["annotations"][key] == rolled["metadata"]["annotations"][key]
    # Re-based at this tick: at its step 1 the 10-replica rollout (surge 3, unavailable 2) had
    # 5 new pods ready, 3 old left and 10 new; now 20 replicas (surge 5, unavailable 5, pace 10)
    # continue from there: no old pod comes back, the 10 extra new pods start.
    assert scaled["metadata"]["annotations"][ROLLOUT_START] == str(int(rolled["metadata"]["annotations"][ROLLOUT_START]) + 1)
    s = status(connector)
    assert (s["replicas"], s["updatedReplicas"], s["availableReplicas"]) == (23, 20, 8)
    clock.tick += 1
    s = status(connector)
    assert (s["replicas"], s["updatedReplicas"], s["availableReplicas"]) == (20, 20, 15)
    clock.tick += 1
    assert status(connector)["availableReplicas"] == status(connector)["updatedReplicas"] == 20


def test_changing_the_fenceposts_mid_rollout_never_goes_backwards_nor_recreates_old_pods():
    connector, clock = make()
    connector.apply(deployment(replicas=20, strategy=rolling(10, 0)))
    connector.apply(deployment(replicas=20, image="shop/checkout:2", strategy=rolling(10, 0)))
    clock.tick += 1
    before = status(connector)
    connector.apply(deployment(replicas=20, image="shop/checkout:2", strategy=rolling(1, 0)))
    after = status(connector)
    assert after["updatedReplicas"] >= before["updatedReplicas"]
    assert after["availableReplicas"] >= before["availableReplicas"]
    assert after["replicas"] <= before["replicas"], "no old pod is recreated"
    for _ in range(30):
        clock.tick += 1
        s = status(connector)
        assert s["availableReplicas"] >= 20
        if s["updatedReplicas"] == s["availableReplicas"] == s["replicas"] == 20:
            break
    else:
        raise AssertionError("the rollout did not finish")
    connector.apply(deployment(replicas=20, image="shop/checkout:2", strategy=rolling(5, 5)))
    s = status(connector)
    assert (s["replicas"], s["updatedReplicas"], s["availableReplicas"]) == (20, 20, 20), "a finished rollout stays finished"


def test_recreate_takes_everything_down_then_up():
    connector, clock = make()
    connector.apply(deployment(replicas=5, strategy={"type": "Recreate"}))
    connector.apply(deployment(replicas=5, strategy={"type": "Recreate"}, image="shop/checkout:2"))
    first = status(connector)
    assert (first["replicas"], first["updatedReplicas"], first["availableReplicas"], first["unavailableReplicas"]) == (5, 5, 0, 5)
    assert condition(first, "Available")["status"] == "False"
    assert condition(first, "Progressing")["reason"] == "ReplicaSetUpdated"
    new_hash = template_hash(deployment(image="shop/checkout:2")["spec"]["template"])
    assert {p["metadata"]["labels"]["pod-template-hash"] for p in pods(connector)} == {new_hash}
    assert all(not p["status"]["containerStatuses"][0]["ready"] for p in pods(connector))
    clock.tick += 1
    done = status(connector)
    assert (done["replicas"], done["updatedReplicas"], done["availableReplicas"]) == (5, 5, 5)
    assert condition(done, "Available")["status"] == "True"
    assert condition(done, "Progressing")["reason"] == "NewReplicaSetAvailable"


def test_replica_sets_and_pods_carry_both_template_hashes_during_a_rollout():
    connector, clock = make()
    connector.apply(deployment(replicas=10, cpu="100m"))
    connector.apply(deployment(replicas=10, cpu="200m", image="shop/checkout:2"))
    old_hash = template_hash(deployment(cpu="100m")["spec"]["template"])
    new_hash = template_hash(deployment(cpu="200m", image="shop/checkout:2")["spec"]["template"])
    clock.tick += 1
    sets = {rs["metadata"]["labels"]["pod-template-hash"]: rs for rs in replica_sets(connector)}
    assert set(sets) == {old_hash, new_hash}
    old, new = sets[old_hash], sets[new_hash]
    assert old["metadata"]["name"] == f"checkout-{old_hash}" and new["metadata"]["name"] == f"checkout-{new_hash}"
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (3, 10)
    assert (old["metadata"]["annotations"][REVISION], new["metadata"]["annotations"][REVISION]) == ("1", "2")
    assert old["spec"]["template"]["spec"]["containers"][0]["image"] == "shop/checkout:1"
    assert new["status"]["availableReplicas"] == 5 and old["status"]["availableReplicas"] == 3

    by_hash: dict[str, list] = {}
    for pod in pods(connector):
        by_hash.setdefault(pod["metadata"]["labels"]["pod-template-hash"], []).append(pod)
        owner = pod["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "ReplicaSet" and owner["name"] == f"checkout-{pod['metadata']['labels']['pod-template-hash']}"
    assert len(by_hash[old_hash]) == 3 and len(by_hash[new_hash]) == 10
    assert len(pods(connector)) == status(connector)["replicas"] == 13
    # Old pods keep the old template (its resources), new ones have the new one.
    assert {p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in by_hash[old_hash]} == {"100m"}
    assert {p["spec"]["containers"][0]["image"] for p in by_hash[new_hash]} == {"shop/checkout:2"}
    assert sum(p["status"]["containerStatuses"][0]["ready"] for p in by_hash[new_hash]) == 5
    starting = [p for p in by_hash[new_hash] if not p["status"]["containerStatuses"][0]["ready"]]
    assert all(p["status"]["phase"] == "Running" and p["status"]["conditions"][0]["type"] == "Ready" for p in starting)

    # The inventory sees every pod as the Deployment's, and their requests on the nodes.
    snap = build_snapshot(connector.list_nodes().items, connector.list_pods().items, connector.list_workloads())
    mine = [p for p in snap.pods.values() if p.namespace == "shop"]
    assert len(mine) == 13 and all((p.owner_kind, p.owner_name) == ("Deployment", "checkout") for p in mine)
    assert sum(p.cpu_request_milli for p in mine) == 3 * 100 + 10 * 200
    assert snap.workloads[("shop", "Deployment", "checkout")].ready_replicas == 8

    clock.tick += 1
    assert [rs["metadata"]["labels"]["pod-template-hash"] for rs in replica_sets(connector)] == [new_hash]
    assert {p["metadata"]["labels"]["pod-template-hash"] for p in pods(connector)} == {new_hash}


def test_pods_keep_their_names_while_the_rollout_moves():
    connector, clock = make()
    connector.apply(deployment(replicas=10))
    connector.apply(deployment(replicas=10, image="shop/checkout:2"))
    first = {p["metadata"]["name"]: p["metadata"]["creationTimestamp"] for p in pods(connector)}
    clock.tick += 5
    later = {p["metadata"]["name"]: p["metadata"]["creationTimestamp"] for p in pods(connector)}
    new_hash = template_hash(deployment(image="shop/checkout:2")["spec"]["template"])
    kept = [n for n in first if n.startswith(f"checkout-{new_hash}-")]
    assert len(kept) == 5 and all(later[n] == first[n] for n in kept)


def test_a_template_change_mid_rollout_starts_over_from_the_template_it_replaces():
    connector, clock = make()
    connector.apply(deployment(replicas=10))
    connector.apply(deployment(replicas=10, image="shop/checkout:2"))
    clock.tick += 1
    third = connector.apply(deployment(replicas=10, image="shop/checkout:3"))
    second_hash = template_hash(deployment(image="shop/checkout:2")["spec"]["template"])
    assert third["metadata"]["annotations"][ROLLOUT_FROM] == second_hash
    annotations = third["metadata"]["annotations"]
    assert annotations[REVISION] == "3" and annotations[ROLLOUT_START] == str(clock.tick)
    assert {rs["metadata"]["labels"]["pod-template-hash"] for rs in replica_sets(connector)} == {
        second_hash, template_hash(deployment(image="shop/checkout:3")["spec"]["template"])}
    roll(connector, clock, 10, 3, 2, 3)
    assert status(connector)["updatedReplicas"] == status(connector)["availableReplicas"] == 10


def test_rollout_annotations_sent_by_a_caller_are_ignored():
    connector, clock = make()
    forged = deployment(replicas=4)
    forged["metadata"]["annotations"] = {ROLLOUT_FROM: "deadbeef", ROLLOUT_START: "0", REVISION: "9", "team": "shop"}
    created = connector.apply(forged)
    assert created["metadata"]["annotations"] == {"team": "shop", REVISION: "1"}
    assert status(connector)["updatedReplicas"] == status(connector)["availableReplicas"] == 4
    # Re-applying what was read back (status, annotations and all) changes nothing.
    again = connector.apply(copy.deepcopy(connector.get("apps/v1", "Deployment", "checkout", namespace="shop")))
    assert again["metadata"]["annotations"] == created["metadata"]["annotations"]
    assert again["metadata"]["generation"] == 1


def test_the_same_history_gives_the_same_cluster():
    def run():
        connector, clock = make()
        connector.apply(deployment(replicas=12, strategy=rolling(1, 2)))
        clock.tick += 2
        connector.apply(deployment(replicas=12, strategy=rolling(1, 2), image="shop/checkout:2"))
        clock.tick += 2
        return (connector.list("v1", "Pod").items, connector.list("apps/v1", "ReplicaSet").items,
                connector.list_workloads())

    assert run() == run()


def test_a_patch_of_the_image_starts_a_rollout_too():
    connector, clock = make()
    connector.apply(deployment(replicas=8))
    patched = connector.patch("apps/v1", "Deployment", "checkout",
                              [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "shop/checkout:2"}],
                              namespace="shop", patch_type="json")
    assert patched["metadata"]["annotations"][REVISION] == "2" and ROLLOUT_FROM in patched["metadata"]["annotations"]
    s = status(connector)
    assert s["updatedReplicas"] < 8 and s["availableReplicas"] >= 8 - 2


# --- the invariant over random Deployments ------------------------------------------------

fencepost = st.one_of(st.integers(0, 6), st.sampled_from(["0%", "10%", "25%", "33%", "50%", "100%"]))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 30), surge=fencepost, unavailable=fencepost)
def test_every_tick_stays_within_the_fenceposts(n, surge, unavailable):
    strategy = rolling(surge, unavailable)
    _, s, u = deployment_strategy({"strategy": strategy}, n)
    connector, clock = make()
    connector.apply(deployment(replicas=n, strategy=strategy))
    connector.apply(deployment(replicas=n, strategy=strategy, image="shop/checkout:2"))
    ticks = rollout_ticks(n, s, u)
    assert ticks == (math.ceil(n / (s + u)) if n else 0)
    seen = roll(connector, clock, n, s, u, ticks + 1)
    assert seen[-1]["updatedReplicas"] == seen[-1]["availableReplicas"] == seen[-1]["replicas"] == n
    assert condition(seen[-1], "Progressing")["reason"] == "NewReplicaSetAvailable"
    if n:
        assert condition(seen[ticks - 1], "Progressing")["reason"] == "ReplicaSetUpdated"


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 500), s=st.integers(0, 60), u=st.integers(0, 60), k=st.integers(0, 600))
def test_the_progression_rule(n, s, u, k):
    step = rollout_step(n, s, u, k)
    budget = u if (s or u) else 1
    assert step.old + step.new <= n + s
    assert step.available >= n - budget
    assert 0 <= step.ready <= step.new <= n
    assert step.done == (k >= rollout_ticks(n, s, u))
    if not step.done:
        nxt = rollout_step(n, s, u, k + 1)
        assert nxt.ready > step.ready or nxt.old < step.old, "every tick moves"
