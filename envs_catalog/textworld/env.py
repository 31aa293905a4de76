"""TextWorld (`llm/TextWorld-v0`): play a generated text adventure, one command per turn.

Each episode is one game built by Microsoft's TextWorld (`envs_catalog.textworld.games`: a map of
`world_size` rooms, at least `nb_objects` objects and a quest of `quest_length` actions, compiled
to a Z-machine story by TextWorld's bundled Inform 7 compiler and run by the Jericho interpreter).
The first observation is the game's opening text (its objective and the first room); each turn
the model replies with one command ("go north", "take the key", "unlock chest with key"), the
command is sent to the game and the game's answer is the next user message, followed by the
turns left. The seed picks one of the split's `n_games` games (see `games.pool_specs`: a game
belongs to "test" when `split_of` its key says so, else "train").

Replies are read by the `CommandAnswer` contract under the one answer policy
(`llm_gym.grading.POLICY`; `read_command`): a line labelled "Command:", "Action:" or "Answer:", else the whole
reply, is the command, read as shown (look-alike letters mapped, invisible characters dropped):
an optional ">" prompt mark, quotes, backticks or bold, one line of ASCII letters, digits,
spaces, hyphens and apostrophes, at most `MAX_COMMAND_WORDS` words and `MAX_COMMAND_CHARS`
characters, an optional final "." or "!". Several commands (a "then", a ".", ";" or ","
inside, several lines), prose with punctuation, an empty reply, the interpreter's meta commands (restart,
quit, undo, save, restore, again, oops, yes/no answers, ...) and TextWorld's own `tw-` debug
commands are invalid turns: they cost `invalid_penalty` and a turn and never reach the game. A
readable command the game does not understand ("dance wildly") is a valid turn: the game says so,
reward 0.

Rewards per step (the return is their sum): the game's score gain divided by its maximum score
(TextWorld's generated quests score 1 point, on completion, so a won game returns 1; the score is
clamped to [0, max_score]); -invalid_penalty for an invalid turn. The episode ends when the game
is won ("solved"), lost ("lost": the quest can no longer be completed, e.g. its item was eaten),
after `max_turns` replies ("out_of_turns"), on out-of-vocabulary token ids ("malformed_tokens",
with the penalty), or when the next observation would pass `max_context_tokens`
("context_exceeded"; that turn scored as usual). Each game answer is cut to
`MAX_FEEDBACK_CHARS`. So the return lies in [-invalid_penalty * max_turns, 1]. Observations keep
the prefix property (`llm_gym.renderers.continuation.Continuation`). Gold scripted case: TextWorld's
own winning policy for the current state (`EnvInfos(policy_commands=True)`), one command a turn.
"""

from __future__ import annotations

import re
import warnings
from typing import Any, cast

import numpy as np

from envs_catalog.textworld import games
from llm_gym.authoring import check_float, check_int, child_seed
from llm_gym.env_source import EnvCard, EnvSource
from llm_gym.grading import AnswerContract
from llm_gym.grading.policy import Declaration
from llm_gym.model_input import ModelInput
from llm_gym.renderers import Message, ParseTermination, Renderer
from llm_gym.renderers.continuation import Continuation
from llm_gym.rl.types import Action, ActionExtra, Env, Observation, StepResult, StopCondition
from llm_gym.scripted import ScriptedCase

DEFAULTS: dict[str, Any] = {
    "world_size": 2, "nb_objects": 4, "quest_length": 2, "n_games": 8, "max_turns": 12,
    "invalid_penalty": 0.1, "max_context_tokens": 8192,
}
MAX_COMMAND_CHARS = 80  # below Jericho's 198-byte input buffer, so nothing is cut silently
MAX_COMMAND_WORDS = 10
MAX_FEEDBACK_CHARS = 1200
MAX_REPLY_CHARS = 400  # longer replies are not read at all (a command is short)

# Interpreter and library commands that act on the session, not the world (and "again"/"oops",
# which replay or patch an earlier command): never sent to the game.
META_VERBS = frozenset(
    "restart quit q save restore undo script unscript transcript noscript verify version notify "
    "brief verbose superbrief normal long short pronouns nouns again g oops o yes y no".split()
)
_COMMAND = re.compile(r"[a-z0-9'][a-z0-9' -]*")
_PROMPT_MARK = re.compile(r"^>[ \t]*")
# A label line that declares the command ("Command: go north", "My next action: look").
_LINE_LEAD = re.compile(r"[ \t*_#>]*(?:[A-Za-z]+[ \t]+){0,3}")


_WRAPS = ("**", "__", "`", '"', "'")  # bold, code, quotes: one pair each, two layers at most


def _unwrap(text: str) -> str:
    body = text.strip()
    for _ in range(2):  # **`look`**
        wrap = next((w for w in _WRAPS if len(body) >= 2 * len(w) and body.startswith(w) and body.endswith(w)), None)
        if wrap is None:
            break
        body = body[len(wrap): len(body) - len(wrap)].strip()
    return body


def _one_command(slot: str) -> tuple[str | None, str]:
    """(the command, "ok") when `slot` (markup already off) is one game command, else (None, why)."""
    body = _PROMPT_MARK.sub("", slot.strip()).strip()
    if body[-1:] in (".", "!"):
        body = body[:-1].rstrip()
    if not body:
        return None, "empty"
    if "\n" in body or "\r" in body:
        return None, "several_lines"
    body = " ".join(body.lower().split())
    if len(body) > MAX_COMMAND_CHARS:
        return None, "too_long"
    if not _COMMAND.fullmatch(body):
        return None, "not_a_command"
    words = body.split()
    if len(words) > MAX_COMMAND_WORDS:
        return None, "too_long"
    if "then" in words:
        return None, "several_commands"
    if words[0] in META_VERBS or words[0].startswith("tw-"):
        return None, "meta_command"
    return body, "ok"


class CommandAnswer(AnswerContract):
    """The env's answer contract: one game command. It is declared by a line labelled
    "Command:" / "Action:" (a few words may stand before the label), else the whole reply is the
    command -- so several lines, or prose around a command, are not one command."""

    kind = "command"
    multiline = True
    whole_reply = True
    placeholder = "command"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(labels=("answer", "command", "action"), max_chars=MAX_REPLY_CHARS, name="one command",
                         **kwargs)

    def parse(self, text: str) -> str | None:
        return _one_command(_unwrap(text))[0]

    def read_slot(self, slot: str) -> str | None:
        return self.parse(slot)

    def find_declarations(self, visible: str) -> list[Declaration] | None:
        found = super().find_declarations(visible)
        if found is None:
            return None
        return [d for d in found if d.source == "label"
                and _LINE_LEAD.fullmatch(visible[visible.rfind("\n", 0, d.start) + 1: d.start])]

    def last_answer(self, visible: str) -> Declaration | None:
        return Declaration("whole", visible, 0) if visible.strip() else None

    def answer_block(self, block: str) -> str:
        return block.split("\n", 1)[0]  # the label's own line: one command

    def mentions(self, text: str) -> bool:
        return bool(text.strip())

    def format(self, value: Any) -> str:
        return str(value)

    def describe(self) -> str:
        return "one game command on one line"

    def attack_others(self, gold: str, rng: Any) -> list[str]:
        return ["look" if gold != "look" else "inventory"]


COMMAND = CommandAnswer()


def read_command(text: str) -> tuple[str | None, str]:
    """(the command, lowercased, single-spaced; "ok") for a reply that is one game command under
    the `CommandAnswer` contract, else (None, why): "empty", "unreadable" (bidirectional
    overrides, other scripts' digits, U+FFFD), "too_long", "several_lines", "several_commands"
    (a "then"), "not_a_command" (punctuation, symbols: ".", ";" and "," would chain commands in
    the game's parser), "meta_command" or "conflicting" (two declared commands)."""
    if len(text) > MAX_REPLY_CHARS:
        return None, "too_long"
    reading = COMMAND.read(text)
    if reading.ok:
        return reading.value, "ok"
    if reading.status in ("invalid_text", "confusable", "unsupported_digits"):
        return None, "unreadable"
    if reading.status == "malformed":
        return None, _one_command(_unwrap(reading.text))[1]
    return None, reading.status


_STATUS_TAIL = re.compile(r"\s*>?\s*-= [^\n=]*=-\s*-?\d+/\d+\s*\Z")  # prompt + status line
_THE_END = "*** The End ***"


def clean_game_text(raw: str, limit: int = MAX_FEEDBACK_CHARS) -> str:
    """The player-facing part of the interpreter's output: no status line or prompt at the end,
    no ASCII-art banner (leading lines without a letter), nothing after "*** The End ***" (the
    restart menu), runs of blank lines folded, cut to `limit` characters."""
    text = raw.replace("\r", "")
    text = _STATUS_TAIL.sub("", text).rstrip()
    if text.endswith(">"):
        text = text[:-1].rstrip()
    end = text.find(_THE_END)
    if end >= 0:
        text = text[: end + len(_THE_END)]
    lines = text.split("\n")
    while lines and not re.search(r"[A-Za-z]", lines[0]):
        lines.pop(0)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in lines)).strip()
    if len(text) > limit:
        text = text[: limit - 5].rstrip() + " [...]"
    return text or "(no answer)"


def intro_text(game_text: str, max_turns: int) -> str:
    return (
        "You are playing a text adventure game. Complete the task the game gives you. Each turn, "
        "reply with exactly one command, such as: go north, look, inventory, examine box, take "
        f"key, open door, unlock chest with key, put apple on table. You have {max_turns} turns."
        f"\n\n{game_text}"
    )


def _request_infos():
    textworld = games.require_textworld()
    return textworld.EnvInfos(policy_commands=True, max_score=True, won=True, lost=True,
                              score=True)


class TextWorldEnv(Env):
    """One game. Step metrics: `invalid` and, while the game goes on, the continuation's one-hot
    mode; on the last step `solved`, `lost`, `turns`, `invalid_turns`, `context_exceeded`
    (log `stop_reason`). `policy_commands` is TextWorld's winning policy from the current state
    (for scripted policies; empty once the game is over)."""

    rules_reminder = "Reply with exactly one game command, such as: go north, take key."
    answer_contract = COMMAND  # what a reply is (the generated attack suite is built from it)

    def __init__(
        self, renderer: Renderer, game_path: str, *, max_turns: int, invalid_penalty: float,
        max_context_tokens: int, game_seed: int, game_key: str = "",
        continuation: Continuation | None = None,
    ) -> None:
        self.renderer = renderer
        self.game_path = game_path
        self.game_key = game_key  # `games.GameSpec.key`: what the split is decided on
        self.max_turns = max_turns
        self.invalid_penalty = invalid_penalty
        self.max_context_tokens = max_context_tokens
        self.game_seed = game_seed
        self.continuation = continuation or Continuation(renderer)
        self._stop = renderer.get_stop_sequences()
        self._game: Any = None  # the running textworld environment
        self._ob: ModelInput | None = None
        self._messages: list[Message] = []
        self.intro = ""
        self.policy_commands: list[str] = []
        self.score = 0
        self.max_score = 1
        self.turns = 0
        self.invalid_turns = 0
        self.done = False

    @property
    def stop_condition(self) -> StopCondition:
        return cast(StopCondition, list(self._stop))  # a copy, of the same kind (str or int)

    def close(self) -> None:
        """Stop the interpreter (called at the end of the game and by `release_env`)."""
        if self._game is not None:
            game, self._game = self._game, None
            game.close()

    def _track(self, state: Any) -> None:
        self.policy_commands = list(state.get("policy_commands") or [])
        self.max_score = max(1, int(state.get("max_score") or 1))

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        textworld = games.require_textworld()
        import jericho  # pyright: ignore[reportMissingImports]  (textworld's; not in .venv)

        with warnings.catch_warnings():
            # Jericho warns that a TextWorld story is not in its list of known games (score and
            # move detection come from TextWorld's wrapper instead): expected, not the user's
            # business, and `check_env` must see no warnings.
            warnings.simplefilter("ignore", jericho.UnsupportedGameWarning)
            self._game = textworld.start(self.game_path, request_infos=_request_infos())
        self._game.seed(self.game_seed)  # the interpreter's random opcode
        state = self._game.reset()
        self._track(state)
        self.intro = intro_text(clean_game_text(state.feedback), self.max_turns)
        self._ob = self.continuation.first(self._intro_messages())
        return self._ob, self.stop_condition

    def _intro_messages(self) -> list[Message]:
        return [{"role": "user", "content": self.intro}]

    def _finish(self, reward: float, stop_reason: str, metrics: dict, logs: dict) -> StepResult:
        self.done = True
        self.close()
        self.policy_commands = []
        metrics.update(
            solved=float(stop_reason == "solved"), lost=float(stop_reason == "lost"),
            turns=self.turns, invalid_turns=self.invalid_turns,
            context_exceeded=float(stop_reason == "context_exceeded"),
        )
        logs.update(stop_reason=stop_reason, game=self.game_path, score=self.score)
        return StepResult(reward, True, ModelInput.empty(), self.stop_condition, metrics, logs)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self._ob is None or self.done:
            raise RuntimeError(
                "TextWorldEnv: call initial_observation() first; envs are single-use")
        self.turns += 1
        message, termination = self.renderer.parse_response(action)
        text = str(message.get("content", ""))
        logs: dict[str, Any] = {"response": text[:1000]}
        if termination is ParseTermination.MALFORMED and self.renderer.has_invalid_ids(action):
            self.invalid_turns += 1  # such ids cannot be appended to the transcript
            logs["command_status"] = "malformed_tokens"
            return self._finish(-self.invalid_penalty, "malformed_tokens", {"invalid": 1.0}, logs)
        command, status = read_command(text) if termination.is_clean else (None, "truncated")
        logs["command_status"] = status
        metrics: dict[str, float | int] = {"invalid": float(command is None)}
        if command is None:
            self.invalid_turns += 1
            reward = -self.invalid_penalty
            feedback = f"That is not one game command ({status.replace('_', ' ')}). " \
                       f"{self.rules_reminder}"
        else:
            logs["command"] = command
            state, _, _ = self._game.step(command)
            self._track(state)
            score = min(max(int(state.get("score") or 0), 0), self.max_score)
            reward, self.score = (score - self.score) / self.max_score, score
            if state.get("won"):
                return self._finish(reward, "solved", metrics, logs)
            if state.get("lost"):
                return self._finish(reward, "lost", metrics, logs)
            feedback = clean_game_text(state.feedback)
        if self.turns >= self.max_turns:
            return self._finish(reward, "out_of_turns", metrics, logs)
        # the cap is checked before the action is appended, so a huge action costs no copy
        if self._ob.length + len(action) >= self.max_context_tokens:
            return self._finish(reward, "context_exceeded", metrics, logs)
        left = self.max_turns - self.turns
        feedback += f"\n\n({left} {'turn' if left == 1 else 'turns'} left.)"
        self._messages = (self._messages or self._intro_messages()) + [
            message, {"role": "user", "content": feedback}
        ]
        step = self.continuation.next(self._ob, action, self._messages)
        if step.observation.length > self.max_context_tokens:
            return self._finish(reward, "context_exceeded", metrics, logs)
        metrics.update(step.metrics)
        self._ob = step.observation
        return StepResult(reward, False, self._ob, self.stop_condition, metrics, logs)


_EXAMPLE_GAME = (
    "Welcome to TextWorld! First step, go north. Then, unlock the locker with the latchkey. "
    "Then, open the locker. That's it!\n\n-= Sauna =-\nYou are in a sauna.\n\nYou see a "
    "locked trunk in the corner.\n\nThere is an exit to the north."
)


class TextWorldSource(EnvSource):
    """Games for `llm/TextWorld-v0`; knobs in `DEFAULTS` (see the card). Constructing the source
    builds no game; `make_env` builds (once, cached on disk) the game the seed picks, and
    `prepare()` builds the whole pool up front."""

    card = EnvCard(
        id="llm/TextWorld-v0",
        family="textworld",
        description=(
            "Multi-turn text adventure generated by Microsoft TextWorld: a small house of "
            "world_size rooms with objects, containers and doors, and a quest of quest_length "
            "actions stated in the opening text (take an item, unlock and open a container, put "
            "something somewhere). Each turn the model replies with one command and the game "
            "(a real Z-machine story compiled by TextWorld's bundled Inform 7 compiler, run by "
            "Jericho) answers. One command per reply: several commands, prose with punctuation, "
            "meta commands (restart, undo, save, ...) and empty replies are invalid turns that "
            "never reach the game. Each seed picks one of n_games pre-generated games per split "
            "(held out by a hash of the game's key); games are built once and cached on disk "
            "(seconds each). Needs the optional extra 'textworld'. Each observation extends the "
            "previous one (prefix property), so a game is one training datum."
        ),
        multi_turn=True,
        reward_range=(-1.2, 1.0),
        reward_meaning=(
            "Episode return: the game's final score / max score (1 for completing the quest, "
            "else 0), minus invalid_penalty (0.1) for each invalid turn (not exactly one "
            "command, a meta command, truncated or out-of-vocabulary tokens, which also end the "
            "game). The game ends when won, lost (the quest became impossible), after max_turns "
            "replies, or when the next observation would pass max_context_tokens. Range "
            "[-invalid_penalty*max_turns, 1]."
        ),
        difficulty_knobs={
            "world_size": "rooms in the map, 1-10 (default 2)",
            "nb_objects": "objects in the world at least (quest items plus distractors), 1-30 "
                          "(default 4)",
            "quest_length": "actions the quest needs, 1-8 (default 2)",
            "n_games": "distinct games per split (each built once, ~4 s, cached on disk), "
                       "1-128 (default 8)",
            "max_turns": "replies allowed, 1-100 (default 12)",
            "invalid_penalty": "reward for an invalid turn is minus this, 0-1 (default 0.1)",
            "max_context_tokens": "the game ends (stop reason context_exceeded) rather than let "
                                  "an observation grow past this many tokens, 512-1000000 "
                                  "(default 8192)",
        },
        data_source=(
            "games generated offline by TextWorld 1.7.0 (textworld.generator, its 'house' theme "
            "grammar) and compiled by its bundled Inform 7 compiler; played with Jericho 3.3 "
            "(Frotz); seeded by a hash of the knobs and the game number; cached under "
            "$LLM_GYM_TEXTWORLD_CACHE or ~/.cache/llm_gym/textworld"
        ),
        license=(
            "generated games: ours (Apache-2.0); TextWorld: MIT; Jericho (the interpreter, an "
            "optional dependency): GPL-2.0-or-later"
        ),
        example_episode=[
            {"role": "user", "content": intro_text(_EXAMPLE_GAME, 12)},
            {"role": "assistant", "content": "go north"},
            {"role": "user", "content": "-= Kitchen =-\nYou are in the kitchen. You see a "
                                        "table.\n\n(11 turns left.)"},
            {"role": "assistant", "content": "go south"},
        ],
        answer_form="exact text",  # the reply is the game command itself; prose would be read as one
        answer_contract="one game command (CommandAnswer): a 'Command:' line, else the whole reply",
    )

    def __init__(self, *, renderer: Renderer, split: str = "train", **knobs: Any) -> None:
        own = {k: knobs.pop(k, v) for k, v in DEFAULTS.items()}
        super().__init__(renderer=renderer, split=split, **knobs)
        self.world_size = check_int("world_size", own["world_size"], 1, 10)
        self.nb_objects = check_int("nb_objects", own["nb_objects"], 1, 30)
        self.quest_length = check_int("quest_length", own["quest_length"], 1, 8)
        self.n_games = check_int("n_games", own["n_games"], 1, 128)
        self.max_turns = check_int("max_turns", own["max_turns"], 1, 100)
        self.invalid_penalty = check_float("invalid_penalty", own["invalid_penalty"], 0.0, 1.0)
        self.max_context_tokens = check_int(
            "max_context_tokens", own["max_context_tokens"], 512, 1_000_000)
        games.require_textworld()  # fail at gym.make, with the install command, not mid-episode
        self.continuation = Continuation(renderer)
        self.pool = games.pool_specs(self.world_size, self.nb_objects, self.quest_length, split,
                                     self.n_games)

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-self.invalid_penalty * self.max_turns, 1.0)

    def prepare(self) -> list[str]:
        """Build (or find in the cache) every game of this split's pool; their paths."""
        return [str(games.game_file(spec)) for spec in self.pool]

    def make_env(self, rng: np.random.Generator) -> TextWorldEnv:
        spec = self.pool[int(rng.integers(len(self.pool)))]
        game_seed = child_seed(rng) % (2**31)
        return TextWorldEnv(
            self.renderer, str(games.game_file(spec)), max_turns=self.max_turns,
            invalid_penalty=self.invalid_penalty, max_context_tokens=self.max_context_tokens,
            game_seed=game_seed, game_key=spec.key, continuation=self.continuation,
        )

    def small_held_out_reason(self) -> str | None:
        """A held-out split of `n_games` games (8 by default): TextWorld compiles each game (~4 s,
        cached on disk), so the default keeps first use under a minute."""
        if self.n_games >= 100:
            return None
        return (f"each game is compiled by TextWorld (~4 s, cached on disk), so the split holds "
                f"n_games={self.n_games} games; pass n_games=100 or more (at most 128) for a "
                f"held-out evaluation of at least 100 games")

    def task_key(self, env: TextWorldEnv) -> str:
        """The game's key (for `llm-gym check`'s split check): the episode's task is its game."""
        return env.game_key

    def scripted_cases(self) -> list[ScriptedCase]:
        """Gold: TextWorld's winning policy from the current state, one command a turn (its
        first command each time), bare and after a "Command:" marker; the case raises max_turns
        to cover a quest of quest_length + 8 steps when the source allows fewer. Adversarial —
        none scores above 0 (the return of a game that is not won): the whole walkthrough on
        one line (joined by ". ", by " then ", by "; " and on several lines), "look" every
        turn (exactly 0), an empty reply, prose about the plan, meta commands (restart, undo),
        TextWorld's debug command `tw-print`, a win claim ("*** The End ***"), and a command
        the game does not know (exactly 0)."""
        lo = -self.invalid_penalty * self.max_turns
        needed = self.quest_length + 8

        def first(env: TextWorldEnv) -> str:
            return env.policy_commands[0] if env.policy_commands else "look"

        def joined(sep: str):
            # "look" is appended so that a one-step quest still gives two commands
            return lambda env, ob: sep.join([*env.policy_commands, "look"])

        def case(name: str, reply: Any, low: float = lo, high: float = 0.0) -> ScriptedCase:
            return ScriptedCase(name, "adversarial", reply, low, high)

        gold_knobs = {"max_turns": needed} if self.max_turns < needed else {}
        return [
            ScriptedCase("TextWorld's winning policy", "gold", lambda env, ob: first(env),
                         1.0, 1.0, knobs=gold_knobs,
                         note="the game's own policy_commands from the current state"),
            ScriptedCase("winning policy after a marker", "gold",
                         lambda env, ob: f"Command: {first(env)}", 1.0, 1.0, knobs=gold_knobs),
            case("the walkthrough joined by periods", joined(". ")),
            case("the walkthrough joined by then", joined(" then ")),
            case("the walkthrough joined by semicolons", joined("; ")),
            case("the walkthrough on several lines", joined("\n")),
            case("look every turn", lambda env, ob: "look", 0.0, 0.0),
            case("empty", lambda env, ob: ""),
            case("prose plan", lambda env, ob: f"I think I should {first(env)}, and then finish "
                                               "the quest."),
            case("restart", lambda env, ob: "restart"),
            case("undo", lambda env, ob: "undo"),
            case("debug command", lambda env, ob: "tw-print score"),
            case("win claim", lambda env, ob: "*** The End ***"),
            case("unknown verb", lambda env, ob: "dance wildly", 0.0, 0.0),
        ]


__all__ = ["DEFAULTS", "TextWorldEnv", "TextWorldSource", "clean_game_text", "intro_text",
           "read_command"]
