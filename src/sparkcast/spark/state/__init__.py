"""Where sparkcast's state and files live: Spark's state store behind the engine
(``backend.py``), the checkpoint's files (``checkpoint.py``) and its layout record
(``compatibility.py``), the streamed path's broadcast snapshots, content-addressed blobs, the
commit log of ``foreachBatch`` writes, all reached through ``storage.py``."""
