"""The seed document's scheduling example (its NodeSchedulerConfig, the annotations that ask
for it, what it renders to) and a pod to carry them: shared by the template, webhook, API and
page tests."""

from __future__ import annotations

import copy
from typing import Any

from scheduling.schedconfig import NSC_ANNOTATION, NSC_ARGS_ANNOTATION

#: The seed's NodeSchedulerConfig, verbatim (lines 66-99 of seeds/003_ecdc6eedd27c54cd.txt), stray "    ..." included.
SEED_NSC_YAML = """\
apiVersion: sched.cloud.ctrip.com/v1
kind: NodeSchedulerConfig
metadata:
  name: resource-pool-example
spec:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - key: cloud.ctrip.com/pool
          operator: In
          values:
          - {{.PrefferredPool}}
      - matchExpressions:
        - key: cloud.ctrip.com/pool
          operator: In
          values:
          - {{.DefaultPool}}
    preferredDuringSchedulingIgnoredDuringExecution:
     - weight: 3
       preference:
         matchExpressions:
           - key: cloud.ctrip.com/pool
             operator: In
             values:
             - {{.PrefferredPool}}
     - weight: 2
       preference:
         matchExpressions:
           - key: cloud.ctrip.com/pool
             operator: In
             values:
             - {{.DefaultPool}}
    ...
"""

SEED_ANNOTATIONS = {NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: '{"DefaultPool":"B","PrefferredPool":"A"}'}

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
POOL = "cloud.ctrip.com/pool"


def pool(value):
    return {"matchExpressions": [{"key": POOL, "operator": "In", "values": [value]}]}


#: What the seed example must render to, exactly.
SEED_RENDERED = {"nodeAffinity": {
    REQ: {"nodeSelectorTerms": [pool("A"), pool("B")]},
    PREF: [{"weight": 3, "preference": pool("A")}, {"weight": 2, "preference": pool("B")}],
}}


def pod(annotations: dict | None = None, labels: dict | None = None, *, name: str = "web-0", namespace: str = "web",
        spec: dict | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if labels is not None:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": copy.deepcopy(spec) if spec is not None else {"containers": [{"name": "app", "image": "nginx"}]}}
