"""Supervision: how a destructive call reaches a person and what people decide. The gate the
loop calls (gate.py: request, policy, closing), routes (who decides: policy, rules, grants,
safeguards), checks, people's decisions (decide.py, bulk_decisions.py), rules and their admin and
preview, grants, escalation, levers, identifier provenance and the queue's reads."""
