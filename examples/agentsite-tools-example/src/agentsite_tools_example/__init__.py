"""Example agentsite tools, registered when agentsite imports this module at start.

agentsite finds the module through the `agentsite.tools` entry point in pyproject.toml; a module
that is not installed as a package can be named in AGENTSITE_TOOL_MODULES instead. To use the
handler, add a Tool row of kind Python with handler `word_count` and allow it for an agent; to
use the verifier, choose `answer_gives_a_number` as the agent's verifier.
"""
import re

from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler
from toolsapp.verifiers import verifier

WORD = re.compile(r"\w+(?:['’-]\w+)*")


# read_only: it changes nothing anywhere, so the loop may run it before recording its step.
@python_handler("word_count", read_only=True)
def word_count(args, ctx):
    text = args.get("text")
    if not isinstance(text, str):
        raise ToolError("give the text to count as a string in 'text'")  # goes back to the model
    words = WORD.findall(text)
    return {"words": len(words), "characters": len(text), "unique_words": len({w.lower() for w in words})}


@verifier("answer_gives_a_number")
def answer_gives_a_number(*, run_id, answer, customer=""):
    """A count was asked for: an answer without any number is sent back to the model."""
    if re.search(r"\d", answer or ""):
        return True, ""
    return False, "the answer gives no number; say how many words the text has"
