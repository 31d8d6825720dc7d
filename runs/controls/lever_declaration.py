"""What a lever is, declared once (runs/controls/levers.py lists them): its service, its words for
the run page, the API and the timeline, its button, the field it takes if any, and who may pull it.

Everything else derives from the declaration: the page's routes and their one view
(runs/web/views/levers.py), the API's routes, views and schema (runs/web/api/views/levers.py), the
route-scoping registrations (runs/web/project_routes.py), the run page's buttons
(templates/runs/_run_levers.html) and what its script does with them (static/js/run_levers.js),
and the names the run's socket takes (runs/web/consumers/run_timeline.py).
"""
from collections.abc import Callable
from dataclasses import dataclass

from runs.models import Run
from runs.roles import PERM_CANCEL

# When a lever's button shows, by the run's status (the page's script applies the same rule live):
ACTIVE = "active"  # while the run is active (the whole controls section hides when it ends)
PAUSED = "paused"  # only while the run is paused
UNPAUSED = "unpaused"  # while the run is active and not paused
SHOWN_WHEN = (ACTIVE, PAUSED, UNPAUSED)

# The run page's two groups of buttons, in this order: (name, title).
GROUPS = (("steer", "Steer"), ("end", "End the run"))


@dataclass(frozen=True)
class Body:
    """The one text field a lever takes (the message's note), as the page and the API ask for it."""

    field: str
    max_chars: int
    label: str  # the page's label
    placeholder: str
    help: str  # the API field's description
    example: tuple[str, str]  # (name, value) of the API's request example


@dataclass(frozen=True)
class Button:
    """The lever's button on the run page (for a lever with a body, the button that sends the field)."""

    label: str
    group: str  # one of GROUPS' names
    shown_when: str = ACTIVE  # one of SHOWN_WHEN
    # The run's field that says the lever was already pulled (its button hides until that is over).
    asked_flag: str = ""
    style: str = ""  # "primary" or "danger"
    help: str = ""  # the sentence that describes it (aria-describedby)
    confirm: str = ""  # asked next to the button before a lever that ends the run is sent

    def __post_init__(self):
        if self.shown_when not in SHOWN_WHEN or self.group not in dict(GROUPS):
            raise ValueError(f"A lever's button shows when one of {SHOWN_WHEN}, in a group of {GROUPS}.")


@dataclass(frozen=True)
class Lever:
    """One operator's lever on a live run."""

    name: str  # the socket's and the timeline's word for it; its routes are run_<name>, api-run-<name>
    pull: Callable  # the service: pull(run_id=, user=, **{body.field: text}) -> Run (or what it made)
    button: Button
    page_answer: Callable[[Run], str]  # the run page's words once it took, from the run as it left it
    api_answer: Callable[[Run], str]  # the API's "detail", likewise
    api_summary: str  # the API operation's summary
    timeline: str = ""  # the timeline's line for its event: "<timeline> <who> at <when>"
    body: Body | None = None
    # What the API adds to its reply from what `pull` returned (the note the message lever made).
    api_extra: Callable[[object], dict] | None = None
    permission: str = PERM_CANCEL

    @property
    def slug(self) -> str:
        """Its part of the URL paths."""
        return self.name.replace("_", "-")

    @property
    def page_route(self) -> str:
        return f"run_{self.name}"

    @property
    def api_route(self) -> str:
        return f"api-run-{self.slug}"

    def hidden_for(self, run: Run) -> bool:
        """Whether the run page renders its button hidden (run_levers.js keeps it so live)."""
        asked = bool(self.button.asked_flag and getattr(run, self.button.asked_flag))
        if self.button.shown_when == PAUSED:
            return run.status != Run.Status.PAUSED
        if self.button.shown_when == UNPAUSED:
            return run.status == Run.Status.PAUSED or asked
        return asked
