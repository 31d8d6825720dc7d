"""The evidence a person decides a call with: what the model had just read and where each
argument value came from (sources.py, matched by match.py), identifiers the run was never shown
(provenance.py), twins on the same thing (twins.py), the tool's state check (state_checks.py), and
all of it in words for chat and e-mail (text.py)."""
