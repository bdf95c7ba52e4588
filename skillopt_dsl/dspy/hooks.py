"""The proposer hooks of a `PredictorModule` (see `skillopt_dsl.dspy.proposals`).

Every hook speaks only of rows whose run passed through the predictor being trained: a row the
program's branching sent to another predictor gives it no worked example, no label for a rule
mined from labels and no format failure. A run that failed (the metric said so, or an output
did not parse, or the program raised) never becomes a worked example, and every worked example
parses with the program's own adapter before it is proposed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from skillopt_dsl.dspy.calls import ProgramTrace, origin, outputs_of
from skillopt_dsl.dspy.demos import labelled_demo, render_demo
from skillopt_dsl.dspy.proposals import (
    AdapterStyle,
    answer_parses,
    format_rule_for,
    reflection_case,
    worked_example,
    worked_values,
)
from skillopt_dsl.dspy.route import charged
from skillopt_dsl.optimizers.proposers import (
    Proposer,
    ReflectiveProposer,
    default_proposers,
    mentions_format,
)
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.evaluate import Rollout
    from skillopt_dsl.module import FieldSpec

__all__ = ["ProgramFacts", "ProposerHooks", "program_trace"]


class ProgramFacts(Protocol):
    """What the hooks read of the program (`skillopt_dsl.dspy.program.DSPyProgram` has it):
    which predictors each row's runs reached, each predictor's signature, the adapter that
    parses outputs, its output style, and whether demos are trained."""

    parser: Any
    style: AdapterStyle
    demos: bool
    last_lm: Any
    traced: set[str]

    def reached(self, example_id: str) -> frozenset[str]: ...

    def always_reached(self, name: str) -> bool: ...

    def signature(self, name: str) -> Any: ...


def program_trace(rollout: Rollout | None) -> ProgramTrace | None:
    """The program run a rollout holds (None: a rollout without one, such as a baseline's)."""
    trace = getattr(rollout, "trace", None)
    return trace if isinstance(trace, ProgramTrace) else None


class ProposerHooks:
    """The proposer hooks, for a module with `program` and `predictor` (its name)."""

    if TYPE_CHECKING:  # set by `PredictorModule` (runtime annotations would be its fields)
        program: ProgramFacts
        predictor: str
        output_fields: ClassVar[dict[str, FieldSpec]]

    def default_proposers(self) -> list[Proposer]:
        """The proposers that suit this predictor (what `compile`'s default search, and so
        `SkillOptimizer`'s, uses on it): the generic ones, whose worked examples here come
        only from real traces and labels (`worked_example`: a `dspy.ReAct` step shows its tool
        call, its extractor the trajectory with each call's result, then the answer). Where
        the predictor reads a `trajectory` (a `dspy.ReAct`'s predictors: the answers come
        from the tools), reflection never writes a training example's answer into the
        instructions (`ReflectiveProposer(state_answers=False)`)."""
        proposers = default_proposers()
        if "trajectory" not in self.program.signature(self.predictor).input_fields:
            return proposers
        return [
            ReflectiveProposer(state_answers=False) if isinstance(p, ReflectiveProposer) else p
            for p in proposers
        ]

    def own_calls(self, run: ProgramTrace | None) -> tuple[Any, ...]:
        """This predictor's traced calls in `run` (its copies' included), whichever
        predictor's module made the run."""
        if run is None:
            return ()
        if run.predictor in (None, self.predictor):
            return run.pred_trace
        return tuple(step for step in run.trace if origin(step[0]) == self.predictor)

    def passed_through(self, example: Example, rollout: Rollout | None) -> bool:
        """Whether the run on `example` called this predictor: `rollout`'s own run, else any
        run of the program on it, else (a row never run) every run so far called it."""
        run = program_trace(rollout)
        if run is not None:
            return self.predictor in run.reached or bool(self.own_calls(run))
        reached = self.program.reached(example.id)
        if reached:
            return self.predictor in reached
        return self.program.always_reached(self.predictor)

    def worked_example(self, example: Example, rollout: Rollout | None) -> str | None:
        """A worked example for this predictor from real data only (None: there is none): its
        own traced call in a run the metric scored a success with every output parsed, or the
        labels when they give every one of its output fields (with demos on and no run through
        it scored a success yet, every one but a `ChainOfThought`'s rationale, left to the
        model: `labelled_demo`); only from a row whose run passed through it, and only one
        its adapter parses."""
        if not self.passed_through(example, rollout):
            return None
        run = program_trace(rollout)
        succeeded = (
            rollout is not None
            and rollout.score >= 1.0
            and run is not None
            and not run.failure
            and not run.unparsed
        )
        signature = self.program.signature(self.predictor)
        calls = self.own_calls(run)
        values = worked_values(signature, example, calls, succeeded)
        if values is None and self.program.demos and self.predictor not in self.program.traced:
            # No run succeeded through it yet (a ChainOfThought's labels lack its reasoning):
            # a labelled demo, the rationale left to the model; a traced one once there is one.
            return labelled_demo(signature, example.inputs, example.labels)
        if values is None:
            return None
        with charged(self.program.last_lm):  # an adapter's parse may call a model
            if not answer_parses(signature, self.program.parser, values[1]):
                return None
        if not self.program.demos:
            return worked_example(signature, self.program.style, example, calls, succeeded)
        if set(values[0]) != set(signature.input_fields):
            return None  # a demo needs every input field too
        return render_demo(*values)

    def labelled_answer(self, example: Example) -> str | None:
        """The example's label for this predictor's one labelled output field (a
        ChainOfThought's `answer`, not its `reasoning`), as text, for rules mined from labels
        (an answer's shape); None when the labels do not give this predictor's field (an
        intermediate predictor: the program's final labels are not its outputs), the field is
        structured (a pydantic model, a list), or the row's run did not pass through it."""
        labelled = [name for name in self.output_fields if name in example.labels]
        if len(labelled) != 1 or not self.passed_through(example, None):
            return (
                None  # no field of this predictor's is labelled, several are, or another branch's
            )
        (name,) = labelled
        value = example.labels.get(name)
        if value is None or isinstance(value, Mapping | list | tuple):
            return None  # a pydantic model's label is its JSON object here
        return str(value)

    def output_broke_format(self, rollout: Rollout) -> bool:
        """Whether this predictor's own output broke its adapter's format in `rollout` (or
        the metric's feedback says the format is wrong); another predictor's parse failure or
        a program output that is merely wrong is not this predictor's format failure."""
        run = program_trace(rollout)
        if run is None:
            return not rollout.prediction.ok
        if self.predictor in run.unparsed:
            return True
        reached = self.predictor in run.reached or bool(self.own_calls(run))
        return (
            reached
            and run.failure is None
            and not run.unparsed
            and mentions_format(rollout.feedback)
        )

    def output_format_rule(self) -> str | None:
        """The output rule in the program's adapter format (None: an adapter we do not know)."""
        return format_rule_for(self.program.signature(self.predictor), self.program.style)

    def reflection_case(self, example: Example, rollout: Rollout) -> str:
        """This predictor's own calls on `example`, then the program's result and feedback."""
        run = program_trace(rollout)
        finished = run is not None and run.prediction is not None and not run.failure
        return reflection_case(
            self.predictor,
            example,
            self.own_calls(run),
            outputs_of(run.prediction) if finished and run is not None else {},
            rollout.feedback or rollout.prediction.error or "",
            self.program.signature(self.predictor),
            called=self.passed_through(example, rollout),
        )
