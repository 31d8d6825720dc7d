"""Approval rules: their conditions as plain data and which rule matches a call (conditions.py),
creating and changing them with a version each time (changes.py), the rule pages' reads and the
audit trail (history.py), who decides a call from the policy, the rules, grants and safeguards
(who_decides.py) and the facts it decides from (route_facts.py), rules in shadow (shadow.py) and
their report (shadow_report.py), and rules tried on past calls: the editor's preview (preview.py),
the backtest against people's decisions (backtest.py), saving over people's rejections
(saved_over.py)."""
