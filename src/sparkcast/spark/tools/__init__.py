"""State tools over a job's checkpoint (Flink's State Processor API): ``read_state`` and
``rescale``."""
