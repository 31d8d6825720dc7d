"""Placeholder: being written."""
from django.http import HttpResponse


def home(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def run_list(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)
