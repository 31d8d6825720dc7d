"""A second `answer_gives_a_number` verifier: the name the example package already registers."""
from toolsapp.verifiers import verifier


@verifier("answer_gives_a_number")
def answer_gives_a_number(*, run_id, answer, customer=""):
    return True, ""
