"""A run's lifecycle around the loop: agents, launching, cancelling, forks and re-runs,
archiving and pruning, the run list (history) and exports."""
