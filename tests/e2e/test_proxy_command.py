"""`perfbench proxy`: the recording proxy on its own, for an agent started by hand. It prints the
route's base URL alone on stdout's first line and the variables for an agent on stderr; an
agent pointed there gets its answers; Ctrl-C stops it and counts the calls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers import perfbench

AGENT = Path(__file__).resolve().parent.parent / "fixtures" / "agents" / "urllib_agent.py"


def test_an_agent_started_by_hand_goes_through_the_proxy() -> None:
    with subprocess.Popen(perfbench("proxy"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proxy:  # fmt: skip
        try:
            assert proxy.stdout is not None and proxy.stderr is not None
            base = proxy.stdout.readline().strip()
            assert base.startswith("http://127.0.0.1:") and "/t/" in base
            token = base.rsplit("/", 1)[1]
            env = {**os.environ, "OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": token}
            agent = subprocess.run([sys.executable, str(AGENT)], input="hello", env=env,
                                   capture_output=True, text=True, timeout=60)  # fmt: skip
            assert agent.returncode == 0 and agent.stdout.strip(), agent.stderr
            wrong = {**env, "OPENAI_BASE_URL": base.rsplit("/", 1)[0] + "/" + "0" * 32 + "/v1"}
            refused = subprocess.run([sys.executable, str(AGENT)], input="hello", env=wrong,
                                     capture_output=True, text=True, timeout=60)  # fmt: skip
            assert refused.returncode != 0 and "HTTP 401" in refused.stderr
        finally:
            proxy.send_signal(signal.SIGINT)
            _, said = proxy.communicate(timeout=20)
    assert proxy.returncode == 0, said
    assert f"export OPENAI_BASE_URL={base}/v1" in said
    assert "perfbench proxy: 1 model call, 0 failed." in said
