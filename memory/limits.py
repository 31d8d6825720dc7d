"""The memory's settings, each with its default: an installation sets them in its settings module."""
from django.conf import settings


def max_facts() -> int:
    """Facts one scope (an agent and one customer) may hold; a save beyond it is refused."""
    return getattr(settings, "MEMORY_MAX_FACTS", 500)


def search_limit() -> int:
    """Facts one search_memory call returns, best first."""
    return getattr(settings, "MEMORY_SEARCH_LIMIT", 5)


TEXT_MIN, TEXT_MAX = 3, 1000  # characters of a fact, as the save_memory tool's schema has them
