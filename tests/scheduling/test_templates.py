"""Scheduling templates end to end: render, resolve for a pod, merge, patch; errors and injection."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from kube.jsonpatch import apply_patch
from scheduling.manifests import load_manifests
from scheduling.schedconfig import (
    NSC_ANNOTATION,
    NSC_ARGS_ANNOTATION,
    PSC_ANNOTATION,
    PSC_ARGS_ANNOTATION,
    RenderError,
    Resolution,
    ResolutionError,
    SchedulerBinding,
    SchedulerTemplate,
    SchedulingConfigError,
    TemplateRef,
    merged_pod,
    mutation_patch,
    parse_args,
    placeholders,
    render,
    resolve,
    validate_binding,
    validate_template,
)

from .seed import PREF, REQ, SEED_ANNOTATIONS, SEED_NSC_YAML, SEED_RENDERED, pool
from .seed import pod as make_pod

NODE_REQ = f"spec.affinity.nodeAffinity.{REQ}.nodeSelectorTerms"
ARGS_FIELD = f"metadata.annotations[{NSC_ARGS_ANNOTATION}]"
NAME_FIELD = f"metadata.annotations[{NSC_ANNOTATION}]"


def seed_template() -> SchedulerTemplate:
    return load_manifests(SEED_NSC_YAML).objects[0]


ANTI = SchedulerTemplate("PodSchedulerConfig", "spread-by-host", {"podAntiAffinity": {
    PREF: [{"weight": "{{.Weight}}", "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "{{.App}}"}},
                                                         "topologyKey": "kubernetes.io/hostname"}}]}})
STATIC = SchedulerTemplate("NodeSchedulerConfig", "ssd-only", {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}})


def test_seed_text_is_the_seed_verbatim():
    seed = pathlib.Path("/work/shared/seeds/003_ecdc6eedd27c54cd.txt")
    if not seed.exists():
        pytest.skip("the seed file is not available here")
    assert SEED_NSC_YAML == "\n".join(seed.read_text().split("\n")[65:99]) + "\n"


def test_seed_example_end_to_end():
    """Annotations -> resolution -> patch -> patched pod, exactly as the seed writes it."""
    template = seed_template()
    assert template.placeholders == {"DefaultPool", "PrefferredPool"}
    pod = make_pod(SEED_ANNOTATIONS)
    resolution = resolve(pod, [template], [])
    assert resolution.affinity == SEED_RENDERED
    assert resolution.warnings == ()
    assert resolution.explain() == ['NodeSchedulerConfig "resource-pool-example" with args '
                                    '{"DefaultPool":"B","PrefferredPool":"A"}, from the pod annotation '
                                    "scb.sched.cloud.ctrip.com/nsc"]
    ops = mutation_patch(pod, resolution)
    assert ops == [{"op": "add", "path": "/spec/affinity", "value": SEED_RENDERED}]
    patched = apply_patch(pod, ops)
    assert patched == merged_pod(pod, resolution)
    assert patched["spec"] == {"containers": [{"name": "app", "image": "nginx"}], "affinity": SEED_RENDERED}
    assert patched["metadata"] == pod["metadata"]
    assert mutation_patch(patched, resolve(patched, [template], [])) == [], "a reinvoked webhook changes nothing"


def test_render_seed_directly():
    assert render(seed_template(), {"DefaultPool": "B", "PrefferredPool": "A"}) == SEED_RENDERED


# ------------------------------------------------------------------------------ denials

RESOLUTION_ERRORS = [
    ("missing template", {NSC_ANNOTATION: "no-such-pool", NSC_ARGS_ANNOTATION: "{}"},
     [("template_not_found", NAME_FIELD, 'NodeSchedulerConfig "no-such-pool" does not exist')]),
    ("missing argument", {NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: '{"PrefferredPool":"A"}'},
     [("missing_argument", ARGS_FIELD, 'NodeSchedulerConfig "resource-pool-example" needs argument "DefaultPool" '
       '(map has no entry for key "DefaultPool" at spec.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution'
       '.nodeSelectorTerms[1].matchExpressions[0].values[0])')]),
    ("no args annotation at all: every argument is missing", {NSC_ANNOTATION: "resource-pool-example"},
     [("missing_argument", ARGS_FIELD, 'needs argument "PrefferredPool"'),
      ("missing_argument", ARGS_FIELD, 'needs argument "DefaultPool"')]),
    ("args are not JSON", {NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: "{DefaultPool: B}"},
     [("invalid_args", ARGS_FIELD, "is not valid JSON: Expecting property name enclosed in double quotes")]),
    ("args are a JSON array", {NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: '["A", "B"]'},
     [("invalid_args", ARGS_FIELD, "must be an object of string, number or boolean values, not an array")]),
    ("args are a JSON string: named as JSON names it, not as Python does",
     {NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: '"A"'},
     [("invalid_args", ARGS_FIELD, "must be an object of string, number or boolean values, not a string")]),
    ("an argument is an object", {NSC_ANNOTATION: "resource-pool-example",
                                  NSC_ARGS_ANNOTATION: '{"DefaultPool": {"x": 1}, "PrefferredPool": "A"}'},
     [("invalid_args", ARGS_FIELD, 'argument "DefaultPool" must be a string, number or boolean, not an object')]),
    ("an argument is null", {NSC_ANNOTATION: "resource-pool-example",
                             NSC_ARGS_ANNOTATION: '{"DefaultPool": null, "PrefferredPool": "A"}'},
     [("invalid_args", ARGS_FIELD, 'argument "DefaultPool" must be a string, number or boolean, not null')]),
    ("NaN is not JSON", {NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: '{"DefaultPool": NaN}'},
     [("invalid_args", ARGS_FIELD, "is not valid JSON: NaN is not valid JSON")]),
    ("an argument given twice", {NSC_ANNOTATION: "resource-pool-example",
                                 NSC_ARGS_ANNOTATION: '{"DefaultPool": "A", "DefaultPool": "B"}'},
     [("invalid_args", ARGS_FIELD, 'is not valid JSON: duplicate argument "DefaultPool"')]),
    ("args without a template name", {NSC_ARGS_ANNOTATION: '{"DefaultPool": "B"}'},
     [("invalid_annotation", ARGS_FIELD, "is set but scb.sched.cloud.ctrip.com/nsc is not")]),
    ("empty template name", {NSC_ANNOTATION: " "}, [("invalid_annotation", NAME_FIELD, "must name a NodeSchedulerConfig")]),
    ("a good nsc does not hide a bad psc",
     {**SEED_ANNOTATIONS, PSC_ANNOTATION: "spread-by-host", PSC_ARGS_ANNOTATION: '{"App": "web"}'},
     [("missing_argument", f"metadata.annotations[{PSC_ARGS_ANNOTATION}]",
       'PodSchedulerConfig "spread-by-host" needs argument "Weight"')]),
    ("a number where the template needs an integer weight is fine, a string is not",
     {PSC_ANNOTATION: "spread-by-host", PSC_ARGS_ANNOTATION: '{"App": "web", "Weight": "3"}'},
     [("rendered_invalid", f"spec.affinity.podAntiAffinity.{PREF}[0].weight",
       'Invalid value: "3": must be an integer (from argument "Weight"), rendering PodSchedulerConfig "spread-by-host"')]),
]


@pytest.mark.parametrize(("annotations", "expected"), [c[1:] for c in RESOLUTION_ERRORS], ids=[c[0] for c in RESOLUTION_ERRORS])
def test_resolution_errors_name_what_is_wrong(annotations, expected):
    with pytest.raises(ResolutionError) as caught:
        resolve(make_pod(annotations), [seed_template(), ANTI], [])
    problems = caught.value.problems
    assert [(p.code, p.field) for p in problems] == [(code, field) for code, field, _ in expected]
    for problem, (_, _, message) in zip(problems, expected):
        assert message in problem.message
    assert caught.value.code == expected[0][0]


def test_denial_detail_and_error_body():
    with pytest.raises(ResolutionError) as caught:
        resolve(make_pod({NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: '{"PrefferredPool":"A"}'}),
                [seed_template()], [])
    error = caught.value
    assert error.detail.startswith(f'{ARGS_FIELD}: NodeSchedulerConfig "resource-pool-example" needs argument "DefaultPool"')
    assert error.body() == {"code": "missing_argument", "detail": error.detail,
                            "errors": {ARGS_FIELD: [error.problems[0].message]}}


def test_parse_args_accepts_scalars():
    assert parse_args('{"a": "x", "b": 2, "c": 1.5, "d": true}', "f") == {"a": "x", "b": 2, "c": 1.5, "d": True}
    with pytest.raises(SchedulingConfigError):
        parse_args('{"a": [1]}', "f")


# --------------------------------------------------------------------------- injection

INJECTIONS = [
    "A\n  - evil",
    "A\n- matchExpressions: []",
    "A: b",
    "{x: y}",
    "[a, b]",
    "# comment",
    "- a",
    "'quoted'",
    '"quoted"',
    "*alias",
    "&anchor A",
    "!!int 3",
    "|\n  block",
    "A\n---\nkind: Pod",
    "A\n...",
    "{{.DefaultPool}}",
    "A}} {{.X",
    "a" * 64,
]


@pytest.mark.parametrize("value", INJECTIONS)
def test_injected_values_stay_one_refused_value(value):
    """The value lands in exactly one leaf, unchanged; validation refuses it there, naming the field."""
    args = {"PrefferredPool": value, "DefaultPool": "B"}
    rendered = render(seed_template(), args, validate=False)
    expected = copy.deepcopy(SEED_RENDERED)
    expected["nodeAffinity"][REQ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = [value]
    expected["nodeAffinity"][PREF][0]["preference"]["matchExpressions"][0]["values"] = [value]
    assert rendered == expected
    annotations = {NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: json.dumps(args)}
    with pytest.raises(ResolutionError) as caught:
        resolve(make_pod(annotations), [seed_template()], [])
    fields = {p.field for p in caught.value.problems}
    assert fields == {f"{NODE_REQ}[0].matchExpressions[0].values[0]",
                      f"spec.affinity.nodeAffinity.{PREF}[0].preference.matchExpressions[0].values[0]"}
    assert all(p.code == "rendered_invalid" for p in caught.value.problems)
    assert all(json.dumps(value, ensure_ascii=False) in p.message and 'argument "PrefferredPool"' in p.message
               for p in caught.value.problems)


def test_an_empty_string_is_a_valid_label_value_and_stays_a_string():
    rendered = render(seed_template(), {"PrefferredPool": "", "DefaultPool": "B"})
    assert rendered["nodeAffinity"][REQ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [""]


TYPED_CASES = [
    ("integer", 3, 3),
    ("integral float is an integer", 3.0, 3),
    ("string stays a string", "3", "3"),
    ("boolean stays a boolean", True, True),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in TYPED_CASES], ids=[c[0] for c in TYPED_CASES])
def test_a_single_placeholder_leaf_takes_the_arguments_type(value, expected):
    rendered = render(ANTI, {"Weight": value, "App": "web"}, validate=False)
    weight = rendered["podAntiAffinity"][PREF][0]["weight"]
    assert weight == expected and type(weight) is type(expected)


def test_text_around_a_placeholder_prints_the_value_as_go_does():
    template = SchedulerTemplate("NodeSchedulerConfig", "t", {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["pool-{{.N}}-{{ .Gpu }}"]}]}]}}})
    rendered = render(template, {"N": 7.0, "Gpu": False})
    assert rendered["nodeAffinity"][REQ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["pool-7-false"]


# ----------------------------------------------------------------------------- bindings

def binding(name, *, namespace=None, priority=0, selector=None, nsc=None, psc=None):
    return SchedulerBinding(name=name, namespace=namespace, priority=priority,
                            selector={"matchLabels": {"app": "web"}} if selector is None else selector,
                            node_config=TemplateRef(*nsc) if nsc else None, pod_config=TemplateRef(*psc) if psc else None)


SEED_ARGS = {"DefaultPool": "B", "PrefferredPool": "A"}
B_FIRST = {"DefaultPool": "A", "PrefferredPool": "B"}

PRECEDENCE_CASES = [
    ("a matching binding applies", [binding("pools", nsc=("resource-pool-example", SEED_ARGS))], {},
     [("NodeSchedulerConfig", "resource-pool-example", "binding", "pools", ())]),
    ("a selector that does not match", [binding("pools", selector={"matchLabels": {"app": "db"}},
                                                nsc=("resource-pool-example", SEED_ARGS))], {}, []),
    ("a binding of another namespace", [binding("pools", namespace="db", nsc=("resource-pool-example", SEED_ARGS))], {}, []),
    ("higher priority wins", [binding("low", nsc=("resource-pool-example", SEED_ARGS)),
                              binding("high", priority=10, nsc=("resource-pool-example", B_FIRST))], {},
     [("NodeSchedulerConfig", "resource-pool-example", "binding", "high", ("low",))]),
    ("at equal priority the namespaced binding wins",
     [binding("cluster-wide", nsc=("resource-pool-example", SEED_ARGS)),
      binding("local", namespace="web", nsc=("resource-pool-example", B_FIRST))], {},
     [("NodeSchedulerConfig", "resource-pool-example", "binding", "web/local", ("cluster-wide",))]),
    ("then the name decides", [binding("b", nsc=("resource-pool-example", B_FIRST)),
                               binding("a", nsc=("resource-pool-example", SEED_ARGS))], {},
     [("NodeSchedulerConfig", "resource-pool-example", "binding", "a", ("b",))]),
    ("annotations beat bindings", [binding("pools", priority=100, nsc=("ssd-only", {}))], SEED_ANNOTATIONS,
     [("NodeSchedulerConfig", "resource-pool-example", "annotation", None, ("pools",))]),
    ("node and pod templates are chosen independently",
     [binding("pools", nsc=("resource-pool-example", SEED_ARGS)),
      binding("spread", psc=("spread-by-host", {"App": "web", "Weight": 10}))],
     {NSC_ANNOTATION: "ssd-only"},
     [("NodeSchedulerConfig", "ssd-only", "annotation", None, ("pools",)),
      ("PodSchedulerConfig", "spread-by-host", "binding", "spread", ())]),
]


@pytest.mark.parametrize(("bindings", "annotations", "expected"), [c[1:] for c in PRECEDENCE_CASES],
                         ids=[c[0] for c in PRECEDENCE_CASES])
def test_binding_precedence(bindings, annotations, expected):
    pod = make_pod(annotations, labels={"app": "web"})
    resolution = resolve(pod, [seed_template(), ANTI, STATIC], bindings)
    assert [(a.kind, a.name, a.source, a.binding, a.shadowed) for a in resolution.applied] == expected
    for applied in resolution.applied:
        if applied.name == "resource-pool-example":
            preferred = "A" if applied.args == SEED_ARGS else "B"
            assert resolution.affinity["nodeAffinity"][PREF][0]["preference"] == pool(preferred)


def test_equal_priority_ties_are_warned_about():
    resolution = resolve(make_pod(labels={"app": "web"}), [seed_template()],
                         [binding("b", nsc=("resource-pool-example", SEED_ARGS)),
                          binding("a", nsc=("resource-pool-example", SEED_ARGS))])
    assert resolution.warnings == ('SchedulerConfigBindings "a", "b" all select this pod for a NodeSchedulerConfig with '
                                   'priority 0; "a" wins by name',)
    assert resolution.explain() == ['NodeSchedulerConfig "resource-pool-example" with args '
                                    '{"DefaultPool":"B","PrefferredPool":"A"}, '
                                    'from SchedulerConfigBinding "a" (preferred over b)']


def test_a_binding_with_an_unreadable_selector_is_skipped_with_a_warning():
    bad = binding("broken", selector={"matchExpressions": [{"key": "app", "operator": "In"}]}, nsc=("ssd-only", {}))
    resolution = resolve(make_pod(labels={"app": "web"}), [STATIC], [bad])
    assert resolution.applied == ()
    assert resolution.warnings[0].startswith('SchedulerConfigBinding "broken" was skipped: its selector is invalid')


def test_the_request_namespace_overrides_the_pods():
    bindings = [binding("local", namespace="web", nsc=("ssd-only", {}))]
    assert resolve(make_pod(labels={"app": "web"}, namespace=""), [STATIC], bindings, namespace="web").applied
    assert not resolve(make_pod(labels={"app": "web"}, namespace="web"), [STATIC], bindings, namespace="db").applied


def test_problems_from_a_binding_name_the_binding():
    bindings = [binding("pools", namespace="web", nsc=("resource-pool-example", {"PrefferredPool": "A"})),
                binding("spread", psc=("gone", {}))]
    with pytest.raises(ResolutionError) as caught:
        resolve(make_pod(labels={"app": "web"}), [seed_template()], bindings)
    assert [(p.code, p.field) for p in caught.value.problems] == [
        ("missing_argument", "SchedulerConfigBinding web/pools: spec.nodeSchedulerConfig.args"),
        ("template_not_found", "SchedulerConfigBinding spread: spec.podSchedulerConfig.name"),
    ]


def test_unused_arguments_are_warned_about():
    args = json.dumps({**SEED_ARGS, "Zone": "z1"})
    resolution = resolve(make_pod({NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: args}), [seed_template()], [])
    assert resolution.warnings == (f'{ARGS_FIELD}: argument "Zone" is not used by NodeSchedulerConfig "resource-pool-example"',)


def test_nothing_applies():
    pod = make_pod(labels={"app": "web"})
    resolution = resolve(pod, [seed_template()], [])
    assert resolution == Resolution({}, (), ())
    assert mutation_patch(pod, resolution) == []
    assert merged_pod(pod, resolution) == pod


# ----------------------------------------------------------------------------- patches

SSD = {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
ZONE = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
HOST_SPREAD = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}

PATCH_CASES = [
    ("no spec.affinity", {"containers": []}, [{"op": "add", "path": "/spec/affinity", "value": SEED_RENDERED}]),
    ("spec.affinity is null", {"containers": [], "affinity": None},
     [{"op": "add", "path": "/spec/affinity", "value": SEED_RENDERED}]),
    ("only pod anti-affinity", {"affinity": {"podAntiAffinity": {REQ: [HOST_SPREAD]}}},
     [{"op": "add", "path": "/spec/affinity/nodeAffinity", "value": SEED_RENDERED["nodeAffinity"]}]),
    ("node affinity with preferred terms only", {"affinity": {"nodeAffinity": {PREF: [{"weight": 9, "preference": SSD}]}}},
     [{"op": "add", "path": f"/spec/affinity/nodeAffinity/{PREF}/-", "value": SEED_RENDERED["nodeAffinity"][PREF][0]},
      {"op": "add", "path": f"/spec/affinity/nodeAffinity/{PREF}/-", "value": SEED_RENDERED["nodeAffinity"][PREF][1]},
      {"op": "add", "path": f"/spec/affinity/nodeAffinity/{REQ}", "value": SEED_RENDERED["nodeAffinity"][REQ]}]),
    ("required node terms are combined and replaced",
     {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [ZONE]}}}},
     [{"op": "replace", "path": f"/spec/affinity/nodeAffinity/{REQ}", "value": {"nodeSelectorTerms": [
         {"matchExpressions": ZONE["matchExpressions"] + pool("A")["matchExpressions"]},
         {"matchExpressions": ZONE["matchExpressions"] + pool("B")["matchExpressions"]}]}},
      {"op": "add", "path": f"/spec/affinity/nodeAffinity/{PREF}", "value": SEED_RENDERED["nodeAffinity"][PREF]}]),
    ("no spec at all", None, [{"op": "add", "path": "/spec", "value": {"affinity": SEED_RENDERED}}]),
]


@pytest.mark.parametrize(("spec", "expected"), [c[1:] for c in PATCH_CASES], ids=[c[0] for c in PATCH_CASES])
def test_mutation_patch(spec, expected):
    pod = make_pod(SEED_ANNOTATIONS, spec=spec)
    if spec is None:
        del pod["spec"]
    resolution = resolve(pod, [seed_template()], [])
    ops = mutation_patch(pod, resolution)
    assert ops == expected
    patched = apply_patch(pod, ops)
    assert patched == merged_pod(pod, resolution)
    assert mutation_patch(patched, resolution) == [], "applying twice adds nothing"


def test_a_merge_above_the_cap_is_a_denial():
    spec = {"affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [f"z{i}"]}]} for i in range(40)]}}}}
    pod = make_pod(SEED_ANNOTATIONS, spec=spec)
    with pytest.raises(ResolutionError) as caught:
        mutation_patch(pod, resolve(pod, [seed_template()], []))
    assert caught.value.code == "affinity_too_large"
    assert caught.value.field == NODE_REQ


def test_pointer_tokens_are_escaped():
    from scheduling.schedconfig import _pointer

    assert _pointer("metadata", "annotations", "scb.sched.cloud.ctrip.com/nsc", "a~b") == \
        "/metadata/annotations/scb.sched.cloud.ctrip.com~1nsc/a~0b"


# -------------------------------------------------------------------- saving templates

def nsc(spec, name="t"):
    return SchedulerTemplate("NodeSchedulerConfig", name, spec)


def selector_term(key="pool", operator="In", values=("{{.Pool}}",)):
    return {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}]}}}


TEMPLATE_PROBLEMS = [
    ("seed is valid", None, []),
    ("placeholders in operator and weight wait for rendering",
     nsc({"nodeAffinity": {PREF: [{"weight": "{{.W}}", "preference": {"matchExpressions": [
         {"key": "pool", "operator": "{{.Op}}", "values": ["{{.Pool}}"]}]}}]}}), []),
    ("nested placeholder", nsc(selector_term(values=["{{.Pools.A}}"])),
     [("template_unsupported", f"spec.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]",
       "{{.Pools.A}}: arguments are flat name/value pairs, so a placeholder is a single name such as {{.A}}")]),
    ("if action", nsc(selector_term(values=["{{if .X}}a{{end}}"])),
     [("template_unsupported", f"spec.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].values[0]",
       "{{if}} actions are not supported")]),
    ("placeholder in a field name", nsc({"nodeAffinity": {"{{.Field}}": {}}}),
     [("template_unsupported", "spec.nodeAffinity.{{.Field}}", "placeholders are not allowed in field names")]),
    ("static parts are validated", nsc(selector_term(operator="Equals")),
     [("invalid", f"spec.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].operator",
       'Invalid value: "Equals": not a valid selector operator')]),
    ("a pod template in a node template", nsc({"podAffinity": {}}),
     [("invalid", "spec.podAffinity", "Forbidden: unknown field"), ("invalid", "spec", "Required value: must set nodeAffinity")]),
    ("an empty pod template", SchedulerTemplate("PodSchedulerConfig", "p", {}),
     [("invalid", "spec", "Required value: must set podAffinity or podAntiAffinity")]),
    ("a bad name", nsc(selector_term(), name="Pool_A"),
     [("invalid", "metadata.name", 'Invalid value: "Pool_A": a lowercase RFC 1123 subdomain')]),
]


@pytest.mark.parametrize(("template", "expected"), [c[1:] for c in TEMPLATE_PROBLEMS], ids=[c[0] for c in TEMPLATE_PROBLEMS])
def test_validate_template(template, expected):
    problems = validate_template(template or seed_template())
    assert [(p.code, p.field) for p in problems] == [(code, field) for code, field, _ in expected]
    for problem, (_, _, message) in zip(problems, expected):
        assert message in problem.message


def test_placeholders_for_forms():
    assert placeholders(ANTI) == {"App", "Weight"}
    assert placeholders(STATIC) == frozenset()


BINDING_PROBLEMS = [
    ("valid", binding("pools", nsc=("resource-pool-example", SEED_ARGS)), []),
    ("names no template", binding("pools"), [("invalid", "spec")]),
    ("no selector", SchedulerBinding("pools", None, node_config=TemplateRef("ssd-only")), [("invalid", "spec.selector")]),
    ("bad selector", binding("pools", selector={"matchLabels": {"app": "we b"}}, nsc=("ssd-only", {})),
     [("invalid", "spec.selector.matchLabels")]),
    ("priority must be an integer", binding("pools", priority=True, nsc=("ssd-only", {})), [("invalid", "spec.priority")]),
    ("bad namespace", binding("pools", namespace="Web", nsc=("ssd-only", {})), [("invalid", "metadata.namespace")]),
    ("args must be scalars", binding("pools", nsc=("resource-pool-example", {"DefaultPool": ["B"]})),
     [("invalid_args", "spec.nodeSchedulerConfig.args")]),
    ("args must not hold template actions", binding("pools", nsc=("resource-pool-example", {"DefaultPool": "{{.X}}"})),
     [("invalid_args", "spec.nodeSchedulerConfig.args")]),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in BINDING_PROBLEMS], ids=[c[0] for c in BINDING_PROBLEMS])
def test_validate_binding(value, expected):
    assert [(p.code, p.field) for p in validate_binding(value)] == expected


def test_validate_binding_against_templates_catches_what_admission_would_deny():
    templates = [seed_template(), STATIC]
    assert validate_binding(binding("pools", nsc=("resource-pool-example", SEED_ARGS)), templates) == []
    problems = validate_binding(binding("pools", nsc=("resource-pool-example", {"PrefferredPool": "A"}),
                                        psc=("gone", {})), templates)
    assert [(p.code, p.field) for p in problems] == [("missing_argument", "spec.nodeSchedulerConfig.args"),
                                                     ("template_not_found", "spec.podSchedulerConfig.name")]
    problems = validate_binding(binding("pools", nsc=("resource-pool-example", {**SEED_ARGS, "DefaultPool": "B C"})), templates)
    assert [(p.code, p.field) for p in problems] == [("rendered_invalid", f"{NODE_REQ}[1].matchExpressions[0].values[0]"),
                                                     ("rendered_invalid", f"spec.affinity.nodeAffinity.{PREF}[1].preference"
                                                                          ".matchExpressions[0].values[0]")]


def test_render_refuses_args_that_are_not_scalars():
    with pytest.raises(RenderError) as caught:
        render(seed_template(), {"DefaultPool": ["B"], "PrefferredPool": "A"})
    assert caught.value.code == "invalid_args"
