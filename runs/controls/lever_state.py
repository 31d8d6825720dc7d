"""What the levers' callers show of a run: who asked for a pause or a stop, and the notes that wait."""
from runs.models import OperatorMessage, Run


def run_lever_state(run: Run) -> dict:
    return {
        "pause_requested": run.pause_requested,
        "paused_by": run.paused_by_name or None,
        "paused_at": run.paused_at.isoformat() if run.paused_at else None,
        "stop_requested_by": run.stop_requested_by_name or None,
        "notes_waiting": OperatorMessage.objects.filter(run=run, step=None).count(),
    }


def operator_note_data(note: OperatorMessage) -> dict:
    return {
        "id": note.pk,
        "text": note.text,
        "author": note.author_name,
        "created_at": note.created_at.isoformat() if note.created_at else None,
        "step": note.step.index if note.step_id else None,
    }
