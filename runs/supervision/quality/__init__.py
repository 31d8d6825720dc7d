"""How people decide, measured: the Supervision page's figures (report.py) and the nudge against
rubber stamps that asks for a reason after a streak of quick approvals (nudges.py)."""
