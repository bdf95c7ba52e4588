"""Shared builders for tests: the synthetic parity task shipped with the contract suite.

The fake target answers right only when the skill mentions "divisible by 2" (else always
"odd"), so a skill edit is what makes the score move.
"""

from __future__ import annotations

from skillopt_dsl.testing.contract import ContractParity as Parity
from skillopt_dsl.testing.contract import contract_examples as parity_examples
from skillopt_dsl.testing.contract import contract_target as parity_target

__all__ = ["Parity", "parity_examples", "parity_target"]
