"""What a plan produces and where it goes: the tagged output frame for each execution path
(``operators.py``), the sinks of ``write_stream`` (``sinks.py``, the streamed path's
``streamed_writer.py``) and their files (``files.py``)."""
