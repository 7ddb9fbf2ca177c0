"""Upstream YAML (``sched.cloud.ctrip.com/v1``) for scheduling templates and bindings, in and out.

Reading a template is the hard part: upstream writes placeholders straight into YAML
(``- {{.PrefferredPool}}``), where ``{{`` opens a YAML flow mapping, so the text is not
YAML until it has been rendered.  :func:`load_manifests` therefore reads the text as Go
does first:

1. The whole text is lexed as a Go template (:mod:`scheduling.gotemplate`): trim markers
   are applied, comments dropped, and every action is replaced by a unique plain word
   (``MERIDIANPH<n>X``, lengthened until it occurs nowhere in the text) that YAML reads as
   a string wherever it stands, quoted or not.  An action outside the supported subset is
   refused here, with its line.
2. The result is parsed as YAML (YAML 1.1 as PyYAML reads it, without timestamps, so
   dates stay strings; duplicate keys are refused, as Kubernetes' strict decoding does).
3. Each word is turned back into its placeholder, written canonically (``{{.Name}}``), in
   the string leaf it ended up in.  A placeholder in a field name is refused.

A template thus becomes a plain tree whose string leaves hold placeholders
(:class:`~scheduling.schedconfig.SchedulerTemplate.spec`), which is also what the REST API
stores.  :func:`dump_manifests` writes that tree as ordinary YAML (a leaf ``{{.X}}`` is
quoted, ``'{{.X}}'``), which reads back the same: ``load_manifests(dump_manifests(x)).objects
== x``.  Formatting and comments of the original text are not kept.

One leniency for text copied from documents: a line holding only an indented ``...`` or
``---`` is not valid YAML where it stands (document markers start in column 0); when the
YAML parser stops on such a line, it is read as the marker it was meant to be, with a
warning.  (The seed's ``resource-pool-example`` ends with such a line.)

Errors carry the 1-based document number (non-empty documents, in order) and the line in
the given text; every problem of every document is reported at once, and nothing is
returned unless everything is valid (the import is all or nothing).  ``kind: List``
documents are unpacked, as node config's import does.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kube.manifests import dump_documents as _dump_documents

from . import gotemplate
from .schedconfig import (
    API_VERSION,
    NODE_SCHEDULER_CONFIG,
    POD_SCHEDULER_CONFIG,
    SCHEDULER_CONFIG_BINDING,
    Problem,
    SchedulerBinding,
    SchedulerTemplate,
    SchedulingConfigError,
    TemplateRef,
    validate_binding,
    validate_template,
)

__all__ = [
    "LoadedManifests",
    "ManifestError",
    "dump_manifests",
    "from_manifest",
    "load_manifests",
    "load_spec",
    "to_manifest",
]

SchedulingObject = SchedulerTemplate | SchedulerBinding

_KINDS = (NODE_SCHEDULER_CONFIG, POD_SCHEDULER_CONFIG, SCHEDULER_CONFIG_BINDING)
_TOKEN_BASE = "MERIDIANPH"
_MAX_NODES = 100_000
_MAX_MARKER_FIXES = 20
_MARKER_LINE = re.compile(r"[ \t]+(\.\.\.|---)[ \t]*")


class ManifestError(SchedulingConfigError):
    """The YAML cannot be imported; ``problems`` carry ``document`` and ``line``."""


@dataclass(frozen=True)
class LoadedManifests:
    """The objects of an import, in document order, and warnings about leniencies used."""

    objects: tuple[SchedulingObject, ...]
    warnings: tuple[str, ...] = ()


# ------------------------------------------------------------------------- the Go pre-scan

class _Prescan:
    """The text with every Go action replaced by a word, and the way back to the source."""

    def __init__(self, source: str) -> None:
        self.source = source
        template = gotemplate.parse(source, "yaml")
        base = _TOKEN_BASE
        while base in source:
            base += "Z"
        self.pattern = re.compile(re.escape(base) + r"(\d+)X")
        self.fields: list[gotemplate.Field] = []
        pieces: list[str] = []
        self._static_starts: list[int] = []
        self._source_starts: list[int] = []
        length = 0
        for node in template.nodes:
            if isinstance(node, gotemplate.Text):
                piece = node.text
            else:
                piece = f"{base}{len(self.fields)}X"
                self.fields.append(node)
            self._static_starts.append(length)
            self._source_starts.append(node.offset)
            pieces.append(piece)
            length += len(piece)
        self.text = "".join(pieces)

    def line(self, static_index: int) -> int:
        """1-based line in the source of a position in the pre-scanned text."""
        at = bisect.bisect_right(self._static_starts, static_index) - 1
        offset = self._source_starts[at] + static_index - self._static_starts[at] if at >= 0 else static_index
        return self.source.count("\n", 0, min(offset, len(self.source))) + 1

    def restore(self, text: str) -> tuple[str, tuple[gotemplate.Field, ...]]:
        """A string leaf with its words turned back into canonical placeholders, and those fields."""
        fields: list[gotemplate.Field] = []

        def placeholder(match: re.Match[str]) -> str:
            node = self.fields[int(match.group(1))]
            fields.append(node)
            return "{{" + node.source + "}}"

        return self.pattern.sub(placeholder, text), tuple(fields)


# ------------------------------------------------------------------------------- YAML loading

class _Loader(yaml.SafeLoader):
    """Safe loading as Kubernetes reads manifests: no timestamps (dates stay strings), no duplicate keys."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable keys are refused by the base constructor
            if duplicate:
                raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                        f"found duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _compose(text: str) -> list[tuple[yaml.Node, Any]]:
    """(node, data) per YAML document, data fully constructed."""
    loader = _Loader(text)
    try:
        documents = []
        while loader.check_node():
            node = loader.get_node()
            documents.append((node, loader.construct_document(node)))
        return documents
    finally:
        loader.dispose()


def _yaml_problem(exc: yaml.YAMLError, prescan: _Prescan) -> Problem:
    if isinstance(exc, yaml.MarkedYAMLError):
        message = ", ".join(part for part in (exc.context, exc.problem) if part) or str(exc)
        mark = exc.problem_mark or exc.context_mark
        return Problem("yaml_invalid", "yaml", f"not valid YAML: {message}", line=prescan.line(mark.index) if mark else None)
    return Problem("yaml_invalid", "yaml", f"not valid YAML: {exc}")


def _marker_lines(exc: yaml.YAMLError, prescan: _Prescan) -> list[int]:
    """Indented ``...``/``---`` lines (0-based) where the parser stopped, to read as markers."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return []
    lines = prescan.source.split("\n")
    found = []
    for mark in (exc.context_mark, exc.problem_mark):
        if mark is not None:
            number = prescan.line(mark.index) - 1
            if 0 <= number < len(lines) and _MARKER_LINE.fullmatch(lines[number]) and number not in found:
                found.append(number)
    return found


def _parse(text: str) -> tuple[_Prescan, list[tuple[yaml.Node, Any]], list[str]]:
    """Pre-scan and parse, reading stray indented document markers as markers."""
    warnings: list[str] = []
    for _ in range(_MAX_MARKER_FIXES + 1):
        try:
            prescan = _Prescan(text)
        except gotemplate.TemplateError as exc:
            raise ManifestError([Problem(exc.code, "yaml", exc.message, line=exc.line)]) from None
        try:
            return prescan, _compose(prescan.text), warnings
        except yaml.YAMLError as exc:
            fixes = _marker_lines(exc, prescan)
            if not fixes:
                raise ManifestError([_yaml_problem(exc, prescan)]) from None
            lines = text.split("\n")
            for number in fixes:
                marker = lines[number].strip()
                warnings.append(f"line {number + 1}: the indented {marker!r} was read as a YAML document marker")
                lines[number] = marker
            text = "\n".join(lines)
    raise ManifestError([Problem("yaml_invalid", "yaml", "not valid YAML: too many stray document markers")])


# --------------------------------------------------------------------- words back to placeholders

class _Restorer:
    """Walks constructed documents: words back to placeholders, JSON types only, bounded size."""

    def __init__(self, prescan: _Prescan, document: int, lines: Mapping[str, int]) -> None:
        self.prescan = prescan
        self.document = document
        self.lines = lines
        self.problems: list[Problem] = []
        self.visited = 0

    def problem(self, code: str, path: str, message: str) -> None:
        self.problems.append(Problem(code, path, message, self.document, _line_of(self.lines, path)))

    def restore(self, value: Any, path: str, active: frozenset[int] = frozenset()) -> Any:
        self.visited += 1
        if self.visited > _MAX_NODES:
            raise ManifestError([Problem("yaml_invalid", "yaml", f"document {self.document} is too large "
                                         f"(more than {_MAX_NODES} values once aliases are expanded)")])
        if isinstance(value, (dict, list)):
            if id(value) in active:
                self.problem("yaml_invalid", path, "recursive YAML aliases are not supported")
                return None
            active = active | {id(value)}
        if isinstance(value, dict):
            return {self.key(key, path): self.restore(item, _join(path, str(key)), active) for key, item in value.items()}
        if isinstance(value, list):
            return [self.restore(item, f"{path}[{i}]", active) for i, item in enumerate(value)]
        if isinstance(value, str):
            return self.leaf(value, path)
        if value is None or isinstance(value, (bool, int)) or isinstance(value, float) and math.isfinite(value):
            return value
        self.problem("manifest_invalid", path, f"Invalid value: a {type(value).__name__} is not a JSON value")
        return None

    def key(self, key: Any, path: str) -> Any:
        if not isinstance(key, str):
            self.problem("manifest_invalid", path, f"Invalid value: {key!r}: field names must be strings")
            return str(key)
        restored, fields = self.prescan.restore(key)
        if fields:
            self.problem("template_unsupported", _join(path, restored), "placeholders are not allowed in field names")
        return restored

    def leaf(self, text: str, path: str) -> str:
        restored, fields = self.prescan.restore(text)
        if not fields:
            return text
        try:
            reparsed = gotemplate.parse(restored, "leaf").fields
        except gotemplate.TemplateError:
            reparsed = ()
        if tuple(f.names for f in reparsed) != tuple(f.names for f in fields):
            self.problem("template_syntax", path, "text next to a placeholder would be read as part of an action "
                         f"({restored!r}); separate them, e.g. with a space")
        return restored


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _node_lines(node: yaml.Node, path: str, line: int, prescan: _Prescan, out: dict[str, int],
                active: frozenset[int] = frozenset()) -> None:
    """Source line of every field path in a composed document: where its field name (or
    list item) is written, since a block value starts on the line after its name."""
    if id(node) in active or len(out) > _MAX_NODES:
        return
    out.setdefault(path, line)
    active = active | {id(node)}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key, _ = prescan.restore(key_node.value)
                _node_lines(value_node, _join(path, key), prescan.line(key_node.start_mark.index), prescan, out, active)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _node_lines(item, f"{path}[{i}]", prescan.line(item.start_mark.index), prescan, out, active)


def _line_of(lines: Mapping[str, int], path: str) -> int | None:
    """Line of the deepest known field at or above ``path``."""
    best, best_length = lines.get(""), -1
    for known, line in lines.items():
        if (path == known or path.startswith((known + ".", known + "["))) and len(known) > best_length:
            best, best_length = line, len(known)
    return best


# ------------------------------------------------------------------------------ conversion

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Reader:
    """Reads one upstream object into a template or a binding, collecting problems."""

    def __init__(self, document: int | None, lines: Mapping[str, int], prefix: str) -> None:
        self.document = document
        self.lines = lines
        self.prefix = prefix
        self.problems: list[Problem] = []

    def problem(self, code: str, path: str, message: str) -> None:
        full = _join(self.prefix, path)
        self.problems.append(Problem(code, full, message, self.document, _line_of(self.lines, full)))

    def adopt(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.problem(problem.code, problem.field, problem.message)

    def mapping(self, value: Any, path: str, fields: Sequence[str] | None = None) -> Mapping[str, Any]:
        """``value`` as an object (None reads as empty); with ``fields``, other fields are refused."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem("manifest_invalid", path, "Invalid value: must be an object")
            return {}
        unknown = [key for key in value if key not in fields] if fields is not None else []
        for key in unknown:
            self.problem("manifest_invalid", _join(path, str(key)), "Forbidden: unknown field")
        return value

    def read(self, obj: Any) -> SchedulingObject | None:
        if not isinstance(obj, Mapping):
            self.problem("manifest_invalid", "", "must be an object")
            return None
        self.mapping(obj, "", ("apiVersion", "kind", "metadata", "spec", "status"))
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if kind not in _KINDS:
            self.problem("unsupported_kind", "kind", f"Unsupported value: {kind!r}: supported values: {', '.join(_KINDS)}")
            return None
        if api_version != API_VERSION:
            self.problem("manifest_invalid", "apiVersion", f"Unsupported value: {api_version!r}: supported values: {API_VERSION}")
        metadata = self.mapping(obj.get("metadata"), "metadata")
        name = metadata.get("name")
        if kind == SCHEDULER_CONFIG_BINDING:
            return self.binding(metadata, name, obj.get("spec"))
        return self.template(kind, metadata, name, obj.get("spec"))

    def template(self, kind: str, metadata: Mapping[str, Any], name: Any, spec: Any) -> SchedulerTemplate | None:
        if metadata.get("namespace") is not None:
            self.problem("manifest_invalid", "metadata.namespace", f"Forbidden: a {kind} is cluster-wide; remove the namespace")
        template = SchedulerTemplate(kind, name if isinstance(name, str) else "", _canonical(spec))
        problems = validate_template(template)
        if not isinstance(name, str):
            problems = [p for p in problems if p.field != "metadata.name"]
            self.problem("manifest_invalid", "metadata.name", "Required value: must be a string")
        self.adopt(problems)
        return template

    def ref(self, value: Any, path: str) -> TemplateRef | None:
        if value is None:
            return None
        ref = self.mapping(value, path, ("name", "args"))
        args = ref.get("args")
        return TemplateRef(ref.get("name"), {} if args is None else args)  # type: ignore[arg-type]

    def binding(self, metadata: Mapping[str, Any], name: Any, spec: Any) -> SchedulerBinding | None:
        spec = self.mapping(spec, "spec", ("selector", "priority", "nodeSchedulerConfig", "podSchedulerConfig"))
        namespace = metadata.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            self.problem("manifest_invalid", "metadata.namespace", "Invalid value: must be a string")
            namespace = str(namespace)
        binding = SchedulerBinding(
            name=name, selector=spec.get("selector"), namespace=namespace or None,  # type: ignore[arg-type]
            priority=spec.get("priority", 0),
            node_config=self.ref(spec.get("nodeSchedulerConfig"), "spec.nodeSchedulerConfig"),
            pod_config=self.ref(spec.get("podSchedulerConfig"), "spec.podSchedulerConfig"))
        self.adopt(validate_binding(binding))
        return binding


def _canonical(spec: Any) -> Any:
    """Leaves written canonically (``{{ .X }}`` → ``{{.X}}``) so equal templates compare equal.

    Leaves that do not parse are kept as they are, for validation to report.
    """
    if isinstance(spec, Mapping):
        return {key: _canonical(value) for key, value in spec.items()}
    if isinstance(spec, list):
        return [_canonical(item) for item in spec]
    if isinstance(spec, str) and "{{" in spec:
        try:
            template = gotemplate.parse(spec, "leaf")
        except gotemplate.TemplateError:
            return spec
        canonical = template.canonical()
        try:
            same = gotemplate.parse(canonical, "leaf").nodes == template.nodes
        except gotemplate.TemplateError:
            same = False
        return canonical if same else spec
    return spec


def from_manifest(obj: Mapping[str, Any], *, document: int | None = None, lines: Mapping[str, int] | None = None,
                  prefix: str = "") -> SchedulingObject:
    """One upstream object (already decoded, placeholders in string leaves) as a template or binding.

    Raises :class:`ManifestError` with every problem; used by :func:`load_manifests` and
    by API endpoints that take the object as JSON.
    """
    reader = _Reader(document, lines or {}, prefix)
    result = reader.read(obj)
    if reader.problems or result is None:
        raise ManifestError(reader.problems or [Problem("manifest_invalid", prefix, "cannot be read")])
    return result


def _objects(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path prefix, object) of a document; a ``List`` (``kind: List`` or ``…List`` with items) is unpacked."""
    if isinstance(data, Mapping) and isinstance(data.get("items"), list) and str(data.get("kind", "")).endswith("List"):
        return [(f"items[{i}]", item) for i, item in enumerate(data["items"])]
    return [(prefix, data)]


def _identity(obj: SchedulingObject) -> tuple[str, str | None, str]:
    if isinstance(obj, SchedulerBinding):
        return SCHEDULER_CONFIG_BINDING, obj.namespace, obj.name
    return obj.kind, None, obj.name


def load_manifests(text: str) -> LoadedManifests:
    """Every template and binding in ``text`` (one or more YAML documents); all or nothing.

    Raises :class:`ManifestError` listing every problem, each with its document and line.
    """
    if not isinstance(text, str):
        raise ManifestError([Problem("yaml_invalid", "yaml", "must be text")])
    prescan, documents, warnings = _parse(text)
    problems: list[Problem] = []
    objects: list[SchedulingObject] = []
    seen: dict[tuple[str, str | None, str], int] = {}
    number = 0
    for node, data in documents:
        if data is None:
            continue
        number += 1
        lines: dict[str, int] = {}
        _node_lines(node, "", prescan.line(node.start_mark.index), prescan, lines)
        restorer = _Restorer(prescan, number, lines)
        restored = restorer.restore(data, "")
        problems += restorer.problems
        if restorer.problems:
            continue
        for prefix, obj in _objects(restored):
            try:
                result = from_manifest(obj, document=number, lines=lines, prefix=prefix)
            except ManifestError as exc:
                problems += exc.problems
                continue
            identity = _identity(result)
            if identity in seen:
                problems.append(Problem("duplicate_object", _join(prefix, "metadata.name"),
                                        f"{identity[0]} {'/'.join(p for p in identity[1:] if p)!r} is also defined in "
                                        f"document {seen[identity]}", number, _line_of(lines, _join(prefix, "metadata.name"))))
                continue
            seen[identity] = number
            objects.append(result)
    if problems:
        raise ManifestError(problems)
    return LoadedManifests(tuple(objects), tuple(warnings))


def load_spec(text: str) -> Any:
    """One spec as upstream writes it (a template's ``spec`` typed in a form, where placeholders
    such as ``- {{.Pool}}`` may stand unquoted), read as :func:`load_manifests` reads a document:
    the Go pre-scan, strict YAML, words back to canonical placeholders, JSON values only.

    No leniency for stray document markers, and no conversion: the value as written. Raises
    ``yaml.YAMLError`` for text that is not YAML (the caller words it for its reader),
    :class:`~scheduling.gotemplate.TemplateError` for an action outside the supported subset, and
    :class:`ManifestError` otherwise (code ``one_document`` when the text holds none or several).
    """
    prescan = _Prescan(text)
    documents = _compose(prescan.text)
    if len(documents) != 1:
        raise ManifestError([Problem("one_document", "yaml", f"one YAML document expected, not {len(documents)}")])
    restorer = _Restorer(prescan, 1, {})
    value = restorer.restore(documents[0][1], "spec")
    if restorer.problems:
        raise ManifestError(restorer.problems)
    return value


# ----------------------------------------------------------------------------------- export

def _ref_manifest(ref: TemplateRef) -> dict[str, Any]:
    manifest: dict[str, Any] = {"name": ref.name}
    if ref.args:
        manifest["args"] = dict(ref.args)
    return manifest


def to_manifest(obj: SchedulingObject) -> dict[str, Any]:
    """The upstream object for a template or binding (what :func:`from_manifest` reads back)."""
    if isinstance(obj, SchedulerTemplate):
        return {"apiVersion": API_VERSION, "kind": obj.kind, "metadata": {"name": obj.name}, "spec": _plain(obj.spec)}
    metadata: dict[str, Any] = {"name": obj.name}
    if obj.namespace is not None:
        metadata["namespace"] = obj.namespace
    spec: dict[str, Any] = {"selector": _plain(obj.selector)}
    if obj.priority:
        spec["priority"] = obj.priority
    if obj.node_config is not None:
        spec["nodeSchedulerConfig"] = _ref_manifest(obj.node_config)
    if obj.pod_config is not None:
        spec["podSchedulerConfig"] = _ref_manifest(obj.pod_config)
    return {"apiVersion": API_VERSION, "kind": SCHEDULER_CONFIG_BINDING, "metadata": metadata, "spec": spec}


def _plain(value: Any) -> Any:
    """Plain dicts and lists (the YAML dumper refuses other Mapping types)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def dump_manifests(objects: Iterable[SchedulingObject]) -> str:
    """YAML documents for ``objects``, in order (the export of the REST API)."""
    return _dump_documents([to_manifest(obj) for obj in objects])
