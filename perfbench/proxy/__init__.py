"""The recording model proxy: how perfbench sees inside an agent it did not write.

An agent under test (a ``cmd:`` target's program) is pointed at a per-task route of this
proxy, ``http://127.0.0.1:PORT/t/<token>/v1``, as its OpenAI and Anthropic base URL. The
proxy forwards every model call to the upstream (the embedded mock, a provider, any
``--base-url``), streams the answer back as it arrives, and times the call onto the task the
token belongs to, with the same code perfbench's own clients use (``apis.openai_chat`` and
friends): a model call of an agent is a step like any other, its TTFT defined as everywhere.

- ``routes``: tokens → the task each one records into; a request without an open token is
  refused, and concurrent tasks never mix.
- ``upstream``: where each API family's calls go, with which key (never the agent's).
- ``forward``: one call, forwarded and timed; the answer's bytes go to the agent before
  perfbench parses them.
- ``server``: the aiohttp server on loopback.

Keys: the agent gets its task's token as its API key; the upstream key is added by the
proxy and is written nowhere."""
