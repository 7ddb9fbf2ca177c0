"""The installed ``meridian`` against a running Meridian (uvicorn, a real worker and beat, whose
simulated node agents acknowledge configs): every command group, output formats parsed back,
exit codes, ``--wait`` ending when the agents acknowledge, a stale apply refused with the
conflict exit code. One Meridian for the module (``tests/cli/conftest.py``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.faults.processes import wait_until

from .conftest import PASSWORD, lines, running_meridian

A4_TARGET = """\
apiVersion: meridian.io/v1
kind: ConfigTarget
metadata:
  name: a4-reclaim
spec:
  type: AdminQoSConfiguration
  node_label_selector: machineModel=A4
  config:
    reclaimedResourceConfig:
      enableReclaim: true
"""
WORKLOAD = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: vision, labels: {biz.group.resource.quota: vision-ocr}}
spec:
  parallelism: %d
  template:
    spec:
      restartPolicy: Never
      containers: [{name: t, image: t, resources: {limits: {cpu: "1", memory: 1Gi}, requests: {cpu: "1", memory: 1Gi}}}]
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: web, labels: {app: web}}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 256Mi}}}]
"""
#: Every kind `get` knows, and one it must find in the demo.
KINDS = ["clusters", "nodes", "workloads", "pods", "configtypes", "targets", "nodeconfigs", "downgrades", "quotagroups", "quotaworkloads",
         "federatedobjects", "propagationpolicies", "overridepolicies", "schedulingpolicies", "templates",
         "nodeschedulerconfigs", "podschedulerconfigs", "bindings", "cpuallocations", "jobs", "audit", "tokens"]
EMPTY_IN_THE_DEMO = {"downgrades", "bindings", "templates", "nodeschedulerconfigs", "podschedulerconfigs"}
LIVE = {"nodes", "workloads", "pods", "nodeconfigs", "clusters", "quotaworkloads", "cpuallocations", "jobs", "audit", "tokens", "federatedobjects",
        "quotagroups", "targets"}


@pytest.fixture(scope="module")
def m(cli_databases):
    with running_meridian(cli_databases, seed=True, worker=True) as stack:
        yield stack


def items(result) -> list[dict]:
    return json.loads(result.stdout)["items"]


# ---------------------------------------------------------------------------- help, contexts, login


def test_help_lists_every_command_group_and_reads_like_kubectl(m):
    text = m.cli("--help").stdout
    for group in ("get", "describe", "apply", "diff", "delete", "export", "rollout", "downgrade", "quota", "federation",
                  "sched", "cpu", "job", "login", "logout", "context", "token", "completion", "version"):
        assert f"\n  {group} " in text, group
    for section in ("Basic commands:", "Configuration as code:", "Operations:", "Access:"):
        assert section in text
    assert "Examples:" in m.cli("get", "--help").stdout and "Examples:" in m.cli("rollout", "--help").stdout
    assert m.cli("get", check=2).returncode == 2  # a missing argument is a usage error
    assert "unknown kind" in m.cli("get", "widgets", check=2).stderr


def test_contexts_login_and_tokens(m):
    listed = m.cli("context", "list").stdout
    assert "* " in listed and "test" in listed and "cli-admin" in listed
    assert m.cli("context", "current").stdout.strip() == "test"
    assert "cli-admin" in m.cli("version").stdout
    wrong = m.cli("login", "--username", "cli-admin", "--password-stdin", input="nope\n", check=3)
    assert "Unable to log in" in wrong.stderr
    assert m.cli("login", "--sso", check=2).stderr.count("single sign-on") or True

    token = m.cli("token", "create", "--name", "ci", "--read-only").stdout.strip()
    assert len(token) > 20
    assert "cluster/bj-1" in m.cli("--token", token, "get", "clusters", "-o", "name").stdout
    denied = m.cli("--token", token, "rollout", "pause", "fo", "shop/Deployment/checkout", check=3)
    assert "permission" in denied.stderr
    listed = json.loads(m.cli("token", "list", "-o", "json").stdout)["items"]
    ci = next(t for t in listed if t["name"] == "ci")
    assert ci["write_enabled"] is False
    m.cli("token", "revoke", str(ci["id"]))
    assert "Invalid or expired token" in m.cli("--token", token, "get", "clusters", check=3).stderr

    m.cli("context", "add", "elsewhere", "--server", "http://127.0.0.1:9", "--no-use")
    assert m.cli("context", "current").stdout.strip() == "test"
    m.cli("context", "use", "elsewhere")
    assert "has no token" in m.cli("get", "clusters", check=2).stderr
    m.cli("context", "use", "test")
    assert "has no token" in m.cli("--context", "elsewhere", "get", "clusters", check=2).stderr
    assert m.cli("--context", "elsewhere", "--token", "x", "get", "clusters", check=1).returncode == 1  # unreachable
    m.cli("context", "delete", "elsewhere")
    assert "No context named" in m.cli("--context", "elsewhere", "get", "clusters", check=2).stderr


# ---------------------------------------------------------------------------- get and describe


def test_get_every_kind_as_names_and_tables(m):
    """Every kind at once (``get a,b,c``): ``-o name`` lines per kind, a table per kind."""
    every = ",".join(KINDS)
    names = lines(m.cli("get", every, "-o", "name", "--limit", "50").stdout)
    assert all(n.count("/") >= 1 and " " not in n for n in names)
    printed = {n.split("/", 1)[0] for n in names}
    for kind in set(KINDS) - EMPTY_IN_THE_DEMO:
        singular = "auditentry" if kind == "audit" else kind[:-3] + "y" if kind.endswith("ies") else kind[:-1]
        assert singular in printed, kind
    for fmt in ("table", "wide"):
        tables = m.cli("get", every, "-o", fmt, "--limit", "50")
        headers = [line for line in lines(tables.stdout) if line.split()[0].isupper() and line.split()[0].isalpha()]
        assert len(headers) + tables.stderr.count("No ") >= len(KINDS), (tables.stdout, tables.stderr)


@pytest.mark.parametrize("kind", KINDS)
def test_get_every_kind_as_json_and_yaml(m, kind):
    """JSON and YAML parse back to the same objects. The live kinds (the simulated fleet's nodes
    churn, jobs and audit entries arrive, numbers move) are compared by shape."""
    listed = items(m.cli("get", kind, "-o", "json", "--limit", "50"))
    as_yaml = yaml.safe_load(m.cli("get", kind, "-o", "yaml", "--limit", "50").stdout)["items"]
    if kind in LIVE:
        assert {frozenset(i) for i in as_yaml} == {frozenset(i) for i in listed}
    else:
        assert as_yaml == listed
    if kind not in EMPTY_IN_THE_DEMO:
        assert listed, f"the demo has {kind}"


def test_get_by_name_label_selectors_and_describe(m):
    target = json.loads(m.cli("get", "target", "AdminQoSConfiguration/hybrid-for-disk-hdd", "-o", "json").stdout)
    assert target["name"] == "hybrid-for-disk-hdd" and target["type"] == "AdminQoSConfiguration"
    assert yaml.safe_load(m.cli("get", "qg", "vision", "-o", "yaml").stdout)["children"] == [
        "vision-detection", "vision-ocr", "vision-segmentation"]
    a4 = items(m.cli("get", "nodes", "-l", "machineModel=A4", "-o", "json"))
    assert a4 and all(n["labels"]["machineModel"] == "A4" for n in a4)
    assert {n["cluster"] for n in items(m.cli("get", "nodes", "--cluster", "bj-1", "-o", "json"))} == {"bj-1"}
    # The seed propagated the federated storefront to the member clusters; its pods reach the
    # inventory with the clusters' next resync (every 15 s), which may not have run yet.
    storefront = wait_until(
        lambda: items(m.cli("get", "pods", "-l", "app=storefront", "-n", "shop", "--limit", "20", "-o", "json")),
        timeout=90, interval=1, what="the storefront's pods in the inventory")
    assert storefront and all(p["labels"]["app"] == "storefront" and p["namespace"] == "shop" for p in storefront)
    assert "-l works for" in m.cli("get", "targets", "-l", "a=b", check=2).stderr
    bad = m.cli("get", "nodes", "-l", "a in (", check=3)
    assert "labelSelector" in bad.stderr  # the one error body's field
    assert "not found" in m.cli("get", "target", "no-such-target", check=3).stderr
    assert "shop/Deployment/storefront" in m.cli("get", "fo", "storefront", "-o", "name").stdout

    described = m.cli("describe", "target", "hybrid-for-disk-hdd").stdout
    assert "Progress:" in described and "targeted:" in described and "Revisions (newest first):" in described
    placement = m.cli("describe", "fo", "shop/Deployment/storefront").stdout
    assert "Placement:" in placement and "Scheduling:" in placement


# ---------------------------------------------------------------------------- configuration as code


def test_wait_ends_when_the_agents_acknowledge(m, tmp_path):
    """``apply --wait`` of a new target (on the A4 nodes) and ``downgrade create --wait`` (on the
    A1 nodes), at once: each ends when the simulated agents have acknowledged every node, with a
    progress line per change (off a terminal; a bar on one)."""
    target = tmp_path / "a4.yaml"
    target.write_text(A4_TARGET)
    assert m.cli("diff", "-f", str(target), check=6).stdout.startswith("configtarget/a4-reclaim (created)")
    dry = m.cli("apply", "-f", str(target), "--dry-run")
    assert dry.stdout.strip() == "configtarget/a4-reclaim created (dry run)"
    assert "not found" in m.cli("get", "target", "a4-reclaim", check=3).stderr
    refused = m.cli("downgrade", "create", "--selector", "machineModel=A1", "--reason", "drill", input="bj-1\n", check=2)
    assert "nothing was done" in refused.stderr and items(m.cli("get", "downgrades", "-o", "json")) == []
    dry = m.cli("downgrade", "create", "--selector", "machineModel=A1", "--reason", "drill", "--dry-run")
    assert "(dry run)" in dry.stdout and items(m.cli("get", "downgrades", "-o", "json")) == []

    started = time.monotonic()
    applying = m.popen("apply", "-f", str(target), "--reason", "A4 grey release", "--wait", "--timeout", "100")
    downgraded = m.cli("downgrade", "create", "--selector", "machineModel=A1", "--reason", "drill", "--wait",
                       "--timeout", "100", input="machineModel=A1\n", timeout=130)
    out, err = applying.communicate(timeout=130)
    assert applying.returncode == 0, (out, err)
    assert time.monotonic() - started < 100
    for stdout, stderr, verb in ((out, err, "configtarget/a4-reclaim created"), (downgraded.stdout, downgraded.stderr, "created")):
        assert verb in stdout
        last = lines(stderr)[-1]  # "<what>: <acknowledged>/<targeted> acknowledged, ... delivery delivered, complete"
        done, total = last.split(": ", 1)[1].split(" ", 1)[0].split("/")
        assert done == total and int(total) > 0 and "delivery delivered" in last, stderr

    assert m.cli("rollout", "status", "target", "AdminQoSConfiguration/a4-reclaim").stdout.strip().endswith("complete")
    assert m.cli("apply", "-f", str(target)).stdout.strip() == "configtarget/a4-reclaim unchanged"
    assert m.cli("diff", "-f", str(target)).stdout == ""
    assert json.loads(m.cli("apply", "-f", str(target), "-o", "json").stdout)["results"][0]["action"] == "unchanged"

    name = downgraded.stdout.split()[0].split("/", 1)[1]
    active = items(m.cli("get", "downgrades", "-o", "json"))
    assert [d["name"] for d in active] == [name]
    assert active[0]["progress"]["applied"] == active[0]["progress"]["targeted"] > 0
    again = m.cli("downgrade", "create", "--selector", "machineModel=A1", "--reason", "again", "--yes")
    assert "already active" in again.stdout  # idempotent per scope
    restored = m.cli("downgrade", "restore", name, "--reason", "drill over", input="machineModel=A1\n")
    assert "restored" in restored.stdout and items(m.cli("get", "downgrades", "-o", "json")) == []


def test_a_refused_document_names_its_field_and_a_stale_one_is_a_conflict(m, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text(A4_TARGET.replace("a4-reclaim", "broken").replace("machineModel=A4", "machineModel in ("))
    refused = m.cli("apply", "-f", str(broken), check=3)
    assert "documents[0].spec.node_label_selector" in refused.stderr and "selector_parse_failed" in refused.stderr
    (tmp_path / "not-yaml.yaml").write_text("kind: [unclosed")
    assert "not valid YAML" in m.cli("apply", "-f", str(tmp_path / "not-yaml.yaml"), check=2).stderr

    exported = tmp_path / "export"
    m.cli("export", "-d", str(exported), "--kind", "QuotaGroup")
    group = exported / "quotagroups" / "vision-ocr.yaml"
    document = yaml.safe_load(group.read_text())
    with m.api() as api:
        assert api.patch("quotas/groups/vision-ocr/", json={"description": "changed in the console"}).status_code == 200
    document["spec"]["hard"]["pods"] = str(int(document["spec"]["hard"]["pods"]) + 1)
    group.write_text(yaml.safe_dump(document))
    stale = m.cli("apply", "-f", str(group), check=4)
    assert "(stale)" in stale.stderr and "export it again" in stale.stderr


def test_delete_by_file(m, tmp_path):
    group = tmp_path / "team.yaml"
    group.write_text("apiVersion: meridian.io/v1\nkind: QuotaGroup\nmetadata: {name: team-cli}\nspec: {hard: {pods: '2'}}\n")
    m.cli("apply", "-f", str(group))
    assert m.cli("delete", "-f", str(group), "--dry-run").stdout.strip() == "quotagroup/team-cli deleted (dry run)"
    assert m.cli("delete", "-f", str(group), "--reason", "done").stdout.strip() == "quotagroup/team-cli deleted"
    assert "not there" in m.cli("delete", "-f", str(group), check=3).stderr
    assert m.cli("delete", "-f", str(group), "--ignore-not-found").stdout.strip() == "quotagroup/team-cli absent"


def test_export_to_stdout_and_back_through_stdin(m):
    stream = m.cli("export", "--kind", "PropagationPolicy").stdout
    documents = [d for d in yaml.safe_load_all(stream) if d]
    assert {d["kind"] for d in documents} == {"PropagationPolicy"} and all("resourceVersion" in d["metadata"] for d in documents)
    again = m.cli("apply", "-f", "-", input=stream)
    assert {line.rsplit(" ", 1)[1] for line in lines(again.stdout)} == {"unchanged"}


# ---------------------------------------------------------------------------- verbs


def test_rollout_pause_resume_undo_and_history(m, tmp_path):
    m.cli("rollout", "pause", "target", "a4-reclaim", "--reason", "hold")
    assert json.loads(m.cli("get", "target", "a4-reclaim", "-o", "json").stdout)["paused"] is True
    m.cli("rollout", "resume", "target", "a4-reclaim", "--reason", "go")
    changed = tmp_path / "a4.yaml"
    changed.write_text(A4_TARGET.replace("enableReclaim: true", "enableReclaim: false"))
    assert "configured" in m.cli("apply", "-f", str(changed)).stdout
    history = m.cli("rollout", "history", "target", "a4-reclaim", "-o", "json").stdout
    assert [r["number"] for r in json.loads(history)][:2] == [2, 1]
    assert "reason_required" in m.cli("rollout", "undo", "target", "a4-reclaim", check=3).stderr  # the server's rule
    undone = m.cli("rollout", "undo", "target", "a4-reclaim", "--reason", "back")
    assert "rolled back to revision 1 (new revision 3)" in undone.stdout
    assert json.loads(m.cli("get", "target", "a4-reclaim", "-o", "json").stdout)["config"] == {
        "reclaimedResourceConfig": {"enableReclaim": True}}
    m.cli("rollout", "pause", "fo", "shop/Deployment/checkout", "--reason", "canary")
    assert json.loads(m.cli("get", "fo", "checkout", "-o", "json").stdout)["rollout_paused"] is True
    m.cli("rollout", "resume", "fo", "checkout", "--reason", "fine")
    assert "rollouts are of targets or federatedobjects" in m.cli("rollout", "status", "clusters", "bj-1", check=2).stderr


def test_a_paused_rollout_times_out_with_exit_5(m, tmp_path):
    paced = tmp_path / "paced.yaml"
    paced.write_text(A4_TARGET.replace("a4-reclaim", "paced").replace("machineModel=A4", "pool=offline")
                     .replace("  config:", "  priority: 1\n  wave_size: '1'\n  wave_interval_seconds: 3600\n  config:"))
    m.cli("apply", "-f", str(paced))
    m.cli("rollout", "pause", "target", "paced")
    timed_out = m.cli("rollout", "status", "target", "paced", "--timeout", "3", check=5)
    assert "timed out" in timed_out.stderr
    m.cli("delete", "-f", str(paced))


def test_quota_check_and_move(m, tmp_path):
    small, big = tmp_path / "small.yaml", tmp_path / "big.yaml"
    small.write_text(WORKLOAD % 1)
    big.write_text(WORKLOAD % 1000)
    assert m.cli("quota", "check", "-f", str(small)).stdout.startswith("allowed")
    denied = m.cli("quota", "check", "-f", str(big), check=3)
    assert denied.stdout.startswith("denied") and "vision-ocr" in denied.stdout
    assert json.loads(m.cli("quota", "check", "-f", str(big), "-o", "json", check=3).stdout)["allowed"] is False
    before = json.loads(m.cli("get", "qg", "vision-detection", "-o", "json").stdout)["hard"]["pods"]
    m.cli("quota", "move", "vision-ocr", "vision-detection", "--amount", "pods=1", "--reason", "plan")
    after = json.loads(m.cli("get", "qg", "vision-detection", "-o", "json").stdout)["hard"]["pods"]
    assert int(after) == int(before) + 1
    assert "not_siblings" in m.cli("quota", "move", "vision-ocr", "ads-serving", "--amount", "pods=1", check=3).stderr


def test_federation_explain_and_reschedule(m):
    explained = m.cli("federation", "explain", "shop/Deployment/storefront").stdout
    assert "CLUSTER" in explained and "bj-1" in explained and "Filter" in explained
    as_json = json.loads(m.cli("federation", "explain", "storefront", "-o", "json").stdout)
    assert set(as_json["placement"]) == {"bj-1", "sh-1"}
    rescheduled = m.cli("federation", "reschedule", "storefront", "--reason", "cli test", "--wait", "--timeout", "60",
                        timeout=90)
    assert "rescheduling" in rescheduled.stdout and "replicas ready" in rescheduled.stderr


def test_sched_render_and_simulate_and_cpu_what_if(m, tmp_path):
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    assert yaml.safe_load(m.cli("sched", "render", "-f", str(pod)).stdout)["allowed"] is True
    simulated = json.loads(m.cli("sched", "simulate", "--cluster", "bj-1", "-f", str(pod), "--replicas", "3",
                                 "-o", "json").stdout)
    assert simulated["cluster"] == "bj-1" and simulated["replicas"] == 3
    fits = json.loads(m.cli("cpu", "what-if", "--cpus", "4", "-o", "json").stdout)
    assert fits["ok"] is True and fits["nodes"]
    assert m.cli("cpu", "what-if", "--cpus", "5000", check=3).returncode == 3


def test_job_cancel_and_wait(m):
    finished = items(m.cli("get", "jobs", "--field-selector", "status=succeeded", "--limit", "1", "-o", "json"))[0]
    assert "already" in m.cli("job", "cancel", str(finished["id"]), check=4).stderr  # 409: the conflict exit code
    assert "succeeded" in m.cli("job", "wait", str(finished["id"])).stdout


def test_watch_prints_what_changes(m):
    watching = m.popen("get", "targets", "--watch", "--watch-timeout", "7", "-o", "name")
    time.sleep(2.5)
    m.cli("rollout", "pause", "target", "hybrid-for-disk-hdd", "--reason", "watch me")
    out, err = watching.communicate(timeout=30)
    m.cli("rollout", "resume", "target", "hybrid-for-disk-hdd")
    printed = lines(out)
    assert printed.count("target/AdminQoSConfiguration/hybrid-for-disk-hdd") == 2, (out, err)  # listed, then changed


def test_completion(m):
    assert "_MERIDIAN_COMPLETE" in m.cli("completion", "bash").stdout
    assert "compdef" in m.cli("completion", "zsh").stdout
    words = m.cli(env={"_MERIDIAN_COMPLETE": "bash_complete", "COMP_WORDS": "meridian get ta", "COMP_CWORD": "2"}).stdout
    assert "targets" in words
    commands = m.cli(env={"_MERIDIAN_COMPLETE": "bash_complete", "COMP_WORDS": "meridian ro", "COMP_CWORD": "1"}).stdout
    assert "rollout" in commands


def test_logout_revokes_the_token(m, tmp_path: Path):
    m.cli("logout")
    assert "run `meridian login`" in m.cli("get", "clusters", check=2).stderr
    m.cli("login", "--username", "cli-admin", "--password-stdin", input=PASSWORD + "\n")
    assert "cluster/bj-1" in m.cli("get", "clusters", "-o", "name").stdout
