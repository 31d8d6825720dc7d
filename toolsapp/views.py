"""Placeholder: being written."""
from django.http import HttpResponse


def tool_list(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def tool_create(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def tool_detail(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def tool_edit(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)
