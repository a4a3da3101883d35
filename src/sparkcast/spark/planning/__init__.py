"""From a ``process(...)`` call to a checked ``RuntimePlan`` on one execution path, on the
driver: the planner, the inputs' tagging, the path choice, the checks against the session, the
initial state (bootstrap) and the capture of malformed input rows."""
