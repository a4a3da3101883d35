"""From a ``process(...)`` call to a checked ``RuntimePlan`` on one engine, on the driver: the
planner, the inputs' tagging, the engine choice and its facts, ``explain()``, the checks against
the session, the initial state (bootstrap) and the capture of malformed input rows."""
