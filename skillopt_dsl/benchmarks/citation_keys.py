"""An output-convention benchmark: write the house citation key for a bibliography entry.

Each input is one bibliography entry for an invented paper, written in one of four real citation
styles (APA-like, MLA-like, IEEE-like, Chicago-like, with one to three authors and MLA's and
IEEE's "et al."). The answer is the house citation key: the FIRST author's surname in lower
case followed by the 4-digit year, nothing else (`novak1998`). A small model can find the first
author and the year, but nothing in the entry says what the key looks like: `Novak1998`,
`novak_1998`, `Novak et al. (1998)` and a BibTeX line are all reasonable guesses. The key's
shape is the convention the skill carries, and `CitationKey` (in
`skillopt_dsl.benchmarks.tasks`) scores it case-sensitively.

The entries are generated from a fixed seed (surnames, first names, title words and venues from
the short lists below, years 1950-2023), so every split is the same everywhere, licence-free and
new to every model. Invariants (tested): the same rows on every call; every key matches
`^[a-z]+[0-9]{4}$`; the key's surname is the entry's first author and its year is the only
4-digit number in the entry; no entry is repeated; every style is present.

Example::

    splits = load_benchmark("citation_keys", seed=0, sizes=(30, 30, 60))
    result = compile(CitationKey(), splits.train, splits.val, testset=splits.test)
"""

from __future__ import annotations

import random
from functools import cache

from skillopt_dsl.json_types import JSONObject

__all__ = ["N_ROWS", "STYLES", "rows"]

N_ROWS = 400
"""How many entries the generator makes (ids `citation_keys-0` … `citation_keys-399`)."""

STYLES: tuple[str, ...] = ("apa", "mla", "ieee", "chicago")
"""The citation styles the entries are written in, drawn uniformly."""

_SEED = 20261215

_SURNAMES = (
    "Novak", "Garcia", "Li", "Chen", "Okafor", "Schmidt", "Rossi", "Tanaka", "Kowalski",
    "Haddad", "Moreau", "Silva", "Nguyen", "Petrov", "Andersson", "Kim", "Patel", "Murphy",
    "Fischer", "Dubois", "Jansen", "Costa", "Yilmaz", "Ivanova", "Sato", "Brennan", "Lindqvist",
    "Mensah", "Castillo", "Horvath", "Nakamura", "Bauer", "Ferreira", "Olsen", "Kaur", "Romano",
    "Weber", "Abadi", "Kovacs", "Walsh",
)  # fmt: skip
_FIRST_NAMES = (
    "Maria", "Jun", "Ahmed", "Sofia", "David", "Elena", "Kenji", "Amara", "Lukas", "Priya",
    "Tomas", "Ingrid", "Omar", "Hana", "Pablo", "Grace", "Viktor", "Nadia", "Samuel", "Yuki",
    "Fatima", "Erik", "Chloe", "Rafael",
)  # fmt: skip
_ADJECTIVES = (
    "adaptive", "seasonal", "urban", "coastal", "nonlinear", "early", "regional", "hidden",
    "stochastic", "rural", "thermal", "long-term",
)  # fmt: skip
_NOUNS = (
    "river erosion", "soil moisture", "bird migration", "wage growth", "protein folding",
    "traffic flow", "crop yields", "memory consolidation", "glacier retreat", "school choice",
    "lake sediments", "housing prices", "forest fires", "language change", "coral bleaching",
    "sleep quality",
)  # fmt: skip
_PLACES = (
    "northern Europe", "the Andes", "West Africa", "small islands", "the Baltic",
    "mountain valleys", "river deltas", "large cities",
)  # fmt: skip
_TITLES = (
    "Patterns of {adj} {noun}",
    "A model of {noun} in {place}",
    "{Adj} {noun}: evidence from {place}",
    "Measuring {adj} {noun}",
    "On the dynamics of {noun}",
    "Rethinking {noun} in {place}",
    "{Adj} drivers of {noun}",
)
_VENUES = (
    ("Journal of Hydrology", "J. Hydrol."),
    ("Annals of Applied Statistics", "Ann. Appl. Stat."),
    ("Journal of Economic Geography", "J. Econ. Geogr."),
    ("Ecological Modelling", "Ecol. Model."),
    ("Quarterly Review of Biology", "Q. Rev. Biol."),
    ("Journal of Climate Research", "J. Clim. Res."),
    ("Urban Studies Review", "Urban Stud. Rev."),
    ("Cognitive Science Letters", "Cogn. Sci. Lett."),
    ("Marine Ecology Progress", "Mar. Ecol. Prog."),
    ("Journal of Applied Physics", "J. Appl. Phys."),
)
_SMALL_WORDS = {"a", "an", "and", "the", "of", "in", "on", "for", "from", "to"}


def _title_case(title: str) -> str:
    words = title.split(" ")
    out = []
    for i, word in enumerate(words):
        after_colon = i > 0 and words[i - 1].endswith(":")
        if i == 0 or after_colon or word not in _SMALL_WORDS:
            word = "-".join(part[:1].upper() + part[1:] for part in word.split("-"))
        out.append(word)
    return " ".join(out)


def _title(rng: random.Random) -> str:
    """A title in sentence case (proper nouns such as "Europe" keep their capitals)."""
    adjective = rng.choice(_ADJECTIVES)
    return rng.choice(_TITLES).format(
        adj=adjective,
        Adj=adjective[0].upper() + adjective[1:],
        noun=rng.choice(_NOUNS),
        place=rng.choice(_PLACES),
    )


def _join(names: list[str], *, amp: bool = False, inverted: bool = False) -> str:
    """ "A", "A and B", "A, B, and C"; APA (`amp`): "A, & B", "A, B, & C"; an inverted first
    name (`inverted`, MLA and Chicago: "Novak, Maria") takes a comma before "and" as well."""
    if len(names) == 1:
        return names[0]
    if amp:
        return ", ".join(names[:-1]) + ", & " + names[-1]
    if len(names) == 2 and not inverted:
        return f"{names[0]} and {names[1]}"
    return ", ".join(names[:-1]) + ", and " + names[-1]


def _entry(rng: random.Random, style: str) -> tuple[str, str]:
    """One bibliography entry in `style` and its citation key."""
    n_authors = rng.choice((1, 1, 2, 2, 3))
    surnames = rng.sample(_SURNAMES, n_authors)
    firsts = [rng.choice(_FIRST_NAMES) for _ in surnames]
    middles = [rng.choice(_FIRST_NAMES)[0] if rng.random() < 0.2 else "" for _ in surnames]
    year = rng.randint(1950, 2023)
    title = _title(rng)
    venue, abbrev = rng.choice(_VENUES)
    volume, issue = rng.randint(1, 99), rng.randint(1, 12)
    first_page = rng.randint(1, 900)
    pages = f"{first_page}-{first_page + rng.randint(3, 40)}"
    initials = [f"{f[0]}." + (f" {m}." if m else "") for f, m in zip(firsts, middles, strict=True)]
    full = [f"{f} {m}." if m else f for f, m in zip(firsts, middles, strict=True)]
    et_al = n_authors == 3 and style in ("mla", "ieee") and (style == "mla" or rng.random() < 0.5)

    if style == "apa":
        authors = _join([f"{s}, {i}" for s, i in zip(surnames, initials, strict=True)], amp=True)
        text = f"{authors} ({year}). {title}. {venue}, {volume}({issue}), {pages}."
    elif style == "mla":
        lead = f"{surnames[0]}, {full[0]}"
        if et_al:
            authors = f"{lead}, et al."
        else:
            rest = [f"{f} {s}" for f, s in zip(full[1:], surnames[1:], strict=True)]
            authors = _join([lead, *rest], inverted=True).removesuffix(".") + "."
        issue_part = f", no. {issue}" if rng.random() < 0.5 else ""
        text = (
            f'{authors} "{_title_case(title)}." {venue}, vol. {volume}{issue_part}, {year}, '
            f"pp. {pages}."
        )
    elif style == "ieee":
        names = [f"{i} {s}" for i, s in zip(initials, surnames, strict=True)]
        authors = f"{names[0]} et al." if et_al else _join(names)
        text = f'{authors}, "{title}," {abbrev}, vol. {volume}, no. {issue}, pp. {pages}, {year}.'
    else:  # chicago: author-date or notes-bibliography
        lead = f"{surnames[0]}, {full[0]}"
        rest = [f"{f} {s}" for f, s in zip(full[1:], surnames[1:], strict=True)]
        authors = _join([lead, *rest], inverted=True).removesuffix(".") + "."
        if rng.random() < 0.5:
            text = f'{authors} {year}. "{_title_case(title)}." {venue} {volume} ({issue}): {pages}.'
        else:
            text = (
                f'{authors} "{_title_case(title)}." {venue} {volume}, no. {issue} ({year}): '
                f"{pages}."
            )
    return text, f"{surnames[0].lower()}{year}"


@cache
def _rows() -> tuple[tuple[str, str, str], ...]:
    """(reference, key, style) for every entry, in generation order."""
    rng = random.Random(_SEED)
    seen: set[str] = set()
    made: list[tuple[str, str, str]] = []
    while len(made) < N_ROWS:
        style = rng.choice(STYLES)
        reference, key = _entry(rng, style)
        if reference not in seen:
            seen.add(reference)
            made.append((reference, key, style))
    return tuple(made)


def rows() -> list[JSONObject]:
    """Every entry as a row `{id, reference, answer}`, ids `citation_keys-<n>` in generation
    order."""
    return [
        {"id": f"citation_keys-{i}", "reference": reference, "answer": key}
        for i, (reference, key, _) in enumerate(_rows())
    ]
