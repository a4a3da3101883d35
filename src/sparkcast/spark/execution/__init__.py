"""Running the engine core in Spark: the one subtask runner every engine and shape calls
(``subtask.py``), the operator engine's processor (``processor.py``, light for the driver's
process that only declares its state; its work in ``operator_runner.py``), the micro-batch
engine's work per micro-batch and its runners (in place and bound to a snapshot, by subtask
over the keyed store), a static broadcast side applied once (``static_side.py``), the
processing-time clock's no-op operator, and what they share (one engine factory, where rows go
(``routing.py``: a key's subtask, one row per subtask, a subtask's shuffle partition), the order
a subtask runs them in (``ordering.py``: source order), input values, output encoding, metrics
rows, dead letters), and the names of the driver's jobs in Spark's UI (``phases.py``). A Python
worker imports only the modules of what it runs."""
