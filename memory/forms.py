"""The memories page's search and a person's correction of a fact."""
from django import forms

from memory.limits import TEXT_MAX, TEXT_MIN

ANY = ""  # the customer choice that filters nothing
SCOPE_PREFIX = "c:"  # "c:acme" is acme's facts, "c:" the facts of runs without a customer


class MemorySearchForm(forms.Form):
    q = forms.CharField(
        label="Search", required=False, max_length=200,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "words of a fact"}),
        help_text="Facts holding any of the words, best match first: the search the agent's search_memory tool does.",
    )
    customer = forms.ChoiceField(label="Customer", required=False)
    # The run page's link: the facts one run saved or read.
    run = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, customers: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["customer"].choices = [(ANY, "Any customer")] + [
            (SCOPE_PREFIX + name, name or "(no customer)") for name in customers
        ]

    def scope(self) -> str | None:
        """The chosen customer ("" for runs without one), or None for any."""
        value = self.cleaned_data.get("customer") or ANY
        return value.removeprefix(SCOPE_PREFIX) if value.startswith(SCOPE_PREFIX) else None


class MemoryEditForm(forms.Form):
    text = forms.CharField(
        label="Fact", min_length=TEXT_MIN, max_length=TEXT_MAX, strip=True,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=f"{TEXT_MIN} to {TEXT_MAX} characters. Later runs of this agent for this customer find it by its words.",
    )
