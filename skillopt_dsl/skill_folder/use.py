"""Use as a measured task: an agent runs a request with the skill folder loaded, as Claude Code
and Codex do, and opens a reference file only when it needs it.

Declare the task like any module — typed input and output fields and a metric — and name the
folder and the parts that train::

    class Notes(SkillUseModule):
        \"\"\"Write the release note for a change.\"\"\"
        change: str = InputField()
        note: str = OutputField()
        folder = "skills/release-notes"
        trains = ("body", "references")
        metric = my_metric

or `SkillUseModule.from_folder(path, name=..., inputs=..., outputs=..., metric=..., trains=...)`.

How one request runs (the `AgentModule` tool loop, unchanged): the system message is the body
(from the trained document, or the folder's when the run does not train the body) followed by
a fixed list of the reference files; the tool `open_reference(path)` returns a reference file's
current text (the trained document's, or the folder's when references do not train), and for an
unknown path an error that lists the valid paths, which the model reads and the run goes on.
So a rule can live in a reference file and cost context only on the requests that open it.

What the skill cost: every rollout's trace is a `SkillUseTrajectory` whose `skill_cost` counts,
with the target model's tokenizer (`skillopt_dsl.lm.tokens`), the system message's tokens once
per model call of the episode plus the tokens of every reference text the tool returned (an
unknown path, an error, costs no reference tokens). `SkillUseModule.use_summary(report)` gives
the mean per request and how often each reference was opened, for seed-versus-compiled tables.

At the door: `skill_refusal` refuses a candidate that is not a folder document with exactly the
parts this module trains, so a document that lost a part never reaches the gate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from skillopt_dsl.agents import AgentModule, Environment, Tool, ToolCall, Trajectory
from skillopt_dsl.agents.module import Protocol
from skillopt_dsl.agents.protocol import bind_positional
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.lm.tokens import count_text_tokens
from skillopt_dsl.module import RunOutcome, declared_namespace
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.document import BODY, DESCRIPTION, FolderDocument
from skillopt_dsl.skill_folder.folder import SkillFolder
from skillopt_dsl.skill_folder.use_cost import SkillCost, SkillUseSummary
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM

__all__ = ["REFERENCE_TOOL", "SkillUseModule", "SkillUseTrajectory"]

REFERENCE_TOOL: Final[str] = "open_reference"
"""The name of the tool that opens a reference file."""

REFERENCES_HEADER: Final[str] = (
    f"Reference files of this skill (open one with the {REFERENCE_TOOL} tool when you need it):"
)
"""The line that opens the list of reference files in the system message."""


@dataclasses.dataclass(frozen=True)
class SkillUseTrajectory(Trajectory):
    """An agent run with a skill folder loaded: the `Trajectory`, plus what the skill cost."""

    skill_cost: SkillCost = dataclasses.field(default_factory=lambda: SkillCost(0, 0, ()))

    def to_dict(self) -> dict[str, object]:
        """The trajectory's JSON-ready dict with the skill cost added."""
        return {**super().to_dict(), "skill_cost": self.skill_cost.to_dict()}


def open_reference(path: str) -> str:
    """Open one of this skill's reference files and return its text.

    Args:
        path: the file's path exactly as the skill lists it, e.g. references/style.md.
    """
    raise NotImplementedError("bound to a folder per episode by SkillUseModule.episode_tools")


class SkillUseModule(AgentModule):
    """A task run by an agent that has a skill folder loaded (see the module docstring).

    Class attributes (each also a constructor keyword): `folder` (a `SkillFolder` or the path of
    one), `trains` (the parts the run trains: `"body"`, `"references"`, reference paths, or a
    mix; default the body), plus `AgentModule`'s `tools`, `environment`, `max_turns`,
    `protocol`. The seed skill is the folder's document of those parts.
    """

    folder: ClassVar[SkillFolder | str | Path | None] = None
    trains: ClassVar[Sequence[str]] = (BODY,)
    max_result_chars: ClassVar[int] = 50_000

    def __init__(
        self,
        *,
        folder: SkillFolder | str | Path | None = None,
        trains: Sequence[str] | None = None,
        metric: Callable[..., Any] | None = None,
        tools: Sequence[Tool | Callable[..., Any]] | None = None,
        environment: Environment[Any] | None = None,
        max_turns: int | None = None,
        protocol: Protocol | None = None,
    ) -> None:
        self.skill_folder = _as_folder(folder if folder is not None else type(self).folder, self)
        parts = tuple(trains if trains is not None else type(self).trains)
        self.trained_parts: tuple[str, ...] = _trained_parts(self.skill_folder, parts, self)
        own = list(tools if tools is not None else type(self).tools)
        if any(getattr(t, "name", getattr(t, "__name__", "")) == REFERENCE_TOOL for t in own):
            raise UserInputError(
                f"{self.name}: {REFERENCE_TOOL!r} is the skill folder's own tool; rename yours"
            )
        self._reference_tool = Tool.from_function(open_reference)
        super().__init__(
            skill=self.skill_folder.seed_skill(parts),
            metric=metric,
            tools=[*own, self._reference_tool],
            environment=environment,
            max_turns=max_turns,
            protocol=protocol,
        )

    @classmethod
    def from_folder(
        cls,
        folder: SkillFolder | str | Path,
        *,
        name: str,
        inputs: Mapping[str, object],
        outputs: Mapping[str, object],
        metric: Callable[..., Any],
        trains: Sequence[str] = (BODY,),
        description: str = "",
    ) -> SkillUseModule:
        """Declare a use task without a class statement: `inputs` / `outputs` map field names
        to a type or `(type, description)`, as in `SkillModule.create`."""
        subclass = type(name, (cls,), declared_namespace(name, inputs, outputs, description))
        instance: SkillUseModule = subclass(folder=folder, trains=trains, metric=metric)
        return instance

    # -- what the agent reads --------------------------------------------------------------------
    def loaded(self, skill: Skill) -> SkillFolder:
        """The folder as the agent sees it under `skill`: the trained parts put in place, the
        parts this run does not train as read. A document this module cannot run is an error."""
        refusal = self.skill_refusal(skill)
        if refusal is not None:
            raise UserInputError(f"{self.name} cannot run this skill: {refusal}")
        return self.skill_folder.trained(skill)

    def instructions(self, skill: Skill) -> str:
        """The system message under `skill`: the body, then the list of reference files."""
        listing = "\n".join(f"- {path}" for path in self.skill_folder.reference_paths)
        return f"{self.loaded(skill).body.strip(chr(10))}\n\n{REFERENCES_HEADER}\n{listing}"

    def render(self, skill: Skill, inputs: Example | Mapping[str, object]) -> list[Any]:
        """The first messages of an episode: `instructions(skill)` as the system message, the
        rendered inputs as the user message."""
        return super().render(Skill(self.instructions(skill)), inputs)

    def episode_tools(self, skill: Skill, state: Any) -> dict[str, Tool]:
        """The module's tools with `open_reference` reading the references under `skill`."""
        view = self.loaded(skill)

        def opened(path: str) -> str:
            return _reference_text(view, path)

        bound = dataclasses.replace(self._reference_tool, function=opened)
        return {**self.tools_for(state), REFERENCE_TOOL: bound}

    def skill_refusal(self, skill: Skill) -> str | None:
        """Why `skill` is not a document this module runs (None: it is): it must be a skill
        folder document carrying exactly the parts this module trains."""
        try:
            names = FolderDocument.from_skill(skill).names
        except UserInputError as exc:
            return str(exc)
        missing = [part for part in self.trained_parts if part not in names]
        if missing:
            return (
                f"the skill folder document lacks the part(s) {missing} that {self.name} trains "
                f"(it has {list(names)})"
            )
        extra = [part for part in names if part not in self.trained_parts]
        if extra:
            return (
                f"the skill folder document carries part(s) {extra} that {self.name} does not "
                f"train (it trains {list(self.trained_parts)})"
            )
        return None

    # -- running and costing one request -----------------------------------------------------------
    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """The `AgentModule` loop under `skill`; the trace is a `SkillUseTrajectory`."""
        outcome = super().run(skill, example, lm, seed=seed)
        trajectory = outcome.trace
        if not isinstance(trajectory, Trajectory):
            raise TypeError(f"AgentModule.run returned a {type(trajectory).__name__} trace")
        cost = self.skill_cost(skill, trajectory, lm.model)
        fields = {f.name: getattr(trajectory, f.name) for f in dataclasses.fields(trajectory)}
        return dataclasses.replace(outcome, trace=SkillUseTrajectory(**fields, skill_cost=cost))

    def skill_cost(self, skill: Skill, trajectory: Trajectory, model: str) -> SkillCost:
        """What the skill cost in `trajectory`, in `model`'s tokens: the system message on each
        model call, plus each reference text the tool returned."""
        opened = tuple(
            (self._opened_path(call), count_text_tokens(model, call.result))
            for call in trajectory.tool_calls
            if _opened_reference(call)
        )
        instruction_tokens = count_text_tokens(model, self.instructions(skill))
        return SkillCost(instruction_tokens, trajectory.n_turns, opened)

    def _opened_path(self, call: ToolCall) -> str:
        """The path an `open_reference` call opened, however the model wrote the arguments
        (a JSON object, or a Python-style positional call)."""
        return str(bind_positional(self._reference_tool, call.arguments).get("path", "")).strip()

    def use_summary(self, rollouts: EvaluationReport | Sequence[Rollout]) -> SkillUseSummary:
        """Mean skill tokens per request and how often each reference was opened, over an
        evaluation of this module (every reference of the folder listed, opened or not)."""
        records = rollouts.records if isinstance(rollouts, EvaluationReport) else rollouts
        return SkillUseSummary.of(records, self.skill_folder.reference_paths)


def _as_folder(folder: SkillFolder | str | Path | None, module: SkillUseModule) -> SkillFolder:
    if folder is None:
        raise UserInputError(
            f"{module.name} has no skill folder; set `folder = 'path/to/skill'` on the class or "
            "pass folder="
        )
    read = folder if isinstance(folder, SkillFolder) else SkillFolder.read(folder)
    if not read.reference_paths:
        raise UserInputError(
            f"the skill folder {str(read.root)!r} has no reference files; without them its body "
            "is the whole skill, so train it as a plain SkillModule with the body as its skill"
        )
    return read


def _trained_parts(
    folder: SkillFolder, parts: tuple[str, ...], module: SkillUseModule
) -> tuple[str, ...]:
    if not parts:
        raise UserInputError(f"{module.name} trains no part; choose 'body', 'references' or both")
    if DESCRIPTION in parts:
        raise UserInputError(
            f"{module.name} runs requests with the skill already loaded, so it never reads the "
            "description; train the description with the trigger module"
        )
    return folder.document(parts).names


def _reference_text(view: SkillFolder, path: str) -> str:
    wanted = path.strip()
    if wanted not in view.reference_paths:
        raise LookupError(
            f"no reference file {wanted!r}; the files are: {', '.join(view.reference_paths)}"
        )
    return view.reference_text(wanted)


def _opened_reference(call: ToolCall) -> bool:
    return call.name == REFERENCE_TOOL and call.ok
