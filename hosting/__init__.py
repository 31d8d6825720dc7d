"""How the site runs on a machine, below every app: the databases and their engines (a pooled
PostgreSQL, a SQLite that waits for its lock), the read-replica router, the processes `manage.py
up` starts (the embedded Redis among them), settings read from the environment, the local
secret key, and the text and JSON the database and the parsers can hold (`text.py`). It imports nothing of the project; `agentsite` (settings, URLs, ASGI, Celery) wires
the apps together on top of it."""
