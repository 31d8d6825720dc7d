"""The agent engine: the loop and what it alone needs (deciding an answer, guards and limits,
records, running tools, leases, the conversation, summaries, events and dispatch, the model
client). It imports nothing of supervision or observability: it asks a registered gate about a
call that may not simply run, and tells registered listeners what it committed (hooks.py)."""
