"""Placeholder: being written."""
from django.http import HttpResponse


def run_launch(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def run_detail(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def run_cancel_view(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def run_rerun(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)


def call_result(request, *args, **kwargs):
    return HttpResponse("not yet", status=501)
