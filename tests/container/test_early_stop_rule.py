"""The early-stop rule as the container drives it on a GPU: how soon it may stop on steady step times."""

from __future__ import annotations

from trainsweep.predict import SteadyState, StopRule


def _stop_step(rule: StopRule, times: list[float]) -> int | None:
    st = SteadyState(rule)
    for i, v in enumerate(times, start=1):
        st.add(v)
        if st.stop_reason():
            return i
    return None


# an H100 at batch 256: step 1 autotunes, the next few steps are still slower, then 44 ms +- microseconds
GPU_STEPS = [3.0, 0.07, 0.06, 0.05, *(0.0439 + 1e-6 * (i % 3) for i in range(200))]


def test_the_rule_rechecks_every_step_while_warm_up_leaves_too_few_steady_steps():
    # at step 11 warm-up detection drops steps 2-4, leaving 7 < 10 steady steps; the rule checks
    # again at every step (it waited 10 more steps before) and stops once 10 steady steps are in
    assert _stop_step(StopRule(min_steady_steps=10, min_seconds=0), GPU_STEPS) == 14


def test_by_default_the_precision_waits_for_ten_seconds_of_steps():
    # the same steady GPU steps: 10 steady steps are in at step 14, but 10 s of steps only at step ~170
    step = _stop_step(StopRule(min_steady_steps=10), GPU_STEPS)
    assert step is not None and sum(GPU_STEPS[:step]) >= 10.0 > sum(GPU_STEPS[: step - 1])


def test_steady_steps_from_the_start_stop_at_min_steady_steps():
    times = [3.0, *(0.0439 + 1e-6 * (i % 3) for i in range(200))]
    assert _stop_step(StopRule(min_steady_steps=10, min_seconds=0), times) == 11  # step 1 + 10 steady steps
