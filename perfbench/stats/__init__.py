"""Numbers: pure functions over samples and summaries. Nothing here reads a file, opens a
socket or imports the engine, targets or CLI (``tests/test_architecture.py`` holds it to that),
with one edge: ``cost.load_pricer`` reads the dated price override file it is given.

``histogram`` → ``summary`` (per run / case / language, across runs) → ``compare`` → ``gate``
(+ ``thresholds``); ``knee`` (sweeps), ``headroom`` (the calibrated ceiling), ``advice``
(warnings), ``cost`` and ``tokens``."""
