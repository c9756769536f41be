"""The math checker's simplest-form rule, measured both ways.

- golds: every MATH, MATH-500 and GSM8K gold, boxed, graded against itself: how many are
  credited (all must be);
- corpus: the 291-case equivalence corpus (``tests/data``) graded as ``tests/test_math_corpus.py``
  grades it: the score, and each row's verdict (``--json``) to compare two versions row by row;
- sweep: answers that leave the work undone, each bare and in wrappers (brackets, ``+0``,
  ``\\cdot 1``, ``\\frac{2}{2}``, ...), must earn nothing; legitimate equivalent forms, bare and
  in harmless wrappers, must be credited. Prints every verdict that goes the wrong way;
- respelled: each MATH gold rewritten by sympy's printer from its value, a legitimate form
  nobody picked, graded against the gold (refusals for form are legitimate forms lost).

    python benchmarks/math_simplest_form.py [--only golds,corpus,sweep,respelled] [--json OUT]

One worker process is enough (``GRPO_GYM_MATH_WORKERS=1`` keeps it to one core).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "data" / "math_equivalence_cases.jsonl"
# as in tests/test_math_corpus.py: rows written for the peer's float rounding
DECIMAL_ROUNDING_ROWS = {120, 127, 133, 182, 260}

# (gold, an answer with the gold's value that leaves work undone)
UNDONE = [
    ("6", r"\log_2 64"), ("6", r"\log_{2}{64}"), ("6", r"\frac{\ln 64}{\ln 2}"),
    ("6", r"\log_2(64)"), ("3", r"\log_{10} 1000"), ("3", r"\ln e^3"), ("2", r"\log 100"),
    (r"11\sqrt{2}", r"242^{1/2}"), (r"11\sqrt{2}", r"\sqrt{242}"),
    (r"11\sqrt{2}", r"\sqrt{242} + 2 - 2"), (r"11\sqrt{2}", r"\sqrt{2}\cdot\sqrt{121}"),
    (r"11\sqrt{2}", r"\sqrt{2}\cdot 11^{1}"), (r"2\sqrt{2}", r"\sqrt{8}"),
    (r"2\sqrt{2}", r"2^{3/2}"), (r"2\sqrt{2}", r"\frac{4}{\sqrt{2}}"), ("3", r"\sqrt[3]{27}"),
    ("3", r"27^{1/3}"), (r"\sqrt{6}", r"\sqrt{2}\sqrt{3}"), (r"\sqrt{3}", r"\frac{\sqrt{6}}{\sqrt{2}}"),
    (r"\frac{\sqrt{2}}{2}", r"\sqrt{\frac{1}{4}}\sqrt{2}"), (r"\frac{\sqrt{2}}{2}", r"\frac{2\sqrt{2}}{4}"),
    ("2i", r"\sqrt{-4}"), (r"-\frac{\pi}{6}", r"\arcsin(-0.5)"),
    (r"-\frac{\pi}{6}", r"\sin^{-1}\left(-\frac{1}{2}\right)"), (r"\frac{\pi}{4}", r"\arctan 1"),
    (r"\frac{\pi}{2}", r"\arccos 0"), (r"\frac{1}{2}", r"\sin\frac{\pi}{6}"),
    (r"\frac{1}{2}", r"\cos\frac{\pi}{3}"), ("1", r"\tan\frac{\pi}{4}"), ("-1", r"e^{i\pi}"),
    ("55", r"\sum_{k=1}^{10} k"), ("24", r"\prod_{k=1}^{4} k"), (r"\frac{n(n+1)}{2}", r"\sum_{k=1}^{n} k"),
    ("2", r"\int_0^2 1\,dx"), ("2", r"\int_0^2 x\,dx"), ("1", r"\lim_{x\to 0}\frac{\sin x}{x}"),
    ("2x", r"\frac{d}{dx} x^2"), ("5", r"e^{\ln 5}"), ("10", r"\binom{5}{2}"), ("10", r"C(5,2)"),
    ("6", "3!"), ("5", "|-5|"), ("5", r"\left|-5\right|"), ("3", r"\lfloor 3.5 \rfloor"),
    ("4", r"\lceil 3.5 \rceil"), ("6", r"\gcd(12, 18)"), ("36", r"\operatorname{lcm}(12, 18)"),
    ("5", r"\max(3, 5)"), ("100", "10^{2}"), ("100", r"10\cdot 10"), ("1024", "2^{10}"),
    ("6", r"2\cdot 3"), ("5", "2+3"), (r"\frac{1}{4}", r"\left(\frac{1}{2}\right)^{2}"),
    (r"\frac{2}{7}", r"\frac{6}{21}"), (r"\frac{2}{7}", r"\frac{1}{3}\cdot\frac{6}{7}"),
    (r"\frac{2}{7}", r"\frac{2}{7}\cdot\frac{2}{2}"), (r"\frac{3}{4}", "6/8"), ("2", r"\frac{1}{\frac{1}{2}}"),
    ("2", r"(\sqrt{3}+1)(\sqrt{3}-1)"), (r"3+2\sqrt{2}", r"(1+\sqrt{2})^2"), ("x-1", r"\frac{x^2-1}{x+1}"),
    ("2x", "x+x"), ("x^2", r"x\cdot x"), ("4x^2", "(2x)^2"), ("x^6", "(x^2)^3"), ("2", r"(\sqrt{2})^2"),
    ("6", "-(-6)"), ("6", r"6 + 0\cdot\pi"), ("6", r"6 e^{0}"), ("6", r"6\cos 0"), ("6", r"\frac{6!}{5!}"),
    ("6", r"2^{\log_2 6}"), ("6", r"\sqrt{6^2}"), ("6", "36^{0.5}"), ("6", r"\frac{\pi}{\pi}\cdot 6"),
    ("1", r"\sin^2 x + \cos^2 x"), (r"\pi", r"\arccos(-1)"), (r"\pi", r"4\arctan 1"), ("2", r"\sqrt[4]{16}"),
    ("8", r"2\cdot 2\cdot 2"), ("0", r"\sin \pi"), (r"\frac{5x}{6}", r"\frac{x}{2}+\frac{x}{3}"),
    (r"11\sqrt{2}", r"\frac{22}{\sqrt{2}}"), (r"11\sqrt{2}", r"11\sqrt{\frac{4}{2}}"), ("1500", r"1.5\times 10^{3}"),
    ("2x", "(x+1)^2 - x^2 - 1"), ("x^2", "(x-1)(x+1) + 1"),
    # follow-up: a factor 1 beside a reciprocal, e^1, a number to the power -1, fractions of
    # decimals and \div, a product or quotient of a sum left to work out, terms that cancel once
    # multiplied out, a function traded for another, a repeating decimal, a bar over a number
    (r"\frac{1}{x}", r"x^{-1}\cdot 1"), ("e", "e^{1}"), ("e", r"\exp(1)"), (r"\frac{1}{2}", "2^{-1}"),
    (r"\frac{x}{2}", r"x\cdot 2^{-1}"), ("6", r"12 \div 2"), (r"\frac{1}{2}", r"\frac{1}{2.0}"),
    (r"2+\sqrt{2}", r"\sqrt{2}(1+\sqrt{2})"), (r"1+\sqrt{2}", r"\frac{2+2\sqrt{2}}{2}"),
    (r"1+\sqrt{2}", r"\frac{2+\sqrt{2}}{\sqrt{2}}"), ("a^2+b^2", "(a+b)^2-2ab"), (r"\ln 2", r"\ln(2e)-1"),
    (r"\sin 1", r"\cos(\frac{\pi}{2}-1)"), (r"\ln 2", r"-\ln\frac{1}{2}"), (r"\sin x", r"\sin(x+2\pi)"),
    (r"\frac{2}{3}", r"0.\overline{6}"), ("6", r"\overline{6}"),
    # one tree for value and form: Python operators, bracketed factors side by side,
    # a unit factor of either sign, double signs through brackets, a factor 1 after 10^k
    (r"11\sqrt{2}", "242**(1/2)"), ("3125", "5**5"), ("2", "5//2"), ("90", "(10)(9)"), ("90", "[10][9]"),
    ("90", "{10}{9}"), ("90", "10 9"), ("720", "(6)(5)(4)(3)(2)(1)"), ("-50", r"(-1)\cdot 50"),
    ("15x-80", "(80-15x)(-1)"), ("-x", "x(-1)"), ("50", "-[-50]"), ("p-q", "p + (-q)"),
    ("1000000", r"10^{6}\cdot 1"), ("19", r"\{10\}\{9\}"),
]

# (gold, a legitimate form of the same value)
LEGIT = [
    (r"\frac{1}{\sqrt{2}}", r"\frac{\sqrt{2}}{2}"), (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"),
    (r"\frac{\sqrt{2}}{2}", r"2^{-1/2}"), (r"\frac{\sqrt{2}}{2}", r"\sqrt{\frac{1}{2}}"),
    (r"\frac{\sqrt{6}}{3}", r"\frac{\sqrt{2}}{\sqrt{3}}"),
    (r"\frac{\sqrt{3}}{6}", r"\frac{1}{2\sqrt{3}}"), (r"\sqrt{2}-1", r"\frac{1}{1+\sqrt{2}}"),
    (r"\frac{1+\sqrt{5}}{2}", r"\frac{1}{2}+\frac{\sqrt{5}}{2}"), (r"\frac{1}{2}+\frac{\sqrt{5}}{2}", r"\frac{1+\sqrt{5}}{2}"),
    (r"11\sqrt{2}", r"11 \sqrt 2"), (r"11\sqrt{2}", r"\sqrt{2}\cdot 11"), (r"\frac{5}{2}", "2.5"),
    (r"\frac{5}{2}", r"2\frac{1}{2}"), ("0.5", r"\frac{1}{2}"), (r"-\frac{3}{4}", r"\frac{-3}{4}"),
    (r"\frac{3\pi}{4}", r"\frac{3}{4}\pi"), (r"\log_2 3", r"\frac{\ln 3}{\ln 2}"), (r"\frac{\ln 3}{\ln 2}", r"\log_2 3"),
    ("e^2", r"\exp(2)"), (r"\frac{1}{e}", "e^{-1}"), ("x^2+2x+1", "(x+1)^2"), ("(x+1)^2", "x^2+2x+1"),
    ("2x+2", "2(x+1)"), (r"\frac{x}{2}", r"\frac{1}{2}x"), ("i", r"\sqrt{-1}"),
    (r"2^{10}", "1024"), (r"2^{10}", "4^{5}"), (r"\frac{6}{8}", r"\frac{3}{4}"), (r"\binom{n}{2}", r"\frac{n(n-1)}{2}"),
    ("3+2i", "2i+3"), (r"\pi - 2", r"-2+\pi"), (r"1-\frac{\sqrt{3}}{2}", r"\frac{2-\sqrt{3}}{2}"),
    (r"\frac{5\sqrt{3}}{6}", r"\frac{5}{2\sqrt{3}}"), (r"12\sqrt{3}", r"12 \cdot \sqrt{3}"),
    ("x^2+2x", "(x+1)^2 - 1"), ("x^2-1", "(x-1)(x+1)"),
    # follow-up: notation beside the follow-up hacks
    (r"\frac{1}{x}", "x^{-1}"), (r"\frac{2}{x}", "2x^{-1}"), (r"-\frac{1}{2x}", r"-\frac1{2x}"),
    (r"2+2\sqrt{2}", r"2(1+\sqrt{2})"), (r"\pi+\pi\sqrt{2}", r"\pi(1+\sqrt{2})"),
    (r"\sqrt{2}+\sqrt{6}", r"\sqrt{2}(1+\sqrt{3})"), (r"\sqrt{2}(1+\sqrt{2})", r"(1+\sqrt{2})\sqrt{2}"),
    (r"1+\frac{\sqrt{2}}{2}", r"\frac{2+\sqrt{2}}{2}"), (r"\frac{1}{3}+\frac{\sqrt{2}}{2}", r"\frac{2+3\sqrt{2}}{6}"),
    (r"\frac{1}{a}+\frac{1}{b}", r"\frac{a+b}{ab}"), (r"2^{2/3}", r"\sqrt[3]{4}"), ("2y^2+4y+5", "2(y+1)^2+3"),
    (r"|y-1|", r"|1-y|"), (r"\sin(y-1)", r"-\sin(1-y)"), (r"1+\ln 2", r"\ln(2e)"), ("AB", r"\overline{AB}"),
    # unicode twins, letter expressions, scientific notation from 10^4
    (r"2\sqrt{5}", "2√5"), (r"\frac{\sqrt{3}}{3}", "√3/3"), (r"\frac{1}{2}", "½"), ("p-q", "-q+p"),
    ("1000000", "10^6"), ("25000", r"2.5\times 10^{4}"), ("15x-80", "-(80-15x)"),
]

# (name, wrapper): each leaves the value alone and adds work of its own
HACK_WRAPPERS = [
    ("bare", "{}"), ("brackets", r"\left({}\right)"), ("plus zero", "{} + 0"), ("times one", r"1 \cdot {}"),
    ("over one", r"\frac{{{}}}{{1}}"), ("times 2/2", r"\frac{{2}}{{2}}\cdot {}"), ("to the first", "({})^{{1}}"),
    ("displaystyle", r"\displaystyle {}"), ("equation", "x = {}"), ("unit", r"{}\text{{ units}}"),
]
LEGIT_WRAPPERS = [
    ("bare", "{}"), ("brackets", r"\left({}\right)"), ("displaystyle", r"\displaystyle {}"),
    ("equation", "x = {}"),
]


def _box(answer: str) -> str:
    return "\\boxed{" + answer + "}"


def golds() -> dict[str, dict[str, int]]:
    from envs.verify.math import verify
    from tasks import load_pack

    out = {}
    for name in ("math", "math500", "gsm8k"):
        pack = load_pack(name)
        answers = [str(r["answer"]) for s in pack.manifest.splits for r in pack.records(s)]
        failed = [(g, v.reason) for g in answers if not (v := verify(g, _box(g), timeout=30.0)).passed]
        out[name] = {"golds": len(answers), "credited": len(answers) - len(failed)}
        print(f"golds {name:8} {out[name]['credited']}/{len(answers)} credited", failed[:5])
    return out


def corpus() -> dict[str, object]:
    from envs.verify.math import verify

    rows = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
    verdicts = []
    for i, r in enumerate(rows):
        v = verify(r["gold"], r["pred"], timeout=30.0, decimal_rounding=i in DECIMAL_ROUNDING_ROWS)
        verdicts.append({"row": i, "passed": v.passed, "reason": v.reason, "expected": r["expected"]})
    score = sum(v["passed"] == v["expected"] for v in verdicts)
    peer = sum(r["observed_math_verify_0_8_0"] == r["expected"] for r in rows)
    reasons = Counter(v["reason"] for v in verdicts)
    print(f"corpus   {score}/{len(rows)} (math-verify {peer}); reasons {dict(reasons)}")
    return {"score": score, "rows": len(rows), "peer": peer, "verdicts": verdicts}


def sweep() -> dict[str, object]:
    from envs.verify.math import verify

    wrong = []
    hacks = legit = 0
    reasons: Counter[str] = Counter()
    for gold, pred in UNDONE:
        for name, wrap in HACK_WRAPPERS:
            hacks += 1
            v = verify(gold, _box(wrap.format(pred)), timeout=30.0)
            reasons[v.reason] += 1
            if v.passed:
                wrong.append(("credited", name, gold, pred, v.reason))
    for gold, pred in LEGIT:
        for name, wrap in LEGIT_WRAPPERS:
            legit += 1
            v = verify(gold, _box(wrap.format(pred)), timeout=30.0)
            if not v.passed:
                wrong.append(("refused", name, gold, pred, f"{v.reason} {v.details.get('undone', '')}"))
    credited = sum(w[0] == "credited" for w in wrong)
    refused = sum(w[0] == "refused" for w in wrong)
    print(f"sweep    {hacks} undone answers: {credited} credited; reasons {dict(reasons)}")
    print(f"sweep    {legit} legitimate forms: {refused} refused")
    for w in wrong:
        print("   ", *w)
    return {"undone": hacks, "undone_credited": credited, "legit": legit, "legit_refused": refused,
            "wrong": wrong, "reasons": dict(reasons)}


def _spellings(expr: object) -> set[str]:
    """sympy's LaTeX for ``expr`` as it is, factored, expanded, over one denominator, and with
    powers for roots: forms a person may write, none of them leaving work undone."""
    import sympy

    forms = {expr, sympy.factor(expr), sympy.expand(expr), sympy.together(expr)}
    out = {sympy.latex(f) for f in forms} | {sympy.latex(expr, root_notation=False)}
    inverse = 1 / expr
    if not expr.free_symbols and not expr.is_Rational and sympy.fraction(inverse)[1] == 1:
        # the denominator not rationalized: \frac{\sqrt7}{14} as \frac{1}{2\sqrt7}
        out.add(sympy.latex(sympy.Pow(inverse, -1, evaluate=False)))
    return {s.replace(" ", "") for s in out if len(s) < 300}


def respelled() -> dict[str, object]:
    """Legitimate forms nobody chose: each MATH gold that is one expression, rewritten by sympy's
    LaTeX printer from its value (``_spellings``), graded against the gold. A refusal for form
    here is a legitimate form lost."""
    from envs.verify.math import verify
    from envs.verify.math_extract import extract
    from envs.verify.math_normalize import normalize_answer
    from envs.verify.math_parse import Val, parse_answer
    from tasks import load_pack

    pack = load_pack("math")
    seen: set[str] = set()
    tried = credited = 0
    refused: list[tuple[str, str, str]] = []
    for split in pack.manifest.splits:
        for record in pack.records(split):
            gold = str(record["answer"])
            ex = extract(gold, gold=True)
            if gold in seen or ex is None or len(ex.answer) != 1:
                continue
            seen.add(gold)
            try:
                node = parse_answer(ex.answer[0])
                alts = _spellings(node.expr) if isinstance(node, Val) else set()
            except Exception:
                continue
            alts.discard(normalize_answer(gold).replace(" ", ""))
            for alt in sorted(alts):
                tried += 1
                v = verify(gold, _box(alt), timeout=30.0)
                credited += v.passed
                if not v.passed:
                    refused.append((gold, alt, f"{v.reason} {v.details.get('undone', '')}"))
    reasons = Counter(r[2].split()[0] for r in refused)
    print(f"respelled {tried} MATH golds in sympy's forms: {credited} credited; refused {dict(reasons)}")
    for r in refused:
        if r[2].startswith("not_simplified"):
            print("   ", *r)
    return {"tried": tried, "credited": credited, "refused": refused}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="golds,corpus,sweep,respelled")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sections = {"golds": golds, "corpus": corpus, "sweep": sweep, "respelled": respelled}
    out = {}
    for name in args.only.split(","):
        t0 = time.perf_counter()
        out[name] = sections[name]()
        print(f"({name}: {time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
