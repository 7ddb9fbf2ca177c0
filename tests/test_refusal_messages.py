"""Every refusal a person reads is in the catalogue (issue #33).

A :class:`core.errors.Refused` (or one of its subclasses) carries the text the REST API returns as
``detail`` and the console's forms show next to the field: a literal there reaches a Chinese user
in English. The project's sources are walked with ``ast`` and every refusal whose message is an
English literal is listed: a str constant, an f-string, a ``"..." + ...`` of literals, given as
the message (the 2nd positional argument, ``detail=`` or ``message=``; the 1st for
``PreconditionFailed``, which has no code), or as a value of ``errors={field: ...}`` or of
``Refused.from_errors({field: ...})``. The message goes through ``gettext`` instead
(``_("There is no member cluster named %(name)s.") % {"name": repr(name)}``).

Left out: ``tests/``, migrations, ``kube/`` (pure Kubernetes semantics, no Django: its texts are
Kubernetes' own, word for word), ``scripts/`` and ``bench/``; and the modules in
``KUBERNETES_FACING``, whose refusals are read in Kubernetes (as admission denials are), never
on a page or in the REST API's error body.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {"tests", "migrations", ".venv", "node_modules", "static", "templates", "locale", "kube", "scripts",
                "bench"}
REFUSALS = {"Refused", "Forbidden", "NotFound", "Conflict", "PreconditionFailed", "Unavailable"}
MESSAGE_KEYWORDS = {"detail", "message"}
KUBERNETES_FACING = {
    # The pod scheduler's side of CPU co-location: a refusal becomes the pod's FailedScheduling
    # event and condition ("node … cannot give the pod its CPUs: …"), written by a worker.
    "scheduling/cpu/binding.py",
}


def _sources() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if not SKIPPED_DIRS.intersection(relative.parts) and not relative.parts[0].startswith(".") \
                and relative.as_posix() not in KUBERNETES_FACING:
            yield path


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _literal(node: ast.expr | None) -> bool:
    """English text written in the code: a str constant, an f-string, or literals joined with ``+``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and bool(node.value.strip())
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal(node.left) or _literal(node.right)
    return False


def _literal_values(node: ast.expr | None) -> Iterator[ast.expr]:
    """The literal messages of an ``errors`` mapping: ``{field: "..."}`` or ``{field: ["...", ...]}``
    (a ``dict(...)`` call's keywords too)."""
    values: list[ast.expr] = []
    if isinstance(node, ast.Dict):
        values = [value for value in node.values if value is not None]
    elif isinstance(node, ast.Call) and _name(node.func) == "dict":
        values = [keyword.value for keyword in node.keywords]
    for value in values:
        if isinstance(value, ast.List | ast.Tuple | ast.Set):
            yield from (item for item in value.elts if _literal(item))
        elif _literal(value):
            yield value


def _message(call: ast.Call, name: str) -> ast.expr | None:
    position = 0 if name == "PreconditionFailed" else 1
    if len(call.args) > position:
        return call.args[position]
    return next((keyword.value for keyword in call.keywords if keyword.arg in MESSAGE_KEYWORDS), None)


def literal_refusals(tree: ast.AST) -> Iterator[int]:
    """The line of every literal message a refusal carries."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        if name == "from_errors" and isinstance(node.func, ast.Attribute) and _name(node.func.value) in REFUSALS:
            errors = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "errors"), None)
            yield from (value.lineno for value in _literal_values(errors))
        elif name in REFUSALS:
            message = _message(node, name)
            if _literal(message):
                yield message.lineno
            errors = next((keyword.value for keyword in node.keywords if keyword.arg == "errors"), None)
            yield from (value.lineno for value in _literal_values(errors))


def _violations() -> list[str]:
    found = []
    for path in _sources():
        tree = ast.parse(path.read_text(), str(path))
        found += [f"{path.relative_to(ROOT).as_posix()}:{line}" for line in sorted(set(literal_refusals(tree)))]
    return found


def test_every_refusal_message_is_in_the_catalogue() -> None:
    found = _violations()
    assert not found, (f"{len(found)} refusal(s) with an English literal as their message; pass it through gettext "
                       "(`_(\"... %(name)s ...\") % {...}`):\n" + "\n".join(found))


def test_the_walk_sees_every_shape_of_literal_message() -> None:
    source = '''
raise Refused("a", "plain", field="x")                         # 2
raise Refused("a", f"{x!r} is taken")                          # 3
raise NotFound("a", "one " + name)                             # 4
raise errors.Conflict("a", detail="keyword")                   # 5
raise PreconditionFailed("stale text")                         # 6
raise Refused.from_errors({"name": "literal"})                 # 7
raise Refused("a", message, errors={"name": ["literal"]})      # 8
raise Refused("a", _("translated %(x)s") % {"x": x})           # 9
raise Refused("a", message, errors={"name": [_("fine")]})      # 10
raise Refused.from_errors({"name": problems})                  # 11
raise Refused("a", str(exc))                                   # 12
raise PreconditionFailed()                                     # 13
raise Refused.from_errors(dict(name=f"{x} bad"))               # 14
'''
    assert sorted(literal_refusals(ast.parse(source))) == [2, 3, 4, 5, 6, 7, 8, 14]
