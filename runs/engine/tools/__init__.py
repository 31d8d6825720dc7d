"""Running the tools a model calls: the tools one run may call (run_tools.py), validating and
executing a call under a timeout (execution.py) in threads that bound the hung ones (threads.py),
recording each call as it runs (call_runner.py), a call refused for a read it needs first
(prior_reads.py), the note on a call an operator edited (edit_note.py), and what an experiment's
call that would change something gets instead of running (simulation.py)."""
