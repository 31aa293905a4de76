"""Env workers on Ray: env groups live in a bounded pool of Ray actors while sampling stays here.

`RayRolloutWorkers(num_workers).wrap(builders)` turns each `EnvGroupBuilder` into a
`RemoteGroupBuilder`, a proxy that ships the (picklable) builder to one worker actor the first time
its envs are made; from then on everything the builder and its envs do runs in that worker:
`make_envs`, `initial_observation`, `step`, graders, `compute_group_rewards`, `cleanup` and the
sandboxes they start. `make_envs` returns `RemoteEnv` proxies whose async methods await actor calls,
so the driver's rollout loop (`llm_gym.rl.rollouts`), its rollout strategies and its policy call
`await policy(obs, stop, ...)` run unchanged in the trainer's process: only observations, actions,
`StepResult`s and trajectories cross the process boundary (they must pickle). A group is placed on
the least-loaded worker (ties: round robin). A worker that dies (killed, OOM, node lost) is
replaced by a fresh actor in its slot; every call that was in flight on it raises `WorkerLostError`
-- each of the group's rollouts then fails as any rollout failure does, and the rollout strategy
(`llm_gym.rl.rollout_strategy`) retries it on a fresh group built in the replacement worker within
its budget, or surfaces the failure as that strategy does. Env errors come back as the env's own
exception (type and message), so strategies see what they would see in-process. What the
builder's methods change happens to its copy in the worker (as under a process-pool rollout
executor): a builder that reports to driver-side state from `compute_group_rewards` (a curriculum
dataset) must be told on the driver instead (`CurriculumRLDataset.observe`). The pool is
driver-side state: `RemoteGroupBuilder`s do not pickle. `close()` kills the actors.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import io
import itertools
import logging
import pickle
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from llm_gym.env_source import EnvSource
from llm_gym.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    Observation,
    StepResult,
    StopCondition,
    Trajectory,
)

if TYPE_CHECKING:
    from llm_gym.rl.types import InitialObservationOverflow

logger = logging.getLogger(__name__)

__all__ = [
    "RayRolloutWorkers",
    "RemoteEnv",
    "RemoteGroupBuilder",
    "WorkerLostError",
    "check_ray_available",
]

RAY_EXTRA_HINT = "pip install 'llm-gym[ray]'"

# The env seams the rollout loop sets through synchronous setters (`rollout_runner._push_seams`):
# a RemoteEnv records the call and replays it in the worker before its next remote call.
_SEAM_SETTERS = ("set_max_tool_calls", "set_parse_error_policy")


def check_ray_available() -> Any:
    """Return the `ray` module; raise `ImportError` with a one-line message naming the extra that
    installs it when it is not importable."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"Ray rollout workers need ray, which is not installed: {RAY_EXTRA_HINT}") from None
    return ray


class WorkerLostError(RuntimeError):
    """A worker actor died while (or before) serving a group's call; its envs' state is gone. A
    rollout strategy treats it as a failed rollout (retry on a fresh group, within its budget)."""


# ------------------------------------------------------------------------------------------------
# Worker side
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _EnvInfo:
    """What the driver's proxy must know about a worker-side env to behave like it in the rollout
    loop: which seam setters it has, its own `rollout_limits`, whether `step` takes `extra=`."""

    setters: tuple[str, ...]
    rollout_limits: Any
    takes_extra: bool


def _takes_extra(env: Any) -> bool:
    # The rollout loop passes `extra=` only to envs whose step accepts it; the proxy always accepts
    # it, so the worker makes the same choice for the real env.
    try:
        params = inspect.signature(type(env).step).parameters
    except (TypeError, ValueError):
        return False
    return "extra" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


# A transition's fields a group grader may edit in place: reward, episode_done, metrics, logs.
_TransitionEdit = tuple[float, bool, Metrics, dict[str, Any]]


class _Group:
    def __init__(self, builder: EnvGroupBuilder) -> None:
        self.builder = builder
        self.envs: list[Any] = []


class _SharedObjectsUnpickler(pickle.Unpickler):
    """Loads a builder pickled by `_pickle_sharing_sources`, resolving its shared objects from `shared`."""

    def __init__(self, data: bytes, shared: dict[str, Any]) -> None:
        super().__init__(io.BytesIO(data))
        self.shared = shared

    def persistent_load(self, pid: Any) -> Any:
        return self.shared[pid]


class _EnvWorker:
    """The actor: holds the groups shipped to it (by group id) and their envs (by index), and the
    objects those groups share (by key). An async actor, so many envs' steps interleave on its
    event loop; a step that blocks blocks this worker only. Every method past `open_group` is a
    plain pass-through to the builder or env."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}
        self.shared: dict[str, Any] = {}

    def share(self, key: str, obj: Any) -> None:
        self.shared[key] = obj

    def ping(self) -> int:
        import os

        return os.getpid()

    async def open_group(self, group_id: str, pickled_builder: bytes) -> None:
        self.groups[group_id] = _Group(_SharedObjectsUnpickler(pickled_builder, self.shared).load())

    async def make_envs(self, group_id: str) -> tuple[int, list[_EnvInfo]]:
        group = self.groups[group_id]
        envs = list(await group.builder.make_envs())
        first = len(group.envs)
        group.envs.extend(envs)
        infos = [
            _EnvInfo(
                setters=tuple(name for name in _SEAM_SETTERS if callable(getattr(env, name, None))),
                rollout_limits=getattr(env, "rollout_limits", None),
                takes_extra=_takes_extra(env),
            )
            for env in envs
        ]
        return first, infos

    def _env(self, group_id: str, index: int, seams: list[tuple[str, Any]]) -> Any:
        env = self.groups[group_id].envs[index]
        for name, value in seams:
            getattr(env, name)(value)
        return env

    async def initial_observation(self, group_id: str, index: int, seams: list[tuple[str, Any]]) -> Any:
        return await self._env(group_id, index, seams).initial_observation()

    async def step(self, group_id: str, index: int, seams: list[tuple[str, Any]], action: Action,
                   extra: ActionExtra | None, pass_extra: bool) -> StepResult:
        env = self._env(group_id, index, seams)
        if pass_extra:
            return await env.step(action, extra=extra)
        return await env.step(action)

    async def compute_group_rewards(self, group_id: str, trajectories: list[Trajectory], indices: list[int]
                                    ) -> tuple[list[tuple[float, Metrics]], list[list[_TransitionEdit]]]:
        """The group rewards, and each transition's editable fields after the call: a builder may
        edit the trajectories it grades (in-process, the caller's own objects), e.g. add metrics."""
        group = self.groups[group_id]
        envs = [group.envs[i] for i in indices]
        rewards = list(await group.builder.compute_group_rewards(trajectories, envs))
        edits = [[(t.reward, t.episode_done, t.metrics, t.logs) for t in traj.transitions]
                 for traj in trajectories]
        return rewards, edits

    async def cleanup(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            await group.builder.cleanup()

    def holdings(self) -> tuple[int, int]:
        """(open groups, shared objects) held here: what tests check for leaks and sharing."""
        return len(self.groups), len(self.shared)


# ------------------------------------------------------------------------------------------------
# Driver side
# ------------------------------------------------------------------------------------------------
class _Incarnation:
    """One actor in one slot of the pool; `alive` until it is found dead (then its slot gets a new
    incarnation, and every group session on this one knows at once)."""

    def __init__(self, slot: int, actor: Any) -> None:
        self.slot = slot
        self.actor = actor
        self.alive = True
        # key -> the ObjectRef of the `share` call that delivered it (awaitable again in any loop)
        self.shared: dict[str, Any] = {}


class _Session:
    """One group's home on one worker incarnation."""

    def __init__(self, worker: _Incarnation, group_id: str) -> None:
        self.worker = worker
        self.group_id = group_id

    @property
    def slot(self) -> int:
        return self.worker.slot

    @property
    def actor(self) -> Any:
        return self.worker.actor

    @property
    def alive(self) -> bool:
        return self.worker.alive


@functools.cache
def _sharing_pickler() -> type:
    # Imported here, so that importing this module never imports ray.
    from ray.cloudpickle.cloudpickle import Pickler as CloudPickler

    class SharingPickler(CloudPickler):
        """Pickles as Ray does (cloudpickle), except that each `EnvSource` is left out as a
        persistent id (`key_of(source)`) and collected in `shared`."""

        def __init__(self, file: io.BytesIO, key_of: Callable[[Any], str]) -> None:
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.key_of = key_of
            self.shared: dict[str, Any] = {}

        def persistent_id(self, obj: Any) -> str | None:  # type: ignore[override]
            if isinstance(obj, EnvSource):
                key = self.key_of(obj)
                self.shared[key] = obj
                return key
            return None

    return SharingPickler


def _pickle_sharing_sources(builder: EnvGroupBuilder, key_of: Callable[[Any], str]
                            ) -> tuple[bytes, dict[str, Any]]:
    """`builder` pickled without its `EnvSource`s, and those sources by key."""
    buffer = io.BytesIO()
    pickler = _sharing_pickler()(buffer, key_of)
    pickler.dump(builder)
    return buffer.getvalue(), pickler.shared


class RayRolloutWorkers:
    """A pool of `num_workers` Ray actors that hold env groups (see the module docstring).

    Args:
        num_workers: the pool size N (>= 1): at most N actors are alive at any time.
        address: the Ray cluster to join (`ray.init(address=...)`); None starts a local one. When
            Ray is already initialised in this process, that cluster is used and `address` ignored.
        num_cpus_per_worker: CPUs each actor reserves (Ray's `num_cpus`).
        startup_timeout_s: how long to wait for the N actors to start before raising `RuntimeError`
            (a cluster without the CPUs for them would otherwise hang the first rollout).

    `wrap(builders)` gives proxies to pass to the rollout code instead of the builders; `close()`
    (or leaving the `with` block) kills the actors, and shuts Ray down if this pool started it
    (then without forwarding the workers' logs to this process: env errors come back as
    exceptions). Raises `ImportError` naming the extra when ray is not installed.

    Each `EnvSource` inside a builder (the dataset's per-split source, with its tokenizer and
    renderer, which all its groups share) is sent to a worker once and shared there by the groups
    that hold it, as it is shared in-process; the rest of the builder is pickled per group. (A
    source carrying a 150k-token HF tokenizer pickles to ~8 MB and takes ~1 s to load: per group
    that would dwarf the rollout.) The pool keeps each shipped source alive until it is closed, and
    a source changed on the driver after it was shipped is not sent again.
    """

    def __init__(self, num_workers: int, address: str | None = None, *, num_cpus_per_worker: float = 1.0,
                 startup_timeout_s: float = 120.0) -> None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        ray = check_ray_available()
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self._actor_class = ray.remote(num_cpus=num_cpus_per_worker)(_EnvWorker)
        self._workers = [_Incarnation(i, self._actor_class.remote()) for i in range(num_workers)]
        self._load = [0] * num_workers  # open groups per slot (placement only)
        self._cursor = itertools.count()
        self.replacements = 0
        self._shared_objects: dict[int, tuple[str, Any]] = {}
        self._closed = False
        try:
            ray.get([w.actor.ping.remote() for w in self._workers], timeout=startup_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise RuntimeError(
                f"RayRolloutWorkers: {num_workers} workers of {num_cpus_per_worker:g} CPU did not start "
                f"within {startup_timeout_s:g}s; the cluster has {ray.cluster_resources().get('CPU', 0):g} "
                "CPUs: lower num_workers or num_cpus_per_worker"
            ) from None

    # --- public API --------------------------------------------------------------------------------
    @property
    def num_workers(self) -> int:
        return len(self._workers)

    @property
    def workers(self) -> list[Any]:
        """The current actor handles, by slot (a replaced worker's slot holds its successor)."""
        return [w.actor for w in self._workers]

    def wrap(self, builders: Iterable[EnvGroupBuilder]) -> list[EnvGroupBuilder]:
        """Proxies for `builders`, in order: each runs its group in one of the pool's workers."""
        if self._closed:
            raise RuntimeError("RayRolloutWorkers.wrap: the pool is closed")
        return [RemoteGroupBuilder(self, b) for b in builders]

    def close(self) -> None:
        """Kill every worker (envs still open in them are dropped unreleased); idempotent."""
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            worker.alive = False
            try:
                self._ray.kill(worker.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead: nothing to kill
                pass
        self._workers = []
        if self._owns_ray:
            self._ray.shutdown()

    def __enter__(self) -> "RayRolloutWorkers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- used by the proxies -----------------------------------------------------------------------
    def _hold_slot(self) -> int:
        """Pick the least-loaded slot (ties: round robin) and count one more group on it."""
        least = min(self._load)
        candidates = [i for i, n in enumerate(self._load) if n == least]
        slot = candidates[next(self._cursor) % len(candidates)]
        self._load[slot] += 1
        return slot

    def _release_slot(self, slot: int) -> None:
        self._load[slot] -= 1

    def _shared_key(self, obj: Any) -> str:
        held = self._shared_objects.get(id(obj))
        if held is None:  # held with its object, so the id is never reused for another one
            held = self._shared_objects[id(obj)] = (f"shared-{len(self._shared_objects)}", obj)
        return held[0]

    async def _open(self, builder: EnvGroupBuilder, slot: int) -> _Session:
        """Ship `builder` to the actor now in `slot`, as a new group there. Its `EnvSource`s go to
        each worker once (`share`) and are referred to by key after that (see the class docs)."""
        if self._closed:
            raise RuntimeError("RayRolloutWorkers: the pool is closed")
        worker = self._workers[slot]
        session = _Session(worker, uuid.uuid4().hex)
        pickled, sources = _pickle_sharing_sources(builder, self._shared_key)
        for key, source in sources.items():
            if key not in worker.shared:
                worker.shared[key] = worker.actor.share.remote(key, source)
            await self._call(session, worker.shared[key])  # delivered before any group uses it
        await self._call(session, session.actor.open_group.remote(session.group_id, pickled))
        return session

    def _lost(self, session: _Session) -> None:
        """`session`'s actor died: mark it, and give its slot a fresh actor unless already done."""
        dead = session.worker
        if not dead.alive or self._closed:
            return
        dead.alive = False
        try:
            self._ray.kill(dead.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - it is dead already
            pass
        self._workers[dead.slot] = _Incarnation(dead.slot, self._actor_class.remote())
        self.replacements += 1
        logger.warning("rollout worker %d died; replaced by a fresh actor", dead.slot)

    async def _call(self, session: _Session, ref: Any) -> Any:
        """Await one actor call: an env error is re-raised as the env's own exception, a dead actor
        as `WorkerLostError`, and a cancelled await cancels the actor-side task too."""
        ray = self._ray
        try:
            return await ref
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, BaseException):
                raise cause from exc
            raise
        except ray.exceptions.RayActorError as exc:
            self._lost(session)
            raise WorkerLostError(
                f"rollout worker {session.slot} died during this call; the group's envs there are "
                f"lost ({type(exc).__name__})"
            ) from exc
        except asyncio.CancelledError:
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001 - finished or gone meanwhile
                pass
            raise


class RemoteEnv(Env):
    """A driver-side proxy of one env living in a worker (made by `RemoteGroupBuilder.make_envs`).
    Its async methods await the worker; the rollout loop's seams (`set_max_tool_calls`,
    `set_parse_error_policy`, `rollout_limits`) exist on it exactly when the real env has them."""

    def __init__(self, pool: RayRolloutWorkers, session: _Session, index: int, info: _EnvInfo) -> None:
        self._pool = pool
        self._session = session
        self._index = index
        self._takes_extra = info.takes_extra
        self._seams: list[tuple[str, Any]] = []
        if info.rollout_limits is not None:
            self.rollout_limits = info.rollout_limits
        for name in info.setters:
            setattr(self, name, self._recorder(name))

    def _recorder(self, name: str):
        def record(value: Any) -> None:
            self._seams.append((name, value))
        return record

    def _take_seams(self) -> list[tuple[str, Any]]:
        seams, self._seams = self._seams, []
        return seams

    def _check_alive(self) -> None:
        if not self._session.alive:
            raise WorkerLostError(f"rollout worker {self._session.slot} died; this env's state is lost")

    async def initial_observation(self) -> tuple[Observation, StopCondition] | InitialObservationOverflow:
        self._check_alive()
        s = self._session
        return await self._pool._call(
            s, s.actor.initial_observation.remote(s.group_id, self._index, self._take_seams()))

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self._check_alive()
        s = self._session
        return await self._pool._call(s, s.actor.step.remote(
            s.group_id, self._index, self._take_seams(), list(action), extra, self._takes_extra))


class RemoteGroupBuilder(EnvGroupBuilder):
    """An `EnvGroupBuilder` whose group lives in one of the pool's workers (see the module
    docstring). `inner` is the wrapped builder (read its attributes, e.g. `env_id`, from there).

    The group is placed on a worker at the first `make_envs`; later calls (a strategy's retries)
    build more envs on the same worker-side builder, as they would in-process. If that worker died,
    the builder is shipped again to the worker replacing it and the new envs come from there.
    `compute_group_rewards` runs in the worker with the real envs (a builder that does not override
    it gets zeros here without a round trip), and what it edits in the trajectories (a transition's
    reward, episode_done, metrics, logs) is carried back into the caller's; it raises
    `WorkerLostError` when some of those envs died with a worker. `cleanup()` calls the builder's
    cleanup in every live worker that held the group; a worker that died took its envs with it and
    is skipped (logged)."""

    def __init__(self, pool: RayRolloutWorkers, inner: EnvGroupBuilder) -> None:
        if not isinstance(inner, EnvGroupBuilder):
            raise TypeError(f"RayRolloutWorkers.wrap takes EnvGroupBuilders, got {type(inner).__name__}")
        self.inner = inner
        self._pool = pool
        self._sessions: list[_Session] = []
        self._slot: int | None = None
        self._holds_slot = False  # counted in the pool's load until cleanup

    @property
    def worker_index(self) -> int | None:
        """The pool slot this group was placed on (None before the first `make_envs`)."""
        return self._slot

    async def _session(self) -> _Session:
        if self._sessions and self._sessions[-1].alive:
            return self._sessions[-1]
        if self._slot is None:
            self._slot = self._pool._hold_slot()
            self._holds_slot = True
        session = await self._pool._open(self.inner, self._slot)
        self._sessions.append(session)
        return session

    async def make_envs(self) -> Sequence[Env]:
        session = await self._session()
        first, infos = await self._pool._call(session, session.actor.make_envs.remote(session.group_id))
        return [RemoteEnv(self._pool, session, first + i, info) for i, info in enumerate(infos)]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        if type(self.inner).compute_group_rewards is EnvGroupBuilder.compute_group_rewards:
            return [(0.0, {}) for _ in trajectory_group]
        remote = [env for env in env_group if isinstance(env, RemoteEnv)]
        if len(remote) != len(env_group):
            raise TypeError("RemoteGroupBuilder.compute_group_rewards: env_group must hold this group's RemoteEnvs")
        if not remote:
            return list(await self.inner.compute_group_rewards(trajectory_group, []))
        session = remote[0]._session
        if any(env._session is not session for env in remote) or not session.alive:
            raise WorkerLostError(
                f"group rewards need the group's envs, and some of them died with rollout worker "
                f"{session.slot}; the group cannot be graded"
            )
        ref = session.actor.compute_group_rewards.remote(
            session.group_id, list(trajectory_group), [env._index for env in remote])
        rewards, edits = await self._pool._call(session, ref)
        # Carry the grader's edits of the trajectories over to the caller's objects, as they
        # would be in-process (e.g. a curriculum's per-episode metrics on the last transition).
        for trajectory, edited in zip(trajectory_group, edits):
            for transition, (reward, episode_done, metrics, logs) in zip(trajectory.transitions, edited):
                transition.reward, transition.episode_done = reward, episode_done
                # In place, not compared first: logs may hold arrays, whose == is no bool.
                transition.metrics.clear()
                transition.metrics.update(metrics)
                transition.logs.clear()
                transition.logs.update(logs)
        return list(rewards)

    async def cleanup(self) -> None:
        sessions, self._sessions = self._sessions, []
        try:
            for session in sessions:
                if not session.alive:
                    logger.warning("group %s: its worker died; nothing to clean up there", self.inner.logging_tags())
                    continue
                try:
                    await self._pool._call(session, session.actor.cleanup.remote(session.group_id))
                except WorkerLostError as exc:
                    logger.warning("group %s: cleanup lost with its worker (%s)", self.inner.logging_tags(), exc)
        finally:
            if self._holds_slot and self._slot is not None:
                self._holds_slot = False
                self._pool._release_slot(self._slot)

    def logging_tags(self) -> list[str]:
        return self.inner.logging_tags()

    def __reduce__(self) -> Any:
        # It holds the driver's pool (actor handles, load counts): a copy in another process would
        # place groups behind the pool's back. Ship the inner builder instead.
        raise TypeError(
            "RemoteGroupBuilder belongs to the process that made its RayRolloutWorkers and does not "
            "pickle; do not combine it with set_rollout_executor (wrap builders where they are rolled out)"
        )

    def __repr__(self) -> str:
        return f"RemoteGroupBuilder({self.inner!r}, worker={self._slot})"
