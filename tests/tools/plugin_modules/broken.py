"""A tool module with a bug at import time."""
raise RuntimeError("the tools' settings file is missing")
