"""The chat identities of a project's people, in its card on the projects page (the projects app
is below accounts, so the card asks accounts for them through this tag)."""
from django import template

from accounts.chat_identities import chat_identities_of
from accounts.forms import ChatIdentityForm

register = template.Library()


@register.inclusion_tag("accounts/_chat_identities.html", takes_context=True)
def chat_identities(context, row):
    project = row["project"]
    # Nobody maps their own account (a mapping is someone else's word): not offered either.
    user = getattr(context.get("request"), "user", None)
    me = user.get_username() if user is not None else None
    people = [m["name"] for m in row["members"] if m["name"] != me]
    return {
        "project": project, "identities": chat_identities_of(project), "answer_tag": row["answer_tag"],
        "form": ChatIdentityForm(people=people, auto_id=f"id_{project.slug}_chat_%s"),
        "csrf_token": context.get("csrf_token"),
    }
