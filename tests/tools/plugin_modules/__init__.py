"""Tool modules that go wrong, for test_plugins.py: each is imported only by a test that names it."""
