"""A run's call arguments as the run page reads them: masked as in the queue, read from the rows
at each request, an edit field by field, and who may read them."""
import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from runs.lifecycle.call_arguments import field_changes, shown_arguments
from runs.models import ToolCall
from toolsapp.models import Tool
from toolsapp.sensitive import MASK


@pytest.fixture
def viewer(demo_data):
    user = User.objects.create_user("vera")
    user.groups.add(Group.objects.get(name="viewers"))
    return user


def test_arguments_are_pretty_json_with_sensitive_values_masked_at_any_depth():
    text = '{"city": "Lagos", "card": {"number": "4111"}, "items": [{"Token": "t-1", "sku": "A"}]}'
    shown = shown_arguments(text, ["card", "token"])
    assert '"city": "Lagos"' in shown and '"sku": "A"' in shown
    assert "4111" not in shown and "t-1" not in shown and shown.count(MASK) == 2


def test_unparsable_arguments_are_hidden_only_when_the_tool_masks_something():
    assert shown_arguments('{"card": "4111"', ["card"]) == "(not valid JSON; hidden because this tool has sensitive fields)"
    assert shown_arguments('{"city": "Lag', []) == '{"city": "Lag'


def test_an_edit_lists_each_changed_field_once_and_masks_sensitive_ones():
    asked = '{"order_id": "ORD-1", "reason": "asked", "card": {"n": "1111", "cvc": "1"}, "drop": 1}'
    ran = '{"order_id": "ORD-1", "reason": "fixed", "card": {"n": "2222", "cvc": "2"}, "add": [1]}'
    changes = field_changes(asked, ran, ["card"])
    assert changes == [
        {"field": "reason", "asked": '"asked"', "ran": '"fixed"', "sensitive": False},
        {"field": "card", "asked": f'"{MASK}"', "ran": f'"{MASK}"', "sensitive": True},
        {"field": "drop", "asked": "1", "ran": "", "sensitive": False},
        {"field": "add[0]", "asked": "", "ran": "1", "sensitive": False},
    ]
    assert field_changes(asked, "not json", []) == []


def test_the_endpoint_masks_with_the_tools_fields_as_they_are_now(client, viewer, launch):
    run = launch()  # the demo weather run: two get_weather calls
    client.force_login(viewer)
    url = reverse("call_arguments", args=[run.pk])
    body = client.get(url).json()
    assert [c["tool"] for c in body["calls"]] == ["get_weather", "get_weather"] and body["more"] is False
    assert '"city": "Lagos"' in body["calls"][0]["arguments"]
    Tool.objects.filter(name="get_weather").update(sensitive_fields=["city"])  # marked sensitive later
    again = client.get(url).json()
    assert all("Lagos" not in c["arguments"] and MASK in c["arguments"] for c in again["calls"])
    first = ToolCall.objects.filter(run=run).order_by("pk").first()
    after = client.get(url, {"after": first.pk}).json()
    assert [c["pk"] for c in after["calls"]] == [c["pk"] for c in body["calls"][1:]]
    assert client.get(url, {"after": "x"}).status_code == 400
    assert client.get(reverse("call_arguments", args=[999999])).status_code == 404


def test_the_endpoint_needs_a_person_who_may_view_runs(client, demo_data, launch):
    run = launch()
    url = reverse("call_arguments", args=[run.pk])
    assert client.get(url).status_code == 302  # to the sign-in page
    client.force_login(User.objects.create_user("nina"))  # no role
    assert client.get(url).status_code == 403
    assert client.post(url).status_code in (403, 405)


def test_history_shows_each_runs_duration_launcher_and_parent(client, viewer, launch):
    from runs.lifecycle.forks import run_fork
    from runs.models import Run

    parent = launch()
    Run.objects.filter(pk=parent.pk).update(active_seconds=12.34)
    launcher = User.objects.create_user("lena")
    launcher.groups.add(Group.objects.get(name="operators"))
    fork = run_fork(run_id=parent.pk, step_index=1, user=launcher)
    client.force_login(viewer)
    page = client.get(reverse("run_list")).content.decode()
    rows = {row.split('data-run-id="')[1].split('"')[0]: row for row in page.split('<tr class="run-row"')[1:]}
    assert '12.3 s' in rows[str(parent.pk)] and "the command line" in rows[str(parent.pk)]
    assert "lena" in rows[str(fork.pk)] and f'fork of <a href="/runs/{parent.pk}/">#{parent.pk}</a>' in rows[str(fork.pk)]


def test_the_server_rendered_timeline_shows_masked_arguments_decisions_edits_and_a_forks_edited_result(
    client, viewer, launch, script
):
    from runs.engine.loop import run_advance
    from runs.lifecycle.forks import run_fork
    from runs.models import Approval, Run
    from runs.supervision.approvals.decide import approval_decide

    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    model = script(
        {"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]},
        {"tool_calls": [{"id": "c1", "name": "cancel_order", "arguments": {"order_id": "ORD-1001", "reason": "secret why"}}]},
        {"content": "Cancelled."},
    )
    run = launch("Weather, then cancel ORD-1001", models=[model])
    operator = User.objects.create_user("otto")
    operator.groups.add(Group.objects.get(name="operators"))
    approval = Approval.objects.get(run=run)
    approval_decide(approval_id=approval.pk, user=operator, approve=True, reason="checked",
                    arguments='{"order_id": "ORD-1002", "reason": "secret why"}')
    run_advance(run_id=run.pk)
    client.force_login(viewer)
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    timeline = page.split('id="timeline"', 1)[1]
    assert "&quot;city&quot;: &quot;Lagos&quot;" in timeline and "secret why" not in page
    assert f"&quot;reason&quot;: &quot;{MASK}&quot;" in timeline
    assert "Approved by otto: checked" in timeline
    assert 'data-field="order_id"' in timeline and "&quot;ORD-1002&quot;" in timeline
    assert 'class="step-head"' in timeline and "Cancelled." in timeline and 'class="run-end"' in timeline

    weather = run.tool_calls.get(tool_name="get_weather")
    fork = run_fork(run_id=run.pk, step_index=1, user=operator,
                    edit={"tool_result": {"call_id": weather.call_id, "content": "Lagos: snowing"}})
    forked = client.get(reverse("run_detail", args=[fork.pk])).content.decode()
    assert "Result edited by otto" in forked and "Lagos: snowing" in forked
    assert Run.objects.get(pk=fork.pk).forked_from_id == run.pk
