"""Ctrip's scheduling templates: render NodeSchedulerConfig / PodSchedulerConfig, pick them for a
pod (annotations or SchedulerConfigBindings), merge them into ``spec.affinity``, patch the pod.

Plain data in, plain data out; no Django.  The webhook
(``POST /api/admission/v1/scheduling/mutate``) calls :func:`resolve` then :func:`mutation_patch`
and turns a :class:`ResolutionError` into a denial; the REST API saves what
:func:`validate_template` / :func:`validate_binding` accept and answers 400 with
:meth:`SchedulingConfigError.body` otherwise.

Objects
-------
* **NodeSchedulerConfig** (nsc): ``spec.nodeAffinity``, a ``NodeAffinity`` whose string
  values may hold placeholders ``{{.Name}}``.
* **PodSchedulerConfig** (psc): ``spec.podAffinity`` and/or ``spec.podAntiAffinity``.
* **SchedulerConfigBinding** (scb): ``spec.selector`` (a ``metav1.LabelSelector`` over pod
  labels; ``{}`` selects every pod), optional ``spec.priority`` (integer, default 0),
  ``spec.nodeSchedulerConfig`` and/or ``spec.podSchedulerConfig``, each ``{name, args}``
  with ``args`` an object of strings, numbers and booleans.  ``metadata.namespace`` limits
  the binding to pods of that namespace; without it the binding applies to every namespace.
  Templates are cluster-wide (no namespace).

Rendering: values, never text
-----------------------------
A template is stored as a parsed tree (the ``spec`` mapping) whose string leaves may hold Go
actions (``"{{.PrefferredPool}}"``, ``"pool-{{.Zone}}"``).  Rendering substitutes argument
values into those leaves only, so no argument can change the structure of the affinity: a
value such as ``"A\\n  - evil"`` or ``"{x: y}"`` stays one string in one place (and is then
refused as an invalid label value, naming the field).  This is the guard against YAML
injection that Go's textual rendering would not give.

* A leaf that is exactly one placeholder takes the argument's JSON type: ``weight:
  "{{.W}}"`` with ``{"W": 3}`` renders the number 3 (an integral number is an integer, as
  Go would print it and YAML read it back); a string argument always stays a string, even
  ``"3"`` or ``"true"`` (it is never re-read as YAML).
* A leaf with text around its placeholders renders as text, values printed as Go prints them.
* Placeholders are flat names (``{{.Pool}}``); args are flat, so ``{{.A.B}}`` is refused
  when the template is saved.  Placeholders in field names are refused too.
* A missing argument is refused before anything is rendered, naming the template, the
  argument and where the template uses it.  Unused arguments only produce warnings.

Which templates a pod gets (precedence)
---------------------------------------
Node (nsc) and pod (psc) templates are chosen independently; for each:

1. The pod's annotations win: ``scb.sched.cloud.ctrip.com/nsc=<name>`` with
   ``scb.sched.cloud.ctrip.com/nsc-args=<JSON object>`` (``psc``/``psc-args`` likewise).
   Args may be left out when the template has no placeholders.  An args annotation without
   its name annotation is refused (it would otherwise be silently ignored).
2. Otherwise the matching bindings that name a template of that kind compete: a binding
   matches when its namespace (if any) is the pod's and its selector matches the pod's
   labels.  The winner is the one with the highest ``priority``; then a namespaced binding
   beats a cluster-wide one; then the lowest ``namespace/name`` in byte order.  Losers are
   listed in the explanation (and equal-priority ties produce a warning), so the choice is
   auditable.  A binding whose selector cannot be read is skipped with a warning rather
   than blocking every pod of the cluster.

Everything is all or nothing: one problem (a template that does not exist, a missing or
malformed argument, a rendered affinity the API server would refuse) refuses the pod with
every problem listed, and never produces a partial patch.  How the rendered affinity is
merged with the pod's own is described in :mod:`scheduling.affinity_spec`.

Error codes (``Problem.code``)
------------------------------
``invalid`` (a template or binding field), ``template_syntax`` / ``template_unsupported``
(a placeholder the Go subset cannot read), ``template_not_found``, ``missing_argument``,
``invalid_args`` (args not an object of scalars, or not JSON), ``invalid_annotation``,
``rendered_invalid`` (the rendered affinity fails validation), ``affinity_too_large`` (the
merge would exceed the node selector term cap), ``invalid_pod``; the YAML import adds its
own (see :mod:`scheduling.manifests`).
"""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.field import json_type
from kube.labels import SelectorError, dns1123_label_errors, dns1123_subdomain_errors, selector_from_label_selector

from . import gotemplate
from .affinity_spec import (
    AFFINITY_KINDS,
    MAX_NODE_SELECTOR_TERMS,
    FieldError,
    MergeError,
    merge_affinity,
    validate_label_selector,
    validate_node_affinity,
    validate_pod_affinity,
)

__all__ = [
    "API_VERSION",
    "NODE_SCHEDULER_CONFIG",
    "NSC_ANNOTATION",
    "NSC_ARGS_ANNOTATION",
    "POD_SCHEDULER_CONFIG",
    "PSC_ANNOTATION",
    "PSC_ARGS_ANNOTATION",
    "SCHEDULER_CONFIG_BINDING",
    "AppliedTemplate",
    "Problem",
    "RenderError",
    "Resolution",
    "ResolutionError",
    "SchedulerBinding",
    "SchedulerTemplate",
    "SchedulingConfigError",
    "TemplateRef",
    "merged_pod",
    "mutation_patch",
    "parse_args",
    "placeholders",
    "render",
    "resolve",
    "validate_binding",
    "validate_template",
]

API_VERSION = "sched.cloud.ctrip.com/v1"
NODE_SCHEDULER_CONFIG = "NodeSchedulerConfig"
POD_SCHEDULER_CONFIG = "PodSchedulerConfig"
SCHEDULER_CONFIG_BINDING = "SchedulerConfigBinding"
TEMPLATE_KINDS = (NODE_SCHEDULER_CONFIG, POD_SCHEDULER_CONFIG)

NSC_ANNOTATION = "scb.sched.cloud.ctrip.com/nsc"
NSC_ARGS_ANNOTATION = "scb.sched.cloud.ctrip.com/nsc-args"
PSC_ANNOTATION = "scb.sched.cloud.ctrip.com/psc"
PSC_ARGS_ANNOTATION = "scb.sched.cloud.ctrip.com/psc-args"

Scalar = str | int | float | bool


@dataclass(frozen=True)
class _Kind:
    """What differs between the two template kinds."""

    spec_fields: tuple[str, ...]
    binding_field: str
    annotation: str
    args_annotation: str


_KINDS = {
    NODE_SCHEDULER_CONFIG: _Kind(("nodeAffinity",), "nodeSchedulerConfig", NSC_ANNOTATION, NSC_ARGS_ANNOTATION),
    POD_SCHEDULER_CONFIG: _Kind(("podAffinity", "podAntiAffinity"), "podSchedulerConfig", PSC_ANNOTATION, PSC_ARGS_ANNOTATION),
}


# ------------------------------------------------------------------------------------ errors

@dataclass(frozen=True)
class Problem:
    """One reason to refuse: a machine ``code``, the ``field`` it concerns (a Kubernetes-style
    path, or ``metadata.annotations[<key>]``; ``""`` for the input as a whole) and a human
    ``message``.  Imports add the 1-based ``document`` and ``line``."""

    code: str
    field: str
    message: str
    document: int | None = None
    line: int | None = None

    @property
    def key(self) -> str:
        """The key of this problem in an API error body's ``errors``."""
        where = self.field or "non_field_errors"
        return f"document {self.document}: {where}" if self.document is not None else where

    def __str__(self) -> str:
        where = []
        if self.document is not None:
            where.append(f"document {self.document}")
        if self.line is not None:
            where.append(f"line {self.line}")
        prefix = ", ".join(where) + ": " if where else ""
        return f"{prefix}{self.field}: {self.message}" if self.field else prefix + self.message


class SchedulingConfigError(ValueError):
    """Something cannot be saved, rendered or applied; ``problems`` lists every reason.

    ``code`` and ``field`` are the first problem's; ``detail`` is all of them as one text
    (what a webhook denial shows); :meth:`body` is the REST API's 400 body.
    """

    def __init__(self, problems: Sequence[Problem]) -> None:
        if not problems:
            raise ValueError("a SchedulingConfigError needs at least one problem")
        self.problems = tuple(problems)
        super().__init__(self.detail)

    @property
    def code(self) -> str:
        return self.problems[0].code

    @property
    def field(self) -> str:
        return self.problems[0].field

    @property
    def detail(self) -> str:
        return "; ".join(str(problem) for problem in self.problems)

    def body(self) -> dict[str, Any]:
        """``{"code", "detail", "errors": {field: [message, ...]}}``."""
        errors: dict[str, list[str]] = {}
        for problem in self.problems:
            errors.setdefault(problem.key, []).append(problem.message)
        return {"code": self.code, "detail": self.detail, "errors": errors}


class RenderError(SchedulingConfigError):
    """A template cannot be rendered with the given arguments, or renders to an invalid affinity."""


class ResolutionError(SchedulingConfigError):
    """A pod's templates cannot be applied: deny the pod with :attr:`detail`."""


# ------------------------------------------------------------------------------ the objects

@dataclass(frozen=True)
class TemplateRef:
    """A template name and the arguments to render it with."""

    name: str
    args: Mapping[str, Scalar] = field(default_factory=dict)


@dataclass(frozen=True)
class SchedulerTemplate:
    """A NodeSchedulerConfig or PodSchedulerConfig: ``spec`` is JSON-ready, string leaves may
    hold placeholders written ``{{.Name}}``."""

    kind: str
    name: str
    spec: Mapping[str, Any]

    @property
    def placeholders(self) -> frozenset[str]:
        return placeholders(self)


@dataclass(frozen=True)
class SchedulerBinding:
    """A SchedulerConfigBinding; ``namespace`` None applies to every namespace."""

    name: str
    selector: Mapping[str, Any] | None
    namespace: str | None = None
    priority: int = 0
    node_config: TemplateRef | None = None
    pod_config: TemplateRef | None = None

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for a cluster-wide binding."""
        return f"{self.namespace}/{self.name}" if self.namespace is not None else self.name

    def ref(self, kind: str) -> TemplateRef | None:
        return self.node_config if kind == NODE_SCHEDULER_CONFIG else self.pod_config


# --------------------------------------------------------------------------------- leaves

def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@functools.lru_cache(maxsize=4096)
def _leaf_template(text: str) -> gotemplate.Template:
    """Parsed leaf (templates are immutable, and the webhook renders the same few leaves all day)."""
    return gotemplate.parse(text, "leaf")


def _has_action(value: Any) -> bool:
    """A string holding a Go action: in Go every ``{{`` opens one."""
    return isinstance(value, str) and "{{" in value


def _walk(node: Any, path: str) -> Iterator[tuple[str, Any, bool]]:
    """Every (path, value, is_key) below ``node``: mapping keys and scalar leaves."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield _child(path, str(key)), key, True
            yield from _walk(value, _child(path, str(key)))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, f"{path}[{i}]")
    else:
        yield path, node, False


def _placeholder_leaves(spec: Any, path: str) -> Iterator[tuple[str, gotemplate.Template]]:
    """(path, parsed leaf) for every leaf with a placeholder; raises TemplateError on a bad one."""
    for leaf_path, value, is_key in _walk(spec, path):
        if not is_key and _has_action(value):
            yield leaf_path, _leaf_template(value)


def _template_problems(spec: Any, path: str) -> list[Problem]:
    """Placeholders that cannot be used: unparsable, nested chains, or inside field names."""
    problems = []
    for leaf_path, value, is_key in _walk(spec, path):
        if not _has_action(value):
            continue
        if is_key:
            problems.append(Problem("template_unsupported", leaf_path, "placeholders are not allowed in field names"))
            continue
        try:
            template = _leaf_template(value)
        except gotemplate.TemplateError as exc:
            problems.append(Problem(exc.code, leaf_path, f"{exc.message} in {json.dumps(value, ensure_ascii=False)}"))
            continue
        for node in template.fields:
            if len(node.names) > 1:
                problems.append(Problem("template_unsupported", leaf_path,
                                        f"{{{{{node.source}}}}}: arguments are flat name/value pairs, "
                                        f"so a placeholder is a single name such as {{{{.{node.names[-1]}}}}}"))
    return problems


def placeholders(template: SchedulerTemplate) -> frozenset[str]:
    """The argument names ``template`` needs (for forms and "missing argument" messages)."""
    try:
        return frozenset(name for _, leaf in _placeholder_leaves(template.spec, "spec") for name in leaf.placeholders)
    except gotemplate.TemplateError as exc:
        raise SchedulingConfigError([Problem(exc.code, "spec", exc.message)]) from None


def _uses(template: SchedulerTemplate) -> dict[str, str]:
    """Each placeholder name and the first field that uses it."""
    first: dict[str, str] = {}
    for leaf_path, leaf in _placeholder_leaves(template.spec, "spec"):
        for node in leaf.fields:
            first.setdefault(node.names[0], leaf_path)
    return first


# ------------------------------------------------------------------------------- validation

def _field_problems(code: str, errors: Iterable[FieldError]) -> list[Problem]:
    return [Problem(code, error.field, error.body()) for error in errors]


def _name_problems(name: Any, path: str, what: str) -> list[Problem]:
    if not isinstance(name, str) or not name:
        return [Problem("invalid", path, f"Required value: {what} needs a name")]
    return [Problem("invalid", path, f"Invalid value: {json.dumps(name, ensure_ascii=False)}: {message}")
            for message in dns1123_subdomain_errors(name)]


def _spec_errors(kind: str, spec: Any, path: str, deferred: Callable[[Any], bool]) -> list[FieldError]:
    """The affinity of a template spec (or a rendered one, at ``spec.affinity``)."""
    if not isinstance(spec, Mapping):
        return [FieldError(path, "Invalid value", "must be an object", spec)]
    fields = _KINDS[kind].spec_fields
    errors = [FieldError(_child(path, str(key)), "Forbidden", "unknown field") for key in spec if key not in fields]
    if not any(spec.get(name) is not None for name in fields):
        errors.append(FieldError(path, "Required value", f"must set {' or '.join(fields)}"))
    for name in fields:
        validate = validate_node_affinity if name == "nodeAffinity" else validate_pod_affinity
        errors += validate(spec.get(name), _child(path, name), deferred=deferred)
    return errors


def validate_template(template: SchedulerTemplate) -> list[Problem]:
    """Why ``template`` cannot be saved (empty when it can).

    Placeholder values are unknown here, so checks that depend on them wait for rendering.
    """
    if template.kind not in _KINDS:
        return [Problem("invalid", "kind", f"Unsupported value: {template.kind!r}: supported values: "
                        f"{', '.join(TEMPLATE_KINDS)}")]
    problems = _name_problems(template.name, "metadata.name", template.kind)
    template_problems = _template_problems(template.spec, "spec")
    problems += template_problems
    if not template_problems:
        problems += _field_problems("invalid", _spec_errors(template.kind, template.spec, "spec", _has_action))
    return problems


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool))


#: How an argument's message names a JSON type ("must be ..., not an array").
_WITH_ARTICLE = {"null": "null", "boolean": "a boolean", "number": "a number", "string": "a string",
                 "object": "an object", "array": "an array"}


def _json_type(value: Any) -> str:
    return _WITH_ARTICLE.get(json_type(value) or "") or type(value).__name__


def _args_problems(args: Any, field_path: str) -> list[Problem]:
    if not isinstance(args, Mapping):
        return [Problem("invalid_args", field_path,
                        f"must be an object of string, number or boolean values, not {_json_type(args)}")]
    return [Problem("invalid_args", field_path,
                    f"argument {json.dumps(str(name), ensure_ascii=False)} must be a string, number or boolean, "
                    f"not {_json_type(value)}")
            for name, value in args.items() if not isinstance(name, str) or not _is_scalar(value)]


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate argument {json.dumps(key, ensure_ascii=False)}")
        result[key] = value
    return result


def parse_args(text: Any, field_path: str) -> dict[str, Scalar]:
    """An args annotation's JSON object; raises :class:`SchedulingConfigError` naming ``field_path``."""
    if not isinstance(text, str):
        raise SchedulingConfigError([Problem("invalid_args", field_path, "must be a string holding a JSON object")])
    try:
        args = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_pairs)
    except RecursionError:
        raise SchedulingConfigError([Problem("invalid_args", field_path, "is not valid JSON: nested too deeply")]) from None
    except ValueError as exc:
        raise SchedulingConfigError([Problem("invalid_args", field_path, f"is not valid JSON: {exc}")]) from None
    problems = _args_problems(args, field_path)
    if problems:
        raise SchedulingConfigError(problems)
    return args


def _ref_problems(ref: Any, path: str) -> list[Problem]:
    if not isinstance(ref, TemplateRef):
        return [Problem("invalid", path, "must be an object with name and args")]
    problems = _name_problems(ref.name, _child(path, "name"), "the template")
    problems += _args_problems(ref.args, _child(path, "args"))
    if isinstance(ref.args, Mapping):
        problems += [Problem("invalid_args", _child(path, "args"),
                             f"argument {json.dumps(name)}: '{{{{' is reserved for template placeholders")
                     for name, value in ref.args.items() if _has_action(value)]
    return problems


def validate_binding(binding: SchedulerBinding, templates: Iterable[SchedulerTemplate] | None = None) -> list[Problem]:
    """Why ``binding`` cannot be saved (empty when it can).

    With ``templates``, the named templates must exist and render with the binding's args
    into a valid affinity, so a binding that would deny every pod it selects is refused at
    once instead of at admission.
    """
    problems = _name_problems(binding.name, "metadata.name", SCHEDULER_CONFIG_BINDING)
    if binding.namespace is not None:
        problems += [Problem("invalid", "metadata.namespace", f"Invalid value: {json.dumps(binding.namespace)}: {message}")
                     for message in dns1123_label_errors(str(binding.namespace))]
    if binding.selector is None:
        problems.append(Problem("invalid", "spec.selector", "Required value: use {} to select every pod"))
    else:
        problems += _field_problems("invalid", validate_label_selector(binding.selector, "spec.selector"))
    if isinstance(binding.priority, bool) or not isinstance(binding.priority, int) or not -2**31 <= binding.priority < 2**31:
        problems.append(Problem("invalid", "spec.priority", f"Invalid value: {binding.priority!r}: must be a 32-bit integer"))
    if binding.node_config is None and binding.pod_config is None:
        problems.append(Problem("invalid", "spec", "Required value: must name a nodeSchedulerConfig or a podSchedulerConfig"))
    index = _index(templates) if templates is not None else None
    for kind, info in _KINDS.items():
        ref = binding.ref(kind)
        if ref is None:
            continue
        path = _child("spec", info.binding_field)
        ref_problems = _ref_problems(ref, path)
        problems += ref_problems
        if index is not None and not ref_problems:
            problems += _render_problems(kind, ref, index, _child(path, "name"), _child(path, "args"))
    return problems


# -------------------------------------------------------------------------------- rendering

def _typed(value: Any) -> Any:
    """A single-placeholder leaf's value: JSON numbers and booleans keep their type."""
    if isinstance(value, bool) or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    return gotemplate.format_value(value)


def _substitute(node: Any, args: Mapping[str, Any], path: str, sources: dict[str, frozenset[str]]) -> Any:
    if isinstance(node, Mapping):
        return {key: _substitute(value, args, _child(path, key), sources) for key, value in node.items()}
    if isinstance(node, list):
        return [_substitute(item, args, f"{path}[{i}]", sources) for i, item in enumerate(node)]
    if not _has_action(node):
        return copy.deepcopy(node)
    leaf = _leaf_template(node)
    sources[path] = leaf.placeholders
    return _typed(leaf.lookup(leaf.single_field, args)) if leaf.single_field else leaf.execute(args)


def _describe(template: SchedulerTemplate) -> str:
    return f"{template.kind} {json.dumps(template.name)}"


def _origin_of(path: str, sources: Mapping[str, frozenset[str]]) -> str:
    """Which arguments produced the value at ``path`` (or below it), for messages."""
    names = sorted({name for leaf, used in sources.items() if leaf == path or leaf.startswith((path + ".", path + "["))
                    for name in used})
    if not names:
        return ""
    return " (from argument" + ("s " if len(names) > 1 else " ") + ", ".join(json.dumps(n) for n in names) + ")"


def render(template: SchedulerTemplate, args: Mapping[str, Any], *, args_field: str = "args",
           path: str = "spec.affinity", validate: bool = True) -> dict[str, Any]:
    """``template.spec`` with ``args`` substituted: the affinity it adds (``{"nodeAffinity": ...}``).

    Raises :class:`RenderError`: ``invalid_args`` / ``missing_argument`` naming ``args_field``,
    or ``rendered_invalid`` with the rendered field's path under ``path`` (the pod's
    ``spec.affinity`` by default).  ``validate=False`` skips the last check, for previews
    that show what a template renders to even when the result is refused.
    """
    problems = _args_problems(args, args_field)
    if problems:
        raise RenderError(problems)
    try:
        uses = _uses(template)
    except gotemplate.TemplateError as exc:
        raise RenderError([Problem(exc.code, "spec", f"{_describe(template)}: {exc.message}")]) from None
    missing = [name for name in uses if name not in args]
    if missing:
        raise RenderError([Problem("missing_argument", args_field,
                                   f"{_describe(template)} needs argument {json.dumps(name)} "
                                   f"(map has no entry for key {json.dumps(name)} at {uses[name]})") for name in missing])
    sources: dict[str, frozenset[str]] = {}
    try:
        rendered = _substitute(template.spec, args, path, sources)
    except gotemplate.TemplateError as exc:  # only reachable with nested chains, which validation refuses
        raise RenderError([Problem(exc.code, args_field, f"{_describe(template)}: {exc}")]) from None
    errors = _spec_errors(template.kind, rendered, path, lambda _value: False) if validate else []
    if errors:
        raise RenderError([Problem("rendered_invalid", error.field,
                                   f"{error.body()}{_origin_of(error.field, sources)}, rendering {_describe(template)}")
                           for error in errors])
    return rendered


def _index(templates: Iterable[SchedulerTemplate]) -> dict[tuple[str, str], SchedulerTemplate]:
    return {(t.kind, t.name): t for t in templates}


def _render_problems(kind: str, ref: TemplateRef, index: Mapping[tuple[str, str], SchedulerTemplate],
                     name_field: str, args_field: str) -> list[Problem]:
    template = index.get((kind, ref.name))
    if template is None:
        return [Problem("template_not_found", name_field, f"{kind} {json.dumps(ref.name)} does not exist")]
    try:
        render(template, ref.args, args_field=args_field)
    except RenderError as exc:
        return list(exc.problems)
    return []


# ------------------------------------------------------------------------------- resolution

@dataclass(frozen=True)
class AppliedTemplate:
    """One template a pod gets, and why: ``source`` is ``"annotation"`` or ``"binding"``
    (``binding`` then holds its ``namespace/name``); ``shadowed`` are the other bindings that
    matched the pod for this kind, in precedence order."""

    kind: str
    name: str
    args: Mapping[str, Scalar]
    source: str
    binding: str | None = None
    shadowed: tuple[str, ...] = ()

    def explain(self) -> str:
        args = json.dumps(dict(self.args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        what = f"{self.kind} {json.dumps(self.name)} with args {args}"
        if self.source == "annotation":
            text = f"{what}, from the pod annotation {_KINDS[self.kind].annotation}"
            if self.shadowed:
                text += f" (takes precedence over matching bindings {', '.join(self.shadowed)})"
            return text
        text = f"{what}, from {SCHEDULER_CONFIG_BINDING} {json.dumps(self.binding)}"
        if self.shadowed:
            text += f" (preferred over {', '.join(self.shadowed)})"
        return text


@dataclass(frozen=True)
class Resolution:
    """What a pod gets: ``affinity`` holds the rendered kinds (``nodeAffinity``, ``podAffinity``,
    ``podAntiAffinity``; empty when no template applies), ``applied`` says where each came from,
    ``warnings`` are for the AdmissionReview's ``warnings``."""

    affinity: Mapping[str, Any]
    applied: tuple[AppliedTemplate, ...] = ()
    warnings: tuple[str, ...] = ()

    def explain(self) -> list[str]:
        """One line per applied template (empty when nothing applies)."""
        return [applied.explain() for applied in self.applied]


@dataclass(frozen=True)
class _Choice:
    ref: TemplateRef
    source: str
    name_field: str
    args_field: str
    binding: SchedulerBinding | None
    shadowed: tuple[SchedulerBinding, ...]


def _annotation(key: str) -> str:
    """The field path of an annotation, as Kubernetes writes map keys."""
    return f"metadata.annotations[{key}]"


def _precedence(binding: SchedulerBinding) -> tuple[int, bool, str, str]:
    return (-binding.priority, binding.namespace is None, binding.namespace or "", binding.name)


def _selecting(bindings: Iterable[SchedulerBinding], labels: Mapping[str, str], namespace: str,
               warnings: list[str]) -> list[SchedulerBinding]:
    """The bindings that select the pod (its namespace, its labels), best first."""
    found = []
    for binding in bindings:
        if binding.namespace is not None and binding.namespace != namespace:
            continue
        try:
            selector = selector_from_label_selector(binding.selector)
        except SelectorError as exc:
            warnings.append(f"{SCHEDULER_CONFIG_BINDING} {json.dumps(binding.key)} was skipped: its selector is invalid ({exc})")
            continue
        if selector.matches(labels):
            found.append(binding)
    return sorted(found, key=_precedence)


def _choose(kind: str, annotations: Mapping[str, Any], matches: list[SchedulerBinding], problems: list[Problem],
            warnings: list[str]) -> _Choice | None:
    info = _KINDS[kind]
    name_field, args_field = _annotation(info.annotation), _annotation(info.args_annotation)
    if info.annotation in annotations:
        name = annotations[info.annotation]
        if not isinstance(name, str) or not name.strip():
            problems.append(Problem("invalid_annotation", name_field, f"must name a {kind}"))
            return None
        args: Mapping[str, Any] = {}
        if info.args_annotation in annotations:
            try:
                args = parse_args(annotations[info.args_annotation], args_field)
            except SchedulingConfigError as exc:
                problems.extend(exc.problems)
                return None
        return _Choice(TemplateRef(name.strip(), args), "annotation", name_field, args_field, None, tuple(matches))
    if info.args_annotation in annotations:
        problems.append(Problem("invalid_annotation", args_field, f"is set but {info.annotation} is not: name the {kind} "
                                "to render with these arguments"))
        return None
    if not matches:
        return None
    winner, rest = matches[0], tuple(matches[1:])
    tied = [b for b in rest if _precedence(b)[:2] == _precedence(winner)[:2]]
    if tied:
        warnings.append(f"{SCHEDULER_CONFIG_BINDING}s {', '.join(json.dumps(b.key) for b in (winner, *tied))} all select "
                        f"this pod for a {kind} with priority {winner.priority}; {json.dumps(winner.key)} wins by name")
    path = _child("spec", info.binding_field)
    return _Choice(winner.ref(kind), "binding", f"{SCHEDULER_CONFIG_BINDING} {winner.key}: {path}.name",  # type: ignore[arg-type]
                   f"{SCHEDULER_CONFIG_BINDING} {winner.key}: {path}.args", winner, rest)


def _unused_args(template: SchedulerTemplate, choice: _Choice) -> list[str]:
    unused = sorted(set(choice.ref.args) - placeholders(template))
    return [f"{choice.args_field}: argument {json.dumps(name)} is not used by {_describe(template)}" for name in unused]


def _metadata(pod: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    value = metadata.get(name) if isinstance(metadata, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def resolve(pod: Mapping[str, Any], templates: Iterable[SchedulerTemplate], bindings: Iterable[SchedulerBinding], *,
            namespace: str | None = None) -> Resolution:
    """The templates ``pod`` gets, rendered; raises :class:`ResolutionError` listing every problem.

    ``namespace`` is the admission request's (authoritative on CREATE); without it the pod's
    ``metadata.namespace`` is used.  See the module doc for the precedence rules.
    """
    annotations, labels = _metadata(pod, "annotations"), _metadata(pod, "labels")
    if namespace is None:
        metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
        namespace = str(metadata.get("namespace") or "") if isinstance(metadata, Mapping) else ""
    index = _index(templates)
    problems: list[Problem] = []
    warnings: list[str] = []
    affinity: dict[str, Any] = {}
    applied: list[AppliedTemplate] = []
    selecting = _selecting(bindings, labels, namespace, warnings)
    for kind in TEMPLATE_KINDS:
        matches = [binding for binding in selecting if binding.ref(kind) is not None]
        choice = _choose(kind, annotations, matches, problems, warnings)
        if choice is None:
            continue
        template = index.get((kind, choice.ref.name))
        if template is None:
            problems.append(Problem("template_not_found", choice.name_field,
                                    f"{kind} {json.dumps(choice.ref.name)} does not exist"))
            continue
        try:
            affinity.update(render(template, choice.ref.args, args_field=choice.args_field))
        except RenderError as exc:
            problems.extend(exc.problems)
            continue
        warnings += _unused_args(template, choice)
        applied.append(AppliedTemplate(kind, template.name, dict(choice.ref.args), choice.source,
                                       choice.binding.key if choice.binding else None, tuple(b.key for b in choice.shadowed)))
    if problems:
        raise ResolutionError(problems)
    return Resolution(affinity, tuple(applied), tuple(warnings))


# ---------------------------------------------------------------------------------- patching

def merged_pod(pod: Mapping[str, Any], resolution: Resolution, *, max_terms: int = MAX_NODE_SELECTOR_TERMS) -> dict[str, Any]:
    """A copy of ``pod`` with the resolution's affinity merged into ``spec.affinity``."""
    result = copy.deepcopy(dict(pod))
    if not resolution.affinity:
        return result
    spec = result.get("spec")
    if not isinstance(spec, dict):
        spec = result["spec"] = {}
    try:
        spec["affinity"] = merge_affinity(spec.get("affinity"), resolution.affinity, max_terms=max_terms)
    except MergeError as exc:
        raise ResolutionError([Problem(exc.code, exc.field, exc.message)]) from None
    return result


def _pointer(*tokens: str) -> str:
    """RFC 6901: ``~`` first, or the ``~1`` written for ``/`` would be escaped again."""
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens)


def _kind_ops(old: Mapping[str, Any], new: Mapping[str, Any], base: str) -> list[dict[str, Any]]:
    """Operations turning one affinity kind into its merge: appends stay appends."""
    ops: list[dict[str, Any]] = []
    for name, value in new.items():
        before = old.get(name)
        path = base + _pointer(name)
        if before == value:
            continue
        if before is None:
            ops.append({"op": "add", "path": path, "value": copy.deepcopy(value)})
        elif isinstance(before, list) and isinstance(value, list) and value[: len(before)] == before:
            ops += [{"op": "add", "path": path + "/-", "value": copy.deepcopy(item)} for item in value[len(before):]]
        else:
            ops.append({"op": "replace", "path": path, "value": copy.deepcopy(value)})
    return ops


def mutation_patch(pod: Mapping[str, Any], resolution: Resolution, *,
                   max_terms: int = MAX_NODE_SELECTOR_TERMS) -> list[dict[str, Any]]:
    """RFC 6902 operations that turn ``pod`` (as the API server sent it) into :func:`merged_pod`.

    Absent ``spec.affinity`` or sub-objects are added whole; appended terms are ``add .../-``;
    the required node selector, when it had to be combined, is replaced.  Empty when
    nothing changes.  Raises :class:`ResolutionError` (``affinity_too_large``) like the merge.
    """
    merged = merged_pod(pod, resolution, max_terms=max_terms)
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return [{"op": "add", "path": _pointer("spec"), "value": merged["spec"]}] if resolution.affinity else []
    old, new = spec.get("affinity"), merged["spec"].get("affinity")
    if old == new:
        return []
    if old is None:
        return [{"op": "add", "path": _pointer("spec", "affinity"), "value": new}]
    ops: list[dict[str, Any]] = []
    for kind in AFFINITY_KINDS:
        before, after = old.get(kind), new.get(kind)
        if before == after:
            continue
        base = _pointer("spec", "affinity", kind)
        if before is None:
            ops.append({"op": "add", "path": base, "value": after})
        else:
            ops += _kind_ops(before, after, base)
    return ops
