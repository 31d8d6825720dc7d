// The answer a model is writing, shown while it streams (see runs/engine/streaming.py).
