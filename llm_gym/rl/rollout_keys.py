"""Which rollout a policy call comes from, so a sampler's randomness need not depend on timing.

A batching sampler gathers the calls that are pending when it runs a batch. When rollouts await
real work (tool calls and renders in threads, sandboxes, graders in worker processes), which calls
share a batch, and in what order, depends on the machine's timing. A sampler that draws every
row from one random stream then gives the same seed different rollouts run to run. With a key per
call that names the rollout and the call's place in it, a sampler can draw each row from a stream
of its own (`call_seed`), and the same seed gives the same samples however the calls were batched.

The key lives in a `contextvars.ContextVar`, so it follows each rollout's asyncio task and no
signature changes: whoever runs a batch of groups marks each group's task with `group_key(i)`;
`llm_gym.rl.rollouts.do_single_rollout` gives each trajectory under that group the next child key
(in the order the trajectories start, which is their order in the group); a sampler reads
`current_rollout_key()` when a call arrives and takes `next_call()` from it (a trajectory's calls
are sequential, so that count is deterministic). Outside a marked group there is no key, and
samplers keep their shared stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["RolloutKey", "call_seed", "current_rollout_key", "group_key", "trajectory_key"]

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z: int) -> int:
    """SplitMix64's finalizer: a bijection on 64-bit ints."""
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & _M64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & _M64
    return z ^ (z >> 31)


def call_seed(*parts: int) -> int:
    """A 64-bit seed mixed from non-negative ints (a sampler seed, a key's path, a call index):
    the same parts always give the same seed, in any process; different parts (in order) give
    different seeds barring a 2**-64 accident."""
    h = _GOLDEN
    for part in parts:
        h = _mix64((h ^ (int(part) & _M64)) + _GOLDEN & _M64)
    return h


class RolloutKey:
    """A node of the key tree: a group's key (`path == (group,)`) hands out trajectory keys
    (`path == (group, i)`); a trajectory's key counts its policy calls."""

    __slots__ = ("path", "_children", "_calls")

    def __init__(self, path: tuple[int, ...]) -> None:
        self.path = path
        self._children = 0
        self._calls = 0

    @property
    def is_trajectory(self) -> bool:
        return len(self.path) >= 2

    def child(self) -> RolloutKey:
        """The next trajectory key under this group (0, 1, 2, ... in the order asked)."""
        key = RolloutKey((*self.path, self._children))
        self._children += 1
        return key

    def next_call(self) -> int:
        """The index of this trajectory's next policy call (0 for its first turn)."""
        index = self._calls
        self._calls += 1
        return index

    def __repr__(self) -> str:
        return f"RolloutKey(path={self.path}, calls={self._calls})"


_KEY: ContextVar[RolloutKey | None] = ContextVar("llm_gym_rollout_key", default=None)


def current_rollout_key() -> RolloutKey | None:
    """The key of the rollout this code runs in: a trajectory's key inside `do_single_rollout`
    under a marked group, a group's key between them, None outside any."""
    return _KEY.get()


def group_key(index: int) -> None:
    """Mark the calling task (and the tasks it creates from now on) as group `index` of a batch.
    Call it at the start of the task that rolls the group out: the mark stays in that task's
    context, so sibling groups in their own tasks are not affected."""
    if index < 0:
        raise ValueError(f"a group index must be >= 0, got {index}")
    _KEY.set(RolloutKey((int(index),)))


@contextlib.contextmanager
def trajectory_key() -> Iterator[RolloutKey | None]:
    """Within a marked group: the next trajectory key, current for the `with` block (None, and
    nothing set, outside a marked group or inside a trajectory already)."""
    parent = _KEY.get()
    if parent is None or parent.is_trajectory:
        yield None
        return
    key = parent.child()
    token = _KEY.set(key)
    try:
        yield key
    finally:
        _KEY.reset(token)
