"""Datasets in, typed and seeded `Splits` out.

- `loading`: `load_splits`, `from_hf`, `Splits`, `as_examples` (the front door, see its docs);
- `sources`: reading each kind of source (a Hub or builder name, a `datasets` object, lists of
  dicts, `dspy.Example`s, a SkillOpt data folder);
- `rows`: one row -> one `Example` (which columns are inputs and labels, content-hash ids);
- `splitting`: seeded splitting by sizes or by the dataset's own split names.

Every public name is importable from `skillopt_dsl.data` itself.
"""

from __future__ import annotations

from skillopt_dsl.data.loading import (
    DEFAULT_SIZES,
    Example,
    Splits,
    as_examples,
    coerce_splits,
    content_hash,
    dspy_input_keys,
    from_hf,
    load_skillopt_dir,
    load_splits,
)

__all__ = [
    "DEFAULT_SIZES",
    "Example",
    "Splits",
    "as_examples",
    "coerce_splits",
    "content_hash",
    "dspy_input_keys",
    "from_hf",
    "load_skillopt_dir",
    "load_splits",
]
