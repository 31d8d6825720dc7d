"""Fields and validators any resource's serializers share: names that are looked up, choices that
are named schema components, no text the database cannot store, a service's messages as a 400, and
the project of what a body creates, with the people and things it may name in it."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings
from rest_framework.validators import UniqueValidator

from hosting.text import storable_text
from projects.access import scoped, visible_projects
from projects.choices import people_of, project_default, project_problem
from projects.models import Project


class StorableUniqueValidator(UniqueValidator):
    # DRF runs every validator of a field even after one failed: without this, text with a NUL
    # would reach the uniqueness query (and PostgreSQL) next to the "Null characters" error.
    def __call__(self, value, serializer_field):
        if isinstance(value, str) and not storable_text(value):
            return
        super().__call__(value, serializer_field)


class NameRelatedField(serializers.SlugRelatedField):
    """An object given by its unique name; text that cannot be stored is never looked up."""

    def to_internal_value(self, data):
        if isinstance(data, str) and not storable_text(data):
            self.fail("does_not_exist", slug_name=self.slug_field, value="(unstorable text)")
        return super().to_internal_value(data)


_CHOICE_FIELDS: dict[str, type[serializers.ChoiceField]] = {}


def choice(choices, component: str, **kwargs) -> serializers.ChoiceField:
    """A ChoiceField whose enum is the named schema component: the same choices under several
    field names (first and later tool choice), or several choice sets under one field name
    (status of runs, calls and approvals), would otherwise leave drf-spectacular guessing names."""
    if component not in _CHOICE_FIELDS:
        values = [value for value, _ in choices]
        schema = {"type": "string", "enum": values}
        if kwargs.get("allow_null"):
            schema = {"type": "string", "enum": [*values, None], "nullable": True}

        # One class per component (the schema's identity of it); a class, not an annotated
        # instance, because serializers deep-copy their fields, which rebuilds them.
        @extend_schema_field(schema, component_name=component)
        class NamedChoiceField(serializers.ChoiceField):
            pass

        _CHOICE_FIELDS[component] = NamedChoiceField
    return _CHOICE_FIELDS[component](choices=choices, **kwargs)


def service_errors(errors: dict[str, list[str]]) -> serializers.ValidationError:
    """A service's messages by field as DRF's 400 ("__all__" as DRF's non-field key)."""
    key = api_settings.NON_FIELD_ERRORS_KEY
    return serializers.ValidationError({key if name == "__all__" else name: messages for name, messages in errors.items()})


def project_field() -> serializers.SlugRelatedField:
    return serializers.SlugRelatedField(
        slug_field="slug", queryset=Project.objects.all(), required=False,
        help_text="The project's slug, given when it is created (it does not move); omitted: your only project "
        "where you may add it, else Default.",
    )


def project_chosen(serializer, attrs: dict, perm: str) -> Project:
    """The project of the thing `serializer` creates or changes, taken out of `attrs`: on a
    change it stays its own; on a creation the one named, or the person's default, if they may
    add it there (projects/choices.py); else a 400 in words."""
    named = attrs.pop("project", None)
    if serializer.instance is not None:
        if named is not None and named.pk != serializer.instance.project_id:
            raise serializers.ValidationError({"project": ["A project is chosen when this is created; it does not move."]})
        return serializer.instance.project
    user = serializer.context["request"].user
    project = named or project_default(user, perm)
    problem = project_problem(user, perm, project)
    if problem:
        raise serializers.ValidationError({"project": [problem]})
    return project


def in_project(thing, project: Project, what: str) -> None:
    """A 400 unless `thing` (an agent a rule or budget names) is of `project`."""
    if thing is not None and thing.project_id != project.pk:
        raise serializers.ValidationError({what: [f"{thing} is not of the project {project.name}."]})


def person_in_project(serializer, attrs: dict, name: str, project: Project) -> None:
    """A 400 unless the person `attrs` names in the field `name` (a rule's launcher, a budget's
    person) is of `project`, in the words of a username that does not exist: another team's
    people are not told apart from no one. The person a thing names already may stay."""
    person = attrs.get(name)
    if person is None or (serializer.instance is not None and getattr(serializer.instance, f"{name}_id") == person.pk):
        return
    if not people_of({project.pk}).filter(pk=person.pk).exists():
        field = serializer.fields[name]
        message = field.error_messages["does_not_exist"].format(slug_name=field.slug_field, value=person.get_username())
        raise serializers.ValidationError({name: [message]})


def people_scoped(serializer, name: str) -> None:
    """Cut a person field's choices to the people of the caller's projects (and the one the
    thing names already): another team's username is not found, as one that does not exist,
    whatever else the body gets wrong. Which project's people exactly: person_in_project."""
    request = serializer.context.get("request")
    if request is None:
        return
    field = serializer.fields[name]
    people = people_of(visible_projects(request.user), field.queryset)
    current = getattr(serializer.instance, f"{name}_id", None)
    field.queryset = people | field.queryset.filter(pk=current) if current else people


def fields_scoped(serializer, *names: str, shared: bool = False) -> None:
    """Cut the named related fields' choices to the caller's projects: another project's agent
    (or tool) named in a body is not found, as at its URL."""
    request = serializer.context.get("request")
    if request is None:
        return
    for name in names:
        field = serializer.fields[name]
        field = getattr(field, "child_relation", field)
        field.queryset = scoped(field.queryset, request.user, shared=shared)
