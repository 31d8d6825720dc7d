"""Decisions from chat: the approval's message in the channel, posted and updated with the
outcome (messages.py), and the Approve / Reject clicks that come back and decide (clicks.py)."""
