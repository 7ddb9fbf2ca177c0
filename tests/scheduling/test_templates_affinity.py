"""Affinity validation (Kubernetes' field errors) and the merge rule of scheduling templates."""

from __future__ import annotations

import pytest

from scheduling.affinity_spec import (
    MergeError,
    merge_affinity,
    validate_affinity,
    validate_label_selector,
    validate_node_affinity,
    validate_pod_affinity,
)

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
NODE_REQ = f"spec.affinity.nodeAffinity.{REQ}.nodeSelectorTerms"


def expr(key, operator, *values):
    requirement = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


def term(*expressions, fields=()):
    result = {}
    if expressions:
        result["matchExpressions"] = list(expressions)
    if fields:
        result["matchFields"] = list(fields)
    return result


def required(*terms):
    return {REQ: {"nodeSelectorTerms": list(terms)}}


POOL_A = expr("pool", "In", "A")
POOL_B = expr("pool", "In", "B")
ZONE_1 = expr("zone", "In", "z1")
ZONE_2 = expr("zone", "In", "z2")
SSD = expr("disk", "Exists")

NODE_CASES = [
    ("valid seed-like affinity", {REQ: {"nodeSelectorTerms": [term(POOL_A), term(POOL_B)]},
                                  PREF: [{"weight": 3, "preference": term(POOL_A)}]}, []),
    ("no terms", {REQ: {"nodeSelectorTerms": []}},
     [f"{NODE_REQ}: Required value: must have at least one node selector term"]),
    ("In without values", required(term(expr("pool", "In"))),
     [f"{NODE_REQ}[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"]),
    ("Exists with values", required(term(expr("pool", "Exists", "A"))),
     [f"{NODE_REQ}[0].matchExpressions[0].values: Forbidden: "
      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"]),
    ("Gt with two values", required(term(expr("cores", "Gt", "1", "2"))),
     [f"{NODE_REQ}[0].matchExpressions[0].values: Required value: "
      "must be specified single value when `operator` is 'Lt' or 'Gt'"]),
    ("Lt with a word", required(term(expr("cores", "Lt", "many"))),
     [f'{NODE_REQ}[0].matchExpressions[0].values[0]: Invalid value: "many": '
      "must be an integer when `operator` is 'Lt' or 'Gt'"]),
    ("unknown operator", required(term(expr("pool", "Equals", "A"))),
     [f'{NODE_REQ}[0].matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator']),
    ("invalid value (the injection case)", required(term(expr("cloud.ctrip.com/pool", "In", "A\n  - evil"))),
     [f'{NODE_REQ}[0].matchExpressions[0].values[0]: Invalid value: "A\\n  - evil": a valid label must be an empty string or '
      "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
      "(e.g. 'MyValue',  or 'my_value',  or '12345', "
      "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]),
    ("number instead of a string value", required(term(expr("pool", "In", 3))),
     [f"{NODE_REQ}[0].matchExpressions[0].values[0]: Invalid value: 3: must be a string"]),
    ("weight out of range", {PREF: [{"weight": 0, "preference": term(POOL_A)}, {"weight": 101, "preference": term(POOL_A)}]},
     [f"spec.affinity.nodeAffinity.{PREF}[0].weight: Invalid value: 0: must be in the range 1-100",
      f"spec.affinity.nodeAffinity.{PREF}[1].weight: Invalid value: 101: must be in the range 1-100"]),
    ("weight as a string", {PREF: [{"weight": "3", "preference": term(POOL_A)}]},
     [f'spec.affinity.nodeAffinity.{PREF}[0].weight: Invalid value: "3": must be an integer']),
    ("unknown field", {"requiredDuringScheduling": {}},
     ["spec.affinity.nodeAffinity.requiredDuringScheduling: Forbidden: unknown field"]),
    ("match fields", required(term(fields=[{"key": "metadata.name", "operator": "In", "values": ["node-1"]},
                                           {"key": "metadata.uid", "operator": "Exists"}])),
     [f'{NODE_REQ}[0].matchFields[1].operator: Invalid value: "Exists": not a valid selector operator',
      f'{NODE_REQ}[0].matchFields[1].key: Invalid value: "metadata.uid": not a valid field selector key']),
]


@pytest.mark.parametrize(("affinity", "expected"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_node_affinity_validation(affinity, expected):
    assert [str(e) for e in validate_node_affinity(affinity)] == expected


POD = "spec.affinity.podAntiAffinity"
APP = {"matchLabels": {"app": "web"}}
POD_CASES = [
    ("valid", {REQ: [{"labelSelector": APP, "topologyKey": "kubernetes.io/hostname"}],
               PREF: [{"weight": 100, "podAffinityTerm": {"labelSelector": APP, "topologyKey": "zone"}}]}, []),
    ("topology key required", {REQ: [{"labelSelector": APP}]}, [f"{POD}.{REQ}[0].topologyKey: Required value: can not be empty"]),
    ("invalid topology key", {REQ: [{"labelSelector": APP, "topologyKey": "a/b/c"}]},
     [f'{POD}.{REQ}[0].topologyKey: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '
      "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
      "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
      "(e.g. 'example.com/MyName')"]),
    ("preferred weight and missing term", {PREF: [{"weight": 101}]},
     [f"{POD}.{PREF}[0].weight: Invalid value: 101: must be in the range 1-100",
      f"{POD}.{PREF}[0].podAffinityTerm.topologyKey: Required value: can not be empty"]),
    ("selector operator Gt is not a label selector operator",
     {REQ: [{"labelSelector": {"matchExpressions": [expr("app", "Gt", "1")]}, "topologyKey": "zone"}]},
     [f'{POD}.{REQ}[0].labelSelector.matchExpressions[0].operator: Invalid value: "Gt": not a valid selector operator']),
    ("invalid namespace", {REQ: [{"labelSelector": APP, "topologyKey": "zone", "namespaces": ["Web"]}]},
     [f'{POD}.{REQ}[0].namespaces[0]: Invalid value: "Web": a lowercase RFC 1123 label must consist of lower case '
      "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
      "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    ("matchLabelKeys need a labelSelector", {REQ: [{"topologyKey": "zone", "matchLabelKeys": ["pod-template-hash"]}]},
     [f"{POD}.{REQ}[0].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"]),
    ("a key in both matchLabelKeys and mismatchLabelKeys",
     {REQ: [{"labelSelector": APP, "topologyKey": "zone", "matchLabelKeys": ["k"], "mismatchLabelKeys": ["k"]}]},
     [f'{POD}.{REQ}[0].mismatchLabelKeys[0]: Invalid value: "k": exists in both matchLabelKeys and mismatchLabelKeys']),
]


@pytest.mark.parametrize(("affinity", "expected"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_pod_affinity_validation(affinity, expected):
    assert [str(e) for e in validate_pod_affinity(affinity, POD)] == expected


def test_label_selector_validation():
    errors = validate_label_selector({"matchLabels": {"app": "we b"}, "matchExpressions": [expr("tier", "In")]}, "spec.selector")
    assert [e.field for e in errors] == ["spec.selector.matchLabels", "spec.selector.matchExpressions[0].values"]


def test_affinity_validates_each_kind():
    errors = validate_affinity({"nodeAffinity": required(), "podAffinity": {REQ: [{}]}, "other": 1})
    assert [e.field for e in errors] == ["spec.affinity.other", NODE_REQ, f"spec.affinity.podAffinity.{REQ}[0].topologyKey"]


def test_deferred_values_skip_checks_that_depend_on_them():
    placeholder = lambda value: isinstance(value, str) and "{{" in value  # noqa: E731
    affinity = {REQ: {"nodeSelectorTerms": [term(expr("pool", "{{.Op}}", "{{.Pool}}"))]},
                PREF: [{"weight": "{{.W}}", "preference": term(expr("{{.Key}}", "In", "x{{.V}}"))}]}
    assert validate_node_affinity(affinity, deferred=placeholder) == []
    assert validate_node_affinity(affinity) != []


# ------------------------------------------------------------------------------------ merging

MERGE_CASES = [
    ("pod without affinity takes the template's", None, {"nodeAffinity": required(term(POOL_A))},
     {"nodeAffinity": required(term(POOL_A))}),
    ("required terms: cross product, pod's expressions first",
     {"nodeAffinity": required(term(ZONE_1), term(ZONE_2))},
     {"nodeAffinity": required(term(POOL_A), term(POOL_B))},
     {"nodeAffinity": required(term(ZONE_1, POOL_A), term(ZONE_1, POOL_B), term(ZONE_2, POOL_A), term(ZONE_2, POOL_B))}),
    ("an expression both have appears once", {"nodeAffinity": required(term(ZONE_1, POOL_A))},
     {"nodeAffinity": required(term(POOL_A, SSD))}, {"nodeAffinity": required(term(ZONE_1, POOL_A, SSD))}),
    ("match fields are combined too",
     {"nodeAffinity": required(term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]))},
     {"nodeAffinity": required(term(POOL_A))},
     {"nodeAffinity": required(term(POOL_A, fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]))}),
    ("an empty pod term (matches nothing) drops out of the product",
     {"nodeAffinity": required(term(), term(ZONE_1))}, {"nodeAffinity": required(term(POOL_A))},
     {"nodeAffinity": required(term(ZONE_1, POOL_A))}),
    ("only empty terms stay unsatisfiable", {"nodeAffinity": required(term())}, {"nodeAffinity": required(term(POOL_A))},
     {"nodeAffinity": required({})}),
    ("a pod that already implies the template is left alone",
     {"nodeAffinity": required(term(ZONE_1, POOL_A), term(POOL_B, SSD))},
     {"nodeAffinity": required(term(POOL_A), term(POOL_B))},
     {"nodeAffinity": required(term(ZONE_1, POOL_A), term(POOL_B, SSD))}),
    ("preferred terms are appended, duplicates once",
     {"nodeAffinity": {PREF: [{"weight": 5, "preference": term(SSD)}, {"weight": 3, "preference": term(POOL_A)}]}},
     {"nodeAffinity": {PREF: [{"weight": 3, "preference": term(POOL_A)}, {"weight": 2, "preference": term(POOL_B)}]}},
     {"nodeAffinity": {PREF: [{"weight": 5, "preference": term(SSD)}, {"weight": 3, "preference": term(POOL_A)},
                              {"weight": 2, "preference": term(POOL_B)}]}}),
    ("pod's required kept, template's preferred added",
     {"nodeAffinity": required(term(ZONE_1))}, {"nodeAffinity": {PREF: [{"weight": 1, "preference": term(POOL_A)}]}},
     {"nodeAffinity": {**required(term(ZONE_1)), PREF: [{"weight": 1, "preference": term(POOL_A)}]}}),
    ("pod affinity required terms are concatenated",
     {"podAffinity": {REQ: [{"labelSelector": APP, "topologyKey": "zone"}]},
      "podAntiAffinity": {PREF: [{"weight": 1, "podAffinityTerm": {"labelSelector": APP, "topologyKey": "host"}}]}},
     {"podAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]},
      "podAntiAffinity": {REQ: [{"labelSelector": APP, "topologyKey": "host"}]}},
     {"podAffinity": {REQ: [{"labelSelector": APP, "topologyKey": "zone"},
                            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]},
      "podAntiAffinity": {PREF: [{"weight": 1, "podAffinityTerm": {"labelSelector": APP, "topologyKey": "host"}}],
                          REQ: [{"labelSelector": APP, "topologyKey": "host"}]}}),
    ("kinds the template does not set are untouched",
     {"podAffinity": {REQ: [{"labelSelector": APP, "topologyKey": "zone"}]}}, {"nodeAffinity": required(term(POOL_A))},
     {"podAffinity": {REQ: [{"labelSelector": APP, "topologyKey": "zone"}]}, "nodeAffinity": required(term(POOL_A))}),
]


@pytest.mark.parametrize(("existing", "addition", "expected"), [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES])
def test_merge(existing, addition, expected):
    import copy
    before = copy.deepcopy(existing)
    assert merge_affinity(existing, addition) == expected
    assert existing == before, "the pod's affinity is not modified in place"


@pytest.mark.parametrize(("existing", "addition"), [c[1:3] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES])
def test_merge_is_idempotent(existing, addition):
    once = merge_affinity(existing, addition)
    assert merge_affinity(once, addition) == once


def test_cross_product_above_the_cap_is_refused():
    pod = {"nodeAffinity": required(*[term(expr("zone", "In", f"z{i}")) for i in range(9)])}
    template = {"nodeAffinity": required(*[term(expr("pool", "In", f"p{i}")) for i in range(8)])}
    assert len(merge_affinity(pod, template, max_terms=72)["nodeAffinity"][REQ]["nodeSelectorTerms"]) == 72
    with pytest.raises(MergeError) as caught:
        merge_affinity(pod, template, max_terms=64)
    assert caught.value.code == "affinity_too_large"
    assert caught.value.field == NODE_REQ
    assert ("9 required node selector terms and the template's 8 would combine into 72 terms (at most 64 allowed)"
            in str(caught.value))
