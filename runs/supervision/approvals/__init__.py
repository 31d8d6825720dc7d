"""Deciding one call: the gate the loop asks and that closes what is left when a run ends
(gate.py), a person's decision (decide.py) after its checks (checks.py), several at once
(bulk_decisions.py), grants for the rest of a run (grants.py), quorums of several people
(quorum.py), and the e-mails and webhooks of a call that waits too long (escalation.py) or will
soon expire (expiry_warnings.py)."""
