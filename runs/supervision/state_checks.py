"""State checks: a read-only tool a destructive tool names (Tool.state_check), run before a person
decides, so the card shows the world as it is now ("ORD-1001: cancelled, checked 4 s ago").
A check that fails says so and never blocks the decision."""


def state_check_soon(approval) -> None:
    """Once the transaction that asks about the call commits, run its tool's state check (if any)."""


def state_refresh_stale(items: list) -> None:
    """Cards being opened: ask again for the checks older than a minute."""
