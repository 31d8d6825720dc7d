"""Writing and reading a run's rows: write transactions and lost connections (db.py), the loop's
fast INSERTs (inserts.py), every write of a driver with its timeline event (records.py), timeline
events stored and then published (events.py), plain-data views of runs, steps and calls
(snapshots.py), and text the database cannot store (text.py)."""
