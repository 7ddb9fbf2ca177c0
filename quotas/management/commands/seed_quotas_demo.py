"""Seed the quota demo: the simulator's business groups as a quota tree sized to what the demo
fleet runs (about two thirds full), so the tree page, bars and admissions have real numbers."""

from __future__ import annotations

import math

from core.management.demo import DemoSeedCommand
from fleet.models import Node
from fleet.simulator import QUOTA_GROUPS
from kube.quantity import Quantity
from quotas import services
from quotas.models import QuotaGroup
from quotas.reconcile import resync_all

#: vision-segmentation runs nothing in the simulated fleet yet: journey 3 plans its quarter.
TREE = {"vision": None, "vision-detection": "vision", "vision-segmentation": "vision", "vision-ocr": "vision",
        "search-core": None, "ads-serving": None, "recsys-online": None}
KEYS = ("limits.cpu", "limits.memory", "requests.nvidia.com/gpu", "pods")
A100 = "requests.nvidia.com/gpu.A100"
#: vision's GPU-hours and its A100s, of which each child gets a quarter (journey 3 moves them).
EXTRA = {"vision": {"cash/requests.nvidia.com/gpu": "100000", A100: "512"}, "search-core": {"limits.cpu.A4": "0"}}
ROOMY = {"limits.cpu": "100000", "limits.memory": "1000Ti", "requests.nvidia.com/gpu": "10000", "pods": "100000"}
HEADROOM = 1.5
#: The fleet size the fixed values above fit; a larger fleet runs proportionally more, so the
#: starting values grow twice as fast as the fleet (200,000 nodes: ×200) and the fit shrinks them.
SIZED_FOR_NODES = 2000


class Command(DemoSeedCommand):
    help = ("Create the demo quota tree (vision → detection/segmentation/ocr, search-core, ads-serving, recsys-online) "
            "unless groups exist.")

    demo, seeded = "quota demo", "groups"

    def already_seeded(self) -> bool:
        return QuotaGroup.objects.exists()

    def seed(self, **options) -> None:
        assert set(QUOTA_GROUPS) <= set(TREE), "every group the simulated workloads name exists"
        nodes = Node.objects.count()
        scale = 1 if nodes <= SIZED_FOR_NODES else math.ceil(2 * nodes / SIZED_FOR_NODES)
        for name, parent in TREE.items():
            hard = dict(ROOMY, **{k: v for k, v in EXTRA.get(name, {}).items() if k.startswith("cash/") or k == A100})
            if parent == "vision":
                hard = {k: _times(v, 1 / 4) for k, v in ROOMY.items()}
                hard["cash/requests.nvidia.com/gpu"] = "1000"
                hard[A100] = "128"
            hard = {k: _times(v, scale) for k, v in hard.items()}
            services.create_group(name=name, parent=parent, hard=hard, description=f"demo business group {name}",
                                  reason="demo seed")
        resync_all()
        self._fit(reason="demo seed: sized to what the fleet runs")
        self.stdout.write(f"quota demo: {len(TREE)} groups sized to the demo fleet's usage")

    def _fit(self, *, reason: str) -> None:
        """Shrink each group to its usage plus headroom: leaves first, so parents see their children's new size."""
        for group in sorted(QuotaGroup.objects.all(), key=lambda g: -g.depth):
            group.refresh_from_db()
            hard = dict(group.hard)
            for key in KEYS:
                hard[key] = _headroom(group.used.get(key, "0"), key)
            if "limits.cpu.A4" in EXTRA.get(group.name, {}):
                hard["limits.cpu.A4"] = _headroom(group.used.get("limits.cpu", "0"), "limits.cpu", share=0.5)
            services.update_group(group, hard=hard, reason=reason)


def _times(value: str, factor: float) -> str:
    """``value`` (a count, or Ti) scaled, in the same unit."""
    unit = "Ti" if value.endswith("Ti") else ""
    return f"{int(int(value.removesuffix(unit)) * factor)}{unit}"


def _headroom(used: str, key: str, share: float = 1.0) -> str:
    amount = Quantity.parse(used).as_decimal()
    if key == "limits.memory":
        return f"{max(1, math.ceil(float(amount) * HEADROOM * share / 2**30))}Gi"
    return str(max(1, math.ceil(float(amount) * HEADROOM * share)))
