"""Graph colouring (`llm/GraphColoring-v0`): colour a generated graph's nodes with k colours.

A task is a graph on nodes 1..N with a planted k-colouring: each node gets a colour (every colour
is used at least once), and each pair of differently coloured nodes is joined with probability
`edge_prob` (at least one edge; graphs without one are redrawn). So every graph is k-colourable;
the planted colouring is the reference answer, and any other proper colouring wins too.

The answer contract is `IndexedListAnswer` (`envs_catalog.puzzles._grid`; a
`llm_gym.grading.SequenceAnswer` of N integers, `GraphColoringEnv.answer_contract`): "Answer: c1 c2
... cN" -- the colour (1..k) of node 1, node 2, ..., node N (spaces, commas or semicolons between
them, optional brackets or parentheses) -- or N (node, colour) pairs ("1:2 2:3 ...", "(1, 2),
(2, 3), ..."), read under the one answer policy (`llm_gym.grading.POLICY`): the last `Answer:`
line is parsed completely, a second declared colouring that differs -- even another proper one
-- voids the credit, nothing else in the reply is read; anything but integers in the slot is
`malformed`. The verifier checks the count (`wrong_count`), the range (`color_out_of_range`: a
(k+1)-th colour or 0) and that no edge joins two nodes of one colour (`edge_conflict`).

Held-out split: the task key (N, k and the sorted edge list) is hashed by
`llm_gym.authoring.split_of`; draws are rejection-sampled into the source's split.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs_catalog.puzzles._grid import OK, IndexedListAnswer, PuzzleEnv
from llm_gym.authoring import check_float, check_int, split_of
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.renderers import Renderer
from llm_gym.scripted import ScriptedCase

Edge = tuple[int, int]  # 0-based, u < v
_MAX_DRAWS = 10_000

_KNOB_DOCS = {
    "nodes": "number of nodes, 3-30",
    "edge_prob": "probability that two differently coloured nodes are joined, 0.05-1",
    "colors": "colours allowed (and planted), 2..min(nodes, 8)",
    "format_coef": "penalty for a reply with no readable answer line, 0-1",
}


def _knob_docs(defaults: dict[str, Any]) -> dict[str, str]:
    return {k: f"{doc} (default {defaults[k]!r})" for k, doc in _KNOB_DOCS.items()}


def task_key(nodes: int, colors: int, edges: list[Edge]) -> str:
    return f"{nodes}:{colors}:" + " ".join(f"{u}-{v}" for u, v in sorted(edges))


def check_coloring(colours: list[int], colors: int, edges: list[Edge]) -> str:
    """"ok" when `colours` (1-based, one per node) is a proper colouring with `colors` colours."""
    if any(not 1 <= c <= colors for c in colours):
        return "color_out_of_range"
    if any(colours[u] == colours[v] for u, v in edges):
        return "edge_conflict"
    return OK


def find_coloring(nodes: int, colors: int, edges: list[Edge]) -> list[int] | None:
    """A proper colouring (1-based) by backtracking (largest-degree node first), or None."""
    adj: list[set[int]] = [set() for _ in range(nodes)]
    for u, v in edges:
        adj[u].add(v)
        adj[v].add(u)
    order = sorted(range(nodes), key=lambda x: -len(adj[x]))
    colour = [0] * nodes

    def rec(i: int) -> bool:
        if i == nodes:
            return True
        x = order[i]
        for c in range(1, colors + 1):
            if all(colour[y] != c for y in adj[x]):
                colour[x] = c
                if rec(i + 1):
                    return True
        colour[x] = 0
        return False

    return colour if rec(0) else None


def coloring_contract(nodes: int, context: str = "", **kwargs: Any) -> IndexedListAnswer:
    """The answer contract of a graph on `nodes` nodes: the colour of each node."""
    return IndexedListAnswer(count=nodes, what=f"the colour of each node, nodes 1 to {nodes}",
                             item_name="colour", context=context, **kwargs)


class GraphColoringEnv(PuzzleEnv):
    def __init__(self, renderer: Renderer, nodes: int, colors: int, edges: list[Edge],
                 planted: list[int], *, format_coef: float = 0.1) -> None:
        self.nodes, self.colors, self.edges, self.planted = nodes, colors, edges, planted
        edge_text = " ".join(f"{u + 1}-{v + 1}" for u, v in edges)
        question = (
            f"Colour the nodes 1-{nodes} of this graph with colours 1-{colors} so that the two "
            f"ends of every edge get different colours.\nEdges: {edge_text}\n"
            f"{coloring_contract(nodes).instruction()}"
        )
        super().__init__(renderer, question, format_coef=format_coef)
        self.contract = coloring_contract(nodes, question, max_chars=self.max_chars)

    @property
    def gold_answer(self) -> tuple[int, ...]:
        return tuple(self.planted)

    def check(self, value: tuple[int, ...]) -> str:
        if len(value) != self.nodes:
            return "wrong_count"
        return check_coloring(list(value), self.colors, self.edges)

    def reference_payload(self) -> str:
        return " ".join(map(str, self.planted))


class GraphColoringSource(EnvSource):
    """Graph colouring tasks; knobs in `DEFAULTS` (see the card). Registered as
    `llm/GraphColoring-v0`."""

    DEFAULTS: dict[str, Any] = {"nodes": 6, "edge_prob": 0.5, "colors": 3, "format_coef": 0.1}
    card = EnvCard(
        id="llm/GraphColoring-v0",
        family="puzzles",
        description=(
            "Graph k-colouring, generated offline: a random graph (default 6 nodes, 3 colours) "
            "built around a planted colouring, so it is always k-colourable; each pair of nodes "
            "of different planted colours is an edge with probability edge_prob (default 0.5). "
            "The reply gives 'Answer:' and the colour of each node in order (e.g. 'Answer: 1 2 3 "
            "1 2 3'; a list, a tuple or node:colour pairs also read). Any proper colouring with "
            "colours 1..k wins; a clash on an edge, a colour out of range or a wrong count earns "
            "nothing. The colouring is read under the one answer policy (llm_gym.grading.POLICY): "
            "the last 'Answer:' line (else the last line stating a colouring), parsed completely; "
            "a second declared colouring that differs (even a proper one) voids the credit, and "
            "nothing else in the reply is read."
        ),
        answer_contract=(
            "N colour numbers, one per node (IndexedListAnswer, a SequenceAnswer; node:colour "
            "pairs also read); any proper colouring counts"
        ),
        multi_turn=False,
        reward_range=(-0.1, 1.0),
        reward_meaning=(
            "format_coef*(format_ok-1) + correct: 1 for a proper colouring with colours 1..k; 0 "
            "for a readable colouring with a clash, an out-of-range colour or the wrong count; "
            "-format_coef (0.1) when no single list of integers can be read (none, a slot with "
            "anything else, two declared colourings that differ). A reply not ending on the end of turn loses "
            "format_coef."
        ),
        difficulty_knobs=_knob_docs(DEFAULTS),
        data_source="generated on the fly from the seed (planted colouring, no dataset)",
        license="Apache-2.0 (generated data)",
        example_episode=[
            {"role": "user", "content": (
                "Colour the nodes 1-6 of this graph with colours 1-3 so that the two ends of "
                "every edge get different colours.\nEdges: 1-2 1-3 1-6 2-3 3-4 3-5 4-5 5-6\nEnd with "
                "one line: Answer: the colour of each node, nodes 1 to 6, separated by spaces.")},
            {"role": "assistant", "content": "Answer: 1 2 3 2 1 3"},
        ],
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in self.DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.nodes = check_int("nodes", own["nodes"], 3, 30)
        self.edge_prob = check_float("edge_prob", own["edge_prob"], 0.05, 1.0)
        self.colors = check_int("colors", own["colors"], 2, min(self.nodes, 8))
        self.format_coef = check_float("format_coef", own["format_coef"], 0.0, 1.0)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.format_coef, 1.0)

    def make_env(self, rng: np.random.Generator) -> GraphColoringEnv:
        n, k = self.nodes, self.colors
        for _ in range(_MAX_DRAWS):
            planted = rng.integers(0, k, size=n).tolist()
            for colour, node in enumerate(rng.permutation(n)[:k].tolist()):
                planted[node] = colour  # every colour used at least once
            coin = rng.random(n * (n - 1) // 2).tolist()
            pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
            edges = [(u, v) for (u, v), x in zip(pairs, coin)
                     if planted[u] != planted[v] and x < self.edge_prob]
            if not edges or split_of(task_key(n, k, edges)) != self.split:
                continue
            return GraphColoringEnv(self.renderer, n, k, edges, [c + 1 for c in planted],
                                    format_coef=self.format_coef)
        raise RuntimeError(  # pragma: no cover - tiny graph spaces only
            f"GraphColoring: no {self.split!r} graph in {_MAX_DRAWS} draws with nodes={n}, "
            f"colors={k}, edge_prob={self.edge_prob}; widen the knobs"
        )

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: the planted colouring, the planted colouring with its colours relabelled, a
        backtracking solver's colouring, node:colour pairs, the colouring stated in prose then
        given as a tuple. Adversarial: one colour for all, 0-based colours, a
        (k+1)-th colour on one node, a clash on one edge, N-1 entries, two different Answer
        lines (both valid colourings), a backup answer after the answer, a second colouring in the
        slot, the edge list echoed, the answer among wrong ones in prose (no marker) or in a
        candidate list."""

        def relabelled(env: GraphColoringEnv) -> str:
            shift = {c: c % env.colors + 1 for c in range(1, env.colors + 1)}
            return "Answer: " + " ".join(str(shift[c]) for c in env.planted)

        def solver(env: GraphColoringEnv) -> str:
            coloring = find_coloring(env.nodes, env.colors, env.edges)
            assert coloring is not None  # the generator draws colourable graphs
            return "Answer: " + " ".join(map(str, coloring))

        def clash(env: GraphColoringEnv) -> str:
            u, v = env.edges[0]
            colours = list(env.planted)
            colours[v] = colours[u]
            return "Answer: " + " ".join(map(str, colours))

        def extra_colour(env: GraphColoringEnv) -> str:
            colours = list(env.planted)
            colours[env.edges[0][0]] = env.colors + 1
            return "Answer: " + " ".join(map(str, colours))

        ref = lambda env: env.reference_payload()  # noqa: E731
        return [
            ScriptedCase("planted", "gold", lambda env, ob: env.get_reference_response(), 1.0, 1.0),
            ScriptedCase("relabelled", "gold", lambda env, ob: relabelled(env), 1.0, 1.0),
            ScriptedCase("solver", "gold", lambda env, ob: solver(env), 1.0, 1.0),
            ScriptedCase("one colour", "adversarial",
                         lambda env, ob: "Answer: " + " ".join(["1"] * env.nodes), -1.0, 0.0),
            ScriptedCase("zero-based", "adversarial",
                         lambda env, ob: "Answer: " + " ".join(str(c - 1) for c in env.planted),
                         -1.0, 0.0),
            ScriptedCase("extra colour", "adversarial", lambda env, ob: extra_colour(env), -1.0, 0.0),
            ScriptedCase("edge clash", "adversarial", lambda env, ob: clash(env), -1.0, 0.0),
            ScriptedCase("too few", "adversarial",
                         lambda env, ob: "Answer: " + " ".join(ref(env).split()[:-1]), -1.0, 0.0),
            ScriptedCase("two answers", "adversarial",
                         lambda env, ob: f"Answer: {relabelled(env)[8:]}\nAnswer: {ref(env)}",
                         -1.0, 0.0),
            ScriptedCase("backup after", "adversarial", lambda env, ob: (
                f"Answer: {ref(env)}\nBackup answer: {relabelled(env)[8:]}"), -1.0, 0.0),
            ScriptedCase("second value in the slot", "adversarial",
                         lambda env, ob: f"Answer: {ref(env)} or {clash(env)[8:]}", -1.0, 0.0),
            ScriptedCase("edges echoed", "adversarial",
                         lambda env, ob: "Answer: " + " ".join(
                             f"{u + 1}-{v + 1}" for u, v in env.edges), -1.0, 0.0),
            ScriptedCase("buried in prose", "adversarial",
                         lambda env, ob: f"Either {clash(env)[8:]} or {ref(env)} works.", -1.0, 0.0),
            ScriptedCase("candidate list", "adversarial",
                         lambda env, ob: f"Answer: {clash(env)[8:]}, {ref(env)}", -1.0, 0.0),
            ScriptedCase("node:colour pairs", "gold",
                         lambda env, ob: "Answer: " + " ".join(
                             f"{i + 1}:{c}" for i, c in enumerate(env.planted)), 1.0, 1.0),
            ScriptedCase("restated as a tuple", "gold", lambda env, ob: (
                f"The answer is {ref(env)}.\nAnswer: ({ref(env).replace(' ', ', ')})"), 1.0, 1.0),
        ]
