"""Fitting each request of one run's driver into its context budget (see window.py): the
conversation's window, the cost of the tool definitions sent, the read-back tool offered from the
first request that summarised a result, and the estimate kept in line with what the provider counts."""
from runs.engine.context import window as context
from runs.engine.tools.run_tools import RunTools
from runs.models import Step


class RequestFit:
    def __init__(self, run_id: int, budget: int, toolbox: RunTools, *, resumed: bool, read_back: bool):
        self.toolbox = toolbox
        self.window = context.Window(budget, read_back=read_back)
        self.fitted: context.Fitted | None = None  # what the last request carried
        self._cost: tuple[int, int] = (0, 0)  # (id of the definitions list, its tokens)
        if budget and resumed:  # what the last request before this driver summarised stays so
            last = Step.objects.filter(run_id=run_id).order_by("-index").values_list("compacted_calls", flat=True)[:1]
            self.window.resumed_ids.update(*last)

    @property
    def budget(self) -> int:
        return self.window.budget

    def fit(self, history: list[dict], preamble: list[dict], effort: context.Effort = context.NORMAL,
            refused_at: int | None = None) -> context.Fitted:
        """The request's messages within the budget (raises context.ContextFull), kept as `fitted`."""
        fitted = self.window.fit(history, preamble, self.definitions_cost(), effort, refused_at)
        if fitted.compacted and self.toolbox.offer_read_back():  # its schema is part of the request now
            fitted = self.window.fit(history, preamble, self.definitions_cost(), effort)
        self.fitted = fitted
        return fitted

    def refit(self, history: list[dict], preamble: list[dict]) -> tuple[list[dict], list[dict]]:
        """(messages, tool definitions) of the request again, after a provider refused it for its
        length: summarised harder, below what was refused (raises context.ContextFull)."""
        fitted = self.fit(history, preamble, context.HARDER, refused_at=self.fitted.tokens)
        return fitted.messages, self.toolbox.definitions

    def observe(self, reply) -> None:
        """What the provider counted of the request it answered (unless the usage is our estimate)."""
        if self.budget and not reply.usage_estimated and reply.tokens_in:
            self.window.observe(self.fitted.tokens, reply.tokens_in)

    def definitions_cost(self) -> int:
        definitions = self.toolbox.definitions  # a new list whenever the tools change
        if self._cost[0] != id(definitions):
            self._cost = (id(definitions), context.definitions_tokens(definitions))
        return self._cost[1]

    def step_fields(self) -> dict:
        """What the step records of the request it answers."""
        return {"context_tokens": self.fitted.tokens, "tool_definition_tokens": self.definitions_cost(),
                "compacted_calls": self.fitted.compacted}
