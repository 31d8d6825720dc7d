"""The API reference (/api/docs/): Swagger UI over /api/schema/, for signed-in people. Its files
are vendored (static/vendor/swagger-ui-*), so the page loads nothing from another host."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import render


@login_required
def api_reference(request):
    return render(request, "api/reference.html")
