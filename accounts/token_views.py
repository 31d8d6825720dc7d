"""The tokens page (/account/tokens/): a person makes an API token, sees its key once (in the
answer to the form that made it, never again), lists their tokens and revokes one."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts.forms import ApiTokenForm
from accounts.services import api_token_create, api_tokens_revoke


@never_cache  # the answer that shows a new key must not be kept by the browser or a proxy
@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request):
    form = ApiTokenForm(request.POST or None, user=request.user)
    created = None
    if form.is_valid():
        token, key = api_token_create(user=request.user, **form.cleaned_data)
        created = {"token": token, "key": key}
        form = ApiTokenForm(user=request.user)
    tokens = request.user.api_tokens.select_related("project")
    return render(request, "accounts/api_tokens.html", {"form": form, "created": created, "tokens": tokens},
                  status=400 if form.errors else 200)


@login_required
@require_http_methods(["GET", "POST"])
def api_token_revoke(request, pk: int):
    """GET asks to confirm; POST revokes. Another person's token is a 404, as if it did not exist."""
    token = get_object_or_404(request.user.api_tokens.select_related("project"), pk=pk)
    if request.method == "GET":
        return render(request, "accounts/api_token_revoke.html", {"token": token})
    if api_tokens_revoke(tokens=request.user.api_tokens.filter(pk=token.pk)):
        messages.success(request, f"Token {token.name or token.prefix} is revoked: it no longer opens the API.")
    else:
        messages.info(request, f"Token {token.name or token.prefix} was already revoked.")
    return redirect("api_tokens")
