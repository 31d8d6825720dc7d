"""Placeholder: being written."""
from django.http import HttpResponse


def metrics(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)
