"""Proposers: small plug-ins that turn a mini-batch of rollouts into typed edits.

Contract (`Proposer`): implement `propose(request) -> list[EditGroup]`. Read anything from the
`ProposalRequest`; never raise for one bad group (log it with `request.note(...)` and skip it);
draw randomness only from `request.rng`. Proposers never apply edits or touch the incumbent:
the optimizer clips their edits to the learning rate and the driver's gate decides.

Shipped proposers:

- `ReflectiveProposer`: the optimizer model reads groups of failures (and, separately,
  successes) and proposes edits as JSON, validated by pydantic, retried once on invalid output.
- `DemonstrationsProposer`: adds or swaps worked examples from the training set in an
  `## Examples` section; needs no optimizer model (small models copy examples well).
- `FormatRuleProposer`: derives an output-format rule from the declared output types when
  rollouts fail to parse or the metric's feedback says the format is wrong; no model needed.

Module hooks: a module whose calls are not rendered by our renderer (a DSPy predictor, which
DSPy's adapter formats and whose labels belong to the whole program) may define
`worked_example(example, rollout) -> str | None`, `output_format_rule() -> str | None`,
`reflection_case(example, rollout) -> str`, `labelled_answer(example) -> str | None` and
`output_broke_format(rollout) -> bool`; the proposers then use them (None: nothing to add)
instead of `render_demo`, `format_rule`, the default reflection case, `gold_answer` (rules
mined from labels) and the default format-failure signals.
"""

from __future__ import annotations

import json
import logging
import random
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic

from skillopt_dsl.errors import BudgetExceeded, ModelError
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.lm import LM
from skillopt_dsl.module import SkillModule
from skillopt_dsl.skill import Add, Delete, Edit, Replace, Skill, tokenize
from skillopt_dsl.types import Example

__all__ = [
    "ConsolidationProposer",
    "DemonstrationsProposer",
    "EditGroup",
    "FormatRuleProposer",
    "ProposalRequest",
    "Proposer",
    "ReflectiveProposer",
    "RejectedCandidate",
    "edit_key",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RejectedCandidate:
    """A candidate the gate turned down: its edits and its validation delta (the memory)."""

    edits: tuple[Edit, ...]
    delta: float
    step: int
    epoch: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as kept in checkpoints."""
        return {
            "edits": [e.model_dump() for e in self.edits],
            "delta": self.delta,
            "step": self.step,
            "epoch": self.epoch,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RejectedCandidate:
        """Rebuild from `to_dict` output."""
        from skillopt_dsl.skill import parse_edits

        return cls(tuple(parse_edits(data["edits"])), data["delta"], data["step"], data["epoch"])


@dataclass(frozen=True)
class EditGroup:
    """Edits one proposer drew from one group of rollouts."""

    edits: tuple[Edit, ...]
    source: str
    failure_driven: bool
    rationale: str = ""


@dataclass
class ProposalRequest:
    """Everything a proposer may read for one step (one context object, not a parameter list)."""

    module: SkillModule
    skill: Skill
    batch: Sequence[Example]
    rollouts: Sequence[Rollout]
    trainset: Sequence[Example]
    rejected: Sequence[RejectedCandidate]
    optimizer_lm: LM
    rng: random.Random
    budget_tokens: int
    step: int = 0
    epoch: int = 0
    notes: list[dict[str, Any]] = field(default_factory=list)

    def note(self, kind: str, **payload: Any) -> None:
        """Record something worth keeping in the run's events (a dropped group, say)."""
        self.notes.append({"kind": kind, **payload})

    def failures(self, threshold: float = 1.0) -> list[tuple[Example, Rollout]]:
        """The batch's (example, rollout) pairs scoring below `threshold`."""
        return [
            (e, r) for e, r in zip(self.batch, self.rollouts, strict=True) if r.score < threshold
        ]

    def successes(self, threshold: float = 1.0) -> list[tuple[Example, Rollout]]:
        """The batch's pairs scoring at least `threshold`."""
        return [
            (e, r) for e, r in zip(self.batch, self.rollouts, strict=True) if r.score >= threshold
        ]


class Proposer(ABC):
    """Turns a `ProposalRequest` into edit groups. See the module docstring for the contract."""

    name: str = "proposer"

    @abstractmethod
    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        """Return zero or more edit groups; never raise for one bad group."""


def edit_key(edit: Edit) -> str:
    """A normalised identity for an edit (whitespace-collapsed, case-folded), for dedup and memory."""
    fields = edit.model_dump(exclude={"rationale"})
    return json.dumps(
        {k: " ".join(str(v).split()).casefold() for k, v in fields.items()}, sort_keys=True
    )


# -- demonstrations --------------------------------------------------------------------------

EXAMPLES_HEADING = "Examples"


def render_demo(module: SkillModule, example: Example) -> str:
    """A worked example as it appears in the skill: the input, then the gold answer."""
    user = module.render(Skill(""), example)[-1]["content"]
    return f"Input: {user}\nAnswer: {gold_answer(module, example)}"


def gold_answer(module: SkillModule, example: Example) -> str:
    """The example's expected output, rendered the way the model should write it."""
    if len(module.output_fields) == 1:
        (name,) = module.output_fields
        value = example.labels.get(name, next(iter(example.labels.values()), ""))
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        return str(value)
    return json.dumps({k: example.labels.get(k) for k in module.output_fields}, ensure_ascii=False)


def module_gold_answer(module: SkillModule, example: Example) -> str | None:
    """The module's `labelled_answer` hook if it has one (None: the labels give no answer for
    this module's output), else `gold_answer`."""
    hook = getattr(module, "labelled_answer", None)
    if callable(hook):
        answer: str | None = hook(example)
        return answer
    return gold_answer(module, example)


def module_demo(module: SkillModule, example: Example, rollout: Rollout | None) -> str | None:
    """The module's `worked_example` hook if it has one, else `render_demo`."""
    hook = getattr(module, "worked_example", None)
    if callable(hook):
        demo: str | None = hook(example, rollout)
        return demo
    return render_demo(module, example)


@dataclass(kw_only=True)
class DemonstrationsProposer(Proposer):
    """Adds (or, once `max_demos` are present, swaps in) worked examples from the training set.

    Failing batch examples come first, then random training examples. Demos already in the skill,
    demos longer than the step's token budget, and edits already rejected are skipped. Each demo
    is its own edit, so the learning rate can keep some and clip the rest. No model is called.
    """

    per_step: int = 2
    max_demos: int = 6
    name: str = "demonstrations"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        rejected = {edit_key(e) for c in request.rejected for e in c.edits}
        failing = [e for e, _ in request.failures()]
        others = [e for e in request.trainset if e not in failing]
        request.rng.shuffle(others)
        planner = _DemoPlanner(request.skill, self.max_demos, request.rng)
        edits: list[Edit] = []
        by_id = {e.id: r for e, r in zip(request.batch, request.rollouts, strict=True)}
        for example in failing + others:
            demo = module_demo(request.module, example, by_id.get(example.id))
            if demo is None or demo in request.skill.text:
                continue
            if len(tokenize(demo)) > request.budget_tokens:
                continue
            edit = planner.edit_for(demo)
            if edit is None or edit_key(edit) in rejected:
                continue
            planner.commit(edit)
            edits.append(edit)
            if len(edits) >= self.per_step:
                break
        if not edits:
            return []
        return [
            EditGroup(
                tuple(edits), self.name, failure_driven=bool(failing), rationale="worked examples"
            )
        ]


class _DemoPlanner:
    """Plans demo edits in order: create the section, then add under it, then swap."""

    def __init__(self, skill: Skill, max_demos: int, rng: random.Random) -> None:
        self.has_section = _has_heading(skill, EXAMPLES_HEADING)
        self.existing = _existing_demos(skill)
        self.count = len(self.existing)
        self.max_demos, self.rng = max_demos, rng

    def edit_for(self, demo: str) -> Edit | None:
        if self.count >= self.max_demos:
            if not self.existing:
                return None
            old = self.existing[self.rng.randrange(len(self.existing))]
            return Replace(old=old, new=demo, rationale="swap a worked example")
        if not self.has_section:
            return Add(
                after=None, text=f"## {EXAMPLES_HEADING}\n\n{demo}", rationale="worked example"
            )
        return Add(after=EXAMPLES_HEADING, text=demo, rationale="worked example")

    def commit(self, edit: Edit) -> None:
        if isinstance(edit, Replace):
            self.existing.remove(edit.old)
            return
        self.has_section, self.count = True, self.count + 1


def bullet_under_heading(skill: Skill, heading: str, rule: str, rationale: str) -> Edit:
    """An edit adding `- rule` at the end of the skill's `heading` section (found in any case,
    and named as the skill spells it), creating the section if the skill has none."""
    title = _heading_title(skill, heading)
    if title is not None:
        return Add(after=title, text=f"- {rule}", rationale=rationale)
    return Add(after=None, text=f"## {heading}\n\n- {rule}", rationale=rationale)


def states(skill: Skill, text: str) -> bool:
    """True when `skill` already says `text` (case and line breaks aside): a rule it states
    is never proposed again."""
    wanted = " ".join(text.split()).casefold()
    return bool(wanted) and wanted in " ".join(skill.text.split()).casefold()


def _heading_title(skill: Skill, title: str) -> str | None:
    """The skill's own spelling of the heading `title` (compared case-insensitively), or None."""
    for section in skill.sections():
        if (section.heading or "").strip().casefold() == title.casefold():
            return (section.heading or "").strip()
    return None


def _has_heading(skill: Skill, title: str) -> bool:
    return _heading_title(skill, title) is not None


def _existing_demos(skill: Skill) -> list[str]:
    for section in skill.sections():
        if (section.heading or "").strip().casefold() == EXAMPLES_HEADING.casefold():
            blocks = [b.strip() for b in section.text.split("\n\n")]
            return [b for b in blocks if b.startswith("Input:")]
    return []


# -- format rules ----------------------------------------------------------------------------

FORMAT_HEADING = "Output format"
_FORMAT_WORDS = ("format", "parse", "could not", "allowed answers", "one of", "no number", "empty")


@dataclass(kw_only=True)
class FormatRuleProposer(Proposer):
    """Adds one output-format rule, derived from the declared output types, when rollouts fail
    to parse or the metric's feedback complains about the format. No model is called."""

    name: str = "format-rule"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failures = request.failures()
        signals = [r for _, r in failures if module_broke_format(request.module, r)]
        if not signals:
            return []
        rule = module_format_rule(request.module)
        if rule is None or states(request.skill, rule):
            return []
        edit = bullet_under_heading(request.skill, FORMAT_HEADING, rule, "output format")
        why = f"{len(signals)} of {len(request.rollouts)} outputs broke the expected format"
        return [EditGroup((edit,), self.name, failure_driven=True, rationale=why)]


def module_broke_format(module: SkillModule, rollout: Rollout) -> bool:
    """The module's `output_broke_format` hook if it has one, else: the output did not parse,
    the feedback names the format, or the output says more than its one value."""
    hook = getattr(module, "output_broke_format", None)
    if callable(hook):
        return bool(hook(rollout))
    return (
        not rollout.prediction.ok
        or _mentions_format(rollout.feedback)
        or _says_more_than_its_answer(module, rollout)
    )


def _says_more_than_its_answer(module: SkillModule, rollout: Rollout) -> bool:
    """True for a failing output that parsed into its one field but says more than the value
    it was read as: "94 times 87 equals 7602." read as 94 is a format failure, not only a
    wrong number."""
    if len(module.output_fields) != 1 or not rollout.prediction.ok:
        return False
    (value,) = rollout.prediction.outputs.values()
    said = (rollout.prediction.raw or rollout.output).strip().rstrip(".").strip()
    return said.casefold() != str(value).strip().casefold()


def _mentions_format(feedback: str | None) -> bool:
    text = (feedback or "").casefold()
    return any(word in text for word in _FORMAT_WORDS)


def mentions_format(feedback: str | None) -> bool:
    """Whether a metric's feedback complains about the output's format."""
    return _mentions_format(feedback)


def module_format_rule(module: SkillModule) -> str | None:
    """The module's `output_format_rule` hook if it has one, else `format_rule`."""
    hook = getattr(module, "output_format_rule", None)
    if callable(hook):
        rule: str | None = hook()
        return rule
    return format_rule(module)


def format_rule(module: SkillModule) -> str:
    """A one-line output rule that follows from the module's declared output types."""
    if len(module.output_fields) > 1:
        keys = ", ".join(f'"{k}"' for k in module.output_fields)
        return f"Reply with one JSON object with the keys {keys} and nothing else."
    (spec,) = module.output_fields.values()
    annotation = spec.annotation
    if typing.get_origin(annotation) is Literal:
        options = ", ".join(str(a) for a in typing.get_args(annotation))
        return f"Reply with exactly one of: {options}. Write nothing else."
    if annotation in (int, float):
        return "Reply with the number only, in digits, with no words."
    if annotation is bool:
        return "Reply with yes or no only."
    return f"Reply with the {spec.name} only, on one line, with no explanation."


# -- reflection ------------------------------------------------------------------------------


class _EditBatch(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    edits: list[typing.Annotated[Add | Replace | Delete, pydantic.Field(discriminator="kind")]]


_SYSTEM = """You improve a skill document: the instructions a model reads before doing a task.
You are shown the document and examples of the model's work with the expected answers and the
metric's feedback. Propose small, general edits to the document that would fix the failures
without breaking the successes. Do not copy example answers; state rules.
Reply with JSON only, in this form:
{"edits": [{"kind": "add", "after": "<heading or exact text, or null for the end>", "text": "<new text>", "rationale": "<why>"},
           {"kind": "replace", "old": "<exact text in the document>", "new": "<replacement>", "rationale": "<why>"},
           {"kind": "delete", "old": "<exact text in the document>", "rationale": "<why>"}]}"""


@dataclass(kw_only=True)
class ReflectiveProposer(Proposer):
    """The optimizer model reads groups of rollouts and proposes typed edits (JSON).

    Failures are read in groups of `group_size`; successes (at most one group) separately, to
    learn what to keep. Invalid output is retried once with the validation error; a group
    still invalid is dropped and recorded, never a crash.
    """

    group_size: int = 4
    max_failure_groups: int = 2
    read_successes: bool = True
    max_edits_per_group: int = 3
    name: str = "reflective"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failures = request.failures()
        groups: list[tuple[bool, list[tuple[Example, Rollout]]]] = [
            (True, failures[i : i + self.group_size])
            for i in range(0, len(failures), self.group_size)
        ][: self.max_failure_groups]
        successes = request.successes()
        if self.read_successes and successes:
            groups.append((False, successes[: self.group_size]))
        result: list[EditGroup] = []
        for index, (failure_driven, group) in enumerate(groups):
            edits = self._reflect(request, group, failure_driven, index)
            if edits:
                result.append(
                    EditGroup(tuple(edits[: self.max_edits_per_group]), self.name, failure_driven)
                )
        return result

    def _reflect(
        self,
        request: ProposalRequest,
        group: list[tuple[Example, Rollout]],
        failure_driven: bool,
        index: int,
    ) -> list[Edit]:
        messages = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _reflection_prompt(request, group, failure_driven)},
        ]
        edits = ask_for_edits(request.optimizer_lm, messages, seed=request.step * 100 + index)
        if isinstance(edits, str):
            reason, _, reply = edits.partition("\n")
            request.note("reflection_dropped", group=index, reason=reason, reply=reply[:500])
            return []
        return edits


def ask_for_edits(lm: LM, messages: list[dict[str, str]], *, seed: int) -> list[Edit] | str:
    """Ask the optimizer model for `{"edits": [...]}`; validate with pydantic; retry once with
    the validation error. Returns the edits, or a string saying why the reply was dropped
    (first line: the reason; then the last reply). Never raises for bad output."""
    for attempt in range(2):
        try:
            reply = lm.complete(messages, seed=seed).text
        except ModelError as exc:
            return f"model error: {exc}"
        try:
            return list(_EditBatch.model_validate_json(_json_block(reply)).edits)
        except (pydantic.ValidationError, ValueError) as exc:
            if attempt == 1:
                return f"{_brief(exc)}\n{reply}"
            retry = f"That reply was invalid: {_brief(exc)}. Reply with the JSON only."
            messages = [
                *messages,
                {"role": "assistant", "content": reply},
                {"role": "user", "content": retry},
            ]
    return "no valid reply"


def _json_block(text: str) -> str:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the reply contains no JSON object")
    return text[start : end + 1]


def _brief(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
    return str(exc)[:300]


def _reflection_prompt(
    request: ProposalRequest, group: list[tuple[Example, Rollout]], failure_driven: bool
) -> str:
    what = "FAILED" if failure_driven else "SUCCEEDED (keep what made these work)"
    parts = [
        f"# Task\n{request.module.description or request.module.name}",
        f"# Document\n{request.skill.text or '(empty)'}",
    ]
    cases = [f"# Examples the model {what}"]
    hook = getattr(request.module, "reflection_case", None)
    for example, rollout in group:
        if callable(hook):
            cases.append(hook(example, rollout))
            continue
        cases.append(
            f"- input: {json.dumps(dict(example.inputs), ensure_ascii=False, default=str)[:600]}\n"
            f"  output: {rollout.output[:300]!r}\n"
            # an agent's trace (Trajectory, HarnessRun) renders itself compactly
            + (
                f"  trajectory:\n{rollout.trace.render_for_reflection()}\n"
                if callable(getattr(rollout.trace, "render_for_reflection", None))
                else ""
            )
            + f"  expected: {gold_answer(request.module, example)}\n"
            f"  feedback: {rollout.feedback or rollout.prediction.error or ''}"
        )
    parts.append("\n".join(cases))
    if request.rejected:
        tried = [
            f"- {e.model_dump_json(exclude={'rationale'})} (delta {c.delta:+.3f})"
            for c in request.rejected[-5:]
            for e in c.edits[:3]
        ]
        parts.append("# Already tried and rejected (do not propose again)\n" + "\n".join(tried))
    parts.append(f"# Limit\nYour edits together may change at most {request.budget_tokens} tokens.")
    return "\n\n".join(parts)


_CONSOLIDATE = """You edit a skill document: the instructions a model reads before doing a task.
Make it more concise and coherent without changing what it asks for: merge repeated rules,
delete redundant sentences, fix contradictions. Keep every worked example that is still useful.
Reply with JSON only: {"edits": [{"kind": "replace", "old": "<exact text>", "new": "<text>", "rationale": "<why>"},
{"kind": "delete", "old": "<exact text>", "rationale": "<why>"}]}"""


@dataclass(kw_only=True)
class ConsolidationProposer(Proposer):
    """The slow update: make the document concise and coherent.

    Deterministically deletes paragraphs that repeat an earlier one (whitespace- and
    case-insensitively); with `use_model=True` also asks the optimizer model for Replace/Delete
    edits (Adds are not consolidation and are dropped, with a note). The edits are clipped to
    the learning rate and gated like any other candidate.
    """

    use_model: bool = True
    name: str = "consolidation"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        groups = (
            [EditGroup(tuple(edits), self.name, False, "repeated paragraphs")]
            if (edits := repeated_paragraph_deletes(request.skill))
            else []
        )
        if self.use_model and request.skill.text.strip():
            groups += self._model_edits(request)
        return groups

    def _model_edits(self, request: ProposalRequest) -> list[EditGroup]:
        prompt = f"# Document\n{request.skill.text}\n\n# Limit\nChange at most {request.budget_tokens} tokens."
        messages = [
            {"role": "system", "content": _CONSOLIDATE},
            {"role": "user", "content": prompt},
        ]
        edits = ask_for_edits(request.optimizer_lm, messages, seed=request.step * 100 + 99)
        if isinstance(edits, str):
            reason, _, reply = edits.partition("\n")
            request.note("consolidation_dropped", reason=reason, reply=reply[:500])
            return []
        kept = [e for e in edits if not isinstance(e, Add)]
        if len(kept) < len(edits):
            request.note("consolidation_adds_dropped", count=len(edits) - len(kept))
        return [EditGroup(tuple(kept), self.name, False, "consolidation")] if kept else []


def repeated_paragraphs(skill: Skill) -> list[str]:
    """Paragraphs that repeat an earlier one (compared whitespace- and case-insensitively)."""
    seen: set[str] = set()
    repeats: list[str] = []
    for block in skill.text.split("\n\n"):
        norm = " ".join(block.split()).casefold()
        if norm and norm in seen:
            repeats.append(block)
        seen.add(norm)
    return repeats


def repeated_paragraph_deletes(skill: Skill) -> list[Edit]:
    """Delete edits for repeated paragraphs that can be anchored unambiguously."""
    return [
        Delete(old=block, rationale="repeats an earlier paragraph")
        for block in repeated_paragraphs(skill)
        if skill.text.count(block) == 1
    ]


def default_proposers() -> list[Proposer]:
    """The proposers GradientText and Beam use unless told otherwise: the format rule and the
    answer-shape rule (no model call), worked examples from failures, then reflection."""
    from skillopt_dsl.optimizers.shape_rules import AnswerShapeProposer  # it imports this module

    return [
        FormatRuleProposer(),
        AnswerShapeProposer(),
        DemonstrationsProposer(),
        ReflectiveProposer(),
    ]


ProposerFactory = Callable[[], Proposer]
_ = BudgetExceeded  # re-raised untouched by proposers: the optimizer stops on it
