"""The search step optimizers hold: propose, fit, try alone, confirm (docs/concepts.md, "Search").

- `step`: `SearchStep`, the step every screened search holds (GradientText, Bundle, Beam), over
  the run's one memory (`RunView.memory`);
- `screened`: `ScreenedSteps`, GradientText's use of it (screen, confirm, compose), typed to the
  part of a search's state it reads (`TrialState`);
- `proposal`: a proposal with its evidence (`Fitted`, `Tried`, `ScreenedProposal`);
- `screening`: trying a candidate against its base on training examples (`screen`);
- `proposer_runs`: running the proposers for one step (`ProposerRuns`);
- `clipping`: fitting ranked edits to a step's learning-rate budget (`clip_to_budget`).

Every public name is importable from `skillopt_dsl.optimizers.search` itself.
"""

from skillopt_dsl.optimizers.search.clipping import clip_to_budget
from skillopt_dsl.optimizers.search.proposal import Fitted, ProposalRecord, ScreenedProposal, Tried
from skillopt_dsl.optimizers.search.proposer_runs import (
    ProposerRuns,
    new_stats,
    proposal_request,
    request_fingerprint,
)
from skillopt_dsl.optimizers.search.screened import (
    SUBMIT_MARGIN,
    ScreenedSteps,
    TrialState,
    luck_free_rate,
    submit_gain,
)
from skillopt_dsl.optimizers.search.screening import (
    ScreenResult,
    compare,
    draw_examples,
    merge_duplicates,
    screen,
)
from skillopt_dsl.optimizers.search.step import (
    SearchStep,
    keeps_reserve,
    pays_for_decisions,
    record_screen,
)

__all__ = [
    "SUBMIT_MARGIN",
    "Fitted",
    "ProposalRecord",
    "ProposerRuns",
    "ScreenResult",
    "ScreenedProposal",
    "ScreenedSteps",
    "SearchStep",
    "TrialState",
    "Tried",
    "clip_to_budget",
    "compare",
    "draw_examples",
    "keeps_reserve",
    "luck_free_rate",
    "merge_duplicates",
    "new_stats",
    "pays_for_decisions",
    "proposal_request",
    "record_screen",
    "request_fingerprint",
    "screen",
    "submit_gain",
]
