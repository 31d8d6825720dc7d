"""Observability: what the product counts and exports, from the committed rows. metrics/ (the
metrics page's reads, daily rollups, figures, budget alerts), prometheus/ (/metrics), tracing/
(OpenTelemetry spans). The rollups and the trace export listen to the engine's hooks."""
