"""analysis.regress: the noise of a figure over a rig's runs, and the judgement of a change against it."""

from softrt.analysis.regress import MIN_RUNS, noise, trend


def test_noise_is_the_range_about_the_median():
    n = noise([100.0, 120.0, 110.0, None])
    assert (n.n, n.median, n.spread, n.known) == (3, 110.0, 20.0, True)
    assert n.judge(125.0) == "within noise" and n.judge(90.0) == "within noise"
    assert n.judge(131.0) == "worse" and n.judge(89.0) == "better" and n.judge(None) == "not measured"


def test_too_few_runs_say_the_noise_is_unknown():
    assert noise([1.0] * (MIN_RUNS - 1)).judge(1e9) == f"noise unknown ({MIN_RUNS - 1} runs)"
    assert noise([None, 5.0]).judge(5.0) == "noise unknown (1 run)"
    assert noise([]).to_dict() == {"runs": 0, "median": None, "range": None, "known": False}


def test_trend_arrows():
    assert trend([100, 100, 200]) == "↑" and trend([200, 200, 100]) == "↓"
    assert trend([100, 100, 105]) == "→" and trend([100]) == "?" and trend([None, 3]) == "?"
