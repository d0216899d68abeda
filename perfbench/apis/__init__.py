"""The model APIs' wire formats, one layer below both ``targets/`` and ``proxy/``: what a
request looks like and how its reply is read, timed token by token, for each API family
(``families``: chat, responses, completions, messages), with the parts they share (``chat``:
the ``ChatApi`` protocol and its types; ``sse``: the event-stream parser; ``retry``: what a
refusal asks; ``usage``: what a reply says about tokens and cost) and the proxy's recording
format (``recording``), which the mock replays.

The built-in agent loop (``targets.agent_loop``) sends with these; the proxy
(``proxy.forward``) reads an agent's calls with the very same code, so a model call's TTFT
means one thing whoever made it. Nothing here imports a target, the proxy or the mock.
"""
