"""What the run history's text search reads besides the task: one document per ended run."""
from django.db import models

from runs.models.core import Run


class RunSearchText(models.Model):
    """An ended run's answer and the start of each tool result, written when the run ends
    (runs/lifecycle/run_search.py). Indexed for substring search: a trigram FTS5 table kept in
    step by triggers on SQLite, a pg_trgm GIN index on PostgreSQL (migration 0026)."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="search_text")
    text = models.TextField()

    def __str__(self) -> str:
        return f"search text of run {self.run_id}"
