"""What "done" means for each kind of asynchronous work, and waiting for it (``--wait``):
a config target's rollout or a downgrade (nodes acknowledged / targeted), a federated object
(replicas ready / desired), a job. ``live.wait_until`` draws the progress from the websocket's
events and REST reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .client import Client
from .live import State, wait_until


def target_state(progress: Mapping[str, Any]) -> State:
    """A target's (or downgrade's) rollout from its progress summary: acknowledged / targeted."""
    targeted, applied, failed = (int(progress.get(k) or 0) for k in ("targeted", "applied", "failed"))
    delivery, rollout = progress.get("delivery", "pending"), progress.get("rollout_state", "complete")
    text = f"acknowledged, {failed} failed, {progress.get('held', 0)} held, delivery {delivery}, {rollout}"
    if progress.get("paused") and rollout != "failed":
        text += " (paused: `meridian rollout resume`)"
    failure = ""
    if rollout == "failed":
        failure = f"the rollout paused on failures: {progress.get('message') or f'{failed} nodes failed'}"
    elif failed and delivery == "delivered" and applied + failed >= targeted:
        failure = f"{failed} of {targeted} nodes failed to apply it"
    finished = delivery == "delivered" and applied >= targeted and rollout == "complete"
    return State(done=applied, total=targeted, text=text, finished=finished, failure=failure)


def wait_target(client: Client, target: Mapping[str, Any], timeout: float, *, title: str = "",
                verify: bool | str = True) -> State:
    path = f"nodeconfig/targets/{target['id']}/progress/"
    return wait_until(client, title=title or f"{target['type']}/{target['name']}", topics=[f"nodeconfig-target-{target['id']}"],
                      read=lambda: target_state(client.get(path)), from_event=target_state, timeout=timeout, verify=verify)


def object_state(item: Mapping[str, Any]) -> State:
    """A federated object from its phase and aggregated status: ready / desired replicas."""
    status = item.get("status") or {}
    phase = item.get("phase") or "Pending"
    desired = status.get("desiredReplicas")
    ready = int(status.get("readyReplicas") or 0)
    total = int(desired) if desired is not None else 1
    done = ready if desired is not None else int(phase == "Ready")
    return State(done=done, total=total, text=f"replicas ready, {phase}{': ' + item['message'] if item.get('message') else ''}",
                 finished=phase == "Ready" and done >= total)


def wait_object(client: Client, obj: Mapping[str, Any], timeout: float, *, verify: bool | str = True) -> State:
    path = f"federation/objects/{obj['id']}/"
    return wait_until(client, title="/".join(p for p in (obj["namespace"], obj["kind"], obj["name"]) if p),
                      topics=[f"federation-object-{obj['id']}"], read=lambda: object_state(client.get(path)),
                      from_event=lambda data: object_state(data) if "phase" in data and "status" in data else None,
                      timeout=timeout, verify=verify)


def job_state(job: Mapping[str, Any]) -> State:
    status = job.get("status", "pending")
    failure = f"job {job.get('id')} {status}: {job.get('error') or ''}".strip() if status in ("failed", "canceled") else ""
    waiting = f" (waiting for {job['waiting_for']})" if job.get("waiting_for") else ""
    return State(done=int(status == "succeeded"), total=1, text=f"{job.get('kind')} {status}{waiting}",
                 finished=status == "succeeded", failure=failure)
