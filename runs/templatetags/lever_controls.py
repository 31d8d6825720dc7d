"""The run page's lever buttons, from the levers declared in runs/controls/levers.py."""
from django import template

from runs.controls.lever_declaration import GROUPS
from runs.controls.levers import DECLARED

register = template.Library()


@register.simple_tag
def lever_groups(run) -> list[dict]:
    """The run's lever groups in page order, each with its levers split by how the page lays them
    out: plain buttons in a row (their help under the row), levers that take a field (a form of
    their own), and levers that ask before they are sent (each alone, its help under it)."""
    groups = []
    for name, title in GROUPS:
        levers = [{"lever": lever, "hidden": lever.hidden_for(run),
                   "asked": bool(lever.button.asked_flag and getattr(run, lever.button.asked_flag))}
                  for lever in DECLARED if lever.button.group == name]
        groups.append({
            "name": name, "title": title,
            "row": [item for item in levers if not item["lever"].body and not item["lever"].button.confirm],
            "fields": [item for item in levers if item["lever"].body],
            "asking": [item for item in levers if item["lever"].button.confirm and not item["lever"].body],
        })
    return groups


@register.simple_tag
def lever_lines() -> dict:
    """The timeline's line for each lever's event ("Pause requested by"), for run_levers.js."""
    return {lever.name: lever.timeline for lever in DECLARED if lever.timeline}
