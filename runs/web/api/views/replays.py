"""Replay one step's request against up to five models, as the run page's "Replay this request"
does: answers only (no tool is run, nothing is added to the run), but spending, so the budgets
covering the run count it and refuse it when reached, and one person has a few in flight at most."""
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, Throttled, ValidationError
from rest_framework.response import Response

from apikit.errors import Conflict
from apikit.schema import ERROR, errors
from apikit.views import ApiView
from runs.lifecycle.replay import ReplayBusy, ReplayOverBudget, ReplayRefused, models_checked, step_replay
from runs.models import Run, Step
from runs.roles import PERM_LAUNCH, PERM_VIEW
from runs.web.api.serializers.replays import StepReplayRequestSerializer, StepReplaySerializer


class StepReplayView(ApiView):
    required_perms = {"POST": (PERM_VIEW, PERM_LAUNCH)}  # it spends tokens, as a launch does

    @extend_schema(
        operation_id="runs_step_replay", summary="Send a step's request again to other models and read their answers",
        description=(
            "Each model is sent the request the step sent (the conversation up to it, with the run's tools and "
            "settings), at once; the answers come back in the order asked. Tool calls they ask for are listed, "
            "never run, and nothing is added to the run. The replay is recorded (the run page lists it, with its "
            "tokens and cost, and the audit log has it) and the cost and tokens budgets covering the run count "
            "it: when one is reached the replay is refused (409) before any model is asked. One person may have "
            "REPLAYS_AT_ONCE replays in flight (429 beyond)."
        ),
        request=StepReplayRequestSerializer,
        responses={200: StepReplaySerializer, **errors(400, 404, 409),
                   429: OpenApiResponse(ERROR, description="You already have as many replays in flight as one person may.")},
        examples=[OpenApiExample("Two models", request_only=True, value={"models": ["gpt-4.1-mini", "o4-mini"]})],
    )
    def post(self, request, pk: int, index: int):
        run = Run.objects.select_related("agent").filter(pk=pk).first()
        if run is None:
            raise NotFound("No such run.")
        if not Step.objects.filter(run=run, index=index).exists():
            raise NotFound("No such step of this run.")
        body = StepReplayRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            done = step_replay(run=run, index=index, models=models_checked(body.validated_data["models"]),
                               user=request.user)
        except ReplayOverBudget as exc:
            raise Conflict(str(exc))
        except ReplayBusy as exc:
            raise Throttled(detail=str(exc))
        except ReplayRefused as exc:
            raise ValidationError(str(exc))
        return Response(StepReplaySerializer(done).data)
