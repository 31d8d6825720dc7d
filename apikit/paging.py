"""Pages of a list the view counts itself (runs, pending approvals): the `page` query parameter
read and checked, and the links to the next and previous pages."""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError

PAGE_PARAMETER = OpenApiParameter("page", OpenApiTypes.INT, OpenApiParameter.QUERY, description="1-based page number.")


def page_number(request) -> int:
    raw = request.query_params.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= 1_000_000:
        raise ValidationError({"page": ["A page number from 1 to 1000000."]})
    return int(raw)


def page_url(request, number: int | None) -> str | None:
    if number is None:
        return None
    query = request.query_params.copy()
    query["page"] = str(number)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
