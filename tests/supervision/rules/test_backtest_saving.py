"""The rule editor's preview shows what the rule would have done beside what people decided,
disagreements first; saving a rule that would have approved calls people rejected asks the
person to confirm them by name, and the new version records them."""
import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import ApprovalRule, ApprovalRuleVersion
from runs.supervision.rules.changes import rule_create
from tests.supervision.rules.backtest_calls import Decided
from tests.supervision.rules.test_rules_pages import form
from tests.support.approval_fixtures import make_user
from toolsapp.models import Tool


def text(response) -> str:
    return unescape(re.sub(r"\s+", " ", response.content.decode()))


def words(response) -> str:
    """What a person reads: the page's text without its tags."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", response.content.decode()))).replace(" ,", ",")


@pytest.fixture
def admin(demo_data):
    client = Client()
    client.force_login(make_user("ada", "admins"))
    return client


@pytest.fixture
def history(demo_data):
    """rita rejected cancelling ORD-1001 (the order was already cancelled); amy approved ORD-7
    after editing it, and ORD-8 as asked."""
    decided = Decided()
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["note"])
    decided.rejected = decided.add("cancel_order", {"order_id": "ORD-1001", "note": "card 4111"}, decision="rejected",
                                   by="rita")
    decided.edited = decided.add("cancel_order", {"order_id": "ORD-7"}, decision="approved", by="amy", edited=True)
    decided.approved = decided.add("cancel_order", {"order_id": "ORD-8"}, decision="approved", by="amy")
    return decided


def test_the_preview_lists_the_call_a_person_rejected_first_with_its_evidence_and_counts_agreements(admin, history):
    page = admin.post(reverse("rule_create"), form(preview="1"))

    body = text(page)
    assert page.status_code == 200 and 'id="rule-backtest"' in body
    listed = re.findall(r'data-kind="(\w+)" data-approval="(\d+)"', body)
    assert listed == [("approved_rejected", str(history.rejected.pk)), ("approved_edited", str(history.edited.pk))]
    first = body[body.index(f'data-approval="{history.rejected.pk}"'):body.index(f'data-approval="{history.edited.pk}"')]
    assert "Would have approved what a person rejected" in first and "Rejected by rita" in first
    assert "The model's own words before the call: <q>The order is open, so I will cancel it.</q>" in first
    assert '"status": "cancelled"' in first and "from lookup_order's result at step 1" in first
    assert '"note": "••••"' in first and "4111" not in body  # the tool's sensitive field, masked
    assert re.search(r'data-count="agreed_approved">1<', body) and re.search(r'data-count="approved_rejected">1<', body)
    # The backtest comes before the preview's own counts; nothing is saved.
    assert body.index('id="rule-backtest"') < body.index('id="rule-preview"')
    assert not ApprovalRule.objects.exists()
    assert f'value="{history.rejected.pk}"' in body and 'id="rule-confirm-saved-over"' in body


def test_saving_asks_for_confirmation_naming_the_calls_and_the_version_records_them(admin, history):
    refused = admin.post(reverse("rule_create"), form(save="1"))

    body = words(refused)
    assert refused.status_code == 200 and not ApprovalRule.objects.exists()
    assert "would have approved 1 call that a person rejected, so it was not saved" in body
    assert f"approval #{history.rejected.pk}: cancel_order in run #{history.run.pk}, rejected by rita" in body

    saved = admin.post(reverse("rule_create"), form(save="1", confirm_saved_over=str(history.rejected.pk)))

    assert saved.status_code == 302
    version = ApprovalRuleVersion.objects.get()
    assert version.saved_over == [{"approval": history.rejected.pk, "run": history.run.pk, "tool": "cancel_order",
                                   "person": "rita"}]
    editor = words(admin.get(reverse("rule_edit", args=[version.rule_key])))
    assert "Saved over people's rejections" in editor
    assert "Version 1, saved by ada" in editor and f"approval #{history.rejected.pk}: cancel_order" in editor
    # Confirmed once for this rule: an edit of something else does not ask about the same call again.
    assert admin.post(reverse("rule_edit", args=[version.rule_key]), form(save="1", name="renamed")).status_code == 302
    assert ApprovalRule.objects.get().name == "renamed"


def test_a_confirmation_of_other_calls_is_refused_and_the_calls_are_named_as_they_are_now(admin, history):
    another = history.add("cancel_order", {"order_id": "ORD-9"}, decision="rejected", by="sam")  # since the preview

    page = admin.post(reverse("rule_create"), form(save="1", confirm_saved_over=str(history.rejected.pk)))

    assert not ApprovalRule.objects.exists() and "2 calls that a person rejected" in words(page)
    assert f'value="{another.pk},{history.rejected.pk}"' in text(page)
    admin.post(reverse("rule_create"), form(save="1", confirm_saved_over=f"{another.pk},{history.rejected.pk}"))
    assert len(ApprovalRuleVersion.objects.get().saved_over) == 2


def test_a_rule_saved_in_shadow_or_disabled_decides_nothing_and_needs_no_confirmation(admin, history):
    admin.post(reverse("rule_create"), form(save="1", shadow="on"))
    admin.post(reverse("rule_create"), form(save="1", name="off", enabled=""))

    assert ApprovalRule.objects.count() == 2 and all(v.saved_over == [] for v in ApprovalRuleVersion.objects.all())


def test_letting_a_rule_in_shadow_decide_in_one_click_names_the_rejections_it_would_approve(admin, history):
    rule = rule_create(data={"name": "trial", "tool_pattern": "cancel_order", "action": "approve", "shadow": True},
                       user=None)

    page = admin.post(reverse("rule_shadow", args=[rule.pk]), {"shadow": ""}, follow=True)

    rule.refresh_from_db()
    assert rule.shadow is True, "a save that decides over a rejection waits for it to be confirmed by name"
    assert f"approval {history.rejected.pk} (run {history.run.pk}, cancel_order, rejected by rita)" in text(page)
    assert rule.versions.count() == 1

    admin.post(reverse("rule_shadow", args=[rule.pk]), {"shadow": "", "confirm_saved_over": str(history.rejected.pk)})
    rule.refresh_from_db()
    assert rule.shadow is False
    assert [c["approval"] for c in rule.versions.order_by("-version").first().saved_over] == [history.rejected.pk]
    # The audit trail of rule changes says so.
    assert f"saved over 1 call people rejected: #{history.rejected.pk}" in text(admin.get(reverse("rule_list")))


def test_a_rule_that_agrees_with_people_saves_at_once(admin, history):
    reject_vip = form(save="1", conditions='[{"path": "$.order_id", "op": "fullmatch", "value": "VIP-.*"}]')

    assert admin.post(reverse("rule_create"), reject_vip).status_code == 302
    assert ApprovalRuleVersion.objects.get().saved_over == []
