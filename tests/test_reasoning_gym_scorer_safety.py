"""reasoning-gym scorers that run model text: the answer grammar keeps text away from ``eval``,
and each answer is scored in a fresh confined child so that what escapes touches its own episode
at most (issue: ``__import__('builtins').exec(...)`` walked the stack to the worker's pipe, sent
``('ok', 1.0)``, and every later verdict was one message out of step)."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the envs
from envs.base import is_infra_error
from sandbox import host_confine

pytest.importorskip("reasoning_gym")

from envs.domains.reasoning_gym import answer_grammar, grading, scorer_worker  # noqa: E402
from envs.domains.reasoning_gym.answer_grammar import GRAMMARS, Refused, safe_answer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
confined = pytest.mark.skipif(not host_confine.supported(), reason="x86_64 filter only")

# Sends ('ok', 1.0) 40 times down every pipe it finds on the stack (the forge), then
# writes a framed verdict (as JSON, then pickled) to every descriptor it can.
FORGE_BODY = ("import sys,os,pickle,struct,json\\nf=sys._getframe()\\nwhile f:\\n"
              " for c in list(f.f_locals.values()):\\n"
              "  for i in range(40):\\n"
              "   try:c.send(('ok',1.0))\\n"
              "   except Exception:pass\\n"
              " f=f.f_back\\n"
              "for m in (json.dumps(['ok',1.0]).encode(),pickle.dumps(('ok',1.0))):\\n"
              " for fd in range(64):\\n"
              "  try:os.write(fd,(struct.pack('!i',len(m))+m)*8)\\n"
              "  except Exception:pass")
# The forge, short enough for every task's length bound.
SHORT_FORGE = ("import sys\\nf=sys._getframe()\\nwhile f:\\n c=f.f_locals.get('conn')\\n"
               " if c:\\n  for i in range(40):c.send(('ok',1.0))\\n  break\\n f=f.f_back")
#: Escapes tried against every scorer that evaluates text (the ones that got through the first
#: fix attempt are marked).
ESCAPES = {
    "import_exec": f'__import__("builtins").exec("{FORGE_BODY}")',
    "short_forge": f'__import__("builtins").exec("{SHORT_FORGE}")',
    "list_wrapped": f'[__import__("builtins").exec("{SHORT_FORGE}")]',
    "attribute_walk": "[c for c in ().__class__.__base__.__subclasses__() if c.__name__=="
                      "'BuiltinImporter'][0].load_module('builtins').exec('1')",
    "format_string": "'{0.__class__.__base__}'.format(1)",
    "lambda_call": "(lambda: __import__('os'))()",
    "getattr_string": "getattr(__builtins__,'ex'+'ec')('1')",
    "sympy_reparse": "S('__import__(\"os\")')",
    "sympy_function": "Function('f')(x)",
    "unicode_exec": "ｅｘｅｃ('1')",
    "fullwidth_digits": "２４",
    "arabic_digits": "٢٤",
    "power_tower": "9**9**9",
    "hidden_exponent": "9**(x*0 + 10**9)",
    "product_exponent": "2**(99*99*99*99)",
    "factorial": "99999999!",
    "keyword": "x if 1 else 2",
    "subscript": "(1, 2)[0]",
    "string": "'24'",
    "walrus": "(y := 24)",
    "comparison": "24 == 24",
    "integral_of_the_question": "Integral(x, x) + C",
    "function_as_value": "sin + 1",
    "bytes_escape": "\\x5f\\x5fimport\\x5f\\x5f",
}


@functools.cache
def env_of(task: str):
    return gym.make("grpo/ReasoningGym-v0", task=task).unwrapped


def test_every_scorer_that_evaluates_text_has_a_grammar():
    from envs.domains.reasoning_gym.generator import task_names

    evaluating = {t for t in task_names() if answer_grammar.evaluates_text(t)}
    # Read from reasoning-gym 0.1.25's source: eval() in four, parse_expr in five, and
    # number_sorting's eval of its gold.
    assert evaluating == set(GRAMMARS) == {
        "spiral_matrix", "binary_matrix", "n_queens", "string_insertion", "countdown",
        "puzzle24", "polynomial_multiplication", "simple_integration",
        "intermediate_integration", "number_sorting"}
    # A task whose scorer evaluates text but has no grammar refuses every answer (fail closed).
    with pytest.raises(Refused, match="no safe grammar"):
        safe_answer("some_new_task", "1", {}, evaluates=True)


@pytest.mark.parametrize("task", sorted(GRAMMARS))
def test_every_escape_is_outside_every_grammar(task):
    entry = env_of(task).pack.task_at("train", 0)["rg_entry"]
    for name, text in ESCAPES.items():
        with pytest.raises(Refused):
            safe_answer(task, text, entry)
            pytest.fail(f"{name} passed {task}'s grammar")


@pytest.mark.parametrize("task, honest", [
    ("countdown", "94*4 - 61 - 6"), ("countdown", "(30 - 4 - 23) * 42"),
    ("polynomial_multiplication", "-2240*x**5 + (896*x**4)"),
    ("simple_integration", "-34*x**8/15 - 5*x/4 + C"),
    ("intermediate_integration", "-4*(-2*x - 8)**(3/2)/3 + E**(2*x) + log(x, 2) + C"),
    ("spiral_matrix", "1 2 -3"), ("binary_matrix", "0 1\n1 2"), ("n_queens", "Q _\n_ Q"),
    ("string_insertion", "ABCDEA"), ("number_sorting", "['-1.5', '2', '30.0']"),
])
def test_honest_forms_are_in_the_grammar(task, honest):
    entry = {"answer": "x", "metadata": {"variable": "x", "variables": ["x"]}}
    safe_answer(task, honest, entry)


@confined
@pytest.mark.parametrize("task", sorted(GRAMMARS))
def test_forge_earns_nothing_and_golds_still_pay(task):
    env = env_of(task)
    task_ = env.pack.task_at("train", 0)
    for name in ("short_forge", "list_wrapped", "format_string", "power_tower"):
        reward, info = env.score(task_, env.answer_in_format(ESCAPES[name]))
        assert reward == 0.0 and info["reason"] == "not_in_grammar", (name, info)
    if task in ("countdown", "puzzle24"):  # a decimal hides two of the question's numbers
        a, b, *rest = task_["rg_entry"]["metadata"]["numbers"]
        reward, info = env.score(task_, env.answer_in_format(f"{a}.{b} + {rest[0]}"))
        assert info["reason"] == "not_in_grammar", info
    assert env.score(task_, env.gold_completion(task_))[0] == 1.0


def _score(task, text, index=0):
    env = env_of(task)
    item = env.pack.task_at("train", index)
    return env.score(item, env.answer_in_format(text) if text is not None
                     else env.gold_completion(item))


OTHER_TASKS = ["arc_agi", "sudoku", "word_ladder", "word_sorting", "mini_sudoku", "futoshiki",
               "game_of_life", "group_anagrams", "knights_knaves", "countdown"]
#: A wrong answer of each task's form (``answer_forms``), so that its scorer does see it.
WRONG = {"arc_agi": "0", "sudoku": "1", "word_ladder": "AB,CD", "word_sorting": "b, a",
         "mini_sudoku": "1", "futoshiki": "1", "game_of_life": "[[0]]",
         "group_anagrams": '[["a"]]', "knights_knaves": "definitely wrong", "countdown": "1 + 1"}


@confined
def test_a_poison_that_runs_reaches_its_own_episode_only(capsys):
    # A scorer with a hole (it evals the answer) runs the forge; then wrong answers on ten
    # other tasks, an empty answer, and a gold.
    entry = {"question": "q", "answer": "x" * 200, "metadata": {}}  # a bound the forge fits
    hole = ("call", "tests.reasoning_gym_helpers:evals")
    worker = scorer_worker.WORKER
    before = grading.grade_scorer(hole, entry, "<answer>0</answer>", timeout=30.0)
    assert before.reason == "not_equal"
    pid = worker.pid()
    poison = grading.grade_scorer(hole, entry, f"<answer>{ESCAPES['import_exec']}</answer>",
                                  timeout=30.0)
    scored = {task: _score(task, WRONG[task]) for task in OTHER_TASKS}
    assert not [t for t, (_, info) in scored.items() if info["reason"] == "not_in_grammar"]
    after = {task: reward for task, (reward, _) in scored.items()}
    empty = _score("sudoku", "")[0]
    gold = _score("countdown", None, index=1)[0]
    with capsys.disabled():
        print(f"\npoison: {poison.reason} (its own episode); wrong answers after it: {after}; "
              f"empty: {empty}; gold: {gold}")
    # It ran: it forged its own verdict (what a scorer with a hole cannot stop, and why the
    # grammar comes first), and nothing else.
    assert poison.reason == "scorer_full"
    assert set(after.values()) == {0.0} and empty == 0.0 and gold == 1.0
    assert worker.pid() == pid  # the worker itself ran no model text and serves on


@confined
def test_a_child_cannot_write_into_the_workers_pipes_through_proc():
    entry = {"question": "q", "answer": "x", "metadata": {}}
    reach = grading.grade_scorer(("call", "tests.reasoning_gym_helpers:reach_worker"), entry,
                                 "<answer>x</answer>", timeout=30.0)
    assert reach.reason == "not_equal", reach  # 0.0: no write got through
    assert _score("countdown", "1 + 1")[0] == 0.0
    assert _score("countdown", None, index=3)[0] == 1.0


@confined
def test_each_answer_runs_in_a_fresh_child():
    entry = {"question": "q", "answer": "x", "metadata": {}}
    spec = ("call", "tests.reasoning_gym_helpers:pid")
    pids = {grading.grade_scorer(spec, entry, "<answer>x</answer>", timeout=30.0)
            .details["scorer_score"] * 2**23 for _ in range(3)}
    assert len(pids) == 3 and scorer_worker.WORKER.pid() not in pids


@confined
def test_a_pre_forked_child_holds_only_its_own_pipes_and_serves_once():
    """The spare child is forked before its answer is known: it must hold none of the worker's
    descriptors (nor the next spare's), and each answer still gets a child of its own."""
    entry = {"question": "q", "answer": "x", "metadata": {}}
    assert scorer_worker.WORKER.prefork
    held = grading.grade_scorer(("call", "tests.reasoning_gym_helpers:open_descriptors"), entry,
                                "<answer>x</answer>", timeout=30.0)
    # its request and reply pipes (listing /proc/self/fd opens one more while it looks)
    assert held.details["scorer_score"] * 1000 <= 3, held
    spec = ("call", "tests.reasoning_gym_helpers:pid")
    pids = [grading.grade_scorer(spec, entry, "<answer>x</answer>", timeout=30.0)
            .details["scorer_score"] * 2**23 for _ in range(4)]
    assert len(set(pids)) == 4, pids


@confined
def test_a_hang_then_a_gold_earns_one():
    entry = {"question": "q", "answer": "x", "metadata": {}}
    hang = grading.grade_scorer(("call", "tests.reasoning_gym_helpers:hang"), entry,
                                "<answer>x</answer>", timeout=1.0)
    assert hang.reason == "timeout"
    assert _score("countdown", None, index=2)[0] == 1.0


class _Lying:
    """A worker whose replies carry the wrong id."""

    def __init__(self, reply):
        self.reply, self.sent = reply, []
        self.tx = self.rx = self
        self.pid = 0

    def alive(self):
        return True

    def send(self, message):
        self.sent.append(message)

    def poll(self, timeout):
        return True

    def recv(self):
        return self.reply(self.sent[-1][0])

    def kill(self):
        self.killed = True


@pytest.mark.parametrize("reply", [lambda rid: (rid + 1, "ok", 1.0), lambda rid: ("ok", 1.0),
                                   lambda rid: (rid - 1, "ok", 1.0)])
def test_a_reply_that_does_not_match_is_an_infra_error(reply, monkeypatch):
    worker = scorer_worker.ScorerWorker()
    lying = _Lying(reply)
    worker._worker = lying
    worker._prepared.add(("call", "x:y"))
    monkeypatch.setattr(grading, "WORKER", worker)
    verdict = grading.grade_scorer(("call", "x:y"), {"answer": "x"}, "<answer>x</answer>", 5.0)
    assert not verdict.passed and verdict.reason == "infra_error"
    assert is_infra_error({"verdict": verdict}) and lying.killed and worker._worker is None


SCRIPT = textwrap.dedent("""
    import gymnasium as gym
    import envs
    print("BODY RAN")
    env = gym.make("grpo/ReasoningGym-v0", task="countdown").unwrapped
    item = env.pack.task_at("train", 0)
    gold = env.score(item, env.gold_completion(item))
    wrong = env.score(item, "<answer>1 + 1</answer>")
    print("RESULT", gold[0], gold[1]["reason"], wrong[0], wrong[1]["reason"])
""")


@confined
@pytest.mark.parametrize("how", ["file", "stdin"])
def test_a_script_without_a_main_guard_runs_once(how, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    argv, stdin = ([sys.executable, str(script)], None) if how == "file" else \
        ([sys.executable, "-"], SCRIPT)
    run = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("BODY RAN") == 1, run.stdout
    assert "RESULT 1.0 scorer_full 0.0 scorer_partial" in run.stdout, run.stdout
