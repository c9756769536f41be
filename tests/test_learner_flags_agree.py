"""learner.run and learner.eval build their shared flags from one set of field definitions:
same type, choices and help; the defaults differ only where learner.eval says why."""

from __future__ import annotations

import json

import pytest

from learner import eval as eval_cli
from learner.config import build_parser, field_default, literal_choices


def _actions(parser):
    return {a.dest: a for a in parser._actions}


@pytest.mark.parametrize("name", sorted(eval_cli.SHARED))
def test_shared_flags_agree(name):
    run, ev = _actions(build_parser())[name], _actions(eval_cli.build_parser())[name]
    assert run.option_strings == ev.option_strings
    assert run.type == ev.type and run.choices == ev.choices and type(run) is type(ev)
    # learner.eval's help is learner.run's, with at most a note on its own default.
    assert ev.help.startswith(run.help.split(" (default:")[0])
    default, note = eval_cli.SHARED[name]
    if note is None:  # no reason given to differ: the same default
        assert ev.default == field_default(name)


def test_choices_come_from_the_literal_types():
    assert literal_choices("tool_role") == (("auto", "tool", "ipython", "user"), False)
    assert literal_choices("scale_rewards") == (("group", "batch", "none"), True)
    assert literal_choices("steps") == ((), False)
    assert _actions(build_parser())["async_steps"].type is int  # Literal[0, 1]


def test_max_new_tokens_defaults_to_the_runs_else_learner_runs(tmp_path):
    parser = eval_cli.build_parser()
    assert eval_cli.resolve_max_new_tokens(parser.parse_args([])) == field_default(
        "max_new_tokens") == 64  # it was 256 here and 64 in learner.run
    (tmp_path / "config.json").write_text(json.dumps({"max_new_tokens": 96}))
    assert eval_cli.resolve_max_new_tokens(parser.parse_args(["--run", str(tmp_path)])) == 96
    given = parser.parse_args(["--run", str(tmp_path), "--max-new-tokens", "8"])
    assert eval_cli.resolve_max_new_tokens(given) == 8


def test_shared_flags_are_checked_as_learner_run_checks_them(capsys):
    with pytest.raises(SystemExit):
        eval_cli.main(["--top-p", "1.5"])
    assert "--top-p must be in (0, 1]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        eval_cli.main(["--max-new-tokens", "0"])
    assert "--max-new-tokens must be >= 1" in capsys.readouterr().err
