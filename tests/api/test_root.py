"""The API root links to what exists: every link answers (a collection or a read endpoint 200;
a write-only endpoint refuses the GET: 405, or 403 where the view has no rule for GET), none 404."""

from __future__ import annotations

import pytest


def links(tree: dict) -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat |= {f"{key}/{sub}": url for sub, url in links(value).items()}
        else:
            flat[key] = value
    return flat


@pytest.mark.django_db
def test_every_link_of_the_api_root_answers(admin_api):
    root = admin_api.get("/api/v1/")
    assert root.status_code == 200
    body = root.json()
    for area, collection in (("fleet", "clusters"), ("nodeconfig", "targets"), ("quotas", "groups"),
                             ("federation", "objects"), ("scheduling", "policies")):
        assert collection in body[area], (area, sorted(body[area]))
    answers = {name: admin_api.get(url) for name, url in links(body).items()}
    missing = {name: r.status_code for name, r in answers.items() if r.status_code not in (200, 403, 405)}
    assert missing == {}
    assert all("POST" in r["Allow"] for r in answers.values() if r.status_code == 405), "write-only, and says so"
    read = [name for name, r in answers.items() if r.status_code == 200]
    assert len(read) >= 25 and "federation/water-levels" in read and "scheduling/cpu/fleet" in read
