"""Placeholder: being written."""
from django.http import HttpResponse


def agent_list(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def agent_create(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def agent_detail(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def agent_edit(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)
