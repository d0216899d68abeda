"""The engine: carries out a run. ``session`` owns a run directory from start to truthful end;
``runner`` runs passes in this process (closed loop through ``limiter``, or open loop), and
``fleet`` + ``worker`` (+ ``messages``) run them over worker processes, each with its ``share``;
``resume`` reads what an interrupted run has; ``collector`` and ``monitor`` keep the client
honest; ``sweep`` runs one session per load level."""
