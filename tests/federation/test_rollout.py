"""Cross-cluster rollout planner against KubeAdmiral's rolloutplan tests.

Every table comes from ``kubewharf/kubeadmiral``
``pkg/controllers/util/rolloutplan_test.go``: TestPlanWholeProcessWithMaxUnavailable,
TestPlanWholeProcessWithBoth, TestPlanWholeProcessWithSurge, TestPlanCreation,
TestPlanScale, TestPlanEmptyTargets, TestPlanUnexceptedCases and
TestPlanActualCases (the latter named after the production log lines they
were taken from). ``_t``, ``_ta`` and ``_tall`` build targets exactly as
upstream's ``newTarget``, ``newTargetWithActualInfo`` and
``newTargetWithAllInfo`` do, with the same argument order.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from federation.rollout import RolloutPlan, RolloutTarget, plan_rollout, planned_replicas


def _tall(name: str, updated: bool, replicas: int, desired: int, updated_replicas: int, updated_available: int,
          current_new: int, current_new_available: int, actual: int, available: int, ms: int, mu: int) -> RolloutTarget:
    return RolloutTarget(
        cluster=name, desired_replicas=desired, replicas=replicas, actual_replicas=actual,
        available_replicas=available, updated_replicas=updated_replicas, updated_available_replicas=updated_available,
        current_new_replicas=current_new, current_new_available_replicas=current_new_available,
        updated=updated, max_surge=ms, max_unavailable=mu,
    )


def _ta(name: str, updated: bool, replicas: int, desired: int, updated_replicas: int, updated_available: int,
        actual: int, available: int, ms: int, mu: int) -> RolloutTarget:
    current_new = updated_replicas if updated else replicas
    return _tall(name, updated, replicas, desired, updated_replicas, updated_available,
                 current_new, current_new, actual, available, ms, mu)


def _t(name: str, updated: bool, replicas: int, desired: int, updated_replicas: int, updated_available: int,
       ms: int, mu: int) -> RolloutTarget:
    return _ta(name, updated, replicas, desired, updated_replicas, updated_available, replicas, replicas, ms, mu)


def _p(replicas: int | None = None, surge: int | None = None, unavailable: int | None = None,
       only: bool = False) -> RolloutPlan:
    return RolloutPlan(replicas, surge, unavailable, only)


N = _p()  # a plan that overrides nothing

# (id, replicas, max_surge, max_unavailable, targets, expected plans)
CASES: list[tuple[str, int, int, int, list[RolloutTarget], dict[str, RolloutPlan]]] = [
    # --- TestPlanWholeProcessWithMaxUnavailable: 45 replicas, maxSurge 0, maxUnavailable 10 ---
    ("TestPlanWholeProcessWithMaxUnavailable/round 1", 45, 0, 10, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", False, 10, 10, 0, 0, 0, 0), _t("c", False, 0, 5, 0, 0, 0, 0),
        _t("a", False, 5, 15, 0, 0, 0, 0), _t("b", False, 20, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5, 0, 5), "c": _p(0), "b": _p(15, only=True)}),
    ("TestPlanWholeProcessWithMaxUnavailable/round 2", 45, 0, 10, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", False, 10, 10, 0, 0, 0, 0), _t("c", True, 0, 5, 0, 0, 0, 10),
        _t("a", True, 5, 15, 5, 5, 0, 5), _t("b", False, 15, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5), "c": _p(0), "b": _p(10, only=True), "d": _p(None, 5, 0)}),
    ("TestPlanWholeProcessWithMaxUnavailable/round 3", 45, 0, 10, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", True, 10, 10, 5, 5, 5, 0), _t("c", True, 0, 5, 0, 0, 0, 10),
        _t("a", True, 5, 15, 5, 5, 0, 10), _t("b", False, 10, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5), "c": _p(0), "d": _p(None, 5, 0), "b": _p(None, 5, 0)}),
    ("TestPlanWholeProcessWithMaxUnavailable/round 4", 45, 0, 10, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", True, 10, 10, 10, 9, 5, 0), _t("c", True, 0, 5, 0, 0, 0, 10),
        _t("a", True, 5, 15, 5, 5, 0, 10), _t("b", True, 10, 10, 5, 5, 5, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5), "c": _p(0), "b": _p(None, 5, 0), "d": _p(None, 1, 0), "f": _p(None, 5, 0)}),
    ("TestPlanWholeProcessWithMaxUnavailable/round 5", 45, 0, 10, [
        _t("f", True, 5, 5, 5, 3, 5, 0), _t("d", True, 10, 10, 10, 10, 0, 10), _t("c", True, 0, 5, 0, 0, 0, 10),
        _t("a", True, 5, 15, 5, 5, 0, 10), _t("b", True, 10, 10, 10, 8, 5, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(15), "c": _p(0), "b": _p(None, 1, 0), "d": N, "f": _p(None, 1, 0)}),
    ("TestPlanWholeProcessWithMaxUnavailable/round 6", 45, 0, 10, [
        _t("f", True, 5, 5, 5, 5, 0, 10), _t("d", True, 10, 10, 10, 10, 0, 10), _t("c", True, 0, 5, 0, 0, 0, 10),
        _t("a", True, 15, 15, 15, 12, 0, 10), _t("b", True, 10, 10, 10, 10, 0, 10), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"c": _p(0), "e": _p(0, 0, 2), "a": N, "b": N, "d": N, "f": N}),
    ("TestPlanWholeProcessWithMaxUnavailable/round 7", 45, 0, 10, [
        _t("f", True, 5, 5, 5, 5, 0, 10), _t("d", True, 10, 10, 10, 10, 0, 10), _t("c", True, 0, 5, 0, 0, 0, 10),
        _t("a", True, 15, 15, 15, 14, 0, 1), _t("b", True, 10, 10, 10, 10, 0, 10),
    ], {"c": N, "a": N, "b": N, "d": N, "f": N}),
    ("TestPlanWholeProcessWithMaxUnavailable/round 8", 45, 0, 10, [
        _t("f", True, 5, 5, 5, 5, 0, 10), _t("d", True, 10, 10, 10, 10, 0, 10), _t("c", True, 5, 5, 5, 5, 0, 10),
        _t("a", True, 15, 15, 15, 15, 0, 1), _t("b", True, 10, 10, 10, 10, 0, 10),
    ], {"a": N, "b": N, "c": N, "d": N, "f": N}),
    # --- TestPlanWholeProcessWithBoth: 45 replicas, maxSurge 5, maxUnavailable 10 ---
    ("TestPlanWholeProcessWithBoth/round 1", 45, 5, 10, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", False, 10, 10, 0, 0, 0, 0), _t("c", False, 0, 5, 0, 0, 0, 0),
        _t("a", False, 5, 15, 0, 0, 0, 0), _t("b", False, 20, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5, 5, 5), "c": _p(0), "b": _p(15, only=True)}),
    ("TestPlanWholeProcessWithBoth/round 2", 45, 5, 10, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", False, 10, 10, 0, 0, 0, 0), _t("c", True, 0, 5, 0, 0, 5, 10),
        _t("a", True, 5, 15, 5, 5, 5, 5), _t("b", False, 15, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5), "c": _p(0), "b": _p(10, only=True), "d": _p(None, 10, 0)}),
    ("TestPlanWholeProcessWithBoth/round 3", 45, 5, 10, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", True, 10, 10, 10, 8, 10, 0), _t("c", True, 0, 5, 0, 0, 5, 10),
        _t("a", True, 5, 15, 5, 5, 5, 10), _t("b", False, 10, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5), "c": _p(0), "d": _p(None, 1, 0), "b": _p(None, 10, 0), "f": _p(None, 5, 0)}),
    ("TestPlanWholeProcessWithBoth/round 4", 45, 5, 10, [
        _t("f", True, 5, 5, 5, 4, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 10), _t("c", True, 0, 5, 0, 0, 5, 10),
        _t("a", True, 5, 15, 5, 5, 5, 10), _t("b", True, 10, 10, 10, 8, 10, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(15), "c": _p(5), "b": _p(None, 1, 0), "d": N, "f": _p(None, 1, 0)}),
    ("TestPlanWholeProcessWithBoth/round 5", 45, 5, 10, [
        _t("f", True, 5, 5, 5, 5, 5, 10), _t("d", True, 10, 10, 10, 10, 5, 10), _t("c", True, 5, 5, 5, 2, 5, 10),
        _t("a", True, 15, 15, 15, 15, 5, 10), _t("b", True, 10, 10, 10, 10, 5, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"e": _p(0, 0, 5), "a": N, "b": N, "c": N, "d": N, "f": N}),
    ("TestPlanWholeProcessWithBoth/round 6", 45, 5, 10, [
        _t("f", True, 5, 5, 5, 5, 5, 10), _t("d", True, 10, 10, 10, 10, 5, 10), _t("c", True, 5, 5, 5, 4, 5, 10),
        _t("a", True, 15, 15, 15, 15, 5, 10), _t("b", True, 10, 10, 10, 10, 5, 10),
    ], {"a": N, "b": N, "c": N, "d": N, "f": N}),
    # --- TestPlanWholeProcessWithSurge: 45 replicas, maxSurge 5, maxUnavailable 0 ---
    ("TestPlanWholeProcessWithSurge/round 1", 45, 5, 0, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", False, 10, 10, 0, 0, 0, 0), _t("c", False, 0, 5, 0, 0, 0, 0),
        _t("a", False, 5, 15, 0, 0, 0, 0), _t("b", False, 20, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5, 5, 0)}),
    ("TestPlanWholeProcessWithSurge/round 2", 45, 5, 0, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", False, 10, 10, 0, 0, 0, 0), _t("c", False, 0, 5, 0, 0, 0, 0),
        _t("a", True, 5, 15, 5, 4, 5, 0), _t("b", False, 20, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5), "c": _p(0), "d": _p(None, 5, 0)}),
    ("TestPlanWholeProcessWithSurge/round 3", 45, 5, 0, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", True, 10, 10, 5, 4, 5, 0), _t("c", True, 0, 5, 0, 0, 5, 0),
        _t("a", True, 5, 15, 5, 5, 5, 0), _t("b", False, 20, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5), "c": _p(0), "d": _p(None, 5, 0)}),
    ("TestPlanWholeProcessWithSurge/round 4", 45, 5, 0, [
        _t("f", False, 5, 5, 0, 0, 0, 0), _t("d", True, 10, 10, 10, 7, 5, 0), _t("c", True, 0, 5, 0, 0, 5, 0),
        _t("a", True, 5, 15, 5, 5, 5, 0), _t("b", False, 20, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(5), "c": _p(0), "d": N, "f": _p(None, 5, 0)}),
    ("TestPlanWholeProcessWithSurge/round 5", 45, 5, 0, [
        _t("f", True, 5, 5, 5, 2, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 0), _t("c", True, 0, 5, 0, 0, 5, 0),
        _t("a", True, 5, 15, 5, 5, 5, 0), _t("b", False, 20, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(10), "c": _p(0), "d": N, "f": N}),
    ("TestPlanWholeProcessWithSurge/round 6", 45, 5, 0, [
        _t("f", True, 5, 5, 5, 5, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 0), _t("c", True, 0, 5, 0, 0, 5, 0),
        _t("a", True, 10, 15, 10, 8, 5, 0), _t("b", False, 20, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(10), "c": _p(0), "b": _p(17, only=True), "d": N, "f": N}),
    ("TestPlanWholeProcessWithSurge/round 7", 45, 5, 0, [
        _t("f", True, 5, 5, 5, 5, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 0), _t("c", True, 0, 5, 0, 0, 5, 0),
        _t("a", True, 10, 15, 10, 10, 0, 1), _t("b", False, 17, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(13), "c": _p(0), "b": _p(15, only=True), "d": N, "f": N}),
    ("TestPlanWholeProcessWithSurge/round 8", 45, 5, 0, [
        _t("f", True, 5, 5, 5, 5, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 0), _t("c", True, 0, 5, 0, 0, 5, 0),
        _t("a", True, 13, 15, 13, 13, 5, 0), _t("b", False, 15, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"a": _p(15), "c": _p(0), "b": _p(12, only=True), "d": N, "f": N}),
    ("TestPlanWholeProcessWithSurge/round 9", 45, 5, 0, [
        _t("f", True, 5, 5, 5, 5, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 0), _t("c", True, 0, 5, 0, 0, 5, 0),
        _t("a", True, 15, 15, 15, 15, 5, 0), _t("b", False, 12, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"c": _p(3), "b": _p(10, only=True), "a": N, "d": N, "f": N}),
    ("TestPlanWholeProcessWithSurge/round 10", 45, 5, 0, [
        _t("f", True, 5, 5, 5, 5, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 0), _t("c", True, 3, 5, 3, 3, 5, 0),
        _t("a", True, 15, 15, 15, 15, 5, 0), _t("b", False, 10, 10, 0, 0, 0, 0), _t("e", False, 5, 0, 0, 0, 0, 0),
    ], {"c": _p(3), "e": _p(2, only=True), "a": N, "d": N, "f": N, "b": _p(None, 2, 0)}),
    ("TestPlanWholeProcessWithSurge/round 11", 45, 5, 0, [
        _t("f", True, 5, 5, 5, 5, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 0), _t("c", True, 3, 5, 3, 3, 5, 0),
        _t("a", True, 15, 15, 15, 15, 5, 0), _t("b", True, 10, 10, 2, 0, 2, 0), _t("e", False, 2, 0, 0, 0, 0, 0),
    ], {"c": _p(3), "a": N, "b": _p(None, 5, 0), "d": N, "f": N}),
    ("TestPlanWholeProcessWithSurge/round 12", 45, 5, 0, [
        _t("f", True, 5, 5, 5, 5, 5, 0), _t("d", True, 10, 10, 10, 10, 5, 0), _t("c", True, 3, 5, 3, 3, 5, 0),
        _t("a", True, 15, 15, 15, 15, 5, 0), _t("b", True, 10, 10, 7, 7, 5, 0), _t("e", False, 2, 0, 0, 0, 0, 0),
    ], {"c": _p(5), "a": N, "b": _p(None, 3, 0), "d": N, "f": N}),
    # --- TestPlanCreation (the planner's Replicas is left at 0 upstream) ---
    ("TestPlanCreation/round 1", 0, 10, 20, [
        _t("b", False, 0, 5, 0, 0, 0, 0), _t("a", False, 0, 10, 0, 0, 0, 0),
    ], {"a": N, "b": N}),
    # --- TestPlanScale ---
    ("TestPlanScale/scale out with creation", 4, 0, 1, [
        _ta("b", True, 4, 4, 4, 4, 4, 4, 0, 1), _ta("c", True, 0, 2, 0, 0, 0, 0, 0, 1),
        _ta("k", True, 0, 1, 0, 0, 0, 0, 0, 0),
    ], {"c": N, "k": N, "b": N}),
    # --- TestPlanEmptyTargets ---
    ("TestPlanEmptyTargets/empty targets", 100, 0, 25, [], {}),
    ("TestPlanEmptyTargets/empty maxSurge & maxUnavailable", 0, 0, 0, [], {}),
    # --- TestPlanUnexceptedCases ---
    ("TestPlanUnexceptedCases/too many unavailable", 500, 0, 25, [
        _ta("a", False, 200, 200, 0, 0, 200, 200, 0, 1), _ta("b", False, 300, 300, 0, 0, 300, 100, 0, 1),
    ], {"b": _p(None, 0, 1)}),
    ("TestPlanUnexceptedCases/too many unavailable during updating", 700, 0, 35, [
        _ta("b", True, 400, 100, 4, 4, 400, 360, 0, 35), _ta("c", False, 300, 600, 0, 0, 300, 300, 0, 15),
    ], {"b": _p(400, 0, 35)}),
    ("TestPlanUnexceptedCases/too many unavailable due to cluster not ready", 600, 0, 25, [
        _ta("a", False, 200, 200, 0, 0, 200, 200, 0, 1), _ta("b", False, 300, 300, 0, 0, 300, 300, 0, 1),
    ], {}),
    ("TestPlanUnexceptedCases/a few unavailable due to cluster not ready", 510, 0, 25, [
        _ta("a", False, 200, 200, 0, 0, 200, 200, 0, 1), _ta("b", False, 300, 300, 0, 0, 300, 300, 0, 1),
    ], {"a": _p(None, 10, 15)}),
    ("TestPlanUnexceptedCases/missing too many replicas", 500, 0, 25, [
        _ta("a", False, 200, 200, 0, 0, 200, 200, 0, 1), _ta("b", False, 300, 300, 0, 0, 200, 200, 0, 1),
    ], {"b": _p(None, 0, 1)}),
    ("TestPlanUnexceptedCases/missing a few replicas", 500, 0, 25, [
        _ta("a", False, 200, 200, 0, 0, 199, 195, 0, 1), _ta("b", False, 300, 300, 0, 0, 298, 295, 0, 1),
    ], {"a": _p(None, 0, 20), "b": _p(None, 0, 5)}),
    ("TestPlanUnexceptedCases/too many replicas actually", 500, 0, 25, [
        _ta("a", False, 200, 200, 0, 0, 300, 250, 0, 1), _ta("b", False, 300, 300, 0, 0, 300, 300, 0, 1),
    ], {"a": _p(None, 0, 25)}),
    ("TestPlanUnexceptedCases/too many replicas actually while available still less than spec replicas",
     700, 0, 35, [
        _ta("a", False, 594, 300, 0, 0, 598, 598, 0, 1), _ta("b", True, 102, 400, 100, 71, 100, 71, 0, 5),
    ], {"b": _p(102, 0, 31)}),
    ("TestPlanUnexceptedCases/unavailable in status lags during updating", 500, 0, 25, [
        _ta("a", True, 200, 200, 0, 0, 200, 200, 0, 25), _ta("b", False, 300, 300, 0, 0, 300, 300, 0, 10),
    ], {"a": _p(None, 0, 25)}),
    ("TestPlanUnexceptedCases/unavailable in status lags during updating 1", 500, 0, 25, [
        _ta("a", True, 200, 100, 0, 0, 200, 200, 0, 25), _ta("b", False, 300, 400, 0, 0, 300, 300, 0, 10),
    ], {"a": _p(200, 0, 25)}),
    ("TestPlanUnexceptedCases/unavailable in status lags during updating 2", 500, 0, 50, [
        _tall("a", True, 200, 100, 0, 0, 0, 0, 200, 200, 0, 25), _ta("b", False, 300, 400, 0, 0, 300, 300, 0, 10),
    ], {"b": _p(300, 0, 25), "a": _p(200, 0, 25)}),
    ("TestPlanUnexceptedCases/unavailable in status lags during updating 3", 500, 0, 50, [
        _ta("a", True, 175, 100, 25, 25, 175, 174, 0, 1), _ta("b", True, 300, 400, 25, 25, 300, 300, 0, 25),
    ], {"b": _p(300, 25, 24), "a": _p(175, 0, 1)}),
    # --- TestPlanActualCases (named after upstream's production log lines) ---
    ("TestPlanActualCases/I0721 13:28:24.347552", 420, 0, 21, [
        _ta("b", True, 120, 120, 120, 120, 120, 120, 0, 6), _ta("c", True, 380, 300, 380, 292, 380, 292, 0, 19),
    ], {"b": N, "c": N}),
    ("TestPlanActualCases/I0721 13:33:21.582337", 510, 0, 25, [
        _ta("b", True, 120, 220, 120, 120, 120, 120, 0, 6), _ta("c", True, 290, 290, 290, 290, 290, 290, 0, 14),
    ], {"c": N, "b": N}),
    ("TestPlanActualCases/I0721 13:33:26.799923", 510, 0, 25, [
        _ta("b", True, 220, 220, 220, 120, 220, 120, 0, 11), _ta("c", True, 290, 290, 290, 290, 290, 290, 0, 14),
    ], {"b": N, "c": N}),
    ("TestPlanActualCases/I0721 14:08:04.842031", 510, 0, 25, [
        _ta("b", False, 220, 220, 0, 0, 220, 220, 0, 11), _ta("c", False, 290, 290, 0, 0, 290, 290, 0, 14),
    ], {"b": _p(None, 0, 25)}),
    ("TestPlanActualCases/I0721 14:08:20.459339", 510, 0, 25, [
        _ta("b", True, 220, 220, 43, 22, 216, 195, 0, 25), _ta("c", False, 290, 290, 0, 0, 290, 290, 0, 14),
    ], {"b": _p(None, 0, 25)}),
    ("TestPlanActualCases/I0721 14:09:42.009571", 510, 0, 25, [
        _ta("b", True, 220, 220, 202, 182, 216, 196, 0, 25), _ta("c", False, 290, 290, 0, 0, 290, 290, 0, 14),
    ], {"b": _p(None, 0, 25)}),
    ("TestPlanActualCases/I0721 14:09:52.491311", 510, 0, 25, [
        _ta("b", True, 220, 220, 220, 203, 220, 202, 0, 25), _ta("c", False, 290, 290, 0, 0, 290, 290, 0, 14),
    ], {"b": N, "c": _p(None, 0, 7)}),
    ("TestPlanActualCases/I0721 14:10:02.860697", 510, 0, 25, [
        _ta("b", True, 220, 220, 220, 220, 220, 220, 0, 25), _ta("c", True, 290, 290, 16, 0, 290, 274, 0, 25),
    ], {"b": N, "c": _p(None, 0, 25)}),
    ("TestPlanActualCases/I0721 14:27:19.667982", 510, 0, 25, [
        _ta("b", False, 220, 320, 0, 0, 220, 220, 0, 11), _ta("c", False, 290, 190, 0, 0, 290, 281, 0, 14),
    ], {"b": _p(220, 0, 16), "c": _p(281, only=True)}),
    ("TestPlanActualCases/I0721 14:27:25.862175", 510, 0, 25, [
        _ta("b", True, 220, 320, 16, 5, 220, 205, 0, 16), _ta("c", False, 290, 190, 0, 0, 290, 281, 0, 14),
    ], {"b": _p(220, 0, 16), "c": _p(281, only=True)}),
    ("TestPlanActualCases/I0721 14:28:26.178728", 510, 0, 25, [
        _ta("b", True, 220, 320, 121, 110, 218, 204, 0, 16), _tall("c", False, 290, 190, 0, 0, 290, 282, 290, 282, 0, 14),
    ], {"b": _p(220, 0, 17), "c": _p(282, only=True)}),
    ("TestPlanActualCases/I0721 14:29:32.612121", 510, 0, 25, [
        _ta("b", True, 220, 320, 220, 217, 220, 217, 0, 18), _ta("c", False, 290, 190, 0, 0, 290, 283, 0, 14),
    ], {"b": _p(220), "c": _p(268, only=True)}),
    ("TestPlanActualCases/I0721 14:29:43.095244", 510, 0, 25, [
        _ta("b", True, 220, 320, 220, 220, 220, 220, 0, 11), _ta("c", False, 268, 190, 0, 0, 268, 268, 0, 13),
    ], {"b": _p(242), "c": _p(265, only=True)}),
    ("TestPlanActualCases/I0721 14:29:53.385275", 510, 0, 25, [
        _ta("b", True, 242, 320, 242, 242, 242, 242, 0, 12), _ta("c", False, 263, 190, 0, 0, 263, 263, 0, 13),
    ], {"b": _p(247), "c": _p(243, only=True)}),
    ("TestPlanActualCases/I0721 14:29:53.799261", 510, 0, 25, [
        _ta("b", True, 247, 320, 242, 242, 242, 242, 0, 12), _ta("c", False, 243, 190, 0, 0, 243, 243, 0, 12),
    ], {"b": _p(262, 5, 5)}),
    ("TestPlanActualCases/I0721 14:30:35.912725", 510, 0, 25, [
        _ta("b", True, 297, 320, 297, 297, 297, 297, 0, 14), _ta("c", False, 203, 190, 0, 0, 203, 203, 0, 10),
    ], {"b": _p(307), "c": _p(190, 0, 2)}),
    ("TestPlanActualCases/I0721 14:30:36.162431", 510, 0, 25, [
        _ta("b", True, 307, 320, 297, 297, 297, 297, 0, 15), _tall("c", True, 190, 190, 0, 0, 203, 203, 203, 203, 0, 2),
    ], {"b": _p(307, 0, 10), "c": _p(None, 13, 2)}),
    ("TestPlanActualCases/I0721 14:30:46.793575", 510, 0, 25, [
        _ta("b", True, 307, 320, 307, 307, 307, 307, 0, 15), _ta("c", True, 190, 190, 19, 4, 203, 188, 13, 12),
    ], {"b": _p(307), "c": _p(None, 13, 12)}),
    ("TestPlanActualCases/I0721 14:33:31.262478", 510, 0, 25, [
        _ta("b", True, 307, 320, 307, 307, 307, 307, 0, 15), _ta("c", True, 190, 190, 190, 173, 195, 178, 13, 12),
    ], {"b": N, "c": N}),
    ("TestPlanActualCases/I0721 15:36:50.064432", 610, 0, 30, [
        _ta("b", False, 320, 320, 0, 0, 320, 320, 0, 16), _ta("c", False, 190, 290, 0, 0, 190, 190, 0, 9),
    ], {"c": _p(190, 100, 0)}),
    ("TestPlanActualCases/I0721 16:01:56.842312", 510, 0, 25, [
        _ta("b", False, 310, 320, 0, 0, 310, 310, 0, 15), _ta("c", True, 190, 190, 190, 182, 190, 182, 0, 9),
    ], {"b": _p(310, 10, 7), "c": N}),
    ("TestPlanActualCases/I0721 11:10:26.009785", 255, 0, 2, [
        _ta("a", True, 99, 99, 4, 2, 101, 99, 0, 2), _ta("b", True, 16, 16, 16, 16, 16, 16, 0, 1),
        _ta("c", False, 40, 40, 0, 0, 40, 40, 0, 0), _ta("d", False, 29, 29, 0, 0, 29, 29, 0, 0),
        _ta("e", False, 30, 30, 0, 0, 30, 30, 0, 0), _ta("f", False, 16, 16, 0, 0, 16, 16, 0, 0),
        _ta("g", False, 10, 10, 0, 0, 10, 10, 0, 0), _ta("h", False, 15, 15, 0, 0, 15, 15, 0, 0),
    ], {"a": _p(None, 0, 2), "b": N}),
    ("TestPlanActualCases/I0721 16:45:31.681757", 510, 0, 25, [
        _ta("b", True, 320, 220, 320, 320, 320, 320, 0, 16), _ta("c", True, 190, 290, 190, 190, 190, 190, 0, 9),
    ], {"c": _p(190), "b": _p(295)}),
    ("TestPlanActualCases/I0721 16:45:36.682072", 510, 0, 25, [
        _ta("b", True, 295, 220, 295, 295, 295, 295, 0, 14), _ta("c", True, 190, 290, 190, 190, 190, 190, 0, 9),
    ], {"c": _p(215), "b": _p(295)}),
    ("TestPlanActualCases/I0721 16:46:50.975936", 510, 0, 25, [
        _ta("b", True, 220, 220, 243, 243, 243, 243, 0, 11), _ta("c", True, 267, 290, 267, 267, 267, 267, 0, 13),
    ], {"b": N, "c": N}),
    ("TestPlanActualCases/I0721 17:02:19.762340", 510, 0, 25, [
        _ta("b", False, 220, 320, 0, 0, 220, 220, 0, 11), _ta("c", False, 290, 190, 0, 0, 290, 275, 0, 14),
    ], {"b": _p(220, 0, 10), "c": _p(275, only=True)}),
    ("TestPlanActualCases/I0721 17:04:36.844995", 510, 0, 25, [
        _ta("b", True, 220, 320, 220, 214, 220, 214, 0, 10), _ta("c", False, 290, 190, 0, 0, 290, 275, 0, 14),
    ], {"b": _p(220), "c": _p(271, only=True)}),
    ("TestPlanActualCases/I0721 20:03:08.508247", 410, 0, 20, [
        _ta("b", False, 193, 120, 0, 0, 193, 193, 0, 9), _ta("c", False, 317, 290, 0, 0, 317, 292, 0, 15),
    ], {"b": _p(120, 0, 20), "c": _p(290, only=True)}),
    ("TestPlanActualCases/I0721 20:04:47.826333", 510, 0, 25, [
        _ta("b", True, 120, 220, 120, 120, 120, 120, 0, 6), _ta("c", True, 290, 290, 23, 4, 290, 271, 0, 20),
    ], {"b": _p(120), "c": _p(None, 100, 0)}),
    ("TestPlanActualCases/I0721 20:08:48.439058", 510, 0, 25, [
        _ta("b", True, 120, 220, 120, 120, 120, 120, 0, 6), _ta("c", True, 290, 290, 265, 245, 290, 270, 0, 20),
    ], {"b": _p(195), "c": _p(None, 25, 0)}),
    ("TestPlanActualCases/I0721 22:00:34.777064", 510, 0, 25, [
        _ta("b", True, 220, 320, 220, 217, 220, 215, 0, 11), _ta("c", True, 290, 190, 290, 279, 290, 279, 0, 14),
    ], {"b": _p(220), "c": _p(270)}),
    ("TestPlanActualCases/I0722 10:58:38.428687", 510, 0, 25, [
        _ta("b", False, 120, 220, 0, 0, 120, 120, 0, 6), _ta("c", False, 190, 290, 0, 0, 190, 190, 0, 9),
    ], {"b": _p(120, 120, 0), "c": _p(190, 80, 0)}),
    ("TestPlanActualCases/I0722 10:59:21.853509", 510, 0, 25, [
        _ta("b", True, 120, 220, 120, 120, 120, 120, 120, 0), _ta("c", True, 190, 290, 96, 0, 286, 190, 94, 0),
    ], {"b": _p(220), "c": _p(194, 94, 0)}),
    ("TestPlanActualCases/I0722 11:43:31.110287", 510, 0, 25, [
        _ta("b", False, 220, 420, 0, 0, 220, 220, 0, 11), _ta("c", False, 290, 90, 0, 0, 290, 281, 0, 14),
    ], {"b": _p(220, 0, 16), "c": _p(281, only=True)}),
    ("TestPlanActualCases/I0726 13:08:28.299562", 500, 0, 50, [
        _tall("b", False, 350, 350, 0, 0, 320, 320, 350, 350, 0, 30),
        _tall("c", False, 150, 150, 0, 0, 0, 0, 150, 150, 0, 20),
    ], {"b": _p(None, 0, 30), "c": _p(None, 0, 20)}),
    ("TestPlanActualCases/I0726 17:34:07.505088", 500, 0, 50, [
        _ta("b", False, 261, 320, 0, 0, 261, 261, 0, 26), _ta("c", True, 239, 180, 239, 189, 239, 189, 0, 23),
    ], {"c": _p(189)}),
    ("TestPlanActualCases/I0726 19:32:32.905839", 500, 0, 50, [
        _tall("b", False, 320, 220, 0, 0, 235, 235, 320, 282, 0, 43), _ta("c", False, 180, 280, 0, 0, 180, 173, 0, 18),
    ], {"b": _p(320, 0, 43), "c": _p(180, 0, 7)}),
    ("TestPlanActualCases/I0729 15:55:04.138529", 25, 0, 6, [
        _tall("a", False, 8, 8, 0, 0, 8, 1, 8, 1, 0, 2), _tall("b", False, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1),
        _tall("c", False, 4, 4, 0, 0, 4, 0, 4, 0, 0, 1), _tall("e", False, 4, 4, 0, 0, 4, 0, 4, 0, 0, 1),
        _tall("f", False, 4, 4, 0, 0, 4, 2, 4, 2, 0, 1), _tall("h", False, 4, 4, 0, 0, 4, 1, 4, 1, 0, 1),
    ], {"a": _p(None, 0, 1), "b": _p(None, 0, 1), "c": _p(None, 0, 1), "e": _p(None, 0, 1),
        "f": _p(None, 0, 1), "h": _p(None, 0, 1)}),
    ("TestPlanActualCases/I0801 23:42:36.557596", 10, 0, 2, [
        _tall("a", False, 3, 0, 0, 0, 5, 5, 5, 5, 0, 1), _tall("c", False, 2, 0, 0, 0, 2, 2, 2, 2, 0, 1),
        _tall("d", True, 0, 10, 0, 0, 0, 0, 0, 0, 0, 1), _tall("e", False, 1, 0, 0, 0, 1, 1, 1, 1, 0, 1),
        _tall("f", False, 2, 0, 0, 0, 2, 2, 2, 2, 0, 1),
    ], {"d": _p(0)}),
    ("TestPlanActualCases/I0801 18:08:25.282496", 8, 0, 2, [
        _tall("a", False, 6, 1, 0, 0, 8, 8, 8, 8, 0, 1), _tall("d", True, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1),
    ], {"d": _p(0)}),
    ("TestPlanActualCases/I0823 11:46:19.897608", 50, 5, 0, [
        _tall("a", True, 19, 19, 19, 19, 19, 19, 19, 19, 2, 0), _tall("b", True, 8, 8, 6, 2, 6, 2, 10, 8, 4, 0),
        _tall("d", True, 5, 5, 5, 5, 5, 5, 5, 5, 1, 0), _tall("e", True, 7, 7, 7, 6, 7, 6, 8, 7, 1, 0),
        _tall("f", False, 7, 7, 0, 0, 7, 7, 7, 7, 1, 0), _tall("h", True, 4, 4, 4, 4, 4, 4, 4, 4, 1, 0),
    ], {"a": N, "b": _p(None, 2, 0), "d": N, "e": N, "h": N}),
    ("TestPlanActualCases/I0823 11:46:24.931388", 50, 5, 0, [
        _tall("a", True, 19, 19, 19, 19, 19, 19, 19, 19, 2, 0), _tall("b", True, 8, 8, 6, 2, 6, 2, 12, 8, 4, 0),
        _tall("d", True, 5, 5, 5, 5, 5, 5, 5, 5, 1, 0), _tall("e", True, 7, 7, 7, 6, 7, 6, 8, 7, 1, 0),
        _tall("f", True, 7, 7, 2, 0, 2, 0, 9, 7, 2, 0), _tall("h", True, 4, 4, 4, 4, 4, 4, 4, 4, 1, 0),
    ], {"a": N, "b": _p(None, 2, 0), "d": N, "e": N, "f": _p(None, 1, 0), "h": N}),
    ("TestPlanActualCases/I0819 14:27:50.120900", 2, 0, 1, [
        _tall("a", True, 1, 1, 1, 0, 1, 0, 2, 1, 1, 0), _tall("e", True, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1),
    ], {"a": _p(None, 1, 0), "e": _p(0)}),
]


@pytest.mark.parametrize(("replicas", "max_surge", "max_unavailable", "targets", "want"),
                         [pytest.param(*case[1:], id=case[0]) for case in CASES])
def test_upstream_rollout_tables(replicas: int, max_surge: int, max_unavailable: int,
                                 targets: list[RolloutTarget], want: dict[str, RolloutPlan]) -> None:
    assert plan_rollout(replicas, max_surge, max_unavailable, targets) == want


def test_input_order_does_not_matter() -> None:
    _, replicas, surge, unavailable, targets, want = CASES[0]
    assert plan_rollout(replicas, surge, unavailable, list(reversed(targets))) == want


def test_duplicate_clusters_are_rejected() -> None:
    with pytest.raises(ValueError):
        plan_rollout(2, 0, 1, [_t("a", False, 1, 1, 0, 0, 0, 1), _t("a", False, 1, 1, 0, 0, 0, 1)])


# --- properties ---------------------------------------------------------------------------


@st.composite
def _steady_fleets(draw: st.DrawFn) -> tuple[int, int, int, list[RolloutTarget]]:
    """A fleet at rest on the old template (all pods available), about to roll and maybe rescale."""
    count = draw(st.integers(1, 6))
    targets = []
    for i in range(count):
        replicas = draw(st.integers(0, 30))
        desired = draw(st.integers(0, 30))
        targets.append(_t(f"c{i}", False, replicas, desired, 0, 0, draw(st.integers(0, 3)), draw(st.integers(0, 3))))
    max_surge = draw(st.integers(0, 10))
    max_unavailable = draw(st.integers(0 if max_surge else 1, 10))
    total = sum(t.desired_replicas for t in targets)
    return total, max_surge, max_unavailable, targets


def _forced_fencepost(plan: RolloutPlan) -> bool:
    """A (surge, unavailable) of (0, 1) or (1, 0) may be the Deployment minimum, not a grant.

    Upstream's own validation ignores these the same way.
    """
    return (plan.max_surge, plan.max_unavailable) in ((0, 1), (1, 0))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(_steady_fleets())
def test_property_step_stays_within_the_global_window(fleet: tuple[int, int, int, list[RolloutTarget]]) -> None:
    replicas, max_surge, max_unavailable, targets = fleet
    current = sum(t.replicas for t in targets)
    assume(replicas - current <= max_unavailable)
    assume(current - replicas <= max_surge)
    plans = plan_rollout(replicas, max_surge, max_unavailable, targets)
    assert set(plans) <= {t.cluster for t in targets}

    unavailable = replicas - current
    surge = current - replicas
    for t in targets:
        plan = plans.get(t.cluster)
        if plan is None:
            continue
        if plan.replicas is not None:
            assert plan.replicas >= 0
            unavailable += max(t.replicas - plan.replicas, 0)
            surge += max(plan.replicas - t.replicas, 0)
        if not _forced_fencepost(plan):
            unavailable += plan.max_unavailable or 0
            surge += plan.max_surge or 0
    assert unavailable <= max_unavailable
    assert surge <= max_surge


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), *[st.integers(0, 20)] * 10), max_size=5),
       st.integers(0, 60), st.integers(0, 10), st.integers(0, 10))
def test_property_never_crashes_and_only_plans_known_clusters(rows: list[tuple], replicas: int, max_surge: int,
                                                               max_unavailable: int) -> None:
    targets = [_tall(f"c{i}", *row) for i, row in enumerate(rows)]
    plans = plan_rollout(replicas, max_surge, max_unavailable, targets)
    assert set(plans) <= {t.cluster for t in targets}
    _check_window(replicas, max_surge, max_unavailable, targets, plans)


def _check_window(replicas: int, max_surge: int, max_unavailable: int, targets: Sequence[RolloutTarget],
                  plans: dict[str, RolloutPlan]) -> None:
    """A rollout step keeps the planned total inside [low - maxUnavailable, high + maxSurge].

    A pure scaling event (every member fully upgraded, scaling one way) is not
    a rollout: every member gets an empty plan and scales freely, unchecked.
    """
    if not plans or (len(plans) == len(targets) and all(p == RolloutPlan() for p in plans.values())):
        return
    desired = sum(t.desired_replicas for t in targets)
    current = sum(t.replicas for t in targets)
    planned = planned_replicas(targets, plans)
    assert min(desired, current) - planned <= max_unavailable
    assert planned - max(desired, current) <= max_surge
    assert replicas - desired <= max_unavailable
