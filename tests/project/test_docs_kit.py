"""docs/writing-an-env.md's command sequence is real: every `llm-gym` command in its kit block
exists in `llm_gym.cli.COMMANDS` and its parser accepts the flags shown, the names agree with what
`llm-gym new` generates, and tests/llm_gym/cli/test_cli_new.py runs the same sequence with the same flags. The
code's pointers to the design docs name files a clone has."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from llm_gym import cli
from llm_gym.cli.new import names_for

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "writing-an-env.md"


def kit_commands() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    marker = text.index("<!-- kit-sequence")
    block = re.search(r"```bash\n(.*?)```", text[marker:], re.S)
    assert block, "no ```bash block after the kit-sequence marker"
    commands = []
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands.append(words)
    return commands


def parser_for(command: str):
    if command == "train":
        from trainers.cli_train import build_parser

        return build_parser()
    module = __import__(cli.COMMANDS[command].partition(":")[0], fromlist=["build_parser"])
    return module.build_parser()


def test_the_kit_sequence_is_new_install_check_test_train():
    commands = kit_commands()
    kinds = [c[1] if c[0] == "llm-gym" else c[0] for c in commands]
    assert kinds == ["new", "pip", "check", "python", "train"]


def test_every_llm_gym_command_exists_and_accepts_the_flags_shown():
    for words in kit_commands():
        if words[0] != "llm-gym":
            continue
        name, rest = words[1], words[2:]
        assert name in cli.COMMANDS, name
        try:
            parser_for(name).parse_args(rest)
        except SystemExit as exc:  # argparse refused the flags
            pytest.fail(f"`llm-gym {name}` refuses {rest}: exit {exc.code}")
        except Exception as exc:  # the train parser raises ConfigError instead
            pytest.fail(f"`llm-gym {name}` refuses {rest}: {exc}")


def test_the_names_in_the_sequence_are_what_new_generates():
    by_kind = {(c[1] if c[0] == "llm-gym" else c[0]): c for c in kit_commands()}
    new = parser_for("new").parse_args(by_kind["new"][2:])
    values = names_for(new.name)
    assert by_kind["check"][2] == values["__ENV_ID__"]
    assert by_kind["train"][by_kind["train"].index("--env") + 1] == values["__ENV_ID__"]
    out = Path(new.out)
    assert Path(by_kind["pip"][-1]) == out
    assert Path(by_kind["python"][-1]) == out / "tests"
    assert out.name == values["__DIST__"]  # the default --out is the same directory
    assert values["__PKG__"] in DOC.read_text(encoding="utf-8")


def test_test_cli_new_exercises_the_same_sequence():
    source = (REPO / "tests" / "llm_gym" / "cli" / "test_cli_new.py").read_text(encoding="utf-8")
    for command in ('"new"', '"check"', '"train"', '"pytest"', '"pip", "install"'):
        assert command in source, command
    by_kind = {(c[1] if c[0] == "llm-gym" else c[0]): c for c in kit_commands()}
    for kind in ("new", "check", "train"):
        for flag in (w for w in by_kind[kind] if w.startswith("--")):
            assert f'"{flag}"' in source, f"test_cli_new.py never passes {flag} to {kind}"


@pytest.mark.parametrize("path", ["llm_gym/env_source.py", "trainers/sampling/hf.py",
                                  "trainers/sampling/vllm_backend.py", "trainers/grpo/trainer.py",
                                  "trainers/sft.py"])
def test_doc_pointers_name_files_a_clone_has(path):
    text = (REPO / path).read_text(encoding="utf-8")
    assert "DESIGN.md" not in text and "CONVENTIONS.md" not in text
    for pointer in re.findall(r"docs/[\w.-]+\.md", text):
        assert (REPO / pointer).is_file(), pointer
    for doc in ("docs/design.md", "docs/writing-an-env.md", "CONTRIBUTING.md"):
        assert (REPO / doc).is_file()
