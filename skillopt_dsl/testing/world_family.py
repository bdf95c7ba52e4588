"""A FAKE family of rule worlds: members drawn from declared ranges over the world's axes.

A search tuned on one `RuleWorld` may not hold on a user's model; a family varies every
mechanic (`skillopt_dsl.testing.rule_world`'s axes: addresses, noise key, the reflection's draw,
alternatives, repeats, answers) and every size and odds within declared ranges, and a bench
reports a search over a fixed development draw and over a fresh draw whose seed is new each run
(bench/bench_search_family.py). A share of the members are null (`p_right=0`: no proposal
helps), where a search that keeps anything is fooled.

`WorldFamily().draw(seed, count)` is deterministic in `seed` (one `random.Random(seed)`); each
member's own runs vary the world's `seed` (items, luck, proposals).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from skillopt_dsl.testing.rule_world import Addresses, Answers, Draw, NoiseKey, RuleWorld

__all__ = ["Member", "WorldFamily"]


@dataclass(frozen=True)
class Member:
    """One drawn world with its split sizes; `name` is its place in the draw ("m07")."""

    name: str
    world: RuleWorld
    train: int
    val: int
    test: int

    @property
    def null(self) -> bool:
        """Whether no proposal can help (`p_right=0`)."""
        return self.world.p_right == 0

    def seeded(self, seed: int) -> RuleWorld:
        """The member's world for one run."""
        return replace(self.world, seed=seed)

    def describe(self) -> str:
        """The member's axes and odds in one short line (for tables)."""
        w = self.world
        return (
            f"{w.addresses}/{w.noise_key}/{w.draw}/{w.answers} alt{w.alternatives}"
            f" rep{w.repeats:.2f} tr{self.train} va{self.val} k{w.classes}x{w.class_share:.2f}"
            f" luck{w.luck:.2f} harm{w.harm:.2f} noise{w.noise:.2f}"
            f" pR{w.p_right:.2f} pH{w.p_harm:.2f}"
        )


@dataclass(frozen=True)
class WorldFamily:
    """Declared ranges (inclusive bounds) and axis values members are drawn from.

    `classed_share` is the share of items in some latent class, split evenly over `classes`;
    `p_right + p_harm` is capped at 0.95. `null_share` of the members (at least one) get
    `p_right=0`."""

    train: tuple[int, int] = (8, 60)
    val: tuple[int, int] = (18, 100)
    test: int = 200
    classes: tuple[int, int] = (1, 8)
    classed_share: tuple[float, float] = (0.1, 0.8)
    luck: tuple[float, float] = (0.0, 0.5)
    harm: tuple[float, float] = (0.05, 0.4)
    noise: tuple[float, float] = (0.0, 0.15)
    p_right: tuple[float, float] = (0.05, 0.5)
    p_harm: tuple[float, float] = (0.1, 0.6)
    alternatives: tuple[int, int] = (1, 3)
    repeats: tuple[float, float] = (0.0, 0.3)
    addresses: tuple[Addresses, ...] = ("exact", "group", "none", "partly_wrong")
    noise_keys: tuple[NoiseKey, ...] = ("text", "content", "difficulty")
    draws: tuple[Draw, ...] = ("classed", "any_failing")
    answers: tuple[Answers, ...] = ("letters", "codes")
    null_share: float = 0.125

    def draw(self, seed: int, count: int) -> list[Member]:
        """`count` members drawn with one `random.Random(seed)`; the null ones at drawn places."""
        rng = random.Random(seed)
        members = [self._member(rng, f"m{i:02d}") for i in range(count)]
        nulls = rng.sample(range(count), max(1, round(count * self.null_share)))
        return [
            replace(m, world=replace(m.world, p_right=0.0)) if i in nulls else m
            for i, m in enumerate(members)
        ]

    def _member(self, rng: random.Random, name: str) -> Member:
        classes = rng.randint(*self.classes)
        p_right = rng.uniform(*self.p_right)
        world = RuleWorld(
            classes=classes,
            class_share=rng.uniform(*self.classed_share) / classes,
            luck=rng.uniform(*self.luck),
            harm=rng.uniform(*self.harm),
            noise=rng.uniform(*self.noise),
            p_right=p_right,
            p_harm=min(rng.uniform(*self.p_harm), 0.95 - p_right),
            alternatives=rng.randint(*self.alternatives),
            addresses=rng.choice(self.addresses),
            noise_key=rng.choice(self.noise_keys),
            draw=rng.choice(self.draws),
            repeats=rng.uniform(*self.repeats),
            answers=rng.choice(self.answers),
        )
        return Member(name, world, rng.randint(*self.train), rng.randint(*self.val), self.test)
