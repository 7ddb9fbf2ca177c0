"""A refusal speaks the reader's language: the REST API's error body and the console's form
errors come from the catalogue (issue #33), in English unless the request asks for Chinese."""

from __future__ import annotations

import pytest

from nodeconfig.models import ConfigTarget

pytestmark = pytest.mark.django_db
TARGETS = "/api/v1/nodeconfig/targets/"
NEW = "/nodeconfig/targets/new/"


def test_a_refused_target_is_explained_in_the_language_asked_for(operator_api, client, operator, fleet, admin_qos):
    body = {"type": "AdminQoSConfiguration", "name": "nowhere", "cluster": "gz-9", "config": {}}
    english = operator_api.post(TARGETS, body, format="json")
    chinese = operator_api.post(TARGETS, body, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert english.status_code == chinese.status_code == 400
    assert english.json() == {"code": "unknown_cluster", "detail": "There is no member cluster named 'gz-9'.",
                              "errors": {"cluster": ["There is no member cluster named 'gz-9'."]}}
    assert chinese.json() == {"code": "unknown_cluster", "detail": "不存在名为 'gz-9' 的成员集群。",
                              "errors": {"cluster": ["不存在名为 'gz-9' 的成员集群。"]}}

    client.force_login(operator)
    form = {"type": "AdminQoSConfiguration", "name": "Bad_Name", "cluster": "", "mode": "selector",
            "node_label_selector": "diskMode=ssd", "priority": "0", "node_names": "", "last_duration": "",
            "config": "{}", "wave_size": "", "wave_interval_seconds": "60", "failure_threshold_percent": "10",
            "reason": "a typo", "save": "1"}
    page = client.post(NEW, form).content.decode()
    assert "Name must be a DNS subdomain: lowercase letters, digits" in page and "名称必须是 DNS 子域名" not in page
    client.cookies["django_language"] = "zh-hans"
    page = client.post(NEW, form).content.decode()
    assert "名称必须是 DNS 子域名：小写字母、数字" in page and "Name must be a DNS subdomain" not in page
    assert not ConfigTarget.objects.filter(name__in=["nowhere", "Bad_Name"]).exists()
