"""The recommendation: fastest, cheapest, Pareto set, deadline and budget."""

from __future__ import annotations

from trainsweep.cost.metrics import FAILED, ConfigMetrics
from trainsweep.cost.recommend import pareto_front, recommend


def _row(itype: str, bs: int, t: float | None, usd: float | None, status: str = "ok") -> ConfigMetrics:
    return ConfigMetrics(itype, 1, bs, 3, time_to_train_s=t, cost_to_train_usd=usd, status=status)


ROWS = [
    _row("ml.p3.2xlarge", 256, 100.0, 2.0),  # fastest
    _row("ml.g4dn.xlarge", 256, 300.0, 0.5),  # cheapest
    _row("ml.g5.xlarge", 256, 200.0, 1.0),  # in between: on the front
    _row("ml.p2.xlarge", 256, 400.0, 1.5),  # dominated by g5 and g4dn
    _row("ml.p3.8xlarge", 256, 50.0, 9.0, status=FAILED),  # failed: never recommended
    _row("ml.c5.xlarge", 256, None, None),  # no timings
]


def test_fastest_and_cheapest():
    rec = recommend(ROWS)
    assert rec.fastest.instance_type == "ml.p3.2xlarge"
    assert rec.cheapest.instance_type == "ml.g4dn.xlarge"
    assert rec.candidates == 4


def test_pareto_front_drops_dominated_configurations_fastest_first():
    front = [r.instance_type for r in pareto_front([r for r in ROWS if r.status == "ok"])]
    assert front == ["ml.p3.2xlarge", "ml.g5.xlarge", "ml.g4dn.xlarge"]


def test_without_constraints_the_pick_is_the_cheapest():
    assert recommend(ROWS).pick.instance_type == "ml.g4dn.xlarge"


def test_deadline_picks_the_cheapest_that_makes_it():
    rec = recommend(ROWS, deadline_s=250)
    assert rec.pick.instance_type == "ml.g5.xlarge"
    assert "deadline" in rec.reason


def test_budget_picks_the_fastest_that_fits():
    assert recommend(ROWS, budget_usd=1.2).pick.instance_type == "ml.g5.xlarge"


def test_impossible_constraints_are_said_in_words():
    rec = recommend(ROWS, deadline_s=10)
    assert rec.pick is None
    caveat, first = rec.sentences()[:2]
    assert caveat.startswith("Could not judge 2 of 6 configurations: 1 no timings, 1 no price")
    assert "No configuration meets" in first


def test_sentences_carry_the_numbers():
    text = " ".join(recommend(ROWS).sentences())
    assert "ml.g4dn.xlarge with batch size 256" in text and "$0.5000" in text and "5.0 min" in text


def test_nothing_to_recommend_when_every_cell_failed():
    rec = recommend([_row("ml.p3.2xlarge", 256, 1.0, 1.0, status=FAILED)])
    assert rec.pick is None and rec.candidates == 0
    caveat, first = rec.sentences()
    assert caveat.startswith("Could not judge 1 of 1 configurations: 1 no timings")
    assert "nothing to recommend" in first


def test_configurations_within_five_percent_of_the_pick_are_named():
    rows = [*ROWS, _row("ml.g6.xlarge", 256, 250.0, 0.52)]
    rec = recommend(rows)
    assert rec.pick.instance_type == "ml.g4dn.xlarge"
    assert [c.instance_type for c in rec.near] == ["ml.g6.xlarge"]
    assert any(s.startswith("Within 5% of its cost: ml.g6.xlarge") for s in rec.sentences())
    assert recommend(ROWS).near == []


def test_without_prices_time_decides_and_names_what_is_near_in_time():
    rows = [_row("local", 32, 120.0, 0.0), _row("local", 64, 80.0, 0.0), _row("local", 128, 78.0, 0.0)]
    rec = recommend(rows)
    assert rec.pick.batch_size == 128 and not rec.priced
    text = rec.sentences()
    assert text[0] == "Use local with batch size 128 (78.0 s to train): the fastest of the 3 configurations."
    assert "Within 5% of its time to train: local with batch size 64 (80.0 s to train)." in text
    assert not any("Cheapest" in s or "Pareto" in s or "$" in s for s in text)
