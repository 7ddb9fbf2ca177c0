"""Select plugins: ``MaxCluster`` keeps the best ``maxClusters`` clusters."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .context import Context
from .types import MAX_CLUSTER, UnitError


def select_max_cluster(
    ctx: Context, ranked: list[str], totals: Mapping[str, int]
) -> tuple[list[str], dict[str, str]]:
    """Keep the ``max_clusters`` best clusters (score descending, then name)."""
    limit = ctx.unit.max_clusters
    if limit is not None and limit < 0:
        raise UnitError("MaxCluster: max clusters is less than 0")
    ordered = sorted(ranked, key=lambda name: (-totals.get(name, 0), name))
    if limit is None or limit >= len(ordered):
        return ordered, {}
    kept, cut = ordered[:limit], ordered[limit:]
    if not kept:
        return [], {name: "maxClusters is 0" for name in cut}
    floor = totals.get(kept[-1], 0)
    reasons = {}
    for name in cut:
        score = totals.get(name, 0)
        detail = f"score {score} < {floor}" if score < floor else f"score {score} ties, name sorts after {kept[-1]}"
        reasons[name] = f"not among the top {limit} clusters ({detail})"
    return kept, reasons


SelectPlugin = Callable[[Context, list[str], Mapping[str, int]], tuple[list[str], dict[str, str]]]

SELECT_PLUGINS: dict[str, SelectPlugin] = {MAX_CLUSTER: select_max_cluster}


def run_select(ctx: Context, names: list[str], totals: Mapping[str, int]) -> tuple[list[str], dict[str, str]]:
    selected, cut = list(names), {}
    for name in ctx.profile.select:
        selected, more = SELECT_PLUGINS[name](ctx, selected, totals)
        cut.update({cluster: f"{name}: {why}" for cluster, why in more.items()})
    return selected, cut
