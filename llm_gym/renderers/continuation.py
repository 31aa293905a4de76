"""Prefix-keeping multi-turn continuation, for every renderer: `Continuation` and `ContinuationStep`.

A multi-turn env shows the policy an observation, gets the tokens it sampled, adds the env's reply
(a user / tool / env turn) and prompts again. `Continuation(renderer).next(prev_ob, action, messages)`
builds that next prompt so that, whenever it can, it starts with `prev_ob + action` token for token
(the prefix property): then `llm_gym.rl.data_processing.trajectory_to_data` makes one datum of the
whole episode and the sampler can reuse its KV cache. `messages` is the whole conversation after the
turn: the earlier messages, the assistant message parsed from `action`, then at least one new
non-assistant message. The step's `mode` says what happened, deterministically, in this order:

- ``"extended"``: the renderer's own rendering of this turn follows the sampled tokens — the action
  is exactly the renderer's tokens for the parsed assistant message (a truncated action is a prefix
  of them) and the tokens after it are the renderer's, so when `prev_ob` was the renderer's own
  rendering, the observation equals `renderer.build_generation_prompt(messages)`.
- ``"appended"`` (with ``fallback="append"``, the default): the renderer disagrees with the sampled
  tokens — they are not its canonical tokenization of the parsed text, the action ended with a stop
  other than the turn's own end (EOS), or the template rewrites history (Qwen3-style templates strip
  ``<think>`` from earlier turns) — so the canonical tokens that close the assistant turn (its
  end-of-turn id unless the action ended with it) and render the new turn(s) are appended after the
  sampled ones. The prefix property holds; the prompt differs from a fresh rendering.
- ``"new_datum"``: the prefix property is given up and the observation is the renderer's fresh
  rendering of `messages`: with ``fallback="new_datum"`` whenever the mode would be "appended"; and
  always when the action holds ids outside the vocabulary (they cannot appear in an observation),
  when the end of the sampled turn cannot be located in the template's rendering (no integer stop
  ids, a stop token spelled out inside the assistant's text, a template that fails to render the
  conversation without a generation prompt), and for role_colon when a non-user message follows an
  action that ended with the "\\n\\nUser:" stop text.

`ContinuationStep.metrics` is one-hot over `METRIC_KEYS` ("continuation/extended",
"continuation/appended", "continuation/new_datum"); an env passes them on in its step metrics, so
episode metrics report the fraction of turns of each kind. `chatml` and `role_colon` (renderers that
never rewrite history) take a fast path that renders only the new turn (cached per new-turn text,
bounded); every other renderer, `chat_template` over any HF template included, renders the whole
conversation once per turn and compares tokens (twice more on a fallback). A renderer's
`has_extension_property` is the static promise that a policy sampling the renderer's own tokens
always gets "extended". Neighbours: `llm_gym.renderers` (the renderers), the catalog's multi-turn
games and `llm_gym.wrappers.from_text` (the callers), `llm_gym.text_env.TextEnv` (reads
`last_extension` to convert only the new tokens of an observation).
"""

from __future__ import annotations

import array
from typing import NamedTuple, Sequence, TypeGuard, TypeVar

from llm_gym.model_input import ModelInput, as_token_ids
from llm_gym.renderers.base import Message, Renderer, ensure_text, validate_messages
from llm_gym.renderers.chat_template import ChatTemplateRenderer
from llm_gym.renderers.chatml import ChatMLRenderer
from llm_gym.renderers.role_colon import STOP_TEXT as _ROLE_COLON_STOP, RoleColonRenderer
from llm_gym.renderers.tools import format_assistant_text

EXTENDED, APPENDED, NEW_DATUM = "extended", "appended", "new_datum"
MODES = (EXTENDED, APPENDED, NEW_DATUM)
METRIC_KEYS = {mode: f"continuation/{mode}" for mode in MODES}
FALLBACKS = ("append", "new_datum")
_ONE_HOT = {mode: {METRIC_KEYS[m]: float(m == mode) for m in MODES} for mode in MODES}
_MAX_CACHED_TAILS = 1024  # new-turn tails kept by the fast paths; cleared when full


class ContinuationStep(NamedTuple):
    """The next observation, how it was built (`mode`: "extended", "appended" or "new_datum"; see
    the module docstring) and its one-hot `metrics` over `METRIC_KEYS` (a fresh dict)."""

    observation: ModelInput
    mode: str
    metrics: dict[str, float]

    @property
    def keeps_prefix(self) -> bool:
        """Whether `observation` starts with the previous observation + the action."""
        return self.mode != NEW_DATUM


_new_step = tuple.__new__  # builds a ContinuationStep without NamedTuple's Python-level __new__


class Continuation:
    """Builds multi-turn observations for `renderer`, keeping the prefix property where it can.

    `first(messages)` is `renderer.build_generation_prompt(messages)`. `next(prev_ob, action_tokens,
    messages)` returns a `ContinuationStep` (see the module docstring for the modes and when each
    applies). `fallback` is what to do when the renderer disagrees with the sampled tokens:
    "append" (keep the prefix, the default) or "new_datum" (use the template's fresh rendering).
    One instance may serve many concurrent episodes: it keeps no per-episode state, only bounded
    caches. `last_extension` is `(prev_ob, observation)` of the last `next` call that kept the
    prefix (None after one that did not); `TextEnv` checks both by identity.
    """

    def __init__(self, renderer: Renderer, *, fallback: str = "append") -> None:
        if not isinstance(renderer, Renderer):
            raise TypeError(
                f"Continuation needs a llm_gym Renderer, got {type(renderer).__name__}; build one "
                "with llm_gym.get_renderer(name, tokenizer)"
            )
        if fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {list(FALLBACKS)}, got {fallback!r}")
        self.renderer = renderer
        self.fallback = fallback
        if _uses_own_rendering(renderer, ChatMLRenderer, ("build_generation_prompt", "_turn", "_turn_header")):
            self._turns: _Turns = _ChatMLTurns(renderer)
        elif _uses_own_rendering(
            renderer, RoleColonRenderer, ("build_generation_prompt", "render_message", "_get_generation_suffix")
        ):
            self._turns = _RoleColonTurns(renderer)
        else:
            self._turns = _TemplateTurns(renderer)
        self._vocab_size = renderer._vocab_size
        self.last_extension: tuple[ModelInput, ModelInput] | None = None

    def first(self, messages: Sequence[Message]) -> ModelInput:
        """The first observation: the renderer's generation prompt for `messages`."""
        return self.renderer.build_generation_prompt(list(messages))

    def next(
        self, prev_ob: ModelInput, action_tokens: Sequence[int], messages: Sequence[Message]
    ) -> ContinuationStep:
        """The observation after the policy sampled `action_tokens` from `prev_ob`; `messages` is
        the whole conversation after the turn (see the module docstring). Never raises on bad
        model output; raises ValueError when `messages` has no assistant message followed by at
        least one other message, and whatever a chat template raises for a conversation it cannot
        render (e.g. roles that must alternate)."""
        if type(messages) is not list:
            messages = list(messages)
        k = len(messages) - 2  # the usual shape: ..., assistant, one new message
        if k < 0 or type(messages[k]) is not dict or messages[k].get("role") != "assistant":
            k = _last_assistant_index(messages)
        try:  # one C pass: ints >= 0 only (numpy ints become ints), then the vocabulary bound
            ids = array.array("Q", action_tokens)
            invalid = bool(ids) and max(ids) >= self._vocab_size
            action = ids.tolist()
        except (TypeError, OverflowError):
            invalid = True
        if invalid:  # out-of-vocabulary ids cannot appear in an observation
            ob, mode = self.renderer.build_generation_prompt(messages), NEW_DATUM
        else:
            ob, mode = self._turns.next(prev_ob, action, messages, k, self.fallback)
        self.last_extension = None if mode == NEW_DATUM else (prev_ob, ob)
        return _new_step(ContinuationStep, (ob, mode, _ONE_HOT[mode].copy()))


def _last_assistant_index(messages: list[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "assistant":
            if i == len(messages) - 1:
                break
            return i
    validate_messages(messages)  # a clearer error first, if the messages are malformed
    raise ValueError(
        "Continuation.next needs the whole conversation after the turn: the earlier messages, the "
        "assistant message parsed from the action, then at least one new user/tool message; got "
        f"roles {[m.get('role') for m in messages if isinstance(m, dict)]}"
    )


_R = TypeVar("_R", bound=Renderer)


def _uses_own_rendering(renderer: Renderer, cls: type[_R], methods: Sequence[str]) -> TypeGuard[_R]:
    """Whether `renderer` is a `cls` whose subclass keeps `cls`'s rendering methods (so a fast path
    that reimplements them incrementally stays exact)."""
    kind = type(renderer)
    return isinstance(renderer, cls) and all(getattr(kind, m) is getattr(cls, m) for m in methods)


class _Turns:
    def next(
        self, prev: ModelInput, action: list[int], messages: list[Message], k: int, fallback: str
    ) -> tuple[ModelInput, str]:
        raise NotImplementedError


def _tail_key(messages: list[Message], k: int) -> tuple:
    # Message is total=False, but a message without a role or content raises KeyError here, as before.
    if k == len(messages) - 2:  # one new message (the usual case)
        m = messages[k + 1]
        content = m["content"]  # pyright: ignore[reportTypedDictNotRequiredAccess]
        return (m["role"], content if type(content) is str else ensure_text(content))  # pyright: ignore[reportTypedDictNotRequiredAccess]
    return tuple((m["role"], ensure_text(m["content"])) for m in messages[k + 1:])  # pyright: ignore[reportTypedDictNotRequiredAccess]


class _ChatMLTurns(_Turns):
    """ChatML: the assistant turn is `content <|im_end|>` then "\\n"; each new message is
    `<|im_start|>role\\n content <|im_end|>\\n`, then the assistant header. History is never
    rewritten, so only the new turn is rendered (and cached per new-turn text)."""

    def __init__(self, renderer: ChatMLRenderer) -> None:
        self.renderer = renderer
        self.im_end = renderer.im_end
        self._im_end = (renderer.im_end,)
        self.encode = renderer.tokenizer.encode
        self._tails: dict[tuple, tuple[int, ...]] = {}

    def _tail(self, key: tuple, messages: list[Message], k: int) -> tuple[int, ...]:
        """The tokens after the assistant's <|im_end|>: "\\n", the new turns, the assistant header."""
        r = self.renderer
        ids = list(r._newline)
        for m in messages[k + 1:]:
            header, body = r._turn(m)
            ids += header + body + r._newline
        ids += r._turn_header("assistant")
        tail = self._im_end + as_token_ids(ids)  # <|im_end|> first, for actions that lack it
        if len(self._tails) >= _MAX_CACHED_TAILS:
            self._tails.clear()
        self._tails[key] = tail
        return tail

    def next(self, prev, action, messages, k, fallback):
        # Message is total=False, but a message without a role or content raises KeyError here, as before.
        if k == len(messages) - 2:  # one new message, the usual case: `_tail_key` inlined
            m = messages[-1]
            key = (m["role"], m["content"] if type(m["content"]) is str else ensure_text(m["content"]))  # pyright: ignore[reportTypedDictNotRequiredAccess]
        else:
            key = _tail_key(messages, k)
        tail = self._tails.get(key) or self._tail(key, messages, k)
        assistant = messages[k]
        content = assistant["content"]  # pyright: ignore[reportTypedDictNotRequiredAccess]
        if "tool_calls" in assistant or "unparsed_tool_calls" in assistant:  # the calls' blocks too
            content = format_assistant_text(assistant)
        body = self.encode(
            content if type(content) is str else ensure_text(content), add_special_tokens=False
        )
        if type(body) is not list:
            body = list(body)
        # canonical: the content's own tokens, then <|im_end|> (which a truncated action lacks)
        if action and action[-1] == self.im_end:
            canonical = action[:-1] == body
            new = tuple(action) + tail[1:]
        else:
            canonical = action == body
            new = tuple(action) + tail
        if not canonical and fallback == "new_datum":
            return self.renderer.build_generation_prompt(messages), NEW_DATUM
        # `action` holds validated ids and `tail` the tokenizer's own: no second validation
        return ModelInput._trusted(prev.tokens + new), EXTENDED if canonical else APPENDED


class _RoleColonTurns(_Turns):
    """Role-colon: the assistant turn is " content\\n\\n", the next header "User:" doubles as the
    rest of the stop text "\\n\\nUser:". How the action ended decides what closes it: the stop
    text (nothing), a blank line (the header) or anything else ("\\n\\n" and the header)."""

    def __init__(self, renderer: RoleColonRenderer) -> None:
        self.renderer = renderer
        tok = renderer.tokenizer
        self._encode = lambda text: list(tok.encode(text, add_special_tokens=False))
        self._blank = self._encode("\n\n")
        self._eos = getattr(tok, "eos_token_id", None)
        self._tails: dict[tuple, tuple[list[int], list[int]]] = {}

    def _tail(self, messages: list[Message], k: int) -> tuple[list[int], list[int]]:
        """(header of the first new message, the rest: its body, later turns, "Assistant:")."""
        key = _tail_key(messages, k)
        cached = self._tails.get(key)
        if cached is None:
            enc = self._encode
            new = messages[k + 1:]
            # Message is total=False, but a message without a role or content raises KeyError here, as before.
            first_header = enc(new[0]["role"].capitalize() + ":")  # pyright: ignore[reportTypedDictNotRequiredAccess]
            rest = enc(" " + ensure_text(new[0]["content"]) + "\n\n")  # pyright: ignore[reportTypedDictNotRequiredAccess]
            for m in new[1:]:
                rest += enc(m["role"].capitalize() + ":") + enc(" " + ensure_text(m["content"]) + "\n\n")  # pyright: ignore[reportTypedDictNotRequiredAccess]
            rest += enc("Assistant:")
            cached = (first_header, rest)
            if len(self._tails) >= _MAX_CACHED_TAILS:
                self._tails.clear()
            self._tails[key] = cached
        return cached

    def next(self, prev, action, messages, k, fallback):
        header, rest = self._tail(messages, k)
        tok = self.renderer.tokenizer
        text = tok.decode(action, skip_special_tokens=True) if action else ""
        by_eos = bool(action) and action[-1] == self._eos
        output = self._encode(" " + format_assistant_text(messages[k]) + "\n\n")
        if text.endswith(_ROLE_COLON_STOP) and not by_eos:
            # "User:" was sampled; a tool turn cannot follow. (A message without a role: KeyError, as before.)
            if messages[k + 1]["role"] != "user":  # pyright: ignore[reportTypedDictNotRequiredAccess]
                return self.renderer.build_generation_prompt(messages), NEW_DATUM
            close, canonical = [], action == output + self._encode("User:")
        elif text.endswith("\n\n") and not by_eos:
            close, canonical = header, action == output
        else:  # truncated, or ended by EOS
            close, canonical = self._blank + header, action + self._blank == output
        if not canonical and fallback == "new_datum":
            return self.renderer.build_generation_prompt(messages), NEW_DATUM
        return prev.append(action + close + rest), EXTENDED if canonical else APPENDED


class _TemplateTurns(_Turns):
    """Any other renderer (`chat_template` over any HF template, custom renderers): render the whole
    conversation and compare tokens; on disagreement, locate the end of the sampled turn in the
    fresh rendering by counting stop ids and append what follows it."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        stops = renderer.get_stop_sequences()
        ints = all(isinstance(s, int) and not isinstance(s, bool) for s in stops)
        self._stops = frozenset(int(s) for s in stops) if ints and stops else frozenset()
        # ChatTemplateRenderer's raw template call (token lists, with or without a generation prompt)
        own = _uses_own_rendering(renderer, ChatTemplateRenderer, ("build_generation_prompt", "_template"))
        self._render_raw = renderer._template if own else None

    def _render(self, messages: list[Message], add_generation_prompt: bool) -> list[int]:
        if self._render_raw is not None:
            return list(self._render_raw(messages, add_generation_prompt=add_generation_prompt))
        if add_generation_prompt:
            return self.renderer.build_generation_prompt(messages).to_ints()
        return self.renderer.build_supervised_example(messages)[0].to_ints()

    def next(self, prev, action, messages, k, fallback):
        try:
            fresh = self._render(messages, True)
        except Exception:  # noqa: BLE001 - the template refused this conversation
            # Mistral's templates refuse an assistant turn with empty content, which a garbage reply
            # parses to: render such turns as one space and start a new datum, rather than crash.
            blank: list[Message] = [
                {**m, "content": " "} if m.get("role") == "assistant" and not m.get("content")
                and not m.get("tool_calls") else m for m in messages
            ]
            if blank == messages:
                raise
            return ModelInput._trusted(tuple(self._render(blank, True))), NEW_DATUM
        prev_ids = prev.to_ints()
        n, m = len(prev_ids), len(action)
        if fresh[:n] == prev_ids and fresh[n:n + m] == action and len(fresh) > n + m:
            return ModelInput._trusted(tuple(fresh)), EXTENDED
        # prev_ob may hold earlier appended turns: compare this turn against the template's own
        # prompt for the history instead.
        try:
            history = self._render(messages[:k], True)
        except Exception:  # e.g. a template that refuses an empty conversation (k == 0)
            return ModelInput._trusted(tuple(fresh)), NEW_DATUM
        h = len(history)
        if fresh[:h] == history and fresh[h:h + m] == action and len(fresh) > h + m:
            return prev.append(action + fresh[h + m:]), EXTENDED
        if fallback == "append":
            close_and_tail = self._after_turn(action, messages, k, fresh, history)
            if close_and_tail is not None:
                return prev.append(action + close_and_tail), APPENDED
        return ModelInput._trusted(tuple(fresh)), NEW_DATUM

    def _after_turn(
        self, action: list[int], messages: list[Message], k: int, fresh: list[int], history: list[int]
    ) -> list[int] | None:
        """The canonical tokens to append after `action`: the template's end of the assistant turn
        (its end-of-turn id unless the action ended with it, and what follows that id), then the
        new turns as `fresh` renders them. None when they cannot be located."""
        stops = self._stops
        if not stops:
            return None
        try:
            through = self._render(messages[: k + 1], False)
        except Exception:  # e.g. a template that only renders conversations ending with a user
            return None
        in_history = sum(1 for t in history if t in stops)
        ends = [i for i, t in enumerate(through) if t in stops]
        # Exactly one stop id in the rendered assistant turn, or its end cannot be told apart.
        if len(ends) != in_history + 1:
            return None
        turn_end = through[ends[-1]]
        closing = through[ends[-1] + 1:]
        count = -1
        for pos, t in enumerate(fresh):
            if t in stops:
                count += 1
                if count == in_history:
                    break
        else:
            return None
        after = pos + 1 + len(closing)
        if fresh[pos] != turn_end or fresh[pos + 1:after] != closing or after >= len(fresh):
            return None
        end = [] if action and action[-1] == turn_end else [turn_end]
        return end + closing + fresh[after:]

