"""Placeholder: being written."""
from django.http import HttpResponse


def approval_queue(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def approval_queue_partial(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def approval_count(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def approval_decide_view(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)
