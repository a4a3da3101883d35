"""From a ``process(...)`` call to a checked ``RuntimePlan`` on one engine, on the driver: the
planner, the inputs' tagging, the engine choice and its facts, the per-batch work of a
``foreachBatch`` query by shape (``shapes.py``), ``explain()``, the checks against the session,
the initial state (bootstrap) and the capture of malformed input rows. A query runs a copy of
the plan; the workers get its frozen ``WorkerPlan``."""
