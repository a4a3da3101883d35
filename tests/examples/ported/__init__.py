"""Six broadcast-state programs as PyFlink code writes them (objects under
``Types.PICKLED_BYTE_ARRAY()``, plain classes, enums) and the Flink docs' count-with-timeout
example; only the imports changed (issue 25)."""
