"""The tool page's settings in sentences: what would block a critical tool's calls."""
from django import template

from toolsapp.two_people import critical_warning

register = template.Library()


@register.simple_tag
def tool_critical_warning(tool) -> str:
    return critical_warning(critical=tool.critical, project_id=tool.project_id,
                            project_name=tool.project.name if tool.project_id else "")
