"""What ``api.plan`` answers: the runs a side and the repeats per run a change needs to be seen
at the noise of runs already made (``stats.power``'s arithmetic over ``stats.planning``'s gated
metrics); ``markdown()`` is `perfbench plan`'s text (``report.plan_md``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfbench import store
from perfbench.errors import GateError
from perfbench.report import plan_md
from perfbench.stats import planning, power
from perfbench.stats.compare import Rules
from perfbench.store import sides


@dataclass(frozen=True)
class Needs:
    """Per gated metric (``needs``) the runs a side and repeats a change of ``effect`` needs
    to be caught with the chance ``chance`` by the gate's ``rules``."""

    needs: list[power.Need]
    effect: float  # the relative change to catch (0.1: 10%)
    chance: float  # the power asked
    rules: Rules
    tested: int  # gated metrics that vary: the correction's first step divides alpha by it
    repeat: int  # the --repeat the noise was measured at (the smallest of the runs given)
    runs: list[list[dict[str, Any]]]  # each group's run-level summaries

    def cheapest(self) -> power.Need | None:
        """The timing whose plan costs least: the plan for a slowdown that moves them all."""
        return plan_md.cheapest(self.needs)

    def markdown(self) -> str:
        return plan_md.text(
            self.needs, self.effect, self.chance, self.rules, self.tested, self.repeat, self.runs
        )


def needs(refs: Sequence[str], effect: float, chance: float, rules: Rules, root: Path) -> Needs:
    if not 0 < effect < 10:
        raise GateError(f"detect {effect:g}: a relative change such as 0.1 (10%) or 0.25")
    with store.reading(*refs):
        loaded = [sides.load_side(ref, root) for ref in refs]
    runs = [list(summary["runs"]) for _, summary in loaded]
    measured = planning.gated(rules, runs)
    repeat = min(_repeat(meta) for meta, _ in loaded)
    gate = planning.gate(rules, measured, chance)
    found = [power.need(m, effect, repeat, gate) for m in measured]
    return Needs(found, effect, chance, rules, planning.tested(measured), repeat, runs)


def _repeat(meta: Mapping[str, Any]) -> int:
    return int(((meta.get("spec") or {}).get("plan") or {}).get("repeat") or 1)
