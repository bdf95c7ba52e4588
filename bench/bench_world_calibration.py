"""Calibrate the simulated rule worlds on a real model: Qwen2.5-Coder-0.5B on `customer_feedback`.

Issue 50, item 3. The rule worlds (`skillopt_dsl.testing.rule_world`, drawn across axes by
`skillopt_dsl.testing.world_family`) decide how a change of the skill moves answers (`noise`,
`noise_key`: "text", "content" or "difficulty") and what a reflection proposes (`p_right`,
`p_harm`, `addresses`, `draw`). This script measures the same quantities on a real model
through the product's own path (`skillopt_dsl.evaluate`, `skillopt_dsl.lm.LM` on an
`openai/...` model, `ReflectiveProposer`), so the family's "realistic" members can be named:

1. Answers (`--val` validation examples, 60 by default): the seed skill, the seed again (the
   same request twice, temperature 0, no response cache: is the server deterministic?), three
   whitespace-only changes, two neutral sentences, two real rules of the task, and on the
   seed-plus-rule skill one whitespace change and one neutral sentence. For each change: the
   answers that move (right <-> wrong) against the seed's, and how concentrated the moves of
   the non-content changes are on the same items (the "difficulty" axis).
2. Reflections (`--proposals`, 20 by default): the seed is run on `--train` training examples;
   each proposal is one `ReflectiveProposer` call (Qwen as the optimizer model too) on a group
   of 4 of those failures drawn with `--seed`, exactly the proposer's group and addresses. The
   proposal, applied to the seed as GradientText applies one (`clip_to_budget`, the 128-token
   floor), is scored on the 4 failures it read, on `--unread` other failures and on `--passing`
   passing items: how often it fixes one it read (`p_right`'s analogue), one it did not read,
   and breaks a passing one (`p_harm`'s).

3. `--reflect-on rule_lower_case_word`: the same on the training failures of a trained skill
   (the seed plus a real rule, whose failures are wrong labels, not format).

    bench/qwen_model.sh serve 8431
    python bench/bench_world_calibration.py --api-base http://127.0.0.1:8431/v1 \
        --reflect-on seed rule_lower_case_word --proposals 8 --unread 4 --passing 6
    bench/qwen_model.sh stop 8431

Every answer is kept in `bench/results/world_calibration.json` (`raw`), written after each
condition and proposal; `--resume` reuses the answers already there, so a killed run continues
where it stopped, and `--resume --phases answers` recomputes every figure from them without a
call. The published figures (bench/README §14) came from that command in two parts (the seed
part with `--reflect-on seed --proposals 20 --unread 6`, stopped by hand after 9 proposals; then
`--resume --phases reflections --reflect-on rule_lower_case_word`): 804 target answers (24 new
tokens) and 23 reflection calls (384), ~60 min on one server thread on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import RESULTS, git_commit, print_table, write_results

import skillopt_dsl as sd
from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.tasks import module_for
from skillopt_dsl.lm import LM, SamplingParams
from skillopt_dsl.optimizers.proposers import ProposalRequest, ReflectiveProposer
from skillopt_dsl.optimizers.search.clipping import clip_to_budget
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

TASK = "customer_feedback"
SEED = "Tag the customer feedback."
RULE_1 = SEED + " Reply with exactly one of: positive, negative. Write nothing else."
RULE_2 = (
    SEED
    + " Answer with one lower-case word: positive if the customer is pleased, otherwise negative."
)


@dataclass(frozen=True)
class Condition:
    """One skill text scored on the validation examples: its kind and the base it changes."""

    name: str
    kind: str  # "seed", "repeat", "whitespace", "neutral", "rule"
    text: str
    base: str = "seed"


CONDITIONS = (
    Condition("seed", "seed", SEED),
    Condition("seed_again", "repeat", SEED),
    Condition("ws_trailing_newline", "whitespace", SEED + "\n"),
    Condition("ws_blank_lines", "whitespace", "\n\n" + SEED + "\n\n"),
    Condition("ws_double_space", "whitespace", SEED.replace(" ", "  ", 1)),
    Condition("neutral_read_carefully", "neutral", SEED + " Read the input carefully."),
    Condition("neutral_take_time", "neutral", SEED + "\n\nTake your time and be accurate."),
    Condition("rule_reply_one_of", "rule", RULE_1),
    Condition("rule_lower_case_word", "rule", RULE_2),
    Condition("rule_ws_newline", "whitespace", RULE_1 + "\n", base="rule_reply_one_of"),
    Condition(
        "rule_neutral", "neutral", RULE_1 + " Read the input carefully.", base="rule_reply_one_of"
    ),
)
NON_CONTENT = ("whitespace", "neutral")


class Answers:
    """Every answer asked of the target, keyed by skill text, example and repeat (`raw`)."""

    def __init__(self, module: sd.SkillModule, lm: LM, raw: dict[str, list[Any]]) -> None:
        self.module, self.lm, self.raw = module, lm, raw
        self.calls = 0

    @staticmethod
    def key(text: str, example_id: str, repeat: int = 0) -> str:
        return f"{hashlib.sha256(text.encode()).hexdigest()[:16]}|{example_id}|{repeat}"

    def score(self, text: str, examples: list[Example], repeat: int = 0) -> dict[str, float]:
        """Each example's score under `text` (asked once per key; `repeat` asks again)."""
        missing = [e for e in examples if self.key(text, e.id, repeat) not in self.raw]
        if missing:
            report = sd.evaluate(
                self.module, missing, skill=text, lm=self.lm, threads=1, progress=False
            )
            self.calls += len(missing)
            for example, record in zip(missing, report.records, strict=True):
                self.raw[self.key(text, example.id, repeat)] = [record.output, record.score]
        return {e.id: float(self.raw[self.key(text, e.id, repeat)][1]) for e in examples}

    def rollouts(self, text: str, examples: list[Example]) -> list[Any]:
        """Fresh rollouts of `examples` (for the proposer to read); their answers join `raw`."""
        report = sd.evaluate(
            self.module, examples, skill=text, lm=self.lm, threads=1, progress=False
        )
        self.calls += len(examples)
        for example, record in zip(examples, report.records, strict=True):
            self.raw[self.key(text, example.id)] = [record.output, record.score]
        return list(report.records)


def moves(base: dict[str, float], other: dict[str, float]) -> dict[str, Any]:
    """Right -> wrong and wrong -> right between two scorings of the same examples."""
    up = sorted(i for i in base if base[i] < 1.0 <= other[i])
    down = sorted(i for i in base if base[i] >= 1.0 > other[i])
    n = len(base)
    return {
        "n": n,
        "base_right": sum(v >= 1.0 for v in base.values()),
        "right": sum(v >= 1.0 for v in other.values()),
        "wrong_to_right": len(up),
        "right_to_wrong": len(down),
        "moved": len(up) + len(down),
        "moved_share": round((len(up) + len(down)) / n, 4),
        "moved_ids": up + down,
    }


def concentration(moved_sets: list[set[str]], ids: list[str]) -> dict[str, Any]:
    """How many of the changes move each item, against independent moves at the same rates.

    Under `noise_key="text"` each change moves its own random items (counts follow the
    independent, Poisson-binomial expectation); under "difficulty" the same few hard items move
    again and again (more items at 0 and at 2+ than expected)."""
    rates = [len(s) / len(ids) for s in moved_sets]
    counts = Counter(sum(i in s for s in moved_sets) for i in ids)
    expected = [0.0] * (len(moved_sets) + 1)
    expected[0] = 1.0
    for p in rates:  # Poisson-binomial by convolution
        expected = [
            (expected[k] * (1 - p)) + (expected[k - 1] * p if k else 0.0)
            for k in range(len(expected))
        ]
    pairs = [(a, b) for a in range(len(moved_sets)) for b in range(a + 1, len(moved_sets))]
    both = sum(len(moved_sets[a] & moved_sets[b]) for a, b in pairs)
    both_expected = sum(rates[a] * rates[b] * len(ids) for a, b in pairs)
    return {
        "changes": len(moved_sets),
        "items": len(ids),
        "items_by_times_moved": {k: counts.get(k, 0) for k in range(len(moved_sets) + 1)},
        "expected_if_independent": {k: round(v * len(ids), 2) for k, v in enumerate(expected)},
        "items_ever_moved": sum(1 for i in ids if any(i in s for s in moved_sets)),
        "pairs_moved_together": both,
        "pairs_expected_if_independent": round(both_expected, 2),
    }


def answers_phase(answers: Answers, val: list[Example], save: Any) -> dict[str, Any]:
    scores: dict[str, dict[str, float]] = {}
    for c in CONDITIONS:
        started = time.perf_counter()
        scores[c.name] = answers.score(c.text, val, repeat=int(c.kind == "repeat"))
        save()
        print(f"{c.name}: {sum(v >= 1 for v in scores[c.name].values())}/{len(val)} right "
              f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
    rows = {c.name: {"kind": c.kind, "base": c.base, "text": c.text,
                     **moves(scores[c.base], scores[c.name])}
            for c in CONDITIONS if c.kind != "seed"}  # fmt: skip
    texts = {c.name: (c.text, int(c.kind == "repeat")) for c in CONDITIONS}
    for c in CONDITIONS[1:]:  # the reply's text can move while its score does not
        base_text, base_repeat = texts[c.base]
        rows[c.name]["output_text_changed"] = sum(
            answers.raw[answers.key(base_text, e.id, base_repeat)][0]
            != answers.raw[answers.key(c.text, e.id, texts[c.name][1])][0]
            for e in val
        )
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in ("repeat", "whitespace", "neutral", "rule"):
        picked = [r for r in rows.values() if r["kind"] == kind and r["base"] == "seed"]
        n = sum(r["n"] for r in picked)
        moved = sum(r["moved"] for r in picked)
        by_kind[kind] = {"changes": len(picked), "answers": n, "moved": moved,
                         "moved_share": round(moved / n, 4) if n else None,
                         "wrong_to_right": sum(r["wrong_to_right"] for r in picked),
                         "right_to_wrong": sum(r["right_to_wrong"] for r in picked)}  # fmt: skip
    ids = [e.id for e in val]
    non_content = [set(r["moved_ids"]) for r in rows.values()
                   if r["kind"] in NON_CONTENT and r["base"] == "seed"]  # fmt: skip
    text_moved = [  # the reply's text, not its score: which items are fragile
        {e.id for e in val
         if answers.raw[answers.key(SEED, e.id)][0] != answers.raw[answers.key(c.text, e.id)][0]}
        for c in CONDITIONS if c.kind in NON_CONTENT and c.base == "seed"
    ]  # fmt: skip
    seed_failing = sum(v < 1 for v in scores["seed"].values())
    seed_passing = len(val) - seed_failing
    nc = [r for r in rows.values() if r["kind"] in NON_CONTENT and r["base"] == "seed"]
    return {
        "conditions": rows,
        "by_kind": by_kind,
        "concentration_non_content": concentration(non_content, ids),
        "concentration_reply_text_non_content": concentration(text_moved, ids),
        "reply_text_changes_on_seed_failures": sum(
            scores["seed"][i] < 1.0 for moved in text_moved for i in moved
        ),
        "reply_text_changes": sum(len(moved) for moved in text_moved),
        "non_content_rates": {
            "fail_to_right_per_failing_item": round(
                sum(r["wrong_to_right"] for r in nc) / (len(nc) * seed_failing), 4
            ),
            "right_to_wrong_per_passing_item": round(
                sum(r["right_to_wrong"] for r in nc) / (len(nc) * seed_passing), 4
            ),
            "seed_failing": seed_failing,
            "seed_passing": seed_passing,
        },
    }


def reflections_phase(
    answers: Answers, module: sd.SkillModule, train: list[Example], optimizer: LM,
    args: argparse.Namespace, save: Any, base: str = SEED,
) -> dict[str, Any]:  # fmt: skip
    records = dict(zip([e.id for e in train], answers.rollouts(base, train), strict=True))
    seed_scores = {i: r.score for i, r in records.items()}
    failing = [e for e in train if seed_scores[e.id] < 1.0]
    passing = [e for e in train if seed_scores[e.id] >= 1.0]
    print(f"{base!r} on train: {len(passing)}/{len(train)} right", flush=True)
    proposer = ReflectiveProposer(max_failure_groups=1, read_successes=False)
    rng = random.Random(args.seed)
    skill = Skill(base)
    proposals: list[dict[str, Any]] = []
    for k in range(args.proposals):
        group = rng.sample(failing, min(4, len(failing)))
        others = [e for e in failing if e not in group]
        unread = rng.sample(others, min(args.unread, len(others)))
        kept_passing = rng.sample(passing, min(args.passing, len(passing)))
        rollouts = [records[e.id] for e in group]  # what the proposer reads: the seed's answers
        request = ProposalRequest(
            module=module, skill=skill, batch=group, rollouts=rollouts, trainset=train,
            rejected=(), optimizer_lm=optimizer, rng=random.Random(k), budget_tokens=128, step=k,
        )  # fmt: skip
        started, calls_before = time.perf_counter(), optimizer.ledger.snapshot().calls
        groups = proposer.propose(request)
        row: dict[str, Any] = {
            "proposal": k,
            "read": [e.id for e in group],
            "read_still_failing_at_reading": sum(r.score < 1.0 for r in rollouts),
            "reflection_s": round(time.perf_counter() - started, 1),
            "optimizer_calls": optimizer.ledger.snapshot().calls - calls_before,
            "notes": request.notes,
        }
        if not groups:
            row["outcome"] = "no proposal"
            proposals.append(row)
            save(proposals)
            print(f"proposal {k}: none ({row['notes']})", flush=True)
            continue
        (edit_group,) = groups
        candidate, kept, _ = clip_to_budget(skill, list(edit_group.edits), 128, None)
        row["addresses"] = list(edit_group.addresses)
        row["edits"] = [e.model_dump(exclude={"rationale"}) for e in edit_group.edits]
        row["applied"] = len(kept)
        row["text"] = candidate.text
        if not kept or candidate.text == base:
            row["outcome"] = "no change"
            proposals.append(row)
            save(proposals)
            print(f"proposal {k}: no change", flush=True)
            continue
        read_s = answers.score(candidate.text, group)
        unread_s = answers.score(candidate.text, unread)
        pass_s = answers.score(candidate.text, kept_passing)
        row.update(
            outcome="changed",
            fixed_read=sum(v >= 1 for v in read_s.values()),
            unread=len(unread),
            fixed_unread=sum(v >= 1 for v in unread_s.values()),
            passing=len(kept_passing),
            broke_passing=sum(v < 1 for v in pass_s.values()),
        )
        proposals.append(row)
        save(proposals)
        print(f"proposal {k}: fixed {row['fixed_read']}/{len(group)} read, {row['fixed_unread']}/"
              f"{len(unread)} unread, broke {row['broke_passing']}/{len(kept_passing)}: "
              f"{candidate.text[:160]!r}", flush=True)  # fmt: skip
    return {
        "train": len(train),
        "seed_train_right": len(passing),
        "proposals": proposals,
        "summary": summarise(proposals),
    }


def summarise(proposals: list[dict[str, Any]]) -> dict[str, Any]:
    """The proposal figures the worlds' odds are read from (counts beside shares)."""
    changed = [p for p in proposals if p.get("outcome") == "changed"]
    n = len(proposals)

    def count(test: Any) -> int:
        return sum(1 for p in changed if test(p))

    fix_read = count(lambda p: p["fixed_read"] > 0)
    fix_unread = count(lambda p: p["fixed_unread"] > 0)
    breaks = count(lambda p: p["broke_passing"] > 0)
    general = count(lambda p: p["fixed_unread"] / max(p["unread"], 1) >= 0.5
                    and p["broke_passing"] <= 1)  # fmt: skip
    harmful = count(lambda p: p["broke_passing"] / max(p["passing"], 1) >= 0.5)
    read_fixed = sum(p["fixed_read"] for p in changed)
    read_n = sum(len(p["read"]) for p in changed)
    unread_fixed, unread_n = (sum(p["fixed_unread"] for p in changed),
                              sum(p["unread"] for p in changed))  # fmt: skip
    broke, pass_n = (sum(p["broke_passing"] for p in changed),
                     sum(p["passing"] for p in changed))  # fmt: skip
    return {
        "proposals": n,
        "no_proposal": sum(1 for p in proposals if p.get("outcome") == "no proposal"),
        "no_change": sum(1 for p in proposals if p.get("outcome") == "no change"),
        "changed": len(changed),
        "fixes_a_read_failure": fix_read,
        "fixes_an_unread_failure": fix_unread,
        "breaks_a_passing_item": breaks,
        "general_fix": general,
        "harmful": harmful,
        "fix_rate_read": round(read_fixed / max(read_n, 1), 4),
        "fix_rate_unread": round(unread_fixed / max(unread_n, 1), 4),
        "break_rate_passing": round(broke / max(pass_n, 1), 4),
        "counts": {
            "read_fixed": read_fixed,
            "read": read_n,
            "unread_fixed": unread_fixed,
            "unread": unread_n,
            "passing_broken": broke,
            "passing": pass_n,
        },
        "distinct_texts": len({p["text"] for p in changed}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", required=True, help="e.g. http://127.0.0.1:8431/v1")
    parser.add_argument("--model", default="openai/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--val", type=int, default=60)
    parser.add_argument("--train", type=int, default=40)
    parser.add_argument("--proposals", type=int, default=20)
    parser.add_argument("--unread", type=int, default=6)
    parser.add_argument("--passing", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--optimizer-max-tokens", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reflect-on", nargs="+", default=["seed", "rule_lower_case_word"],
                        help="the conditions whose training failures the proposer reads")  # fmt: skip
    parser.add_argument(
        "--phases",
        nargs="*",
        default=["answers", "reflections"],
        help="none (with --resume): summarise and print the stored figures",
    )
    parser.add_argument("--out", default="world_calibration")
    parser.add_argument("--resume", action="store_true", help="reuse the answers in --out")
    args = parser.parse_args()

    splits = load_benchmark(TASK, seed=0, sizes=(args.train, args.val, 1))
    module = module_for(TASK)
    target = LM(args.model, api_base=args.api_base, max_concurrency=1, timeout_s=1800.0,
                params=SamplingParams(max_tokens=args.max_tokens))  # fmt: skip
    optimizer = LM(args.model, api_base=args.api_base, max_concurrency=1, timeout_s=1800.0,
                   params=SamplingParams(max_tokens=args.optimizer_max_tokens))  # fmt: skip
    path: Path = RESULTS / f"{args.out}.json"
    old = json.loads(path.read_text()) if args.resume and path.exists() else {}
    answers = Answers(module, target, old.get("raw", {}))
    figures: dict[str, Any] = {
        "task": TASK, "model": args.model, "api_base": args.api_base,
        "sampling": {"temperature": 0.0, "max_tokens": args.max_tokens,
                     "optimizer_max_tokens": args.optimizer_max_tokens, "response_cache": None},
        "sizes": {"train": args.train, "val": args.val}, "seed": args.seed,
        "git_commit": git_commit(), "skillopt_dsl": sd.__file__, "seed_skill": SEED,
    }  # fmt: skip
    for key in old:
        if key == "answers" and "answers" not in args.phases:
            figures[key] = old[key]
        if key.startswith("reflections"):  # a phase run again replaces it
            figures[key] = old[key]

    bases = {c.name: c.text for c in CONDITIONS}
    reflection_key = {name: "reflections" if name == "seed" else f"reflections_{name}"
                      for name in args.reflect_on}  # fmt: skip
    current: list[str] = []

    def save(proposals: list[dict[str, Any]] | None = None) -> None:
        if proposals is not None:
            figures[current[0]] = {"partial": True, "proposals": proposals}
        figures["raw"] = answers.raw
        figures["target_answers_stored"] = len(answers.raw)
        figures["target_calls_this_run"] = answers.calls
        figures["optimizer_calls_this_run"] = optimizer.ledger.snapshot().calls
        write_results(args.out, figures)

    started = time.perf_counter()
    if "answers" in args.phases:
        figures["answers"] = answers_phase(answers, list(splits.val), save)
        save()
    for name, key in reflection_key.items():
        if "reflections" in args.phases:
            current[:] = [key]
            figures[key] = reflections_phase(
                answers, module, list(splits.train), optimizer, args, save, bases[name]
            )
        reflections = figures.get(key)
        if reflections is not None:  # a run stopped part-way is summarised on what it did
            kinds = failure_kinds(answers.raw, list(splits.train), bases[name])
            reflections["base"] = bases[name]
            reflections["summary"] = summarise(reflections["proposals"])
            reflections["failure_kinds"] = kinds
            reflections["by_group_kind"] = by_group_kind(reflections["proposals"], kinds)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    save()
    report(figures)


def failure_kinds(
    raw: dict[str, list[Any]], train: list[Example], base: str = SEED
) -> dict[str, str]:
    """Each seed failure on training data: "format" (the answer names no label: the class a
    format rule fixes) or "label" (a label, the wrong one: a content failure)."""
    kinds: dict[str, str] = {}
    for e in train:
        output, score = raw.get(Answers.key(base, e.id), ["", 1.0])
        if score < 1.0:
            named = any(label in output.lower() for label in ("positive", "negative"))
            kinds[e.id] = "label" if named else "format"
    return kinds


def by_group_kind(proposals: list[dict[str, Any]], kinds: dict[str, str]) -> dict[str, Any]:
    """Proposals split by what the group they read held: format failures only, or some
    wrong-label failures among them (what a reflector reads when it draws any failing item)."""
    out: dict[str, Any] = {}
    for name, test in (("format_only", lambda ks: set(ks) == {"format"}),
                       ("with_label_failures", lambda ks: "label" in ks)):  # fmt: skip
        picked = [p for p in proposals if test([kinds.get(i, "format") for i in p["read"]])]
        out[name] = {"proposals": len(picked), **summarise(picked)}
    return out


def report(figures: dict[str, Any]) -> None:
    if "answers" in figures:
        a = figures["answers"]
        print_table(
            f"Answers that move on {TASK} ({figures['sizes']['val']} validation examples)",
            ["change", "kind", "base", "right", "wrong->right", "right->wrong", "moved",
             "reply text changed"],
            [[name, r["kind"], r["base"], f"{r['right']}/{r['n']} (base {r['base_right']})",
              r["wrong_to_right"], r["right_to_wrong"], f"{r['moved']} ({r['moved_share']:.0%})",
              r["output_text_changed"]]
             for name, r in a["conditions"].items()],
        )  # fmt: skip
        keys = (
            "by_kind",
            "concentration_non_content",
            "concentration_reply_text_non_content",
            "reply_text_changes",
            "reply_text_changes_on_seed_failures",
            "non_content_rates",
        )
        print(json.dumps({k: a[k] for k in keys}, indent=1))  # fmt: skip
    for key, r in figures.items():
        if key.startswith("reflections") and "summary" in r:
            print(f"\n{key}: proposals on the training failures of {r['base']!r}")
            print(json.dumps({k: r[k] for k in ("summary", "by_group_kind")}, indent=1))
            print(f"training failures by kind: {Counter(r['failure_kinds'].values())}")


if __name__ == "__main__":
    main()
