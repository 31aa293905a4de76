"""Bounded-staleness rollouts for GRPO: the batches of later steps are sampled while a step trains.

`AsyncRollouts` owns one background thread running one event loop; the trainer takes step s's
batch (`take`), trains, and reports each new policy version (`policy_updated`; version v = the
weights after v optimizer steps, so the weights that train step s are version s). The schedule is
fixed, so a run is reproducible: step s's batch is sampled by version
`max(floor, s - max_staleness)` -- `floor` is the version the run (or a resumed segment) started
from -- and is started as soon as that version exists, over a *snapshot* of the policy (a copy the
trainer never mutates; one per batch in flight, recycled), with the step's own sampler seed. Up
to `max_staleness + 1` batches are in flight at once in the loop (k + 1 at the start, then k), so
their awaited env work (graders, sandboxes and tools in executors) overlaps each other's and the
training step; blocking env code overlaps only the training step. Batches start in step order, so `get_batch` is
called in step order; a stateful dataset (a curriculum) may be asked for batch s+1 before batch s's
rewards are in, deterministically so when the env's work is (no wall-clock timeouts or executor
races). Every group carries the version that sampled it; `take` drops groups older than
`current - max_staleness` (possible with batches restored from a checkpoint written under a larger
bound) and reports `async/staleness_mean`, `async/staleness_max`, `async/dropped_groups` and
`async/wait_seconds` (how long the step waited for its batch). `drain` finishes every started batch
and returns those not yet taken, for a checkpoint; `AsyncRollouts(..., ready=...)` resumes from
them. An exception in a batch's sampling is raised by the `take` of that step, in the caller's
thread; `close` (also on leaving the `with` block, on any exception or KeyboardInterrupt) cancels
the batches in flight and joins the thread.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Generic, Sequence, TypeVar

import torch

__all__ = ["AsyncRollouts", "SampledBatch", "drop_stale", "sampling_version"]

G = TypeVar("G")  # a trajectory group (`llm_gym.rl.TrajectoryGroup` in the trainer)
THREAD_NAME = "grpo-rollouts"


def sampling_version(step: int, max_staleness: int, floor: int = 0) -> int:
    """The policy version that samples `step`'s batch: `max(floor, step - max_staleness)`."""
    return max(floor, step - max_staleness)


@dataclass
class SampledBatch(Generic[G]):
    """One step's rollouts: its groups, the policy version of each, the sampling time (the
    batch's own, in the background thread: it overlaps training) and how many groups its sampling
    dropped (a rollout strategy's, not staleness: `take` counts those)."""

    step: int
    groups: list[G]
    versions: list[int]
    sample_seconds: float
    groups_dropped: int = 0
    metrics: dict[str, float] = field(default_factory=dict)  # filled by `take`

    def state(self) -> dict[str, Any]:
        """A picklable record for a checkpoint (`SampledBatch.from_state` reverses it)."""
        return {"step": self.step, "groups": self.groups, "versions": self.versions,
                "sample_seconds": self.sample_seconds, "groups_dropped": self.groups_dropped}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "SampledBatch":
        # .get: checkpoints written before `groups_dropped` existed resume too
        return cls(int(state["step"]), list(state["groups"]), [int(v) for v in state["versions"]],
                   float(state["sample_seconds"]), int(state.get("groups_dropped", 0)))


def drop_stale(batch: SampledBatch[G], current: int, max_staleness: int) -> tuple[list[G], list[int], int]:
    """(kept groups, their versions, how many were dropped): a group sampled by a version older
    than `current - max_staleness` is dropped."""
    kept = [(g, v) for g, v in zip(batch.groups, batch.versions) if current - v <= max_staleness]
    return [g for g, _ in kept], [v for _, v in kept], len(batch.groups) - len(kept)


class _Snapshots:
    """Copies of the policy for the sampler: one per batch in flight, recycled when it is taken.

    `take(model)` returns a copy holding `model`'s current weights (no gradients, same train/eval
    mode); `release(copy)` returns it to the free list once its batch is done. Main thread only
    (the copies in use are only *read* by the background thread); which copy a batch gets is
    decided here, in step order, so it is the same run to run."""

    def __init__(self) -> None:
        self._free: list[torch.nn.Module] = []

    def take(self, model: torch.nn.Module) -> torch.nn.Module:
        if self._free:
            snapshot = self._free.pop()
            with torch.no_grad():
                snapshot.load_state_dict(model.state_dict())
            return snapshot
        # deepcopy would copy .grad too; the trainer zeroes gradients (set_to_none) before this
        snapshot = copy.deepcopy(model)
        snapshot.requires_grad_(False)
        return snapshot

    def release(self, snapshot: torch.nn.Module) -> None:
        self._free.append(snapshot)


class AsyncRollouts(Generic[G]):
    """The bounded-staleness pipeline of one training segment (steps `floor` ..< `end_step`).

    Args:
        sample: `await sample(step, policy)` -> that step's groups, sampled with `policy` (a
            snapshot), and how many of its groups the sampling dropped (0 if none); runs in the
            background thread's event loop, up to `max_staleness + 1` batches at a time (its
            synchronous part -- `get_batch`, building the sampler -- runs in step order, as each
            batch starts).
        max_staleness: k >= 1; step s is sampled by version `sampling_version(s, k, floor)`.
        floor: the version of the weights the segment starts from (its first step).
        end_step: one past the last step.
        ready: batches restored from a checkpoint (`drain`), taken instead of being sampled.

    Call `policy_updated(model, floor)` once before the first `take`, then once per new version.
    """

    def __init__(self, sample: Callable[[int, Any], Awaitable[tuple[list[G], int]]], max_staleness: int,
                 floor: int, end_step: int, ready: Sequence[SampledBatch[G]] = ()) -> None:
        if max_staleness < 1:
            raise ValueError(f"max_staleness={max_staleness}: the pipeline needs >= 1 (0 is the "
                             "synchronous loop)")
        self._sample = sample
        self.max_staleness = max_staleness
        self.floor = floor
        self.end_step = end_step
        self._ready: dict[int, SampledBatch[G]] = {b.step: b for b in ready if b.step >= floor}
        self._futures: dict[int, Future] = {}
        self._snapshot_of: dict[int, torch.nn.Module] = {}  # step -> its snapshot, until taken
        self._snapshots = _Snapshots()
        self._closed = False
        # One event loop in one thread: batches in flight overlap their awaits (graders, sandboxes,
        # tools in executors) with each other and with training, and start in step order.
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        # daemon: a pipeline never closed must not keep the interpreter alive (`close` joins it)
        self._thread = threading.Thread(target=self._serve, name=THREAD_NAME, daemon=True)
        self._thread.start()

    # --- the trainer's side ---------------------------------------------------------------
    def policy_updated(self, model: torch.nn.Module, version: int) -> None:
        """Version `version` of the policy exists (`model` holds it): start every batch that it
        samples. At `floor` that is steps floor..floor+k (less those restored), later step
        version+k."""
        if version == self.floor:
            steps = range(self.floor, self.floor + self.max_staleness + 1)
        else:
            steps = range(version + self.max_staleness, version + self.max_staleness + 1)
        steps = [s for s in steps if s < self.end_step and s not in self._ready
                 and s not in self._futures
                 and sampling_version(s, self.max_staleness, self.floor) == version]
        for step in steps:
            # A copy per batch, even for batches of one version: the sampler keeps per-model
            # state (its cache-layout and shared-decode checks, which pick the numerical path of
            # a model's first calls), and batches sharing a model would see it in whatever order
            # the loop interleaves them, i.e. a timing-dependent last bit of their logprobs.
            snapshot = self._snapshots.take(model)
            self._snapshot_of[step] = snapshot
            self._futures[step] = asyncio.run_coroutine_threadsafe(
                self._run(step, snapshot, version), self._loop)

    def take(self, step: int) -> SampledBatch[G]:
        """Step `step`'s batch (waiting for it), with the groups older than the bound dropped and
        the step's `async/...` metrics. Raises what its sampling raised."""
        t0 = time.monotonic()
        if step in self._ready:
            batch = self._ready.pop(step)
        elif step in self._futures:
            try:
                batch = self._futures.pop(step).result()
            finally:
                self._release(step)
        else:
            raise RuntimeError(f"step {step}'s batch was never started: call policy_updated() "
                               "for every new policy version before taking a step")
        wait = time.monotonic() - t0
        groups, versions, dropped = drop_stale(batch, step, self.max_staleness)
        staleness = [step - v for v in versions]
        batch.groups, batch.versions = groups, versions
        batch.metrics = {
            "async/staleness_mean": sum(staleness) / len(staleness) if staleness else 0.0,
            "async/staleness_max": float(max(staleness, default=0)),
            "async/dropped_groups": float(dropped),
            "async/wait_seconds": wait,
        }
        return batch

    def drain(self) -> list[SampledBatch[G]]:
        """Finish every started batch and return all not yet taken, in step order (for a
        checkpoint: with them, a resumed run trains exactly what this one will). Raises what a
        batch's sampling raised."""
        for step in sorted(self._futures):
            try:
                self._ready[step] = self._futures.pop(step).result()
            finally:
                self._release(step)
        return [self._ready[s] for s in sorted(self._ready)]

    def close(self) -> None:
        """Cancel every batch still being sampled and join the thread."""
        if self._closed:
            return
        self._closed = True
        for future in self._futures.values():
            future.cancel()  # cancels its task in the loop
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()

    def __enter__(self) -> "AsyncRollouts[G]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the background thread's side -----------------------------------------------------
    def _serve(self) -> None:
        async def main() -> None:
            await self._stop.wait()
            batches = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in batches:
                task.cancel()
            await asyncio.gather(*batches, return_exceptions=True)

        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(main())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()

    async def _run(self, step: int, snapshot: torch.nn.Module, version: int) -> SampledBatch[G]:
        t0 = time.monotonic()
        groups, groups_dropped = await self._sample(step, snapshot)
        # the batch's latency: with other batches in flight it includes their turns in the loop
        return SampledBatch(step, list(groups), [version] * len(groups), time.monotonic() - t0,
                            groups_dropped)

    def _release(self, step: int) -> None:
        snapshot = self._snapshot_of.pop(step, None)
        if snapshot is not None:
            self._snapshots.release(snapshot)
