"""The tools one run may call, as its driver knows them, kept current while it runs.

A driver reads its run's tools when it starts. Before the calls of each model answer are decided,
it reads again the flags of the tools that answer calls (one small query, none for an answer
without calls), so an administrator who marks a tool destructive or not idempotent, or disables
it, changes what happens to its next call, also in runs already being driven. A tool whose flags
changed is read again in full.
"""
from django.db import connection

from runs.engine.context.window import READ_BACK_TOOL
from runs.engine.decisions import ToolFacts
from runs.engine.tools.execution import reads_only
from runs.engine.tools.simulation import simulated_in_experiments
from runs.models import Run
from toolsapp.models import Tool

# The flags a call's fate depends on, in the order of the query below; then the values whether an
# experiment runs it depends on (runs/engine/tools/simulation.py), compared as they are.
FLAGS = ("enabled", "destructive", "idempotent", "parallel_safe", "always_ask", "critical")
VALUES = ("in_experiments", "kind", "handler")


def facts_of(tool: Tool, *, experiment: bool = False) -> ToolFacts:
    return ToolFacts(tool.name, tool.destructive, tool.idempotent, tool.parallel_safe, reads_only(tool), tool.repeat_limit,
                     simulated=experiment and simulated_in_experiments(tool))


class RunTools:
    """`tools` and `facts` (of enabled tools), `unavailable` (disabled ones), `definitions` (for the model)."""

    def __init__(self, names: list[str], *, read_back: bool = False, experiment: bool = False):
        self.names = list(names)
        self.experiment = experiment  # an experiment's run: calls that would change something are simulated
        # The tool that reads a summarised result again, for a run with a context budget: offered
        # from the first request that summarised one (a request before has nothing to read back,
        # and its schema would cost tokens).
        self.held_back = set()
        if read_back and READ_BACK_TOOL not in self.names:
            self.names.append(READ_BACK_TOOL)
            self.held_back = {READ_BACK_TOOL}
        self.tools: dict[str, Tool] = {}
        self.facts: dict[str, ToolFacts] = {}
        self.unavailable: set[str] = set()
        self._take(Tool.objects.filter(name__in=self.names))
        self.definitions = self._definitions()

    def refresh(self, called: list[str], *, run=None) -> bool:
        """Read again the flags of the run's tools among `called`; the dicts are changed in place.
        With `run`, the same statement reads its cancel flag again into `run.cancel_requested`
        (the loop checks it before running calls): True when it did (some tool was read)."""
        names = sorted(set(called).intersection(self.names))
        if not names:
            return False
        # A plain statement, one per iteration: the ORM's query building would cost more than the
        # query itself, and a second statement for the cancel flag a round trip more.
        marks = ", ".join(["%s"] * len(names))
        tools = f"SELECT name, {', '.join(FLAGS + VALUES)} FROM {Tool._meta.db_table} WHERE name IN ({marks})"
        with connection.cursor() as cursor:
            if run is None:
                cursor.execute(tools, names)
                found = cursor.fetchall()
            else:
                cursor.execute(
                    f"SELECT r.cancel_requested, t.* FROM {Run._meta.db_table} r LEFT JOIN ({tools}) t ON TRUE "
                    "WHERE r.id = %s",
                    [*names, run.pk],
                )
                found = cursor.fetchall()
                run.cancel_requested = bool(found[0][0])
                found = [row[1:] for row in found if row[1] is not None]
            flags = len(FLAGS)
            rows = {name: (*(bool(v) for v in values[:flags]), *values[flags:]) for name, *values in found}
        changed = [name for name in names if not self._unchanged(name, rows.get(name))]
        if not changed:
            return run is not None
        before = set(self.tools)
        for name in changed:
            self.tools.pop(name, None)
            self.facts.pop(name, None)
            self.unavailable.discard(name)
        self._take(Tool.objects.filter(name__in=changed))
        if set(self.tools) != before:
            self.definitions = self._definitions()
        return run is not None

    def _take(self, rows) -> None:
        for tool in rows:
            if tool.enabled:
                self.tools[tool.name] = tool
                self.facts[tool.name] = facts_of(tool, experiment=self.experiment)
            else:
                self.unavailable.add(tool.name)

    def _unchanged(self, name: str, flags: tuple | None) -> bool:
        """Whether `flags` (None: no such row) are what we hold of tool `name`."""
        if name in self.tools:
            tool = self.tools[name]
            return flags == (*(bool(getattr(tool, flag)) for flag in FLAGS), *(getattr(tool, v) for v in VALUES))
        if name in self.unavailable:
            return flags is not None and not flags[0]
        return flags is None

    def offer_read_back(self) -> bool:
        """Offer the read-back tool from now on: True when that changed the definitions."""
        if not self.held_back:
            return False
        self.held_back = set()
        self.definitions = self._definitions()
        return True

    def _definitions(self) -> list[dict]:
        return [self.tools[n].definition() for n in self.names if n in self.tools and n not in self.held_back]
