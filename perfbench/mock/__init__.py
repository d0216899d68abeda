"""The mock agent server and its simulated model: ``profile`` (YAML profiles in mocks/),
``simulator`` (a provider-neutral turn in, a reply with due times out), ``openai_api``,
``responses_api`` and ``anthropic_api`` (the wire formats, pure), ``limiter`` (rate limits),
``service`` (sans-I/O: routing, limits, faults; a ``SendPlan`` of what to send when) and
``server`` (aiohttp on loopback). The in-process mock target (``targets.mock``) asks the same
simulator."""
