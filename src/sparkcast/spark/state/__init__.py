"""Where sparkcast's state and files live: Spark's state store behind the operator engine
(``backend.py``; its state variables in ``variables.py``), the micro-batch engine's broadcast
snapshots (``snapshots.py``) and keyed stores (``keyed_store.py``, ``store_backend.py``), the
checkpoint's files (``checkpoint_files.py``) and its layout record (``compatibility.py``),
content-addressed blobs, the commit log of ``foreachBatch`` writes, all reached through
``storage.py``."""
