"""Datasets, cases and experiments in the REST API (/api/v1/datasets/, /api/v1/experiments/):
serializers.py reads and renders them, views.py calls evals' services, evals/api_urls.py routes them."""
