"""Expose llm-gym environments as `verifiers` 0.4 environments (its `verifiers.v1` stack): an API
model evaluated or trained with verifiers plays our envs and is scored by our envs' own `step`.
verifiers resolves three plugins by module name, and this module is all three under the id
`TASKSET_ID` ("llm-gym-verifiers", resolvable once this module is imported): `LLMGymTaskset` (one
task per task seed, as the TRL adapter's rows; the prompt is the env's opening conversation, the
rubric `env_reward` is our env's reward), `LLMGymEnv` (single-turn envs run as a plain rollout
graded by the rubric; multi-turn envs are played with our env as the user: each model message is
stepped as text, our env's reply is the next user message, the episode return is the reward) and
`LLMGymChatHarness` (a tool-less chat loop run in-process, its calls going through verifiers'
loopback interception server, which records them; no program, `uv` or sandbox). A reply cut off
by `max_tokens` (`finish_reason == "length"`) is stepped as truncated, as in an llm-gym rollout.

    import llm_gym.adapters.verifiers as llm_vf
    episodes = llm_vf.evaluate("llm/Math-v0", n=8, model="gpt-4.1-mini",
                               base_url="https://api.openai.com/v1", api_key_var="OPENAI_API_KEY")
    [e.traces[0].rewards["env_reward"].score for e in episodes]
"""

# verifiers and httpx are in .venv-adapters (make test-adapters), not in the .venv pyright checks
# against: their imports do not resolve there.
# pyright: reportMissingImports=false

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

try:
    import httpx
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.dialects.chat import message_to_wire
    from verifiers.v1.errors import MODEL_TRANSPORT_ERROR_EXIT_CODE
    from verifiers.v1.runtimes import ProgramResult, SubprocessConfig
except ImportError as exc:  # pragma: no cover - exercised only without the package
    raise ImportError(
        "llm_gym.adapters.verifiers needs the optional dependency `verifiers` 0.4 "
        f"({exc}); install it with: pip install 'verifiers>=0.4,<0.5'"
    ) from exc

from llm_gym.adapters._common import (
    float_metrics,
    make_gym_env,
    new_env_messages,
    observation_messages,
    run_async,
    task_seeds,
    text_to_action,
)

__all__ = [
    "TASKSET_ID",
    "LLMGymChatHarness",
    "LLMGymChatHarnessConfig",
    "LLMGymData",
    "LLMGymEnv",
    "LLMGymEnvConfig",
    "LLMGymTask",
    "LLMGymTaskset",
    "LLMGymTasksetConfig",
    "env_config",
    "evaluate",
    "load_environment",
]

TASKSET_ID = "llm-gym-verifiers"
"""The taskset / env / harness id verifiers resolves to this module."""
_MODULE_ALIAS = "llm_gym_verifiers"  # what verifiers imports for TASKSET_ID
_INFO_KEY = "llm_gym"  # trace.info entry holding our env's verdict

# verifiers resolves plugin ids by importing the top-level module of that name: make the id name
# this module, now (the class-level `AgentConfig` below already resolves the harness by id). A
# top-level `llm_gym_verifiers.py` that just imports this module (for `vf-eval llm-gym-verifiers`)
# is replaced by it in `sys.modules` this way, so it needs no re-exports.
sys.modules[_MODULE_ALIAS] = sys.modules[__name__]



# --- llm-gym side: rebuilding an episode, text in and out -------------------------------------


def _make_env(env_id: str, split: str, env_kwargs: dict[str, Any]) -> tuple[Any, int | None]:
    """A fresh unwrapped `TextEnv` for the id (one per episode: a TextEnv holds one episode) and
    the registered `max_episode_steps` that Gymnasium's `TimeLimit` would apply."""
    env = make_gym_env(env_id, split=split, **env_kwargs)
    text_env = env.unwrapped
    if getattr(text_env, "source", None) is None:
        raise TypeError(f"{env_id!r} is not an llm-gym TextEnv; register it through an llm-gym catalog")
    return text_env, (env.spec.max_episode_steps if env.spec is not None else None)




def _prompt_messages(text_env: Any, tokens: Any) -> list[dict[str, str]]:
    conversation: Callable[[], list[dict[str, Any]]] | None = getattr(text_env.current_env, "conversation", None)
    if callable(conversation):  # ProblemEnv: the exact messages, not a decode of them
        return [{"role": m["role"], "content": str(m["content"])} for m in conversation()]
    return observation_messages(text_env.tokenizer, tokens)






def _reply(trace: Any) -> tuple[str, bool]:
    """The trace's last model message (raw, unstripped) and whether it ended on its own (its
    call's `finish_reason` is not `length`). No reply at all reads as an empty message."""
    sampled = [node.message for node in trace.nodes if node.sampled]
    content = sampled[-1].content if sampled else ""
    text = content if isinstance(content, str) else "".join(
        getattr(part, "text", "") or "" for part in (content or [])
    )
    finish = trace.calls[-1].finish_reason if trace.calls else None
    return text, finish != "length"


# --- verifiers side: task, taskset, harness, env -------------------------------------------


class LLMGymData(vf.TaskData):
    """One task: what it takes to rebuild its episode (`gym.make(env_id, split=split,
    **env_kwargs).reset(seed=task_seed)`)."""

    env_id: str
    split: str = "train"
    task_seed: int
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    multi_turn: bool = False


class LLMGymTask(vf.Task[LLMGymData, vf.State, vf.TaskConfig]):
    """The rubric: one reward, `env_reward`, which is exactly our env's (the episode return for
    multi-turn envs), plus the env's metrics as `env/<name>`."""

    @vf.reward
    async def env_reward(self, trace: Any) -> float:
        verdict = trace.info.get(_INFO_KEY)
        if verdict is None:
            if self.data.multi_turn:  # another Env ran it: one reply is not the episode's return
                raise RuntimeError(
                    f"{self.data.env_id!r} is multi-turn: run its tasks in LLMGymEnv (leave env.id "
                    f"unset for the {TASKSET_ID!r} taskset), which plays the env's side"
                )
            verdict = await _grade_reply(self.data, trace)  # single-turn: grade the reply now
            trace.info[_INFO_KEY] = verdict
        trace.record_metrics({f"env/{k}": v for k, v in verdict["metrics"].items()})
        return float(verdict["reward"])


async def _grade_reply(data: LLMGymData, trace: Any) -> dict[str, Any]:
    text_env, _ = _make_env(data.env_id, data.split, data.env_kwargs)
    await text_env.areset(seed=data.task_seed)
    text, finished = _reply(trace)
    action = text_to_action(text_env.renderer, text, terminated=finished)
    _obs, reward, terminated, _truncated, info = await text_env.astep(np.asarray(action, dtype=np.int64))
    return {"reward": float(reward), "metrics": float_metrics(info["metrics"]), "steps": 1,
            "terminated": bool(terminated), "replies": [text]}


class LLMGymTasksetConfig(vf.TasksetConfig):
    """`--env.taskset.*`: which llm-gym env and which of its tasks."""

    id: str = TASKSET_ID
    env: str = ""
    """The registered llm-gym env id, e.g. `llm/Math-v0`."""
    n: int = Field(100, ge=0)
    """How many tasks (task seeds derived from `seed`)."""
    seed: int = 0
    split: str = "train"
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """The env's difficulty knobs."""


class LLMGymTaskset(vf.Taskset[LLMGymTask, LLMGymTasksetConfig]):
    """`n` tasks of one llm-gym env; each prompt is the env's opening conversation on its seed."""

    def load(self):
        config = self.config
        if not config.env:
            raise ValueError(
                f"the {TASKSET_ID!r} taskset needs an llm-gym env id: set taskset.env "
                "(e.g. env_config('llm/Math-v0'))"
            )
        text_env, _ = _make_env(config.env, config.split, config.env_kwargs)
        multi_turn = bool(text_env.source.card.multi_turn)
        for task_seed in task_seeds(config.seed, config.n):
            tokens, _info = text_env.reset(seed=task_seed)
            yield LLMGymTask(
                LLMGymData(
                    id=f"{config.env}#{task_seed}", name=f"{config.env}#{task_seed}",
                    prompt=_prompt_messages(text_env, tokens), env_id=config.env,
                    split=config.split, task_seed=task_seed, env_kwargs=dict(config.env_kwargs),
                    multi_turn=multi_turn,
                ),
                config.task,
            )


class LLMGymChatHarnessConfig(vf.HarnessConfig):
    id: str = TASKSET_ID
    request_timeout: float = Field(600.0, gt=0)
    """Seconds one chat-completions call may take."""


class LLMGymChatHarness(vf.Harness[LLMGymChatHarnessConfig]):
    """A tool-less chat loop run in-process: one chat-completions call per segment through the
    rollout's interception endpoint (verifiers records it on the trace and applies the run's
    model and sampling settings). Resumed segments replay the conversation so far."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data,
                     tool_interception_url=None) -> ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(m) for m in prompt or []]
        body = {"model": ctx.model, "messages": messages}
        try:
            async with httpx.AsyncClient(timeout=self.config.request_timeout) as http:
                response = await http.post(
                    f"{endpoint.rstrip('/')}/chat/completions", json=body,
                    headers={"Authorization": f"Bearer {secret}"},
                )
        except httpx.HTTPError as exc:
            return ProgramResult(MODEL_TRANSPORT_ERROR_EXIT_CODE, "", f"{type(exc).__name__}: {exc}")
        if response.status_code >= 400:
            return ProgramResult(1, "", f"chat completion failed: HTTP {response.status_code}: "
                                        f"{response.text[:500]}")
        return ProgramResult(0, "", "")


class LLMGymEnvConfig(vf.EnvConfig):
    """The env's one seat, `agent`: the model under evaluation, on the in-process chat harness."""

    agent: vf.AgentConfig = vf.AgentConfig(
        harness=LLMGymChatHarnessConfig(), runtime=SubprocessConfig(),
    )


class LLMGymEnv(vf.Env[LLMGymEnvConfig]):
    """One task → one episode. Single-turn: a plain rollout, graded by the task's rubric.
    Multi-turn: our env plays the user until its episode ends (or Gymnasium's registered
    `max_episode_steps`, or the agent's own limits, cut it short)."""

    async def run(self, task: LLMGymTask, agents: Any) -> None:
        if not task.data.multi_turn:
            await agents.agent.run(task)
            return
        data = task.data
        text_env, max_steps = _make_env(data.env_id, data.split, data.env_kwargs)
        await text_env.areset(seed=data.task_seed)
        total, steps, replies, terminated = 0.0, 0, [], False
        metrics: dict[str, float] = {}
        async with agents.agent.interaction(task) as interaction:
            segment = await interaction.turn()
            while not segment.terminated:
                text, finished = _reply(interaction.trace)
                replies.append(text)
                action = text_to_action(text_env.renderer, text, terminated=finished)
                obs, reward, terminated, truncated, info = await text_env.astep(
                    np.asarray(action, dtype=np.int64)
                )
                steps += 1
                total += float(reward)
                metrics = float_metrics(info.get("episode_metrics") or info["metrics"])
                if terminated or truncated or (max_steps is not None and steps >= max_steps):
                    break
                reply = "\n\n".join(m["content"] for m in new_env_messages(text_env.tokenizer, obs))
                segment = await interaction.turn(reply)
            interaction.trace.info[_INFO_KEY] = {
                "reward": total, "metrics": metrics, "steps": steps,
                "terminated": bool(terminated), "replies": replies,
            }


# --- entry points ------------------------------------------------------------------------------


def env_config(
    env_id: str, *, n: int = 100, seed: int = 0, split: str = "train",
    max_turns: int | None = None, **env_kwargs: Any,
) -> LLMGymEnvConfig:
    """The verifiers env config for `n` tasks of `env_id` (validated now: a bad id or knob raises
    here, not mid-run). `max_turns` caps the model turns of one episode (verifiers' agent cap)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int (how many tasks), got {n!r}")
    if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int)
                                  or max_turns < 1):
        raise ValueError(f"max_turns must be a positive int or None, got {max_turns!r}")
    _make_env(env_id, split, env_kwargs)
    agent = LLMGymEnvConfig.model_fields["agent"].default.model_copy(update={"max_turns": max_turns})
    return LLMGymEnvConfig(
        taskset=LLMGymTasksetConfig(env=env_id, n=n, seed=seed, split=split, env_kwargs=env_kwargs),
        agent=agent,
    )


def load_environment(env_id: str, **kwargs: Any) -> LLMGymEnv:
    """A `LLMGymEnv` for `env_id` (arguments as `env_config`); run it with verifiers'
    `env.serving()` / `env.run_slot(...)`, or use `evaluate`."""
    return LLMGymEnv(env_config(env_id, **kwargs))


def evaluate(
    env_id: str, *, model: str, base_url: str, api_key_var: str = "OPENAI_API_KEY",
    n: int = 8, seed: int = 0, split: str = "train", num_rollouts: int = 1,
    sampling: dict[str, Any] | None = None, max_turns: int | None = None,
    max_concurrent: int | None = 8, output_dir: str | Path = "outputs", **env_kwargs: Any,
) -> list[Any]:
    """Run verifiers' own eval (`verifiers.v1.cli.eval.runner.run_eval`, the code behind
    `vf-eval`) on `n` tasks of `env_id` against an OpenAI-compatible endpoint; return its
    `Episode`s (`episode.traces[0].rewards["env_reward"].score` is our env's reward). Nothing is
    pushed to a platform; traces are written under `output_dir`."""
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http(s) URL of an OpenAI-compatible API, got {base_url!r}")
    if isinstance(num_rollouts, bool) or not isinstance(num_rollouts, int) or num_rollouts < 1:
        raise ValueError(f"num_rollouts must be a positive int, got {num_rollouts!r}")
    config = EvalConfig(
        env=env_config(env_id, n=n, seed=seed, split=split, max_turns=max_turns, **env_kwargs),
        model=model,
        client=vf.EvalClientConfig(base_url=base_url, api_key_var=api_key_var),
        sampling=vf.SamplingConfig(**(sampling or {})),
        num_rollouts=num_rollouts, max_concurrent=max_concurrent, rich=None, push=False,
        output_dir=Path(output_dir),
    )
    return run_async(run_eval, config)
