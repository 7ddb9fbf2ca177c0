"""Upstream YAML of scheduling templates and bindings: import (line-numbered errors) and export."""

from __future__ import annotations

import pytest
import yaml

from scheduling.manifests import ManifestError, dump_manifests, from_manifest, load_manifests, load_spec, to_manifest
from scheduling.schedconfig import SchedulerBinding, SchedulerTemplate, TemplateRef, render
from tests.scheduling.seed import SEED_NSC_YAML, SEED_RENDERED

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"


def test_the_seed_imports_with_its_placeholders_in_place():
    loaded = load_manifests(SEED_NSC_YAML)
    assert loaded.warnings == ("line 34: the indented '...' was read as a YAML document marker",)
    (template,) = loaded.objects
    assert (template.kind, template.name) == ("NodeSchedulerConfig", "resource-pool-example")
    terms = template.spec["nodeAffinity"][REQ]["nodeSelectorTerms"]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["{{.PrefferredPool}}"], ["{{.DefaultPool}}"]]
    assert [p["weight"] for p in template.spec["nodeAffinity"][PREF]] == [3, 2]
    assert render(template, {"DefaultPool": "B", "PrefferredPool": "A"}) == SEED_RENDERED


def test_the_seed_reads_the_same_with_the_marker_where_yaml_wants_it():
    fixed = SEED_NSC_YAML.replace("\n    ...\n", "\n...\n")
    loaded = load_manifests(fixed)
    assert loaded.warnings == ()
    assert loaded.objects == load_manifests(SEED_NSC_YAML).objects


def test_export_then_import_is_the_identity_for_the_seed():
    objects = load_manifests(SEED_NSC_YAML).objects
    text = dump_manifests(objects)
    assert "- '{{.PrefferredPool}}'" in text
    assert load_manifests(text).objects == objects


POD_TEMPLATE = """\
apiVersion: sched.cloud.ctrip.com/v1
kind: PodSchedulerConfig
metadata:
  name: spread
spec:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: {{ .Weight }}
      podAffinityTerm:
        labelSelector:
          matchLabels: {app: {{.App}}, tier: "{{- .Tier -}}"}
        topologyKey: {{/* host or zone */}}kubernetes.io/hostname
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - labelSelector:
        matchExpressions:
        - {key: app, operator: In, values: [{{.App}}, "{{.App}}-cache", 'x-{{.App}}']}
      topologyKey: zone
---
apiVersion: sched.cloud.ctrip.com/v1
kind: SchedulerConfigBinding
metadata:
  name: web-spread
  namespace: web
spec:
  selector:
    matchLabels:
      app: web
  priority: 10
  podSchedulerConfig:
    name: spread
    args:
      App: web
      Tier: front
      Weight: 20
  nodeSchedulerConfig:
    name: resource-pool-example
    args: {DefaultPool: B, PrefferredPool: A}
"""


def test_placeholders_anywhere_a_scalar_can_be():
    template, binding = load_manifests(POD_TEMPLATE).objects
    anti = template.spec["podAntiAffinity"][PREF][0]
    assert anti["weight"] == "{{.Weight}}"
    assert anti["podAffinityTerm"]["labelSelector"]["matchLabels"] == {"app": "{{.App}}", "tier": "{{.Tier}}"}
    assert anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    values = template.spec["podAffinity"][REQ][0]["labelSelector"]["matchExpressions"][0]["values"]
    assert values == ["{{.App}}", "{{.App}}-cache", "x-{{.App}}"]
    assert binding == SchedulerBinding(
        name="web-spread", namespace="web", priority=10, selector={"matchLabels": {"app": "web"}},
        pod_config=TemplateRef("spread", {"App": "web", "Tier": "front", "Weight": 20}),
        node_config=TemplateRef("resource-pool-example", {"DefaultPool": "B", "PrefferredPool": "A"}))
    rendered = render(template, binding.pod_config.args)
    assert rendered["podAntiAffinity"][PREF][0]["weight"] == 20
    assert rendered["podAffinity"][REQ][0]["labelSelector"]["matchExpressions"][0]["values"] == ["web", "web-cache", "x-web"]


ROUND_TRIPS = [
    ("seed", load_manifests(SEED_NSC_YAML).objects),
    ("pod template and binding", load_manifests(POD_TEMPLATE).objects),
    ("cluster-wide binding without priority or args", (
        SchedulerBinding("all", {}, node_config=TemplateRef("ssd-only")),)),
    ("strings YAML would read as other types", (SchedulerTemplate("NodeSchedulerConfig", "odd", {"nodeAffinity": {REQ: {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In",
                                                     "values": ["on", "3", "2024-01-01", "null", "yes", "1e3", "0x10", "",
                                                                "{{.A}} {{.B}}", "{{.A}}}", "}}{{.A}}"]}]}]}}}),)),
]


@pytest.mark.parametrize("objects", [c[1] for c in ROUND_TRIPS], ids=[c[0] for c in ROUND_TRIPS])
def test_import_of_export_is_the_identity(objects):
    assert load_manifests(dump_manifests(objects)).objects == tuple(objects)
    for obj in objects:
        assert from_manifest(to_manifest(obj)) == obj


def test_a_list_is_unpacked():
    objects = load_manifests(POD_TEMPLATE).objects
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [to_manifest(o) for o in objects]})
    assert load_manifests(listed).objects == objects


def test_canonical_placeholders_from_json():
    obj = {"apiVersion": "sched.cloud.ctrip.com/v1", "kind": "NodeSchedulerConfig", "metadata": {"name": "t"},
           "spec": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
               {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["{{ .Pool }}", "a {{- .B -}} b"]}]}]}}}}
    template = from_manifest(obj)
    values = template.spec["nodeAffinity"][REQ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert values == ["{{.Pool}}", "a{{.B}}b"]


GOOD_NSC = """\
apiVersion: sched.cloud.ctrip.com/v1
kind: NodeSchedulerConfig
metadata:
  name: good
spec:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: pool, operator: In, values: [{{.Pool}}]}
"""

IMPORT_ERRORS = [
    ("YAML syntax", "kind: NodeSchedulerConfig\nmetadata: {name: [x}\n",
     [("yaml_invalid", "yaml", None, 2, "not valid YAML")]),
    ("unsupported action, with its line", GOOD_NSC.replace("[{{.Pool}}]", "[{{if .Pool}}a{{end}}]"),
     [("template_unsupported", "yaml", None, 10, "{{if}} actions are not supported")]),
    ("unclosed action", GOOD_NSC.replace("{{.Pool}}]", "{{.Pool]"), [("template_syntax", "yaml", None, 10, "unclosed action")]),
    ("unknown kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
     [("unsupported_kind", "kind", 1, 2, "Unsupported value: 'ConfigMap'")]),
    ("unknown top-level field", GOOD_NSC.replace("spec:", "specs: {}\nspec:"),
     [("manifest_invalid", "specs", 1, 5, "Forbidden: unknown field")]),
    ("wrong apiVersion", GOOD_NSC.replace("/v1", "/v2"), [("manifest_invalid", "apiVersion", 1, 1, "Unsupported value")]),
    ("missing name", GOOD_NSC.replace("  name: good\n", "  labels: {}\n"),
     [("manifest_invalid", "metadata.name", 1, 3, "Required value")]),
    ("templates are cluster-wide", GOOD_NSC.replace("  name: good\n", "  name: good\n  namespace: web\n"),
     [("manifest_invalid", "metadata.namespace", 1, 5, "is cluster-wide")]),
    ("placeholder in a field name", GOOD_NSC.replace("nodeSelectorTerms:", "{{.Terms}}:"),
     [("template_unsupported", "spec.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.{{.Terms}}", 1, 8,
       "placeholders are not allowed in field names")]),
    ("invalid affinity, at its line", GOOD_NSC.replace("operator: In", "operator: Equals"),
     [("invalid", f"spec.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].operator", 1, 10,
       'Invalid value: "Equals": not a valid selector operator')]),
    ("duplicate keys", GOOD_NSC.replace("  name: good\n", "  name: good\n  name: bad\n"),
     [("yaml_invalid", "yaml", None, 5, "found duplicate key 'name'")]),
    ("text glued to a placeholder", GOOD_NSC.replace("[{{.Pool}}]", "['{ {{- .Pool}}']"),
     [("template_syntax", f"spec.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]", 1, 10,
       "text next to a placeholder would be read as part of an action")]),
    ("the same object twice", GOOD_NSC + "---\n" + GOOD_NSC,
     [("duplicate_object", "metadata.name", 2, 15, "'good' is also defined in document 1")]),
    ("problems of every document at once", GOOD_NSC.replace("operator: In", "operator: Equals") + "---\n"
     + "apiVersion: sched.cloud.ctrip.com/v1\nkind: SchedulerConfigBinding\nmetadata: {name: b}\n"
       "spec:\n  selector: {}\n  priority: high\n  nodeSchedulerConfig: {name: good, args: {Pool: [A]}, extra: 1}\n",
     [("invalid", f"spec.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].operator", 1, 10, "not a valid"),
      ("manifest_invalid", "spec.nodeSchedulerConfig.extra", 2, 18, "unknown field"),
      ("invalid", "spec.priority", 2, 17, "must be a 32-bit integer"),
      ("invalid_args", "spec.nodeSchedulerConfig.args", 2, 18, 'argument "Pool" must be a string')]),
    ("a binding needs a template", "apiVersion: sched.cloud.ctrip.com/v1\nkind: SchedulerConfigBinding\n"
                                   "metadata: {name: b}\nspec: {selector: {}}\n",
     [("invalid", "spec", 1, 4, "must name a nodeSchedulerConfig or a podSchedulerConfig")]),
    ("alias bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(6)),
     [("yaml_invalid", "yaml", None, None, "too large")]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in IMPORT_ERRORS], ids=[c[0] for c in IMPORT_ERRORS])
def test_import_errors(text, expected):
    with pytest.raises(ManifestError) as caught:
        load_manifests(text)
    problems = caught.value.problems
    assert [(p.code, p.field, p.document, p.line) for p in problems] == [e[:4] for e in expected]
    for problem, (*_, message) in zip(problems, expected):
        assert message in problem.message


def test_import_error_text_and_body():
    with pytest.raises(ManifestError) as caught:
        load_manifests(GOOD_NSC.replace("operator: In", "operator: Equals"))
    field = f"spec.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].operator"
    assert str(caught.value) == f'document 1, line 10: {field}: Invalid value: "Equals": not a valid selector operator'
    assert caught.value.body()["errors"] == {f"document 1: {field}": ['Invalid value: "Equals": not a valid selector operator']}


def test_go_comments_and_trim_markers_are_applied_before_yaml():
    text = GOOD_NSC.replace("values: [{{.Pool}}]", "values: [{{.Pool}}]  {{/* the pool */}}").replace(
        "kind: NodeSchedulerConfig", "kind: {{- /* one line */}} NodeSchedulerConfig")
    assert load_manifests(text).objects == load_manifests(GOOD_NSC).objects


def test_an_indented_marker_inside_a_block_scalar_is_content():
    text = "apiVersion: sched.cloud.ctrip.com/v1\nkind: SchedulerConfigBinding\nmetadata:\n  name: b\nspec:\n  selector: {}\n" \
           "  nodeSchedulerConfig:\n    name: t\n    args:\n      Note: |\n        first\n        ...\n"
    (binding,) = load_manifests(text).objects
    assert binding.node_config.args == {"Note": "first\n...\n"}


def test_empty_documents_are_skipped():
    assert load_manifests("---\n---\n" + GOOD_NSC + "...\n").objects == load_manifests(GOOD_NSC).objects
    assert load_manifests("").objects == ()


def test_one_spec_reads_as_a_document_of_an_import_does():
    """``load_spec`` (a form's spec box): unquoted placeholders, canonical afterwards; one
    document only; problems as an import words them; not-YAML as YAML's own error."""
    from scheduling.forms import parse_template_spec

    text = "nodeAffinity:\n  required:\n    values:\n    - {{ .Pool }}\n    - x-{{.Pool}}\n"
    assert load_spec(text) == {"nodeAffinity": {"required": {"values": ["{{.Pool}}", "x-{{.Pool}}"]}}}
    assert parse_template_spec(text) == load_spec(text)
    with pytest.raises(ManifestError) as caught:
        load_spec("a: 1\n---\nb: 2\n")
    assert caught.value.code == "one_document"
    with pytest.raises(ValueError, match="one YAML document"):
        parse_template_spec("a: 1\n---\nb: 2\n")
    with pytest.raises(ManifestError, match="placeholders are not allowed in field names"):
        load_spec("{{.Key}}: 1\n")
    with pytest.raises(yaml.YAMLError):
        load_spec("a: [b")
    with pytest.raises(ValueError, match="line 1"):
        parse_template_spec("a: [b")
