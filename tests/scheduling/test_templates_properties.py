"""Properties of scheduling templates: rendering only changes leaves, YAML round-trips, and the
patch sent to the API server yields exactly the documented merge (which keeps the pod's meaning)."""

from __future__ import annotations

import copy
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from kube.jsonpatch import apply_patch
from scheduling.affinity_spec import merge_affinity
from scheduling.gotemplate import format_value
from scheduling.manifests import dump_manifests, load_manifests
from scheduling.schedconfig import (
    Resolution,
    SchedulerBinding,
    SchedulerTemplate,
    TemplateRef,
    merged_pod,
    mutation_patch,
    render,
)
from tests.scheduling.seed import SEED_NSC_YAML, SEED_RENDERED

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
SETTINGS = settings(max_examples=250, deadline=None)

# ------------------------------------------------------------------ rendering keeps the shape

_names = st.sampled_from(["Pool", "Zone", "Weight", "App", "X"])
_any_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_scalar_arg = st.one_of(_any_text, st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False), st.booleans())
_literal = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8).filter(lambda s: "{" not in s and "}" not in s)


@st.composite
def _placeholder_leaf(draw):
    name = draw(_names)
    return draw(st.sampled_from([f"{{{{.{name}}}}}", f"{{{{ .{name} }}}}"])) if draw(st.booleans()) else \
        f"{draw(_literal)}{{{{.{name}}}}}{draw(_literal)}"


_leaf = st.one_of(_placeholder_leaf(), _literal, st.integers(0, 100), st.booleans(), st.none())
_tree = st.recursive(_leaf, lambda children: st.one_of(
    st.lists(children, max_size=3),
    st.dictionaries(st.sampled_from(["key", "operator", "values", "weight", "terms"]), children, max_size=3)), max_leaves=12)


def _expected(node, args):
    """What rendering must give: the same tree, placeholder leaves replaced by their value."""
    if isinstance(node, dict):
        return {k: _expected(v, args) for k, v in node.items()}
    if isinstance(node, list):
        return [_expected(v, args) for v in node]
    if isinstance(node, str) and "{{" in node:
        stripped = node.replace(" ", "") if node.startswith("{{ ") else node
        if stripped.startswith("{{.") and stripped.endswith("}}") and stripped.count("{{") == 1:
            value = args[stripped[3:-2]]
            return int(value) if isinstance(value, float) and value.is_integer() else value
        head, _, rest = node.partition("{{.")
        name, _, tail = rest.partition("}}")
        return head + format_value(args[name]) + tail
    return node


@SETTINGS
@given(_tree, st.fixed_dictionaries({name: _scalar_arg for name in ["Pool", "Zone", "Weight", "App", "X"]}))
def test_rendering_changes_leaves_only(tree, args):
    template = SchedulerTemplate("NodeSchedulerConfig", "t", {"nodeAffinity": tree})
    rendered = render(template, args, validate=False)
    assert rendered == {"nodeAffinity": _expected(tree, args)}


@SETTINGS
@given(_any_text, _any_text)
def test_the_seed_renders_any_text_into_its_two_leaves_and_nowhere_else(preferred, default):
    template = load_manifests(SEED_NSC_YAML).objects[0]
    rendered = render(template, {"PrefferredPool": preferred, "DefaultPool": default}, validate=False)
    expected = copy.deepcopy(SEED_RENDERED)
    terms = expected["nodeAffinity"][REQ]["nodeSelectorTerms"]
    prefs = expected["nodeAffinity"][PREF]
    for value, term, pref in ((preferred, terms[0], prefs[0]), (default, terms[1], prefs[1])):
        term["matchExpressions"][0]["values"] = [value]
        pref["preference"]["matchExpressions"][0]["values"] = [value]
    assert rendered == expected


# ------------------------------------------------------------------------------ round trips

_label_value = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?", fullmatch=True)
_value_leaf = st.one_of(_label_value, _names.map(lambda n: f"{{{{.{n}}}}}"),
                        st.tuples(_label_value, _names).map(lambda p: f"{p[0]}-{{{{.{p[1]}}}}}"))
_requirement = st.fixed_dictionaries({"key": st.sampled_from(["pool", "cloud.ctrip.com/pool", "zone"]),
                                      "operator": st.sampled_from(["In", "NotIn"]),
                                      "values": st.lists(_value_leaf, min_size=1, max_size=3)})
_node_term = st.fixed_dictionaries({"matchExpressions": st.lists(_requirement, min_size=1, max_size=2)})
_template_spec = st.fixed_dictionaries({"nodeAffinity": st.fixed_dictionaries({}, optional={
    REQ: st.fixed_dictionaries({"nodeSelectorTerms": st.lists(_node_term, min_size=1, max_size=2)}),
    PREF: st.lists(st.fixed_dictionaries({"weight": st.one_of(st.integers(1, 100), st.just("{{.Weight}}")),
                                          "preference": _node_term}), max_size=2)})})
_object_name = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
_arg_text = _any_text.filter(lambda s: "{{" not in s)
_binding = st.builds(
    SchedulerBinding, name=_object_name,
    selector=st.fixed_dictionaries({}, optional={"matchLabels": st.dictionaries(st.sampled_from(["app", "tier"]), _label_value)}),
    namespace=st.one_of(st.none(), _object_name.filter(lambda n: "." not in n)), priority=st.integers(-100, 100),
    node_config=st.builds(TemplateRef, _object_name,
                          st.dictionaries(_names, st.one_of(_arg_text, st.integers(), st.booleans(), st.floats(-1e9, 1e9)))),
    pod_config=st.none())


@SETTINGS
@given(st.lists(st.tuples(_object_name, _template_spec), max_size=3, unique_by=lambda t: t[0]),
       st.lists(_binding, max_size=3, unique_by=lambda b: (b.namespace, b.name)))
def test_import_of_export_is_the_identity(templates, bindings):
    objects = tuple([SchedulerTemplate("NodeSchedulerConfig", name, spec) for name, spec in templates] + bindings)
    assert load_manifests(dump_manifests(objects)).objects == objects


# --------------------------------------------------------------------------- patch == merge

_keys = ["zone", "pool", "disk"]
_values = ["a", "b", "c"]
_expr = st.one_of(
    st.builds(lambda k, op, vs: {"key": k, "operator": op, "values": vs}, st.sampled_from(_keys),
              st.sampled_from(["In", "NotIn"]), st.lists(st.sampled_from(_values), min_size=1, max_size=2, unique=True)),
    st.builds(lambda k, op: {"key": k, "operator": op}, st.sampled_from(_keys), st.sampled_from(["Exists", "DoesNotExist"])))
_term = st.lists(_expr, max_size=3).map(lambda exprs: {"matchExpressions": exprs} if exprs else {})
_node_affinity = st.fixed_dictionaries({}, optional={
    REQ: st.lists(_term, min_size=1, max_size=3).map(lambda terms: {"nodeSelectorTerms": terms}),
    PREF: st.lists(st.builds(lambda w, t: {"weight": w, "preference": t}, st.integers(1, 100), _term), max_size=2)})
_pod_term = st.builds(lambda app, topology: {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology},
                      st.sampled_from(["web", "db"]), st.sampled_from(["zone", "kubernetes.io/hostname"]))
_pod_affinity = st.fixed_dictionaries({}, optional={
    REQ: st.lists(_pod_term, max_size=2),
    PREF: st.lists(st.builds(lambda w, t: {"weight": w, "podAffinityTerm": t}, st.integers(1, 100), _pod_term), max_size=2)})
_affinity = st.fixed_dictionaries({}, optional={"nodeAffinity": _node_affinity, "podAffinity": _pod_affinity,
                                                "podAntiAffinity": _pod_affinity})
_spec = st.one_of(st.just(None), st.just({"containers": []}),
                  _affinity.map(lambda a: {"containers": [], "affinity": a}),
                  st.just({"containers": [], "affinity": None}))


@SETTINGS
@given(_spec, _affinity)
def test_applying_the_patch_gives_the_merge(spec, addition):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    if spec is not None:
        pod["spec"] = spec
    resolution = Resolution(addition)
    ops = mutation_patch(pod, resolution)
    patched = apply_patch(pod, ops)
    assert patched == merged_pod(pod, resolution)
    assert mutation_patch(patched, resolution) == []


def _matches_expression(labels, requirement):
    value, operator = labels.get(requirement["key"]), requirement["operator"]
    if operator == "In":
        return value in requirement["values"]
    if operator == "NotIn":
        return value not in requirement["values"]
    return (value is not None) == (operator == "Exists")


def _matches(labels, terms):
    """component-helpers semantics: terms ORed, expressions ANDed, an empty term matches nothing."""
    return any(term.get("matchExpressions") and all(_matches_expression(labels, e) for e in term["matchExpressions"])
               for term in terms)


_ALL_LABEL_SETS = [{k: v for k, v in zip(_keys, choice) if v is not None}
                   for choice in itertools.product([None, *_values], repeat=len(_keys))]


@SETTINGS
@given(st.lists(_term, min_size=1, max_size=3), st.lists(_term, min_size=1, max_size=3))
def test_the_merged_required_node_affinity_is_the_conjunction(pod_terms, template_terms):
    merged = merge_affinity({"nodeAffinity": {REQ: {"nodeSelectorTerms": pod_terms}}},
                            {"nodeAffinity": {REQ: {"nodeSelectorTerms": template_terms}}})
    merged_terms = merged["nodeAffinity"][REQ]["nodeSelectorTerms"]
    for labels in _ALL_LABEL_SETS:
        assert _matches(labels, merged_terms) == (_matches(labels, pod_terms) and _matches(labels, template_terms)), labels
