"""Proposers: small plug-ins that turn a mini-batch of rollouts into typed edits.

Contract (`Proposer`): implement `propose(request) -> list[EditGroup]`. Read anything from the
`ProposalRequest`; never raise for one bad group (log it with `request.note(...)` and skip it);
draw randomness only from `request.rng`. Proposers never apply edits or touch the incumbent:
the optimizer clips their edits to the learning rate and the driver's gate decides. A group
drawn from particular failures names them (`EditGroup.addresses`, example ids of the batch):
the screen scores the proposal on those first and drops it, for a call or two, when it fixes
none of the failures it was written for (leave it empty when the group answers no particular
failure).

One module per proposer; the contract lives in `base.py`, the helpers the shipped proposers share
in `common.py`. Shipped proposers (each passes `skillopt_dsl.testing.proposer_contract`):

- `ReflectiveProposer`: the optimizer model reads groups of failures (and, separately,
  successes) and proposes edits as JSON, validated by pydantic, retried once on invalid output.
- `DemonstrationsProposer`: adds or swaps worked examples from the training set in an
  `## Examples` section; needs no optimizer model (small models copy examples well).
- `FormatRuleProposer`: derives an output-format rule from the declared output types when
  rollouts fail to parse or the metric's feedback says the format is wrong; no model needed.
- `AnswerShapeProposer`: states the shape every gold answer shares; no model needed.
- `PlainRuleProposer`: one plain-language rule from a small optimizer model.
- `ConsolidationProposer`: the slow update (repeated paragraphs, concision edits).

Module hooks: a module whose calls are not rendered by our renderer (a DSPy predictor, which
DSPy's adapter formats and whose labels belong to the whole program) may define
`worked_example(example, rollout) -> str | None`, `output_format_rule() -> str | None`,
`reflection_case(example, rollout) -> str`, `labelled_answer(example) -> str | None` and
`output_broke_format(rollout) -> bool`; the proposers then use them (None: nothing to add)
instead of `render_demo`, `format_rule`, the default reflection case, `gold_answer` (rules
mined from labels) and the default format-failure signals.

The module's kind chooses the default search (`default_proposers(module)`): a module whose
default proposers differ from the four below defines `default_proposers() -> list[Proposer]`
(`ChoosesProposers`). An `AgentModule` does: worked examples that show the tool call, its
result and the answer, and reflection on trajectories that never states an example's answer
(docs/agents.md, "What the default search proposes").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from skillopt_dsl.optimizers.proposers.answer_shape import (
    AnswerShape,
    AnswerShapeProposer,
    answer_shape,
    shape_of,
)
from skillopt_dsl.optimizers.proposers.base import (
    EditGroup,
    ProposalRequest,
    Proposer,
    RejectedCandidate,
    RejectedRecord,
    edit_key,
)
from skillopt_dsl.optimizers.proposers.common import (
    EXAMPLES_HEADING,
    FORMAT_HEADING,
    bullet_under_heading,
    gold_answer,
    module_demo,
    module_gold_answer,
    render_demo,
    states,
)
from skillopt_dsl.optimizers.proposers.consolidation import (
    ConsolidationProposer,
    repeated_paragraph_deletes,
    repeated_paragraphs,
)
from skillopt_dsl.optimizers.proposers.demonstrations import DemonstrationsProposer
from skillopt_dsl.optimizers.proposers.format_rule import (
    FormatRuleProposer,
    format_rule,
    mentions_format,
    module_broke_format,
    module_format_rule,
)
from skillopt_dsl.optimizers.proposers.plain_rule import PlainRuleProposer
from skillopt_dsl.optimizers.proposers.reflective import ReflectiveProposer, ask_for_edits

__all__ = [
    "EXAMPLES_HEADING",
    "FORMAT_HEADING",
    "AnswerShape",
    "AnswerShapeProposer",
    "ChoosesProposers",
    "ConsolidationProposer",
    "DemonstrationsProposer",
    "EditGroup",
    "FormatRuleProposer",
    "PlainRuleProposer",
    "ProposalRequest",
    "Proposer",
    "ProposerFactory",
    "ReflectiveProposer",
    "RejectedCandidate",
    "RejectedRecord",
    "answer_shape",
    "ask_for_edits",
    "bullet_under_heading",
    "default_proposers",
    "edit_key",
    "format_rule",
    "gold_answer",
    "mentions_format",
    "module_broke_format",
    "module_demo",
    "module_format_rule",
    "module_gold_answer",
    "render_demo",
    "repeated_paragraph_deletes",
    "repeated_paragraphs",
    "shape_of",
    "states",
]


@runtime_checkable
class ChoosesProposers(Protocol):
    """A module that declares the proposers that suit its kind (see the module docstring)."""

    def default_proposers(self) -> list[Proposer]: ...


def default_proposers(module: object | None = None) -> list[Proposer]:
    """The proposers a search uses unless told otherwise: `module.default_proposers()` where
    the module declares its own (`ChoosesProposers`: an agent's), else the format rule and the
    answer-shape rule (no model call), worked examples from failures, then reflection."""
    if isinstance(module, ChoosesProposers):
        return module.default_proposers()
    return [
        FormatRuleProposer(),
        AnswerShapeProposer(),
        DemonstrationsProposer(),
        ReflectiveProposer(),
    ]


ProposerFactory = Callable[[], Proposer]
