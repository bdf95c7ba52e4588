"""The search's rules, each switched off one at a time: the ablation over the family of worlds.

Each variant is compile's default (`HandOff`: GradientText, then Bundle) with one rule of the
search off, built from the searches of the revision under measurement (`--base`). A rule with
a setting is switched off by that setting; a rule without one by a bench-only subclass that
skips it (`_without`: the instrument's, never the product's). `bench_search_family.py
--ablation` runs the default and every variant on the same members and seeds and prints, per
draw and budget, each variant's mean gain beside the default's, the difference, and how many
members it moves by more than 0.02 either way. A rule earns its place where switching it off
costs across the family (both draws, every budget), not in one member.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ABLATIONS", "Ablation", "build", "render_ablation"]


@dataclass(frozen=True)
class Ablation:
    """One rule switched off: `rule` says which, `make` builds the search from the module
    `opt` (skillopt_dsl.optimizers) and the world's proposers."""

    name: str
    rule: str
    make: Callable[[Any, Sequence[Any]], Any]
    against: str = "default"
    """The variant it is compared with: compile's default, or `gt` (GradientText alone) for
    a rule of GradientText measured where no hand-off hides it."""


def _without(cls: type, **methods: Callable[..., Any]) -> type:
    """A bench-only subclass of `cls` whose `methods` skip a rule that has no setting."""
    return type(f"{cls.__name__}Without", (cls,), dict(methods))


def _default(opt: Any, proposers: Sequence[Any], *, first: Any = None, then: Any = None) -> Any:
    first = first or opt.GradientText(proposers=proposers)
    then = then or opt.Bundle(proposers=proposers)
    return opt.HandOff(first=first, then=then)


def _gradient_text(
    settings: dict[str, Any], methods: dict[str, Callable[..., Any]], *, alone: bool = False
) -> Callable[[Any, Sequence[Any]], Any]:
    """Compile's default whose GradientText has `settings` and skips `methods` (several rules
    off at once where both are given); `alone`: that GradientText without the hand-off, where
    no Bundle hides what a rule of GradientText is worth."""

    def make(opt: Any, proposers: Sequence[Any]) -> Any:
        cls = _without(opt.GradientText, **methods) if methods else opt.GradientText
        first = cls(proposers=proposers, **settings)
        return first if alone else _default(opt, proposers, first=first)

    return make


def _first(**settings: Any) -> Callable[[Any, Sequence[Any]], Any]:
    return _gradient_text(settings, {})


def _first_without(**methods: Callable[..., Any]) -> Callable[[Any, Sequence[Any]], Any]:
    return _gradient_text({}, methods)


def _alone(**settings: Any) -> Callable[[Any, Sequence[Any]], Any]:
    return _gradient_text(settings, {}, alone=True)


_NO_WAIT: dict[str, Callable[..., Any]] = {"_last_decision_waits": lambda self, view, state: False}
_NO_TRIALS: dict[str, Any] = {"confirm_steps": 0, "join_at_net": None, "gate_strikes": 1}


def _then_without(**methods: Callable[..., Any]) -> Callable[[Any, Sequence[Any]], Any]:
    def make(opt: Any, proposers: Sequence[Any]) -> Any:
        then = _without(opt.Bundle, **methods)(proposers=proposers)
        return _default(opt, proposers, then=then)

    return make


def _then(**settings: Any) -> Callable[[Any, Sequence[Any]], Any]:
    def make(opt: Any, proposers: Sequence[Any]) -> Any:
        return _default(opt, proposers, then=opt.Bundle(proposers=proposers, **settings))

    return make


def _hands_off_unless_gained(self: Any, view: Any, state: Any) -> bool:
    """The hand-off's probe as HandOff's docstring reads it: only a proposal on trial that gained
    on its batch (net > 0) keeps the run with GradientText; one that neither gained nor was
    struck does not."""
    after = self.hand_off_after
    gained = [t for t in state.trials if t.net > 0]
    quiet = view.version == 1 and not state.pending and not gained
    return after is not None and view.memory.step >= after and quiet


def _hands_off_unless_clear_fix(self: Any, view: Any, state: Any) -> bool:
    """The hand-off's probe keeping the run with GradientText only for a clear fix (a proposal
    that joined the working candidate); proposals on trial are dropped at the hand-off (else
    GradientText's last chance would submit them and spend the significance Bundle needs)."""
    after = self.hand_off_after
    quiet = view.version == 1 and not state.pending
    if after is None or view.memory.step < after or not quiet:
        return False
    state.trials.clear()
    return True


def _hands_off_always(self: Any, view: Any, state: Any) -> bool:
    """No probe: every run with nothing accepted is handed to Bundle after GradientText's first
    steps; the working candidate and the proposals on trial are dropped at the hand-off."""
    after = self.hand_off_after
    if after is None or view.memory.step < after or view.version != 1:
        return False
    state.trials.clear()
    state.pending.clear()
    return True


def _hands_off_whatever_is_left(self: Any, view: Any, state: Any) -> bool:
    """The probe's hand-off before 2026-12-07 (bench/README §9r): a quiet run goes to Bundle
    whether or not the calls left pay for Bundle's whole decision."""
    after = self.hand_off_after
    quiet = view.version == 1 and not state.pending and not state.trials
    return after is not None and view.memory.step >= after and quiet


def _many_decisions_kept(hands_off: Callable[..., bool]) -> Callable[..., bool]:
    """A probe rule switched off (`hands_off`) beside the hand-off it does not ablate: with
    nothing accepted, calls left for `hand_off_decisions` whole decisions (bench/README §9t)."""

    def method(self: Any, view: Any, state: Any) -> bool:
        after, many = self.hand_off_after, getattr(self, "hand_off_decisions", None)
        left = view.calls_left()
        probed = after is not None and view.memory.step >= after and view.version == 1
        if probed and many is not None and left is not None:
            return left >= many * view.decision_calls(first_look=False) or hands_off(
                self, view, state
            )
        return hands_off(self, view, state)

    return method


def _bundle_decisions_off(opt: Any, proposers: Sequence[Any]) -> Any:
    first, then = opt.GradientText(proposers=proposers), opt.Bundle(proposers=proposers)
    return opt.HandOff(first=first, then=then, bundle_decisions=None)


def _one_strike(opt: Any, proposers: Sequence[Any]) -> Any:
    first = opt.GradientText(proposers=proposers, screen_strikes=1)
    return _default(
        opt, proposers, first=first, then=opt.Bundle(proposers=proposers, screen_strikes=1)
    )


def _with_step(opt: Any, proposers: Sequence[Any], first_cls: type, then_cls: type) -> Any:
    """Compile's default whose GradientText holds a `first_cls` search step and Bundle a
    `then_cls` one (subclasses of `SearchStep`, each with one rule changed)."""
    from dataclasses import replace

    def first_post_init(self: Any) -> None:
        opt.GradientText.__post_init__(self)
        step = self.screened.step
        self.screened = replace(self.screened, step=first_cls(step.max_edits, step.screen_strikes))

    def then_post_init(self: Any) -> None:
        opt.Bundle.__post_init__(self)
        self.search_step = then_cls(self.search_step.max_edits, self.search_step.screen_strikes)

    first = _without(opt.GradientText, __post_init__=first_post_init)(proposers=proposers)
    then = _without(opt.Bundle, __post_init__=then_post_init)(proposers=proposers)
    return _default(opt, proposers, first=first, then=then)


def _claims_block(opt: Any, proposers: Sequence[Any]) -> Any:
    """Compile's default whose search step blocks a proposal at its `screen_strikes`-th
    failure whatever the failure (a failed claim too: the rule before 2026-12-07), not only
    once its evidence rules it out."""
    from skillopt_dsl.optimizers.search import SearchStep

    class ClaimsBlock(SearchStep):  # type: ignore[misc]
        def try_alone(self, view: Any, fitted: Any, *args: Any, epoch: int) -> Any:
            tried = super().try_alone(view, fitted, *args, epoch=epoch)
            memory = view.memory
            if tried.struck and memory.screen_strikes.get(fitted.key, 0) >= self.screen_strikes:
                memory.remember(fitted.kept, tried.evidence.rate, epoch=epoch, block=True)
            return tried

    return _with_step(opt, proposers, ClaimsBlock, ClaimsBlock)


def _unnamed_on_trial(opt: Any, proposers: Sequence[Any]) -> Any:
    """Compile's default whose search step strikes a proposal that gained nothing on its batch
    only when it names failures (the rule before 2026-12-07): in GradientText one that names
    none and is not ruled out goes on trial; Bundle passes over it unstruck."""
    from skillopt_dsl.optimizers.search import SearchStep, step
    from skillopt_dsl.optimizers.search.proposal import Tried

    class UnnamedOnTrial(SearchStep):  # type: ignore[misc]
        passed_over = False  # Bundle's old check: `tried.struck or not tried.result.passed`

        def try_alone(
            self, view: Any, fitted: Any, batch: Any, rollouts: Any, *, epoch: int
        ) -> Any:
            memory, group = view.memory, fitted.group
            result = step.screen(view, fitted.candidate, batch, rollouts, addresses=group.addresses)
            step.record_screen(view, group, result)
            evidence = memory.add_evidence(fitted.key, result)
            ruled_out = evidence.rules_out(view.certifiable_gain())
            struck = (bool(group.addresses) and not result.passed) or ruled_out
            if struck:
                memory.strike(fitted.kept, evidence.rate, epoch=epoch, limit=self.screen_strikes,
                              block=ruled_out)  # fmt: skip
            else:
                memory.proposer_stats.setdefault(group.source, step.new_stats())["survived"] += 1
            return Tried(
                fitted, result, evidence, struck or (self.passed_over and not result.passed)
            )

    class PassedOver(UnnamedOnTrial):  # type: ignore[misc]
        passed_over = True

    return _with_step(opt, proposers, UnnamedOnTrial, PassedOver)


def _passengers_ride(opt: Any, proposers: Sequence[Any]) -> Any:
    """Compile's default whose GradientText composes proposals on trial into a working
    candidate whose own proposals already show the gain the gate certifies (the rule before
    2026-12-07, bench/README §9v): the sum of all of them is what is compared."""
    from dataclasses import fields

    from skillopt_dsl.optimizers.search import screened

    class Riding(screened.ScreenedSteps):  # type: ignore[misc]
        def compose_small_effects(self, view: Any, state: Any) -> None:
            needed = screened.submit_gain(view)
            if self.submit_at_net is not None or needed is None or not self.screen:
                return
            chosen = [t for t in state.trials if t.net > 0 and (t.screens or 0) > 0]
            gain = sum(screened.luck_free_rate(g) for g in (*state.pending, *chosen))
            if gain < needed or not chosen or len(state.pending) + len(chosen) < 2:
                return
            for trial in chosen:
                state.trials.remove(trial)
                state.pending.append(trial)
            view.emit("compose_small", groups=len(chosen), gain=gain, needed=needed)

    def first_post_init(self: Any) -> None:
        opt.GradientText.__post_init__(self)
        kept = {f.name: getattr(self.screened, f.name) for f in fields(self.screened)}
        self.screened = Riding(**kept)

    first = _without(opt.GradientText, __post_init__=first_post_init)(proposers=proposers)
    return _default(opt, proposers, first=first)


def _fixes_unchecked(
    self: Any, view: Any, state: Any, fitted: Any, batch: Any, rollouts: Any
) -> tuple[str, ...]:
    """Bundle's fixes without the changed-wording check: every failure the survivor fixed."""
    before = {r.example_id: r.score for r in rollouts}
    records = view.evaluate(fitted.candidate, batch, label="screen").records
    return tuple(e.id for e, r in zip(batch, records, strict=True) if r.score > before[e.id])


def _breaks_counted(self: Any, view: Any, *args: Any) -> list[Any]:
    """Bundle's audit without the repeat test: every break counts as the edit's (the broken
    examples are the last argument, whatever the revision's signature; `_repeats` returns
    those that repeat, since the audit became a record: a count here crashed the variant)."""
    return list(args[-1])


def _rewording_only(self: Any, view: Any, state: Any, fitted: Any, change: int) -> Any:
    """Bundle's changed texts without the change of content: each one more trailing newline."""
    return type(fitted.candidate)(fitted.candidate.text + "\n" * change)


def _never_readmitted(self: Any, view: Any, state: Any) -> int:
    """Bundle without the wait: a survivor an empty bundle's audit struck stays struck."""
    for waiting in state.waiting:
        self._strike_audited(view, waiting.edits, len(waiting.breaks), len(waiting.breaks))
    state.waiting.clear()
    return 0


def _never_admitted(self: Any, view: Any, state: Any) -> None:
    """Bundle before 2026-12-07 (bench/README §9s): survivors still waiting when an empty
    bundle's collecting ends are left out, and the run ends with no decision."""


ABLATIONS: dict[str, Ablation] = {
    a.name: a
    for a in (
        Ablation("no-hand-off", "the hand-off to Bundle (GradientText alone)",
                 lambda opt, p: opt.GradientText(proposers=p)),
        Ablation("no-screen", "the screen on training data (every proposal untried)", _first(screen=False)),
        Ablation("no-confirm", "confirmation on later batches (confirm_steps=0)", _first(confirm_steps=0)),
        Ablation("no-early-join", "a clear fix joins unconfirmed (join_at_net=None)", _first(join_at_net=None)),
        Ablation("no-submit-gain", "submit once the training gain is certifiable (compose only)",
                 _first(submit_at_net=float("inf"))),
        Ablation("no-last-wait", "the budget's last decision waits for a step",
                 _first_without(**_NO_WAIT)),
        Ablation("no-lean-step", "the lean step in the budget's tail",
                 _first_without(_lean_batch=lambda self, view, state: 0)),
        Ablation("no-budget-steps", "smaller batches for a small budget (budget_steps=None)",
                 _first(budget_steps=None)),
        Ablation("no-slow-update", "the end-of-epoch consolidation", _first(slow_update=False)),
        Ablation("no-benching", "benching proposers that never pass (bench_after=None)",
                 _first(bench_after=None)),
        Ablation("one-screen-strike", "a second screen for a re-proposal (screen_strikes=1)", _one_strike),
        Ablation("claims-block", "a failed claim alone does not block a re-proposal (it blocks at the strikes)",
                 _claims_block),
        Ablation("unnamed-on-trial", "a proposal that gains nothing on its batch is struck whether or not it names failures",
                 _unnamed_on_trial),
        Ablation("one-gate-strike", "a rejected bundle's proposals back on trial (gate_strikes=1)",
                 _first(gate_strikes=1)),
        Ablation("lean-trials", "confirmation, early join, gate strikes and the last wait, together",
                 _gradient_text(_NO_TRIALS, _NO_WAIT)),
        Ablation("lean-all", "lean-trials and the submit at the certifiable gain, together",
                 _gradient_text({**_NO_TRIALS, "submit_at_net": float("inf")}, _NO_WAIT)),
        Ablation("gt", "GradientText alone, every rule on", _alone(), against="gt"),
        Ablation("gt-no-confirm", "GradientText alone: confirmation (confirm_steps=0)",
                 _alone(confirm_steps=0), against="gt"),
        Ablation("gt-no-early-join", "GradientText alone: the early join (join_at_net=None)",
                 _alone(join_at_net=None), against="gt"),
        Ablation("gt-one-gate-strike", "GradientText alone: back on trial (gate_strikes=1)",
                 _alone(gate_strikes=1), against="gt"),
        Ablation("gt-no-submit-gain", "GradientText alone: submit at the certifiable gain",
                 _alone(submit_at_net=float("inf")), against="gt"),
        Ablation("gt-no-last-wait", "GradientText alone: the last decision waits",
                 _gradient_text({}, _NO_WAIT, alone=True), against="gt"),
        Ablation("gt-no-slow-update", "GradientText alone: consolidation (slow_update=False)",
                 _alone(slow_update=False), against="gt"),
        Ablation("no-fix-check", "Bundle: a fix must persist under a changed wording",
                 _then_without(_lasting_fixes=_fixes_unchecked)),
        Ablation("no-audit-repeat", "Bundle: an audit's break must repeat under a changed wording",
                 _then_without(_repeats=_breaks_counted)),
        Ablation("probe-gained-only", "the hand-off's probe: a proposal on trial without a gain keeps the run",
                 _first_without(_hands_off=_many_decisions_kept(_hands_off_unless_gained))),
        Ablation("probe-clear-fix-only", "the hand-off's probe: a proposal on trial keeps the run (only a clear fix does)",
                 _first_without(_hands_off=_many_decisions_kept(_hands_off_unless_clear_fix))),
        Ablation("always-hand-off", "the hand-off's probe (every run without an acceptance goes to Bundle)",
                 _first_without(_hands_off=_many_decisions_kept(_hands_off_always))),
        Ablation("hand-off-undecidable", "the hand-off only where the calls left pay for a whole decision",
                 _first_without(_hands_off=_many_decisions_kept(_hands_off_whatever_is_left))),
        Ablation("no-bundle-decisions", "the hand-off where the calls left pay for six decisions (bundle_decisions=None)",
                 _bundle_decisions_off),
        Ablation("passengers-ride", "small effects ride only where the working candidate needs them to pass",
                 _passengers_ride),
        Ablation("no-replan", "Bundle's decision at all the significance left (the run planned again at the hand-off)",
                 lambda opt, p: _without(opt.HandOff, _plan_then=lambda self, view: None)(
                     first=opt.GradientText(proposers=p), then=opt.Bundle(proposers=p))),
        Ablation("no-content-change", "Bundle: a fix and a break are scored again within the bundle",
                 _then_without(_changed=_rewording_only)),
        Ablation("no-wait", "Bundle: a survivor an empty bundle's audit struck is audited again within it",
                 _then_without(_readmit=_never_readmitted, _admit_waiting=_never_admitted)),
        Ablation("waiting-unjudged", "Bundle: survivors still waiting when an empty bundle's collecting ends go to the gate",
                 _then_without(_admit_waiting=_never_admitted)),
        Ablation("no-audit", "Bundle: the audit for harm (audit_strikes=audit_size)",
                 _then(audit_strikes=24)),
        Ablation("no-break-forgiven", "Bundle: one repeated break forgiven a survivor with two lasting fixes",
                 _then_without(_strikes=lambda self, fixes: self.audit_strikes)),
        Ablation("audit-two-strikes", "Bundle: one repeated break in the audit is forgiven (audit_strikes=2)",
                 _then(audit_strikes=2)),
    )
}  # fmt: skip


def build(name: str, opt: Any, proposers: Sequence[Any]) -> Any:
    """The search for variant `name` (a key of `ABLATIONS`)."""
    return ABLATIONS[name].make(opt, proposers)


def render_ablation(
    figures: dict[str, Any], print_table: Callable[[str, list[str], list[list[Any]]], None]
) -> None:
    """Per draw: each variant's mean gain over members beside its reference's (`against`: the
    default, or GradientText alone), at each budget, with the difference and the members it
    moves by more than 0.02 (better / worse)."""
    calls_list = figures["args"]["calls"]
    variants = [o for o in figures["args"]["optimizers"] if o in ABLATIONS]
    if "default" in figures["args"]["optimizers"]:
        variants = ["default", *variants]
    for d, draw in figures["draws"].items():
        rows = {(r["member"], r["optimizer"], r["calls"]): r["gain"] for r in draw["rows"]}
        names = [m["name"] for m in draw["members"]]
        table = []
        for variant in variants:
            against = ABLATIONS[variant].against if variant in ABLATIONS else "default"
            rule = ABLATIONS[variant].rule if variant in ABLATIONS else "-"
            cells: list[Any] = [variant, rule, against]
            for calls in calls_list:
                pairs = [
                    (g, b)
                    for n in names
                    if (g := rows.get((n, variant, calls))) is not None
                    and (b := rows.get((n, against, calls))) is not None
                ]
                mean = statistics.mean(g for g, _ in pairs) if pairs else float("nan")
                delta = statistics.mean(g - b for g, b in pairs) if pairs else float("nan")
                up = sum(g > b + 0.02 for g, b in pairs)
                down = sum(g < b - 0.02 for g, b in pairs)
                cells.append(f"{mean:+.3f} ({delta:+.3f}; {up}/{down})")
            table.append(cells)
        print_table(
            f"ablation, {d} draw (seed {draw['seed']}): mean gain over members (difference from"
            f" the variant it is against; members better/worse by > 0.02),"
            f" {figures['args']['runs']} seeds",
            ["variant", "rule off", "against", *[f"{c} calls" for c in calls_list]],
            table,
        )
