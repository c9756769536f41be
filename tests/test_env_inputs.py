"""Inputs that were slow or raised (issue 23): each gets a clear one-line error or a verdict.

- the JSON gate's search amid prose does work linear in the text, with the same results;
- a completion that is no Unicode text (a lone surrogate) gets the verdict ``invalid_text`` in
  every env, tool episodes included, and never reaches a sandbox;
- every keyword of every built-in env refuses a value it cannot use at ``gym.make``, in one line
  naming the keyword; an unknown keyword names the env's keywords and the closest one;
- an unknown task id says what the pack's ids look like, for every built-in pack.

None of these needs Docker: a sandbox that is reached fails the test.
"""

from __future__ import annotations

import inspect
import json
import math
import random

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the envs
from envs.base import TaskEnv
from envs.domains.code_tests import CodeTestsEnv
from envs.python_tool import PythonTool
from envs.registration import BUILTIN
from envs.verify import json_extract
from envs.verify.json import verify
from tasks import PackError, load_pack, pack_names
from tasks.pack import manifest_problems

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


# -- the JSON gate: linear work amid prose ----------------------------------------------------

@pytest.fixture
def counted_chars(monkeypatch):
    """The characters ``json`` scans to give its failures a line and column, over every failed
    decode: the work that grew with the square of the length (list of one running total)."""
    total = [0]
    init = json.JSONDecodeError.__init__

    def counting(self, msg, doc, pos):
        total[0] += pos  # JSONDecodeError counts the line breaks in doc[:pos]
        init(self, msg, doc, pos)

    monkeypatch.setattr(json.JSONDecodeError, "__init__", counting)
    return total


@pytest.mark.parametrize("text, reason", [
    pytest.param("a" + "{x" * 20_000, "no_json", id="issue-braces"),  # the issue's, smaller
    pytest.param("\\boxed{" * 6_000, "no_json", id="issue-boxed"),  # the issue's, smaller
    pytest.param("a" + '{"' * 20_000, "no_json", id="keys"),  # each brace may start an object
    pytest.param("a" + '{"a": 1, ' * 4_000 + '{"name": "Ada"}', "valid", id="unclosed-objects"),
    pytest.param("see [2, 3" + " and {x}" * 5_000 + ' {"name": "Ada"}', "valid", id="prose"),
])
def test_json_search_amid_prose_reads_each_character_a_bounded_number_of_times(
        counted_chars, text, reason):
    assert verify(SCHEMA, text).reason == reason
    assert counted_chars[0] <= 4 * len(text), "failed decodes rescan the text before them"


def test_depth_check_string_search_starts_a_match_at_every_quote():
    # A quote whose string never closes used to fail its match and send the search on to the
    # next quote, rescanning the rest of the text from each: quadratic in escaped quotes.
    text = "[" * 65 + '\\"' * 50
    quotes = [i for i, c in enumerate(text) if c == '"']
    assert all(json_extract._STRING.match(text, i) for i in quotes)
    assert verify(SCHEMA, text).reason == "too_deep"
    assert json_extract.nesting_depth('{"a": "x}]", "b": [[1]]}') == 3  # strings still skipped


def _whole_text_search(text: str):
    """The reference: ``raw_decode`` in the whole text at each bracket, as before issue 23."""
    for start in (i for i, c in enumerate(text) if c in "[{"):
        try:
            value, end = json_extract.DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        return value, end
    return None


def _outcome(search, text):
    try:
        return search(text)
    except json_extract.Rejected as rej:
        return ("rejected", rej.reason)
    except RecursionError:
        return ("rejected", "too_deep")


_PIECES = ["the ", "answer ", "\n", "{", "}", "[", "]", '"', ":", ", ", "1", "-2.5e3", "true",
           "null", "NaN", "\\", "\\u00e9", "\\ud83d\\ude00", '"k"', '{"a": 1}', '[1, [2, "x"]]',
           '{"a": 1, "a": 2}', "1e999", "   ", '"s\\"q"', "{x", "\\boxed{"]


@pytest.mark.parametrize("first_window", [4, 256])
def test_windowed_search_finds_what_the_whole_text_search_finds(monkeypatch, first_window):
    # Tiny first windows cut nearly every value somewhere: the result must not change. (A guard
    # on the new search: the whole-text search of old passes it trivially.)
    monkeypatch.setattr(json_extract, "_FIRST_WINDOW", first_window, raising=False)
    rng = random.Random(23)
    budget = 10**9

    def windowed(text):
        return json_extract._next_in_prose(text, 0, budget, 64)

    for _ in range(3000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 60)))
        assert _outcome(windowed, text) == _outcome(_whole_text_search, text), text


def test_a_prefix_of_json_always_fails_as_cut_short():
    decoder = json.JSONDecoder()
    documents = [
        '{"name": "Ada", "n": [1, -2.5e-3, 10E+2, 0], "ok": true, "no": false, "x": null}',
        '[{"a": "\\u00e9\\ud83d\\ude00\\n\\"q\\\\"}, [[], {}], "tail"]',
        '{"k": [true, false, null, -0.5, 123456789012345678901234567890]}',
        '[   1 ,\n  2\t, "   " ]',
    ]
    for doc in documents:
        decoder.raw_decode(doc)  # the whole document decodes
        for cut in range(1, len(doc)):
            with pytest.raises(json.JSONDecodeError) as err:
                decoder.raw_decode(doc[:cut])
            assert json_extract.cut_short(err.value, cut), (doc[:cut], err.value)


# -- text that is not Unicode: a verdict in every env -------------------------------------------

LONE = "\ud800"


@pytest.fixture
def no_sandbox(monkeypatch):
    """Reaching a sandbox fails the test: such text must be graded before any is used."""
    def refuse(*_args, **_kwargs):
        pytest.fail("a sandbox was reached with text that is not Unicode")

    monkeypatch.setattr(PythonTool, "_sandbox", refuse)
    monkeypatch.setattr(CodeTestsEnv, "sandbox", property(refuse))


@pytest.mark.parametrize("env_id, kwargs, action", [
    ("grpo/MathExact-v0", {"pack": "arith", "level": 1}, f"\\boxed{{3}}{LONE}"),
    ("grpo/JsonSchema-v0", {"level": 1}, f'{{"name": "{LONE}"}}'),
    ("grpo/CodeTests-v0", {}, f"```python\ndef f():\n    return '{LONE}'\n```"),
    ("grpo/MathPython-v0", {"level": 1}, f"```python\nprint('{LONE}')\n```"),
    ("grpo/MathPython-v0", {"level": 1}, f"\\boxed{{3}} {LONE}"),
    ("grpo/JsonSchema-v0", {"level": 1, "python_tool": True, "max_turns": 3},
     f"```python\nprint('{LONE}')\n```"),
])
def test_a_lone_surrogate_is_graded_invalid_text(no_sandbox, env_id, kwargs, action):
    env = gym.make(env_id, **kwargs)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert (obs, reward, terminated, truncated) == ("", 0.0, True, False)
    assert info["reason"] == "invalid_text" and not info["passed"]
    assert "surrogate" in info["verdict"].details["error"]
    assert set(info["rewards"]) == set(env.unwrapped.default_weights)
    assert not any(info["rewards"].values())
    if env.unwrapped.tool is not None:
        assert info["turns"] == 1 and info["tool_calls"] == 0
    assert info.get("infra_error") in (None, False)  # the policy's text, not the sandbox


def test_the_python_tool_does_not_run_code_that_is_not_unicode(no_sandbox):
    result = PythonTool().run(f"print('{LONE}')")
    assert result.status == "runtime_error" and result.failed and not result.infra
    assert "surrogate" in result.observation and result.observation.startswith("```output")


# -- env keywords: refused at gym.make, one line each --------------------------------------------

# A value each keyword must refuse, and words its message must hold. Every keyword of every
# built-in env needs a row: test_every_env_keyword_is_checked fails for a new one without.
BAD = {
    "pack": (3, "pack name"),
    "split": (3, "split name"),
    "reward_weights": ("x", "mapping"),
    "python_tool": ("yes", "PythonTool"),
    "max_turns": (0, "positive integer"),
    "timeout": ("5", "positive, finite number"),
    "require_boxed": ("no", "True or False"),
    "decimal_rounding": ("no", "True or False"),
    "max_chars": (-1, "positive integer"),
    "max_depth": (0, "positive integer"),
    "sandbox": ("x", "Sandbox"),
    "per_test_s": ("3", "positive, finite number"),
    "tool_output_chars": ("x", "integer"),
    "tool_limits": ("x", "Limits"),
    # grpo/OpenEnv-v0's (all checked before any server is asked)
    "base_url": ("ftp://host", "http(s) URL"),
    "action_field": (3, "field name"),
    "observation_field": (3, "field name"),
    "launch_command": ([], "shell command line"),
    "launch_timeout": (0, "positive, finite number"),
    "heldout_size": (0, "positive integer"),
    "reward_max": (math.nan, "finite number"),
    "reward_range": ([1, 0], "pair [low, high] of finite numbers with low < high"),
    "max_observation_bytes": (10, "integer of at least 1024"),
    # grpo/ReasoningGym-v0's own (its generator's config keys are checked in its tests)
    "task": (3, "reasoning-gym task name"),
    "level": ("x", "positive integer"),
}
# The issue's values, beyond one per keyword.
MORE = [
    ("grpo/MathExact-v0", "timeout", float("nan")),
    ("grpo/MathExact-v0", "timeout", 0),
    ("grpo/MathExact-v0", "require_boxed", 1),
    ("grpo/MathExact-v0", "reward_weights", {"correct": float("nan")}),
    ("grpo/MathExact-v0", "reward_weights", {"correct": "1"}),
    ("grpo/MathExact-v0", "reward_weights", {"correct": math.inf}),
    ("grpo/CodeTests-v0", "per_test_s", -1.0),
    ("grpo/MathPython-v0", "tool_output_chars", 5),
    ("grpo/JsonSchema-v0", "max_chars", 2.5),
    ("grpo/MathExact-v0", "level", True),  # a pack option: arith's level (with pack="arith")
    ("grpo/MathExact-v0", "level", 2.0),
    ("grpo/JsonSchema-v0", "level", "2"),
    ("grpo/JsonSchema-v0", "family", "pets"),
]


def _refusal(env_id: str, keyword: str, value: object) -> str:
    pack = {"pack": "arith"} if keyword == "level" and env_id == "grpo/MathExact-v0" else {}
    with pytest.raises((TypeError, ValueError)) as err:
        gym.make(env_id, **pack, **{keyword: value})
    message = str(err.value)
    assert "\n" not in message and keyword in message, message
    return message


def _keywords(env_id: str) -> set[str]:
    """The named keywords of an env's constructors, from TaskEnv down."""
    env_cls = gym.envs.registration.load_env_creator(BUILTIN[env_id])
    names = set()
    for klass in env_cls.__mro__[: env_cls.__mro__.index(TaskEnv) + 1]:
        if "__init__" in klass.__dict__:
            params = list(inspect.signature(klass.__init__).parameters.values())[1:]
            names |= {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                            p.KEYWORD_ONLY)}
    return names


@pytest.mark.parametrize("env_id", sorted(BUILTIN))
def test_every_env_keyword_is_checked(env_id):
    keywords = sorted(_keywords(env_id))
    assert set(keywords) <= set(BAD), f"no bad value for {set(keywords) - set(BAD)}"
    for keyword in keywords:
        value, accepts = BAD[keyword]
        assert accepts in _refusal(env_id, keyword, value)


@pytest.mark.parametrize("env_id, keyword, value", MORE)
def test_the_issues_bad_values_are_refused(env_id, keyword, value):
    load_pack("arith", level=1), load_pack("arith", level=2)  # cached packs must not answer
    _refusal(env_id, keyword, value)


def test_a_nan_weight_in_a_pack_manifest_is_refused():
    manifest = {"name": "p", "version": "1", "description": "d", "license": "l", "source": "s",
                "env": "grpo/MathExact-v0", "prompt_template": "{q}", "splits": {"train": "t"},
                "reward_weights": {"correct": float("nan")}}
    assert any("finite" in p for p in manifest_problems(manifest))


def test_good_values_still_make_envs():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1, timeout=2, require_boxed=False,
                   decimal_rounding=True, reward_weights={"correct": 2, "format": 0.0})
    assert env.unwrapped.timeout == 2 and env.unwrapped.reward_weights["correct"] == 2
    env = gym.make("grpo/JsonSchema-v0", level=1, max_chars=10, max_depth=1)
    env.reset(seed=0)
    assert env.step("x" * 11)[4]["reason"] == "too_large"


@pytest.mark.parametrize("env_id, kwargs, closest, pack_says", [
    ("grpo/MathExact-v0", {"requre_boxed": True}, "require_boxed", "pack 'gsm8k' takes no options"),
    ("grpo/MathExact-v0", {"pack": "arith", "levl": 2}, "level", "pack 'arith' takes level"),
    ("grpo/JsonSchema-v0", {"max_dept": 3}, "max_depth", "pack 'extract' takes level, family"),
    ("grpo/MathPython-v0", {"tool_limit": None}, "tool_limits", "pack 'arith' takes level"),
])
def test_an_unknown_keyword_names_the_envs_keywords_and_the_closest(env_id, kwargs, closest,
                                                                     pack_says):
    with pytest.raises(TypeError) as err:
        gym.make(env_id, **kwargs)
    message = str(err.value)
    assert "\n" not in message
    assert f"did you mean '{closest}'?" in message and pack_says in message
    assert "reward_weights" in message and "split" in message  # the env's own keywords


# -- task ids: unknown ones say what the ids look like ----------------------------------------

def test_an_unknown_task_id_shows_the_id_format_in_every_builtin_pack():
    for name in pack_names():
        pack = load_pack(name)
        for bad in (f"{name}/", f"{name}/x", "gsm8k/", f"{name}/L1-", f"{name}/L-1",
                    f"{name}/Lx-3", f"{name}/test-", f"{name}/L1-1x", f"{name}/1/2", "/"):
            with pytest.raises(PackError) as err:
                pack.get(bad)
            message = str(err.value)
            assert f"has no task '{bad}'" in message and "\n" not in message, message
            assert f"look like {name}/" in message, message
            assert "invalid literal" not in message, message


def test_the_issues_task_id_in_reset():
    env = gym.make("grpo/MathPython-v0")  # the arith pack: the id belongs to no pack of it
    with pytest.raises(PackError, match=r"no task 'gsm8k/'.*look like arith/L<level>-<n>"):
        env.reset(options={"task_id": "gsm8k/"})
    env = gym.make("grpo/MathExact-v0", split="test")  # gsm8k/7 is a test task
    with pytest.raises(PackError, match=r"look like gsm8k/<n> \(<n> from 0 to 1318\)"):
        env.reset(options={"task_id": "gsm8k/"})
    assert env.reset(options={"task_id": "gsm8k/7"})[1]["task_id"] == "gsm8k/7"
