"""``softrt compare --json``'s documents: each scenario's figures pooled over its rounds, every
round, the ``--require`` gates (schema layer; built by :mod:`softrt.scenario.compare`)."""

from __future__ import annotations

from typing import Any

from .doc import Doc, count, flatten, many, obj
from .summary import LoadRun, Metrics, Verdict
from .tail import Tail


class PooledMotion(Doc):
    """The worst motion impact over a scenario's rounds (None: no round computed one)."""

    max_deviation_counts: float | None = None
    max_velocity_step_counts_per_s: float | None = None


class Pooled(Doc):
    """One scenario's figures over its rounds (``softrt compare --json``'s ``pooled``): the
    streaming pass's metrics of every round merged, and what the rounds were."""

    metrics: Metrics = flatten(Metrics)
    scenario: str = ""
    description: str = ""
    tuned: bool = True
    rounds: int = 0
    modes: list[str] = many()
    partial: list[int] = many()  # the rounds that did not complete
    motion: PooledMotion = PooledMotion()
    loads: list[LoadRun] = many()  # each load's achieved figures averaged over the rounds
    run_ids: list[str] = many()
    verdict: Verdict | None = None  # the pooled figures judged (--require, or the seed's requirement)
    tail: Tail | None = None  # the tail model of the rounds' periods pooled (None: a round kept no tail)


class RequirementCheck(Doc):
    """One ``--require`` gate on one tuned scenario."""

    scenario: str
    requirement: str
    measured: float | None
    passed: bool


class CompareRound(Doc):
    """One scenario in one round, as ``softrt compare --json``'s ``rounds`` lists it."""

    scenario: str
    round: int
    run_id: str
    path: str
    status: str | None
    period_max_us: float | None
    missed_updates: int | None = count()
    loads: list[LoadRun] = many()
    notes: list[str] = many()


class CompareDoc(Doc):
    """``softrt compare --json``: the scenarios' pooled figures (keyed by scenario name, in the order
    they ran), every round, the verdict sentences and the ``--require`` gates."""

    schema: str = "softrt.compare/1"
    scenarios: list[str] = many()
    pooled: dict[str, Any] = obj()  # scenario name -> its Pooled document's JSON object
    rounds: list[CompareRound] = many()
    overall: str | None = None
    verdict: list[str] = many()
    requirements: list[RequirementCheck] = many()
    interrupted: bool = False
    passed: bool = False
