"""Running the engine core in Spark: the operator path's processor, the stateless and streamed
paths' runner, and what they share (one engine factory, input values, output encoding, metrics
rows, dead letters). A Python worker imports only the modules of the path it runs."""
