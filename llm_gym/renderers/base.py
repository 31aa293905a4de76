"""The `Renderer` contract: chat messages ⇄ tokens for one model family.

A renderer builds the prompt a policy continues (`build_generation_prompt`), says where sampling
stops (`get_stop_sequences`), parses sampled tokens back into a message with a `ParseTermination`,
and builds supervised examples with per-token loss weights for SFT.
"""

from __future__ import annotations

import array
import dataclasses
import enum
import logging
import operator
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal, Sequence, TypedDict

from llm_gym.model_input import EncodedTextChunk, ModelInput
from llm_gym.tokenizers import vocab_size_of

logger = logging.getLogger(__name__)


class Message(TypedDict, total=False):
    """A chat message: `role` ("system", "user", "assistant", "tool") and `content` (text, or a
    list of content parts), plus the cookbook's optional fields (`trainable` for
    `TrainOnWhat.CUSTOMIZED`; the tool fields are carried, not yet rendered)."""

    role: str
    content: str | list[Any]
    tool_calls: list["ToolCall"]
    unparsed_tool_calls: list["UnparsedToolCall"]
    trainable: bool
    tool_call_id: str
    name: str


Role = str


class TextPart(TypedDict):
    """Visible text in a list-of-parts message content."""

    type: Literal["text"]
    text: str


class ThinkingPart(TypedDict):
    """The model's reasoning as a content part."""

    type: Literal["thinking"]
    thinking: str


class ImagePart(TypedDict):
    """An image content part, the cookbook's shape (`image`: a URL / data-URI string or a PIL
    image). llm_gym's renderers are text-only and raise `RendererError` on it; the type exists so
    that code naming it (tool results that may carry images, say) imports and type-checks."""

    type: Literal["image"]
    image: Any


_REPLACEMENT_CHAR = "\ufffd"


@dataclass
class Utf8TokenDecoder:
    """Incremental text from a token stream whose tokens may split a UTF-8 character.

    `decode(new_tokens)` returns the text that became complete (the decode of everything held
    back so far plus `new_tokens`), or None when all of it still ends inside a character; the
    incomplete tail (at most `max_held_tokens` tokens) is held for the next call. A tail counts as
    incomplete when the tokenizer decodes it to U+FFFD, or raises; tokens that stay undecodable
    past `max_held_tokens` are emitted as they decode, so the held tail stays bounded. `flush()`
    returns whatever is held, decoded as it is."""

    tokenizer: Any
    max_held_tokens: int = 8
    _held: list[int] = dataclasses.field(default_factory=list, repr=False)

    def decode(self, tokens: Sequence[int]) -> str | None:
        self._held.extend(tokens)
        if not self._held:
            return None
        # The shortest held-back tail that leaves a cleanly decodable head.
        for keep in range(0, min(len(self._held), self.max_held_tokens) + 1):
            head = self._held[: len(self._held) - keep]
            if not head:
                break
            text = self._try_decode(head)
            if text is not None:
                self._held = self._held[len(head):]
                return text
        if len(self._held) > self.max_held_tokens:  # never a character: emit it as it decodes
            head, self._held = self._held[:-self.max_held_tokens], self._held[-self.max_held_tokens:]
            return str(self.tokenizer.decode(head))
        return None

    def flush(self) -> str:
        held, self._held = self._held, []
        return str(self.tokenizer.decode(held)) if held else ""

    def _try_decode(self, tokens: list[int]) -> str | None:
        try:
            text = str(self.tokenizer.decode(tokens))
        except Exception:  # a byte-level tokenizer may raise on a split character
            return None
        return None if text.endswith(_REPLACEMENT_CHAR) else text


def _longest_matching_suffix_prefix(text: str, tag: str) -> int:
    """Length of the longest proper prefix of `tag` that `text` ends with: while streaming, that
    many trailing characters may be the start of `tag` and are held back (a whole `tag` is found
    by search, so the full length never counts)."""
    for length in range(min(len(text), len(tag) - 1), 0, -1):
        if text.endswith(tag[:length]):
            return length
    return 0


# Tool types, as plain values with the cookbook's field names (rendering and parsing tool calls
# is the job of a later `tools` module; here they only travel on messages).
@dataclass(frozen=True)
class ToolCall:
    """A parsed tool invocation: `ToolCall(function=ToolCall.FunctionBody(name, arguments), id)`,
    `arguments` being a JSON string."""

    @dataclass(frozen=True)
    class FunctionBody:
        name: str
        arguments: str

    function: FunctionBody
    id: str | None = None
    type: Literal["function"] = "function"


@dataclass(frozen=True)
class UnparsedToolCall:
    """Text that looked like a tool call but did not parse, and why."""

    raw_text: str
    error: str


class ToolSpec(TypedDict):
    """A tool the model may call, in the OpenAI function-calling shape."""

    name: str
    description: str
    parameters: dict


@dataclass
class RenderContext:
    """Where a message sits in its conversation, for `Renderer.render_message`."""

    idx: int
    is_last: bool
    prev_message: Message | None = None
    next_message: Message | None = None
    last_user_index: int = -1
    in_last_assistant_turn: bool = False


@dataclass(frozen=True)
class RenderedMessage:
    """One message as token chunks: `header` (role markers, untrained), `output` (what the model
    produces for the turn, end of turn included) and `stop_overlap` (tokens of the stop sequence
    that run into the next message's header, appended only after the last message of a supervised
    example: role_colon's "User:")."""

    output: list[EncodedTextChunk]
    header: EncodedTextChunk | None = None
    stop_overlap: EncodedTextChunk | None = None


def get_text_content(message: Message | dict) -> str:
    """The text of a message; list-of-parts content keeps only its text parts."""
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") if isinstance(p, dict) else str(p) for p in content
        )
    raise TypeError(f"message content must be a str or a list of parts, got {type(content).__name__}")


def ensure_text(content: Any) -> str:
    """Return `content` as text: a str as is, a list of parts only if every part is text
    (`{"type": "text", "text": ...}` or a str). Anything else (images, other objects) raises."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text" and "text" in part:
                texts.append(part["text"])
            else:
                raise ValueError(f"expected text-only content, got a non-text part {part!r:.80}")
        return "".join(texts)
    raise TypeError(f"expected text content (str or list of text parts), got {type(content).__name__}")


class ParseTermination(str, enum.Enum):
    """How a sampled response ended, as `Renderer.parse_response` saw it: the cookbook's three
    members, values and properties. Like the cookbook's StrEnum every member is truthy and compares
    equal to its value ("stop_sequence", ...); ask `is_clean` / `is_stop_sequence`, not `bool()`.
    """

    STOP_SEQUENCE = "stop_sequence"  # the renderer's own end of turn ("\n\nUser:", <|im_end|>)
    EOS = "eos"  # the tokenizer's EOS, accepted as a clean end by some renderers
    MALFORMED = "malformed"  # not a clean end: truncated, two stops, ids outside the vocabulary

    @property
    def is_clean(self) -> bool:
        """STOP_SEQUENCE or EOS: what lenient format rewards and eval grading gate on."""
        return self is not ParseTermination.MALFORMED

    @property
    def is_stop_sequence(self) -> bool:
        """STOP_SEQUENCE only: the strict format-reward gate (`ProblemEnv`'s default)."""
        return self is ParseTermination.STOP_SEQUENCE

    def __str__(self) -> str:
        return self.value


class TrainOnWhat(str, enum.Enum):
    """Which tokens of a supervised example carry loss (the cookbook's seven modes).

    - LAST_ASSISTANT_MESSAGE: the final message, when it is an assistant one.
    - LAST_ASSISTANT_TURN: assistant messages after the last user message.
    - ALL_ASSISTANT_MESSAGES: every assistant message.
    - ALL_MESSAGES: every message's content (headers untrained).
    - ALL_TOKENS: everything, headers included (not a leading BOS).
    - ALL_USER_AND_SYSTEM_MESSAGES: user and system messages only.
    - CUSTOMIZED: each message's own `trainable` flag (required on every message).
    """

    LAST_ASSISTANT_MESSAGE = "last_assistant_message"
    LAST_ASSISTANT_TURN = "last_assistant_turn"
    ALL_ASSISTANT_MESSAGES = "all_assistant_messages"
    ALL_MESSAGES = "all_messages"
    ALL_TOKENS = "all_tokens"
    ALL_USER_AND_SYSTEM_MESSAGES = "all_user_and_system_messages"
    CUSTOMIZED = "customized"

    def __str__(self) -> str:
        return self.value


def last_assistant_turn_start(messages: Sequence[Message]) -> int:
    """Index of the first message after the last user message (0 when there is none)."""
    # Message is total=False, but a message without a role raises KeyError here, as it always has.
    users = (i for i, m in enumerate(messages) if m["role"] == "user")  # pyright: ignore[reportTypedDictNotRequiredAccess]
    return max(users, default=-1) + 1


def trained_messages(messages: Sequence[Message], train_on_what: TrainOnWhat | str) -> list[bool]:
    """Per message: does a supervised example put loss weight on its content? The cookbook's rule
    (`Renderer._output_is_trained`), including that LAST_ASSISTANT_TURN is measured on all
    messages but the last, and that CUSTOMIZED needs a `trainable` flag on every message (and the
    other modes none)."""
    what = TrainOnWhat(train_on_what)
    for i, m in enumerate(messages):
        if (what is TrainOnWhat.CUSTOMIZED) != ("trainable" in m):
            raise ValueError(
                f"message {i}: " + ("train_on_what=CUSTOMIZED needs a 'trainable' flag on every "
                "message" if what is TrainOnWhat.CUSTOMIZED else "has a 'trainable' flag; use "
                "train_on_what=CUSTOMIZED or remove the flag")
            )
    turn_start = last_assistant_turn_start(messages[:-1])
    n = len(messages)
    flags = []
    for i, m in enumerate(messages):
        # Message is total=False, but a message without a role raises KeyError here, as it always has.
        assistant = m["role"] == "assistant"  # pyright: ignore[reportTypedDictNotRequiredAccess]
        if what is TrainOnWhat.LAST_ASSISTANT_MESSAGE:
            flags.append(assistant and i == n - 1)
        elif what is TrainOnWhat.LAST_ASSISTANT_TURN:
            flags.append(assistant and i >= turn_start)
        elif what is TrainOnWhat.ALL_ASSISTANT_MESSAGES:
            flags.append(assistant)
        elif what in (TrainOnWhat.ALL_MESSAGES, TrainOnWhat.ALL_TOKENS):
            flags.append(True)
        elif what is TrainOnWhat.ALL_USER_AND_SYSTEM_MESSAGES:
            flags.append(m["role"] in ("user", "system"))  # pyright: ignore[reportTypedDictNotRequiredAccess]
        else:
            flags.append(bool(m.get("trainable", False)))
    return flags


def validate_messages(messages: Sequence[Message]) -> None:
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"message {i} must be a dict with 'role' and 'content', got {m!r}")
        if not isinstance(m["role"], str):
            raise TypeError(f"message {i}: role must be a str, got {type(m['role']).__name__}")
        if not isinstance(m["content"], (str, list)):
            raise TypeError(
                f"message {i}: content must be a str (or a list of text parts), got "
                f"{type(m['content']).__name__}"
            )


class _PromptWithText(ModelInput):
    """A prompt that carries its text: what `tokenizer.decode(ids, skip_special_tokens=False)`
    returns for its ids. A private kind of `ModelInput` (it compares, hashes and pickles as one),
    made by `prompt_with_text` only."""

    __slots__ = ("_text", "_tokenizer")

    def __init__(self, tokens: tuple[int, ...], text: str, tokenizer: Any) -> None:
        self._tokens = tokens
        self._text = text
        self._tokenizer = tokenizer


def prompt_with_text(tokens: list[int], text: str, tokenizer: Any) -> ModelInput:
    """A prompt of `tokens` that remembers `text` as its decoding under `tokenizer`, for a
    renderer that built both from the same pieces, with ids valid by construction (the caller
    vouches for both: nothing is checked). `known_prompt_text` reads the text back."""
    return _PromptWithText(tuple(tokens), text, tokenizer)


def known_prompt_text(prompt: ModelInput, tokenizer: Any) -> str | None:
    """`tokenizer.decode(prompt.to_ints(), skip_special_tokens=False)` when the renderer that built
    `prompt` recorded it for this tokenizer (`prompt_with_text`), else None: decode it then."""
    if type(prompt) is _PromptWithText and prompt._tokenizer is tokenizer:
        return prompt._text
    return None


def first_index(tokens: list[int], stops: Sequence[int]) -> tuple[int, int | None]:
    """(position, stop id) of the first occurrence of any id in `stops`, or (len, None).
    One C-level `list.index` scan per stop id, no Python work per token."""
    best, which = len(tokens), None
    for stop in stops:
        if stop in tokens:  # C-level scan; avoids raising ValueError for absent stops
            pos = tokens.index(stop)
            if pos < best:
                best, which = pos, stop
    return best, which


class Renderer(ABC):
    """Turns messages into tokens and sampled tokens back into messages for one tokenizer.

    A subclass implements `get_stop_sequences` and `parse_response`, and either `render_message`
    (then the default `build_generation_prompt` / `build_supervised_example` concatenate rendered
    messages, as the cookbook's do) or both of those builders. Renderers pickle with their
    tokenizer (the byte tokenizer and HF tokenizers both pickle), so env group builders that hold
    one can go to worker processes.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._vocab_size = vocab_size_of(tokenizer)

    @property
    def has_extension_property(self) -> bool:
        """Whether each turn's generation prompt extends the previous one token for token (then a
        multi-turn trajectory is one datum and one supervised example trains every turn)."""
        return False

    @property
    def _bos_tokens(self) -> list[int]:
        return []

    @abstractmethod
    def get_stop_sequences(self) -> list[int] | list[str]: ...

    @abstractmethod
    def parse_response(self, tokens: Sequence[int]) -> tuple[Message, ParseTermination]:
        """(best-effort assistant message, how the response ended); never raises on bad ids."""

    def render_message(self, message: Message, ctx: RenderContext) -> RenderedMessage:
        """`message` as header / output / stop-overlap chunks (see `RenderedMessage`)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement render_message; it builds prompts and "
            "supervised examples itself"
        )

    def _get_generation_suffix(self, role: Role, ctx: RenderContext) -> list[int]:
        """The header that opens the turn to sample: an empty message's header."""
        header = self.render_message(Message(role=role, content=""), ctx).header
        return list(header.tokens) if header else []

    def _contexts(self, messages: Sequence[Message], turn_start: int) -> list[RenderContext]:
        last_user = last_assistant_turn_start(messages) - 1
        n = len(messages)
        return [
            RenderContext(
                idx=i, is_last=i == n - 1,
                prev_message=messages[i - 1] if i > 0 else None,
                next_message=messages[i + 1] if i + 1 < n else None,
                last_user_index=last_user, in_last_assistant_turn=i >= turn_start,
            )
            for i in range(n)
        ]

    def build_generation_prompt(
        self, messages: Sequence[Message], role: Role = "assistant", prefill: str | None = None
    ) -> ModelInput:
        """BOS, every message rendered, the header of a `role` turn, then `prefill` (encoded as
        is) if given."""
        validate_messages(messages)
        tokens: list[int] = list(self._bos_tokens)
        for message, ctx in zip(messages, self._contexts(messages, last_assistant_turn_start(messages))):
            rendered = self.render_message(message, ctx)
            if rendered.header:
                tokens += rendered.header.tokens
            for chunk in rendered.output:
                tokens += chunk.tokens
        suffix_ctx = RenderContext(
            idx=len(messages), is_last=True, prev_message=messages[-1] if messages else None,
            last_user_index=last_assistant_turn_start(messages) - 1, in_last_assistant_turn=True,
        )
        tokens += self._get_generation_suffix(role, suffix_ctx)
        if prefill:
            tokens += self.tokenizer.encode(prefill, add_special_tokens=False)
        return ModelInput.from_ints(tokens)

    def build_supervised_example(
        self,
        messages: Sequence[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[ModelInput, list[float]]:
        """Return the whole conversation's tokens and a loss weight per token: 1 on the output of
        each trained message (see `TrainOnWhat`; headers only under ALL_TOKENS), 0 elsewhere; the
        last message's stop overlap carries its weight."""
        validate_messages(messages)
        what = TrainOnWhat(train_on_what)
        if what is TrainOnWhat.ALL_ASSISTANT_MESSAGES and not self.has_extension_property:
            logger.warning(
                "%s lacks the extension property: training ALL_ASSISTANT_MESSAGES in one example "
                "shows earlier turns a context they were not sampled from; use "
                "build_supervised_examples", type(self).__name__,
            )
        trained = trained_messages(messages, what)
        header_weight = float(what is TrainOnWhat.ALL_TOKENS)
        tokens: list[int] = list(self._bos_tokens)
        weights: list[float] = [0.0] * len(tokens)
        contexts = self._contexts(messages, last_assistant_turn_start(messages[:-1]))
        for i, (message, ctx) in enumerate(zip(messages, contexts)):
            rendered = self.render_message(message, ctx)
            weight = float(trained[i])
            if rendered.header:
                tokens += rendered.header.tokens
                weights += [header_weight] * len(rendered.header.tokens)
            for chunk in rendered.output:
                tokens += chunk.tokens
                weights += [weight] * len(chunk.tokens)
            if ctx.is_last and rendered.stop_overlap:
                tokens += rendered.stop_overlap.tokens
                weights += [weight] * len(rendered.stop_overlap.tokens)
        return ModelInput.from_ints(tokens), weights

    def build_supervised_examples(
        self,
        messages: Sequence[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_TURN,
    ) -> list[tuple[ModelInput, list[float]]]:
        """Supervised examples for a conversation: one when the renderer has the extension
        property; otherwise one per trained assistant message, each ending at that message (so
        every turn is trained in the context it was sampled from)."""
        what = TrainOnWhat(train_on_what)
        if self.has_extension_property:
            return [self.build_supervised_example(messages, train_on_what=what)]
        n = len(messages)
        if what is TrainOnWhat.LAST_ASSISTANT_MESSAGE:
            candidates = range(n - 1, n)
        elif what is TrainOnWhat.LAST_ASSISTANT_TURN:
            candidates = range(last_assistant_turn_start(messages), n)
        elif what is TrainOnWhat.ALL_ASSISTANT_MESSAGES:
            candidates = range(n)
        else:
            raise NotImplementedError(
                f"build_supervised_examples cannot split {what} for {type(self).__name__}, which "
                "lacks the extension property: it trains messages the model does not produce"
            )
        return [
            self.build_supervised_example(
                messages[: i + 1], train_on_what=TrainOnWhat.LAST_ASSISTANT_MESSAGE
            )
            for i in candidates
            # Message is total=False, but a message without a role raises KeyError here, as it always has.
            if messages[i]["role"] == "assistant"  # pyright: ignore[reportTypedDictNotRequiredAccess]
        ]

    def has_invalid_ids(self, tokens: Sequence[int]) -> bool:
        """Whether `tokens` holds ids outside the vocabulary (or non-integers): a response that
        `parse_response` reads as MALFORMED whatever else it holds. Envs that treat unreadable
        actions differently from truncated ones ask this (the cookbook has no such case)."""
        return self._split_valid(tokens)[1]

    # --- shared helpers ---------------------------------------------------------------------
    def _split_valid(self, tokens: Sequence[int]) -> tuple[list[int], bool]:
        """Drop ids outside the vocabulary (and non-integers); report whether any were dropped.

        Sampled tokens are nearly always valid, so that case costs a few C-level passes and no
        Python work per token."""
        if isinstance(tokens, (str, bytes, bytearray)):
            raise TypeError(
                f"parse_response expects sampled token ids, got {type(tokens).__name__}; "
                "pass the list of ints the policy sampled"
            )
        if not isinstance(tokens, list):
            tolist = getattr(tokens, "tolist", None)
            tokens = tolist() if tolist is not None and getattr(tokens, "ndim", None) == 1 else list(tokens)
        limit = self._vocab_size
        try:  # array('Q') rejects negatives and non-integers in one C pass
            ids = array.array("Q", tokens)
        except (TypeError, OverflowError):
            pass
        else:
            if not ids or max(ids) < limit:
                return ids.tolist(), False
            return [t for t in ids.tolist() if t < limit], True
        valid = []
        for t in tokens:
            if type(t) is bool:
                continue
            try:
                i = operator.index(t)
            except TypeError:
                continue
            if 0 <= i < limit:
                valid.append(i)
        return valid, len(valid) != len(tokens)

    def _parse_at_stop_ids(
        self, tokens: Sequence[int], stops: Sequence[int], turn_ends: Sequence[int]
    ) -> tuple[Message, ParseTermination]:
        """`parse_response` for renderers that stop on token ids: cut at the first id in `stops`
        (one in `turn_ends` -> STOP_SEQUENCE, any other, i.e. EOS -> EOS; none, i.e. truncated ->
        MALFORMED, as the cookbook's `parse_response_for_stop_token`; ids outside the vocabulary
        dropped -> MALFORMED) and decode the rest with its special tokens as text, as the
        cookbook's renderers do: a special token sampled inside an answer ("7<|pad|>5") stays
        visible to graders instead of silently joining the digits around it."""
        valid, had_invalid = self._split_valid(tokens)
        cut, which = first_index(valid, stops)
        if which is None:
            termination = ParseTermination.MALFORMED
        else:
            valid = valid[:cut]
            termination = (
                ParseTermination.STOP_SEQUENCE if which in turn_ends else ParseTermination.EOS
            )
        if had_invalid:
            termination = ParseTermination.MALFORMED
        text = self.tokenizer.decode(valid, skip_special_tokens=False)
        return Message(role="assistant", content=text), termination


# The cookbook keeps its content helpers in renderers/base.py; ours live in renderers/content.py
# (imported last: it builds on the types above) and are re-exported so `base.X` imports still work
# (`X as X` marks each as a re-export).
from llm_gym.renderers.content import (  # noqa: E402
    PARSE_FAILURE_DETAIL_MAX_CHARS as PARSE_FAILURE_DETAIL_MAX_CHARS,
    UNTERMINATED_TOOL_BLOCK_ERROR as UNTERMINATED_TOOL_BLOCK_ERROR,
    ContentPart as ContentPart,
    ParseFailureKind as ParseFailureKind,
    classify_parse_failure as classify_parse_failure,
    detect_unterminated_tool_block as detect_unterminated_tool_block,
    ensure_list as ensure_list,
    format_content_as_string as format_content_as_string,
    has_thinking as has_thinking,
    parse_content_blocks as parse_content_blocks,
    parse_think_blocks as parse_think_blocks,
    remove_thinking as remove_thinking,
)
