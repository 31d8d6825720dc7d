"""The model calls: sending a run's chat completion to its models in order until one answers
(completions.py), where requests go and the clients that send them (clients.py), what a model
server's answer may make a worker hold (limits.py), a streamed answer put back together (stream.py)
and an answer read into text we can store and send back (answers.py)."""
