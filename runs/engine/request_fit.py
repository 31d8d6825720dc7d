"""Fitting each request of one run's driver into its context budget (see context.py): the
conversation's window, the cost of the tool definitions sent, and the read-back tool offered
from the first request that summarised a result."""
from runs.engine import context
from runs.engine.run_tools import RunTools
from runs.models import Step


class RequestFit:
    def __init__(self, run_id: int, budget: int, toolbox: RunTools, *, resumed: bool):
        self.toolbox = toolbox
        self.window = context.Window(budget)
        self.fitted: context.Fitted | None = None  # what the last request carried
        self._cost: tuple[int, int] = (0, 0)  # (id of the definitions list, its tokens)
        if budget and resumed:  # results summarised before this driver: not a new compaction again
            last = Step.objects.filter(run_id=run_id).order_by("-index").values_list("compacted_calls", flat=True)[:1]
            self.window.compacted_before.update(*last)

    @property
    def budget(self) -> int:
        return self.window.budget

    def fit(self, history: list[dict], preamble: list[dict], effort: context.Effort = context.NORMAL,
            refused_at: int | None = None) -> context.Fitted:
        """The request's messages within the budget (raises context.ContextFull), kept as `fitted`."""
        fitted = self.window.fit(history, preamble, self.definitions_cost(), effort, refused_at)
        if fitted.compacted and self.toolbox.offer_read_back():  # its schema is part of the request now
            fitted = self.window.fit(history, preamble, self.definitions_cost(), effort, refused_at)
        self.fitted = fitted
        return fitted

    def definitions_cost(self) -> int:
        definitions = self.toolbox.definitions  # a new list whenever the tools change
        if self._cost[0] != id(definitions):
            self._cost = (id(definitions), context.definitions_tokens(definitions))
        return self._cost[1]

    def step_fields(self) -> dict:
        """What the step records of the request it answers."""
        return {"context_tokens": self.fitted.tokens, "tool_definition_tokens": self.definitions_cost(),
                "compacted_calls": self.fitted.compacted}

    def newly_compacted(self) -> int:
        return self.window.newly_compacted(self.fitted)
