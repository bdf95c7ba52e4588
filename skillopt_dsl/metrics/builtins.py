"""Built-in metric factories. Each returns a small frozen callable that scores one prediction.

Every metric returns a `Score` whose feedback says what was expected and what came, because
the feedback is what the reflection model reads when it edits the skill. A prediction that
failed to parse scores 0 with feedback quoting the raw output; it never raises. A missing gold
label, a misspelt output field or an unusable dataset value raises `MetricError`.

>>> from skillopt_dsl.types import Example, Prediction
>>> metric = exact_match("answer")
>>> metric(Example("q1", {}, {"answer": "Paris"}), Prediction({"answer": " paris."})).value
1.0
"""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jsonschema
from pydantic import BaseModel

from skillopt_dsl.errors import MetricError, UserInputError
from skillopt_dsl.metrics._common import (
    accepted,
    check_output_field,
    describe_gold,
    failure_score,
    gold_value,
    normalize_text,
    quote,
)
from skillopt_dsl.metrics.score import Metric, Score, call_metric, metric_name
from skillopt_dsl.types import Example, Prediction

__all__ = [
    "contains",
    "exact_match",
    "json_schema",
    "multiple_choice",
    "numeric",
    "regex_match",
    "token_f1",
    "weighted",
]


@dataclass(frozen=True)
class FieldMetric:
    """Base of the built-ins: reads output `field`, scores parse failures 0, delegates the rest.

    Subclasses set `kind` and implement `_score`; those that need gold data override `_gold`.
    """

    field: str
    kind: ClassVar[str] = "field_metric"

    def __post_init__(self) -> None:
        object.__setattr__(self, "__name__", self.name)

    @property
    def name(self) -> str:
        """A readable name such as `exact_match(answer)`, used in logs and errors."""
        return f"{self.kind}({self.field})"

    def __call__(self, example: Example, prediction: Prediction) -> Score:
        """Score `prediction` against `example`."""
        check_output_field(example, prediction, self.field, self.name)
        gold = self._gold(example)
        failed = failure_score(prediction, self.field)
        if failed is not None:
            return failed
        return self._score(example, prediction.outputs[self.field], gold)

    def _gold(self, example: Example) -> Any:
        return None

    def _score(self, example: Example, value: Any, gold: Any) -> Score:
        raise NotImplementedError


@dataclass(frozen=True)
class LabeledMetric(FieldMetric):
    """A field metric compared with the gold value `example.labels[label]`."""

    label: str = ""

    @property
    def name(self) -> str:
        """`kind(field)`, or `kind(field, label=...)` when the label field differs."""
        if self.label in ("", self.field):
            return f"{self.kind}({self.field})"
        return f"{self.kind}({self.field}, label={self.label})"

    def _gold(self, example: Example) -> Any:
        return gold_value(example, self.label or self.field, self.name)


# --------------------------------------------------------------------------- exact / contains


@dataclass(frozen=True)
class ExactMatch(LabeledMetric):
    """1 when the output equals an accepted gold answer (after normalisation, by default)."""

    normalize: bool = True
    kind: ClassVar[str] = "exact_match"

    def _canon(self, value: object) -> str:
        return normalize_text(value) if self.normalize else str(value)

    def _score(self, example: Example, value: Any, gold: Any) -> Score:
        answers = accepted(gold)
        if self._canon(value) in {self._canon(answer) for answer in answers}:
            return Score(1.0, f"Correct: {quote(value)} matches the expected answer.")
        return Score(0.0, f"Expected {describe_gold(answers)}, but the output was {quote(value)}.")


def exact_match(field: str, label: str | None = None, *, normalize: bool = True) -> ExactMatch:
    """Exact match of output `field` with gold `labels[label or field]`.

    Normalisation (on by default) casefolds, strips, collapses whitespace and drops surrounding
    quotes and a trailing period. A list gold label lists accepted answers; any match scores 1.
    """
    return ExactMatch(field, label or field, normalize)


def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    """Find `phrase` not glued to surrounding word characters ("plausible" not in "implausible")."""
    head = r"(?<!\w)" if re.match(r"\w", phrase) else ""
    tail = r"(?!\w)" if re.search(r"\w$", phrase) else ""
    return re.compile(head + re.escape(phrase) + tail)


@dataclass(frozen=True)
class Contains(LabeledMetric):
    """1 when an accepted gold answer appears in the output as a whole phrase (normalised)."""

    kind: ClassVar[str] = "contains"

    def _score(self, example: Example, value: Any, gold: Any) -> Score:
        answers = accepted(gold)
        text = normalize_text(value)
        for answer in answers:
            needle = normalize_text(answer)
            if not needle:
                raise MetricError(
                    f"metric {self.name!r}: example {example.id!r} has an empty gold answer, "
                    "which every output would contain; fix or drop that example",
                    example_id=example.id,
                    metric=self.name,
                )
            if _phrase_pattern(needle).search(text):
                return Score(1.0, f"Correct: the output contains {quote(answer)}.")
        expected = describe_gold(answers)
        return Score(0.0, f"Expected the output to contain {expected}, but it was {quote(value)}.")


def contains(field: str, label: str | None = None) -> Contains:
    """1 when gold `labels[label or field]` appears in output `field` (both normalised).

    The gold must appear as a whole phrase: gold "plausible" is not found in "implausible",
    gold "12" is not found in "112". A list gold label lists accepted answers.
    """
    return Contains(field, label or field)


# --------------------------------------------------------------------------- numeric

_NUMBER = re.compile(
    r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?"
)


def parse_number(value: object) -> float | None:
    """The first number in `value` ("1,234" -> 1234.0, "-5" -> -5.0), or `None` if there is none."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = _NUMBER.search(str(value))
    return float(match.group().replace(",", "")) if match else None


def _fmt(number: float) -> str:
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else repr(number)


@dataclass(frozen=True)
class Numeric(LabeledMetric):
    """1 when the first number in the output equals a gold number within tolerance."""

    rel_tol: float = 0.0
    abs_tol: float = 0.0
    kind: ClassVar[str] = "numeric"

    def _gold(self, example: Example) -> Any:
        numbers = []
        for answer in accepted(super()._gold(example)):
            number = parse_number(answer)
            if number is None:
                raise MetricError(
                    f"metric {self.name!r}: gold answer {quote(answer)} of example "
                    f"{example.id!r} contains no number; fix the label or use exact_match",
                    example_id=example.id,
                    metric=self.name,
                )
            numbers.append(number)
        return numbers

    def _score(self, example: Example, value: Any, gold: Any) -> Score:
        expected = " or ".join(_fmt(number) for number in gold)
        got = parse_number(value)
        if got is None:
            return Score(
                0.0,
                f"Expected the number {expected}, but the output {quote(value)} "
                "contains no number.",
            )
        if any(math.isclose(got, g, rel_tol=self.rel_tol, abs_tol=self.abs_tol) for g in gold):
            return Score(1.0, f"Correct: {_fmt(got)}.")
        return Score(
            0.0,
            f"Expected {expected}{self._tolerance()}, but the output gave "
            f"{_fmt(got)} (read from {quote(value)}).",
        )

    def _tolerance(self) -> str:
        if self.rel_tol == 0.0 and self.abs_tol == 0.0:
            return ""
        return f" (tolerance: relative {self.rel_tol:g}, absolute {self.abs_tol:g})"


def numeric(
    field: str, label: str | None = None, *, rel_tol: float = 0.0, abs_tol: float = 0.0
) -> Numeric:
    """Compare the first number in output `field` with the gold number, within tolerance.

    Handles "1,234", "-5", "3.0" and "answer: 42". With both tolerances 0 the numbers must be
    equal. A gold label that contains no number raises `MetricError`.
    """
    for name, tol in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
        if not math.isfinite(tol) or tol < 0:
            raise UserInputError(f"numeric(): {name} must be a finite number >= 0, got {tol!r}")
    return Numeric(field, label or field, float(rel_tol), float(abs_tol))


# --------------------------------------------------------------------------- token F1

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def squad_tokens(text: object) -> list[str]:
    """SQuAD answer normalisation: lowercase, drop punctuation and articles, split on spaces."""
    return _ARTICLES.sub(" ", str(text).lower().translate(_PUNCTUATION)).split()


def _f1(predicted: list[str], gold: list[str]) -> float:
    if not predicted or not gold:
        return float(predicted == gold)
    same = sum((Counter(predicted) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _token_diff(predicted: list[str], gold: list[str]) -> str:
    missing = sorted((Counter(gold) - Counter(predicted)).elements())[:10]
    extra = sorted((Counter(predicted) - Counter(gold)).elements())[:10]
    return f"missing tokens {missing}, extra tokens {extra}"


@dataclass(frozen=True)
class TokenF1(LabeledMetric):
    """SQuAD-style token F1 between the output and the best-matching gold answer."""

    kind: ClassVar[str] = "token_f1"

    def _score(self, example: Example, value: Any, gold: Any) -> Score:
        predicted = squad_tokens(value)
        scored = [(_f1(predicted, squad_tokens(answer)), answer) for answer in accepted(gold)]
        best, answer = max(scored, key=lambda pair: pair[0])
        if best == 1.0:
            return Score(1.0, f"Correct: the output matches {quote(answer)}.")
        return Score(
            best,
            f"Token F1 {best:.2f}: expected {quote(answer)}, but the output was {quote(value)}; "
            + _token_diff(predicted, squad_tokens(answer)),
        )


def token_f1(field: str, label: str | None = None) -> TokenF1:
    """SQuAD token F1 of output `field` against gold (the best of several accepted answers)."""
    return TokenF1(field, label or field)


# --------------------------------------------------------------------------- regex


@dataclass(frozen=True)
class RegexMatch(FieldMetric):
    """1 when the whole output matches `pattern` (a format check; needs no gold label)."""

    pattern: re.Pattern[str] = re.compile("")
    kind: ClassVar[str] = "regex_match"

    @property
    def name(self) -> str:
        """`regex_match(field, 'pattern')`."""
        return f"{self.kind}({self.field}, {self.pattern.pattern!r})"

    def _score(self, example: Example, value: Any, gold: Any) -> Score:
        if self.pattern.fullmatch(str(value)):
            return Score(1.0, "Correct: the output has the required format.")
        return Score(
            0.0,
            f"The output {quote(value)} does not have the required format: the "
            f"whole output must match the regular expression "
            f"{self.pattern.pattern!r}.",
        )


def regex_match(field: str, pattern: str | re.Pattern[str]) -> RegexMatch:
    """1 when output `field` (as a whole string) matches the regular expression `pattern`."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        message = f"regex_match(): invalid regular expression {pattern!r}: {exc}"
        raise UserInputError(message) from exc
    return RegexMatch(field, compiled)


# --------------------------------------------------------------------------- multiple choice


class _Options(NamedTuple):
    options: list[str]
    correct: list[str]


def _example_choices(example: Example) -> list[str] | None:
    for part in (example.inputs, example.labels):
        found = part.get("choices")
        if isinstance(found, Mapping):
            return [str(key) for key in found]
        if isinstance(found, (list, tuple)):
            return [str(option) for option in found]
    return None


def _mentioned(value: object, options: Sequence[str]) -> list[str]:
    """The options the output names; an option inside a longer named option does not count."""
    text = normalize_text(value)
    exact = [option for option in options if normalize_text(option) == text]
    if exact:
        return exact[:1]
    spans = {
        option: [m.span() for m in _phrase_pattern(normalize_text(option)).finditer(text)]
        for option in options
        if normalize_text(option)
    }
    longer = [(option, span) for option, found in spans.items() for span in found]

    def covered(option: str, start: int, end: int) -> bool:
        return any(
            o != option and a <= start and end <= b and b - a > end - start for o, (a, b) in longer
        )

    return [o for o, found in spans.items() if any(not covered(o, s, e) for s, e in found)]


@dataclass(frozen=True)
class MultipleChoice(LabeledMetric):
    """1 when the output names exactly one option and it is a correct one."""

    choices: tuple[str, ...] | None = None
    kind: ClassVar[str] = "multiple_choice"

    def _gold(self, example: Example) -> _Options:
        gold = super()._gold(example)
        if isinstance(gold, Mapping):
            correct = [str(key) for key, score in gold.items() if score == 1]
            options = list(self.choices or _example_choices(example) or [str(k) for k in gold])
        else:
            correct = [str(answer) for answer in accepted(gold)]
            options = list(self.choices or _example_choices(example) or [])
        self._check(example, options, correct)
        return _Options(options, correct)

    def _check(self, example: Example, options: list[str], correct: list[str]) -> None:
        problem = None
        known = {normalize_text(option) for option in options}
        if not options:
            problem = "has no options: pass choices=... or add a 'choices' field to the dataset"
        elif not correct:
            problem = "marks no option as correct (a target_scores label needs a value of 1)"
        elif not all(normalize_text(answer) in known for answer in correct):
            problem = f"has correct answers {correct} that are not among the options {options}"
        if problem:
            raise MetricError(
                f"metric {self.name!r}: example {example.id!r} {problem}",
                example_id=example.id,
                metric=self.name,
            )

    def _score(self, example: Example, value: Any, gold: _Options) -> Score:
        right = describe_gold(gold.correct)
        picked = _mentioned(value, gold.options)
        if not picked:
            return Score(
                0.0,
                f"The output {quote(value)} matches none of the options "
                f"{gold.options}; answer with exactly one. "
                f"The correct option is {right}.",
            )
        if len(picked) > 1:
            return Score(
                0.0,
                f"The output {quote(value)} names several options {picked}; answer "
                f"with exactly one. The correct option is {right}.",
            )
        if normalize_text(picked[0]) in {normalize_text(answer) for answer in gold.correct}:
            return Score(1.0, f"Correct: chose {quote(picked[0])}.")
        return Score(0.0, f"Chose {quote(picked[0])}, but the correct option is {right}.")


def multiple_choice(
    field: str, label: str | None = None, *, choices: Sequence[str] | None = None
) -> MultipleChoice:
    """1 when output `field` picks exactly one option and that option is correct.

    Options come from `choices`, else the example's `choices` field, else the keys of a
    BIG-bench `target_scores` gold label (a dict whose value 1 marks the correct answers). Any
    other gold label is the correct option (or a list of them). An output naming no option or
    several options scores 0 with feedback saying so.
    """
    if isinstance(choices, str):
        raise UserInputError("multiple_choice(): choices must be a sequence of strings, not a str")
    return MultipleChoice(field, label or field, tuple(choices) if choices is not None else None)


# --------------------------------------------------------------------------- JSON schema


@dataclass(frozen=True, eq=False)
class JsonSchema(FieldMetric):
    """1 when the output (a dict, a pydantic model or a JSON string) validates against `schema`."""

    schema: Mapping[str, object] | None = None
    kind: ClassVar[str] = "json_schema"

    def __post_init__(self) -> None:
        super().__post_init__()
        schema = dict(self.schema or {})
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise UserInputError(f"json_schema(): invalid JSON schema: {exc.message}") from exc
        object.__setattr__(self, "_validator", cls(schema))

    def _score(self, example: Example, value: Any, gold: Any) -> Score:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        elif isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                return Score(0.0, f"The output is not valid JSON ({exc}): {quote(value)}")
        validator: jsonschema.protocols.Validator = self.__dict__["_validator"]
        errors = sorted(validator.iter_errors(value), key=jsonschema.exceptions.relevance)
        if not errors:
            return Score(1.0, "Correct: the output matches the JSON schema.")
        details = "; ".join(f"{error.message} (at {error.json_path})" for error in errors[:3])
        more = f" and {len(errors) - 3} more" if len(errors) > 3 else ""
        return Score(
            0.0,
            f"The output {quote(json.dumps(value, default=str))} does not match "
            f"the JSON schema: {details}{more}.",
        )


def json_schema(field: str, schema: Mapping[str, object]) -> JsonSchema:
    """1 when output `field` validates against the JSON schema `schema`, else 0 with the reasons.

    An invalid schema raises `UserInputError` here, not at scoring time.
    """
    return JsonSchema(field, schema)


# --------------------------------------------------------------------------- weighted


@dataclass(frozen=True, eq=False)
class Weighted:
    """The weighted mean of several metrics' scores; weights are normalised to sum to 1."""

    components: tuple[tuple[Metric, float], ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "__name__", self.name)

    @property
    def name(self) -> str:
        """`weighted(exact_match(answer)=0.75, regex_match(answer, '...')=0.25)`."""
        total = sum(weight for _, weight in self.components)
        parts = (f"{metric_name(m)}={w / total:.2g}" for m, w in self.components)
        return f"weighted({', '.join(parts)})"

    def __call__(self, example: Example, prediction: Prediction) -> Score:
        """Call every component through `call_metric` and combine their scores."""
        total = sum(weight for _, weight in self.components)
        value, lines = 0.0, []
        for metric, weight in self.components:
            score = call_metric(metric, example, prediction)
            value += weight / total * score.value
            lines.append(
                f"[{metric_name(metric)}, weight {weight / total:.2g}] "
                f"score {score.value:.2f}: {score.feedback or '(no feedback)'}"
            )
        return Score(min(1.0, max(0.0, value)), "\n".join(lines))


def _pairs(components: tuple[tuple[Metric, float] | Mapping[Metric, float], ...]) -> list[Any]:
    if len(components) == 1 and isinstance(components[0], Mapping):
        return list(components[0].items())
    return list(components)


def weighted(*components: tuple[Metric, float] | Mapping[Metric, float]) -> Weighted:
    """Combine metrics into a weighted mean: `weighted((em, 3), (fmt, 1))` or `weighted({em: 3})`.

    Weights must be positive; they are normalised to sum to 1. Feedback concatenates each
    component's feedback, labelled with its name and weight.
    """
    pairs = _pairs(components)
    if not pairs:
        raise UserInputError("weighted(): pass at least one (metric, weight) pair")
    checked: list[tuple[Metric, float]] = []
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2 or not callable(pair[0]):
            raise UserInputError(f"weighted(): expected (metric, weight) pairs, got {pair!r}")
        metric, weight = pair
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise UserInputError(
                f"weighted(): weight of {metric_name(metric)!r} must be a "
                f"positive number, got {weight!r}"
            )
        checked.append((metric, float(weight)))
    return Weighted(tuple(checked))
