"""Presentation: stored runs in, text and pictures out. It reads meta.json and summary.json
only (never samples.jsonl, never the engine): ``format`` (one set of formatters), ``console``
(rich tables), ``compare_md`` and ``release_md`` (Markdown), ``sweep_md``, ``junit``, ``charts``
(matplotlib Agg) are pure; ``release`` is the edge that reads runs and writes a report folder."""
