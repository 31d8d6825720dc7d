"""Saving a rule over people's rejections: a rule that would have approved calls people rejected
(runs.supervision.rules.backtest) is saved only once the person confirms exactly those calls, each once
per rule; its new version records them (ApprovalRuleVersion.saved_over). Shared by the editor and
the API."""
from runs.models import ApprovalRule, ApprovalRuleVersion
from runs.supervision.rules.backtest import rule_backtest
from runs.supervision.rules.preview import draft_spec


class SavedOverUnconfirmed(Exception):
    """A save of a rule that would have approved calls people rejected, without the saver
    confirming exactly those calls. `calls` names them (saved_over entries)."""

    def __init__(self, calls: list[dict]):
        self.calls = calls
        super().__init__(saved_over_words(calls))


def decides_once_saved(data: dict, rule: ApprovalRule | None) -> bool:
    """Whether the rule, saved with `data`, decides calls (enabled and not in shadow)."""
    enabled = data.get("enabled", rule.enabled if rule is not None else True)
    shadow = data.get("shadow", rule.shadow if rule is not None else False)
    return bool(enabled) and not shadow


def saved_over_needed(data: dict, *, rule: ApprovalRule | None, project_id: int) -> list[dict]:
    """The calls a person rejected that the rule, saved with `data`, would have approved and that
    nobody confirmed for this rule yet; [] when the rule as saved decides nothing (disabled or in
    shadow)."""
    if not decides_once_saved(data, rule):
        return []
    return not_yet_confirmed(rule_backtest(draft_spec(data, rule=rule), project_id=project_id).rejected_over, rule)


def not_yet_confirmed(calls: list[dict], rule: ApprovalRule | None) -> list[dict]:
    """`calls` less those a saver of this rule confirmed already (in an earlier version's
    saved_over): each is confirmed once per rule, so an edit of something else (a rename, an
    escalation) does not ask about the same calls again."""
    if rule is None or rule.pk is None or not calls:
        return calls
    done = {call.get("approval") for over in ApprovalRuleVersion.objects.filter(rule_key=rule.pk)
            .values_list("saved_over", flat=True) for call in over or ()}
    return [call for call in calls if call["approval"] not in done]


def saved_over_check(calls: list[dict], confirmed) -> list[dict]:
    """What the new version records in `saved_over` (`calls`, saved_over_needed's); raises
    SavedOverUnconfirmed unless `confirmed` (approval ids) is exactly those calls: one that
    appeared or left since the person read them (a new rejection, one gone out of the window, a
    rule changed) asks again, naming the calls as they are now."""
    if calls and {call["approval"] for call in calls} != set(confirmed or ()):
        raise SavedOverUnconfirmed(calls)
    return calls


def saved_over_words(calls: list[dict], *, confirm: bool = True) -> str:
    shown = "; ".join(f"approval {c['approval']} (run {c['run']}, {c['tool']}, rejected by {c['person'] or 'a person'})"
                      for c in calls[:10])
    more = f"; and {len(calls) - 10} more" if len(calls) > 10 else ""
    return (f"This rule would have approved {len(calls)} call{'s' if len(calls) != 1 else ''} that a person "
            f"rejected: {shown}{more}." + (" Confirm them by their approval ids to save over them." if confirm else ""))


def confirmed_ids(text: str) -> set[int]:
    """Approval ids as a form posts them: "12,15 18"."""
    return {int(part) for part in text.replace(",", " ").split() if part.isdigit()}
