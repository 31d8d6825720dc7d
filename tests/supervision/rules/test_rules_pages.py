"""The rule pages: the list in order with conditions in words and the audit trail, the editor
with its preview, and who may do what."""
import json
import re
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import Agent, ApprovalRule, ApprovalRuleVersion, Run
from runs.supervision.rules.changes import SAFEGUARDS_TEXT, rule_create
from tests.support.approval_fixtures import make_user

CONDITIONS = [{"path": "$.order_id", "op": "matches", "value": "^ORD-"}]


def signed_in(name: str, group: str) -> Client:
    client = Client()
    client.force_login(make_user(name, group))
    return client


def form(**changes) -> dict:
    data = {
        "name": "cancel ORD orders", "agent": "", "position": "10", "enabled": "on", "tool_pattern": "cancel_order",
        "conditions": json.dumps(CONDITIONS), "customer": "", "launched_by": "", "action": "approve", "group": "",
        "reason": "", "escalate_after_seconds": "",
    }
    return {**data, **changes}


def text(response) -> str:
    return unescape(re.sub(r"\s+", " ", response.content.decode()))


@pytest.fixture
def admin(demo_data):
    return signed_in("ada", "admins")


@pytest.fixture
def saved_rule(demo_data):
    return rule_create(data={"name": "cancel ORD orders", "tool_pattern": "cancel_order", "action": "approve",
                             "conditions": CONDITIONS, "position": 10}, user=make_user("root-admin", "admins"))


def test_everyone_who_sees_runs_reads_the_rules_in_order_with_conditions_in_words(saved_rule):
    rule_create(data={"name": "ask first", "tool_pattern": "*", "position": 1, "agent": Agent.objects.get(name="demo")},
                user=None)
    viewer = signed_in("vera", "viewers")

    page = viewer.get(reverse("rule_list"))

    assert page.status_code == 200
    body = text(page)
    assert body.index("ask first") < body.index("cancel ORD orders")  # position 1 is tried first
    assert "$.order_id contains a match of the RE2 pattern '^ORD-'" in body
    assert "Approve automatically" in body and "every agent" in body and 'id="nav-rules"' in body
    assert SAFEGUARDS_TEXT in body
    assert 'data-change="created"' in body  # the audit trail
    assert 'id="rule-new"' not in body
    assert viewer.get(reverse("rule_create")).status_code == 403
    assert viewer.get(reverse("rule_edit", args=[saved_rule.pk])).status_code == 403
    assert viewer.post(reverse("rule_delete", args=[saved_rule.pk])).status_code == 403
    assert ApprovalRule.objects.count() == 2


def test_operators_read_rules_but_cannot_write_them(saved_rule):
    operator = signed_in("otto", "operators")

    assert operator.get(reverse("rule_list")).status_code == 200
    assert operator.post(reverse("rule_create"), form(name="mine")).status_code == 403
    assert operator.post(reverse("rule_edit", args=[saved_rule.pk]), form(action="reject")).status_code == 403
    assert ApprovalRule.objects.get().version == 1
    assert Client().get(reverse("rule_list")).status_code == 302  # sign in first


def test_admin_previews_then_saves_a_new_rule(admin, launch):
    run = launch("Cancel order ORD-1001")
    assert run.status == Run.Status.AWAITING_APPROVAL
    editor = admin.get(reverse("rule_create"))
    assert SAFEGUARDS_TEXT in text(editor)

    preview = admin.post(reverse("rule_create"), form(preview="1"))

    assert preview.status_code == 200
    assert not ApprovalRule.objects.exists()  # a preview saves nothing
    body = text(preview)
    assert re.search(r'data-count="matched">1<', body)
    assert re.search(r'data-count="approve">1<|data-count="blocked">1<', body)
    assert f"run #{run.pk}" in body
    assert 'value="cancel ORD orders"' in body  # the form keeps what was typed

    saved = admin.post(reverse("rule_create"), form(save="1"))

    assert saved.status_code == 302 and saved["Location"] == reverse("rule_list")
    rule = ApprovalRule.objects.get()
    assert (rule.conditions, rule.version, rule.updated_by_name) == (CONDITIONS, 1, "ada")
    assert "saved (version 1)" in text(admin.get(reverse("rule_list")))


@pytest.mark.parametrize("changes,message", [
    ({"conditions": '[{"path": "$.amount", "op": "lt", "value": "50"}]'}, "Condition 1: lt compares with a number."),
    ({"conditions": "[{'path': 1}"}, "Conditions are not valid JSON"),
    ({"action": "ask_group"}, "'Ask a named group' needs the group whose members decide."),
    ({"tool_pattern": ""}, "This field is required."),
])
def test_the_editor_says_what_is_wrong_and_saves_nothing(admin, changes, message):
    for button in ("preview", "save"):
        response = admin.post(reverse("rule_create"), form(**changes, **{button: "1"}))
        assert response.status_code == 200
        assert message in text(response)
        assert 'id="rule-preview"' not in text(response)
    assert not ApprovalRule.objects.exists()


def test_admin_edits_a_rule_to_a_new_version_and_deletes_it_keeping_the_trail(admin, saved_rule):
    editor = admin.get(reverse("rule_edit", args=[saved_rule.pk]))
    assert "^ORD-" in text(editor) and 'id="rule-delete"' in text(editor)

    response = admin.post(reverse("rule_edit", args=[saved_rule.pk]), form(action="ask_two", save="1"))
    assert response.status_code == 302
    saved_rule.refresh_from_db()
    assert (saved_rule.action, saved_rule.version, saved_rule.updated_by_name) == ("ask_two", 2, "ada")
    editor = text(admin.get(reverse("rule_edit", args=[saved_rule.pk])))
    assert 'data-version="2" data-change="updated"' in editor and "Updated: action" in editor

    assert admin.get(reverse("rule_delete", args=[saved_rule.pk])).status_code == 405  # a GET never deletes
    assert admin.post(reverse("rule_delete", args=[saved_rule.pk])).status_code == 302
    assert not ApprovalRule.objects.exists()
    assert ApprovalRuleVersion.objects.filter(rule_key=saved_rule.pk).count() == 3
    assert 'data-version="3" data-change="deleted"' in text(admin.get(reverse("rule_list")))


def test_the_agent_page_lists_its_rules_and_links_to_all_that_apply(admin, saved_rule):
    demo = Agent.objects.get(name="demo")
    own = rule_create(data={"name": "demo refunds", "agent": demo, "action": "ask_two"}, user=None)

    body = text(admin.get(reverse("agent_detail", args=[demo.pk])))

    assert f'data-rule-id="{own.pk}"' in body and "demo refunds" in body
    assert f'data-rule-id="{saved_rule.pk}"' not in body  # a global rule is in "all rules that apply"
    listing = text(admin.get(reverse("rule_list") + f"?agent={demo.pk}"))
    assert "demo refunds" in listing and "cancel ORD orders" in listing
    new = text(admin.get(reverse("rule_create") + f"?agent={demo.pk}"))
    assert f'<option value="{demo.pk}" selected>' in new


def test_the_django_admin_shows_rules_read_only_so_every_change_is_versioned(saved_rule):
    root = Client()
    root.force_login(User.objects.create_superuser("su", password="pw-su"))

    assert root.get(reverse("admin:runs_approvalrule_changelist")).status_code == 200
    page = text(root.get(reverse("admin:runs_approvalrule_change", args=[saved_rule.pk])))
    assert "cancel ORD orders" in page and 'name="_save"' not in page
    assert root.get(reverse("admin:runs_approvalrule_add")).status_code == 403
    assert root.post(reverse("admin:runs_approvalrule_delete", args=[saved_rule.pk]), {"post": "yes"}).status_code == 403
    assert ApprovalRule.objects.filter(pk=saved_rule.pk).exists()


def test_the_editor_offers_whole_value_matching_first_and_labels_the_search(admin):
    body = text(admin.get(reverse("rule_create")))
    operators = json.loads(re.search(r'data-operators="([^"]*)"', admin.get(reverse("rule_create")).content.decode())
                           .group(1).replace("&quot;", '"'))
    assert list(operators).index("fullmatch") < list(operators).index("matches")
    assert operators["fullmatch"] == "matches, as a whole value, the RE2 pattern"
    assert operators["matches"] == "contains a match of the RE2 pattern"
    assert '"x@evil.test,y@example.com"' in body  # the help says what a search also accepts

    whole = [{"path": "$.order_id", "op": "fullmatch", "value": r"ORD-\d+"}]
    preview = text(admin.post(reverse("rule_create"), form(conditions=json.dumps(whole), preview="1")))
    assert r"$.order_id matches, as a whole value, the RE2 pattern 'ORD-\\d+'" in preview
    admin.post(reverse("rule_create"), form(conditions=json.dumps(whole), save="1"))
    assert ApprovalRule.objects.get().conditions == whole


def test_the_launcher_is_chosen_among_accounts_and_shown_by_its_current_name(admin):
    ada = User.objects.get(username="ada")
    gone = make_user("gone", "operators")
    User.objects.filter(pk=gone.pk).update(is_active=False)
    editor = text(admin.get(reverse("rule_create")))
    assert f'<option value="{ada.pk}">ada</option>' in editor and "gone (inactive)" in editor
    assert admin.post(reverse("rule_create"), form(launched_by="ada", save="1")).status_code == 200  # a pk, not a name
    assert not ApprovalRule.objects.exists()

    assert admin.post(reverse("rule_create"), form(launched_by=str(ada.pk), save="1")).status_code == 302
    rule = ApprovalRule.objects.get()
    assert rule.launched_by == ada
    User.objects.filter(pk=ada.pk).update(username="ada.lovelace")
    assert "launched by ada.lovelace" in text(admin.get(reverse("rule_list")))
    assert f'<option value="{ada.pk}" selected>ada.lovelace</option>' in text(admin.get(reverse("rule_edit", args=[rule.pk])))


def test_a_launcher_name_without_an_account_is_flagged_and_kept_until_someone_chooses(admin, saved_rule):
    ApprovalRule.objects.filter(pk=saved_rule.pk).update(launched_by_unresolved="carol")
    assert "<strong>matches no run:</strong> launched by carol, which matched no account" in text(admin.get(reverse("rule_list")))
    editor = text(admin.get(reverse("rule_edit", args=[saved_rule.pk])))
    assert 'id="rule-unresolved"' in editor
    assert "<option value=\"unresolved\" selected>nobody: 'carol' matched no account</option>" in editor

    # Saving another change keeps the rule matching nobody: it never widens to "anyone" by itself.
    admin.post(reverse("rule_edit", args=[saved_rule.pk]), form(launched_by="unresolved", action="ask_two", save="1"))
    saved_rule.refresh_from_db()
    assert (saved_rule.action, saved_rule.launched_by_id, saved_rule.launched_by_unresolved) == ("ask_two", None, "carol")

    admin.post(reverse("rule_edit", args=[saved_rule.pk]), form(action="ask_two", save="1"))  # "anyone", chosen
    saved_rule.refresh_from_db()
    assert (saved_rule.launched_by_id, saved_rule.launched_by_unresolved) == (None, "")
    assert 'id="rule-unresolved"' not in text(admin.get(reverse("rule_edit", args=[saved_rule.pk])))


def test_a_searching_pattern_is_pointed_out_in_the_editor_and_the_preview(admin, saved_rule):
    warning = ("Condition 1 searches: $.order_id passes when any part of it matches '^ORD-', whatever surrounds that "
               'part. Choose "matches, as a whole value" to require the whole value.')
    assert warning in text(admin.get(reverse("rule_edit", args=[saved_rule.pk])))
    assert warning in text(admin.post(reverse("rule_create"), form(preview="1")))
    whole = json.dumps([{"path": "$.order_id", "op": "fullmatch", "value": "ORD-.*"}])
    assert 'id="rule-condition-warnings"' not in text(admin.post(reverse("rule_create"), form(conditions=whole, preview="1")))
