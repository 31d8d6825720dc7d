"""A second package's `word_count`: the name the example package already registers."""
from toolsapp.executors.python import python_handler


@python_handler("word_count")
def word_count(args, ctx):
    return {"words": 0}
