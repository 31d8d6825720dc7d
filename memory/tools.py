"""The memory's tools for the model: save a fact (destructive by default, so a person approves
it first) and search the facts saved for the run's agent and customer."""
from memory.services import MemoryRefused, memory_recall, memory_save
from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler


def _fact(memory) -> dict:
    return {"memory_id": memory.pk, "text": memory.text, "saved_at": memory.created_at.isoformat()}


@python_handler("save_memory")
def save_memory(args, ctx):
    try:
        saved = memory_save(run_id=ctx.run_id, customer=ctx.customer, text=args["text"],
                            idempotency_key=ctx.idempotency_key)
    except MemoryRefused as refused:
        raise ToolError(str(refused)) from None
    return {**_fact(saved.memory), "saved": saved.created}


# Read-only for the loop: what it writes (which runs read which facts) is a record for people,
# harmless if a call is ever run twice.
@python_handler("search_memory", read_only=True)
def search_memory(args, ctx):
    found = memory_recall(run_id=ctx.run_id, customer=ctx.customer, query=args["query"], call_key=ctx.idempotency_key)
    return {"facts": [_fact(memory) for memory in found]}
