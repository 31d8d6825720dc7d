"""Supervision: how a destructive call reaches a person and what people decide. approvals/ (the
gate the loop calls, people's decisions one at a time or in bulk, grants, quorums, escalation and
expiry warnings), rules/ (approval rules, who decides a call, rules in shadow, backtests), queue/
(the queue's cards and what they offer), evidence/ (what the model had read, where each argument
value came from, twins, state checks), chat/ (deciding from a chat channel) and quality/ (how
people decide: the figures and the nudge against rubber stamps). A run's levers and budgets are
not supervision of a call: they are in runs/controls/."""
