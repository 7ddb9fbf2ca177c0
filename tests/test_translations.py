"""The zh-Hans catalogue: every entry translated and reviewed, placeholders kept, the compiled
catalogue current. ``make messages`` regenerates both from the code and scripts/translate_zh.py."""

from __future__ import annotations

import gettext
import re
from pathlib import Path

import pytest

LOCALE = Path(__file__).resolve().parent.parent / "locale" / "zh_Hans" / "LC_MESSAGES"
ENTRY = re.compile(r'((?:#[^\n]*\n)*)msgid ((?:"[^"\n]*(?:\\.[^"\n]*)*"\n)+)(?:msgid_plural (?:"[^"\n]*(?:\\.[^"\n]*)*"\n)+)?'
                   r'msgstr(?:\[0\])? ((?:"[^"\n]*(?:\\.[^"\n]*)*"\n)+)')
PLACEHOLDER = re.compile(r"%\([A-Za-z_.]+\)s|%%|\{\{[^}]*\}\}|<[^>]+>")


def _unquote(block: str) -> str:
    return "".join(line[1:-1] for line in block.strip().splitlines()).encode().decode("unicode_escape").encode("latin1").decode()


def _entries() -> list[tuple[str, str, str]]:
    text = (LOCALE / "django.po").read_text()
    return [(comments, _unquote(msgid), _unquote(msgstr)) for comments, msgid, msgstr in ENTRY.findall(text) if msgid != '""\n']


ENTRIES = _entries()


def test_the_catalogue_was_read() -> None:
    assert len(ENTRIES) > 900


@pytest.mark.parametrize(("comments", "msgid", "msgstr"), ENTRIES, ids=[e[1][:40] for e in ENTRIES])
def test_every_entry_is_translated_reviewed_and_keeps_its_placeholders(comments: str, msgid: str, msgstr: str) -> None:
    assert msgstr, "untranslated"
    assert "fuzzy" not in comments, "a fuzzy guess is not a translation"
    assert sorted(PLACEHOLDER.findall(msgstr)) == sorted(PLACEHOLDER.findall(msgid))


def test_the_compiled_catalogue_is_current() -> None:
    with (LOCALE / "django.mo").open("rb") as handle:
        compiled = gettext.GNUTranslations(handle)
    stale = [msgid for _, msgid, msgstr in ENTRIES if compiled.gettext(msgid) != msgstr and "%(n)s" not in msgid]
    assert not stale, f"run `make messages`: {stale[:5]}"
