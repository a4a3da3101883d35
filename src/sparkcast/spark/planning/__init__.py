"""From a ``process(...)`` call to a checked ``RuntimePlan`` on one engine, on the driver: the
planner, the inputs' tagging, the engine choice and its facts, the query around the one runner
by shape (the tagged frame Spark computes, ``frames.py``; the rest, ``shapes.py``: the only
modules after the planner that read the shape), ``explain()``, the checks against the session,
the initial state (bootstrap) and the capture of malformed input rows. A query runs a copy of
the plan; the workers get its frozen ``WorkerPlan``."""
