"""Configuration as code end to end, through the installed ``meridian``: the demo's whole
configuration exported, applied to a fresh Meridian and exported again gives identical
files; applying it again changes nothing; a diff of one edited target shows only that edit.

Two Meridians (web processes only: export, apply and diff need no worker): the seeded demo,
and a fresh one as ``migrate`` leaves it (seed config types, the default scheduling policy).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from .conftest import documents_in, lines, running_meridian


@pytest.fixture(scope="module")
def demo(cli_databases):
    with running_meridian(cli_databases, seed=True, worker=False) as stack:
        yield stack


@pytest.fixture(scope="module")
def fresh(cli_databases):
    with running_meridian(cli_databases, seed=False, worker=False) as stack:
        yield stack


def test_export_to_a_fresh_meridian_and_back_is_identical(demo, fresh, tmp_path):
    first, second = tmp_path / "demo", tmp_path / "fresh"
    demo.cli("export", "-d", str(first))
    exported = documents_in(first)
    kinds = {yaml.safe_load(text)["kind"] for text in exported.values()}
    assert {"Cluster", "ConfigType", "ConfigTarget", "QuotaGroup", "PropagationPolicy", "OverridePolicy", "FederatedObject",
            "SchedulingPolicy"} <= kinds
    assert "clusters/bj-1.yaml" in exported and "configtargets/AdminQoSConfiguration.hybrid-for-disk-hdd.yaml" in exported
    assert "federatedobjects/shop/Deployment.storefront.yaml" in exported
    assert not any("kubeconfig" in text or "credentials" in text for text in exported.values())

    applied = fresh.cli("apply", "-f", str(first), "--reason", "from the demo")
    actions = {line.rsplit(" ", 1)[1] for line in lines(applied.stdout)}
    assert actions <= {"created", "unchanged"} and "created" in actions

    fresh.cli("export", "-d", str(second))
    assert documents_in(second) == exported  # byte for byte, resourceVersions included

    again = fresh.cli("apply", "-f", str(first))
    assert {line.rsplit(" ", 1)[1] for line in lines(again.stdout)} == {"unchanged"}
    with fresh.api() as api:
        audit = api.get("core/audit-log/", params={"q": "from the demo"}).json()
        before = api.get("core/audit-log/").json()["count"]
        fresh.cli("apply", "-f", str(first))
        assert api.get("core/audit-log/").json()["count"] == before  # a second apply writes nothing
    assert audit["results"], "the first apply was audited with its reason"


def test_a_diff_of_one_edited_target_shows_only_that_edit(demo, fresh, tmp_path):
    exported = tmp_path / "config"
    fresh.cli("export", "-d", str(exported))
    edited = tmp_path / "edited"
    shutil.copytree(exported, edited)
    target = edited / "configtargets" / "AdminQoSConfiguration.hybrid-for-disk-hdd.yaml"
    document = yaml.safe_load(target.read_text())
    memory = document["spec"]["config"]["evictionConfig"]["memoryPressureEvictionConfig"]
    memory["systemFreeMemoryThresholdMinimum"] = "24Gi"
    target.write_text(yaml.safe_dump(document, sort_keys=False))

    clean = fresh.cli("diff", "-f", str(exported))
    assert clean.stdout.strip() == ""
    diff = fresh.cli("diff", "-f", str(edited), check=6)
    path = "spec.config.evictionConfig.memoryPressureEvictionConfig.systemFreeMemoryThresholdMinimum"
    assert lines(diff.stdout) == ["configtarget/hybrid-for-disk-hdd (configured)", f'  ~ {path}: "20Gi" -> "24Gi"']
    # the edit applies as one revision; its stale twin is refused with the conflict exit code
    with fresh.api() as api:
        found = api.get("nodeconfig/targets/", params={"name": "hybrid-for-disk-hdd"}).json()["results"]
        target_id = next(t["id"] for t in found if t["name"] == "hybrid-for-disk-hdd")
        revisions = len(api.get(f"nodeconfig/targets/{target_id}/revisions/").json())
        assert "configured" in fresh.cli("apply", "-f", str(target)).stdout
        assert len(api.get(f"nodeconfig/targets/{target_id}/revisions/").json()) == revisions + 1
    memory["systemFreeMemoryThresholdMinimum"] = "28Gi"  # still carries the resourceVersion exported before the edit
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    stale = fresh.cli("apply", "-f", str(target), check=4)
    assert "stale" in stale.stderr and "documents[0].metadata.resourceVersion" in stale.stderr


def test_export_refuses_to_mix_with_an_old_export(fresh, tmp_path: Path):
    fresh.cli("export", "-d", str(tmp_path))
    refused = fresh.cli("export", "-d", str(tmp_path), check=2)
    assert "--force" in refused.stderr
    (tmp_path / "clusters" / "gone.yaml").parent.mkdir(exist_ok=True)
    (tmp_path / "clusters" / "gone.yaml").write_text("stale")
    fresh.cli("export", "-d", str(tmp_path), "--force")
    assert not (tmp_path / "clusters" / "gone.yaml").exists()
