"""``-t mock+http[:profile]``: the mock agent server in a child process on an ephemeral
loopback port, measured through the real OpenAI-compatible client and the agent loop, so the
default run exercises the whole HTTP path. The server is stopped when the run ends. It speaks
every model API the loop does: Chat Completions unless ``api`` names another client
(``--api responses``, ``completions``, ``messages``)."""

from __future__ import annotations

import subprocess
from typing import Self

import anyio

from perfbench.apis.chat import ChatApi, check_suite
from perfbench.apis.openai_chat import OpenAIChat
from perfbench.apis.retry import RetryPolicy
from perfbench.errors import TargetError
from perfbench.sample import Sample
from perfbench.suite import Suite
from perfbench.targets import Target
from perfbench.targets.agent_loop import ModelAgent
from perfbench.task import Task


class MockHttp(Target):
    def __init__(
        self,
        profile: str,
        *,
        seed: int = 0,
        concurrency: int = 1,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        check_tokens: bool = False,
        model: str | None = None,
        url: str | None = None,
        api: ChatApi | None = None,
    ) -> None:
        self.profile, self.seed = profile, seed
        self.model = model or "mock"
        self.api = api or OpenAIChat(self.model)
        self.concurrency, self.stream, self.retry = concurrency, stream, retry
        self.check_tokens = check_tokens
        self._name = f"mock+http:{profile}" + (f"@{model}" if model else "")
        from perfbench.mock.profile import load_profile

        loaded = load_profile(profile)
        # The server answers "mock" with its first simulated model, priced as that model says.
        self.price_ref = loaded.model(model)[1].prices_as
        self.tool_latency_scale = loaded.tool_latency_scale
        self.simulated = True
        self._process: subprocess.Popen[str] | None = None
        self._agent: ModelAgent | None = None
        # Given: a server started elsewhere (a worker process uses its parent's); else spawned.
        self.server_url = url
        self._owns_server = url is None

    def check(self, suite: Suite) -> None:
        check_suite(self.api, suite)  # as ModelAgent.check: the agent is made later

    @property
    def name(self) -> str:
        return self._name

    async def __aenter__(self) -> Self:
        if self._owns_server:
            self.server_url = await anyio.to_thread.run_sync(self._spawn)
        assert self.server_url is not None
        self._agent = ModelAgent(
            self.api,
            self.server_url + "/v1",
            name=self._name,
            stream=self.stream,
            retry=self.retry,
            concurrency=self.concurrency,
            seed_headers=True,
            check_tokens=self.check_tokens,
            estimates=False,  # the mock reports usage, streamed or not
            tool_latency_scale=self.tool_latency_scale,
        )
        self._agent.prepare()
        return self

    async def aclose(self) -> None:
        if self._agent is not None:
            await self._agent.aclose()
        if self._owns_server:
            await anyio.to_thread.run_sync(self._stop)

    async def run(self, task: Task) -> Sample:
        if self._agent is None:
            raise TargetError("mock+http target used outside its context (server not started)")
        return await self._agent.run(task)

    def _spawn(self) -> str:
        from perfbench.mock.server import command

        cmd = command(self.profile, "--seed", str(self.seed), "--port", "0", "--until-stdin-closes")
        # A session of its own: a Ctrl-C in the terminal stops the run, which then stops the
        # server, rather than killing the server under tasks still in flight. Its stdin is a
        # pipe only this process holds: if it dies, even by SIGKILL, the server sees the pipe
        # close and stops too, rather than serving on, orphaned.
        self._process = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self._process.stdout is not None and self._process.stderr is not None
        url = self._process.stdout.readline().strip()
        if not url.startswith("http://"):
            self._process.wait(5)
            problem = self._process.stderr.read().strip() or "it exited without a word"
            raise TargetError(f"the mock server did not start: {problem}")
        return url

    def _stop(self) -> None:
        process = self._process
        if process is None:
            return
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        self._process = None
