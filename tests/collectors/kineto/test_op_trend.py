"""Which operators the ``op_trend`` table keeps: those whose per-step time
rises, by its Theil-Sen slope over the steps."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.collectors.kineto import op_trend


def test_rise_counts_a_growing_operator_and_not_one_slow_step():
    per_step = np.array([
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],    # grows every step
        [5.0, 5.0, 5.0, 5.0, 5.0, 40.0],   # one slow last step (a periodic stall)
        [40.0, 5.0, 5.0, 5.0, 5.0, 5.0],   # a slow first step (one-time start-up)
        [2.0, 2.0, 2.0, 9.0, 9.0, 9.0],    # a step change in the middle of the window
    ])
    grow = op_trend.rise(per_step)
    assert grow[0] > 0 and grow[3] > 0
    assert grow[1] <= 0 and grow[2] <= 0
    # a long window is averaged over runs of steps: the slope stays the step's
    long = np.arange(500, dtype=float)[None, :] * 0.5
    assert op_trend.rise(long)[0] == pytest.approx(0.5)


def test_stand_out_counts_work_of_some_steps_and_not_a_one_time_step():
    per_step = np.array([
        [5.0, 30.0, 5.0, 5.0, 30.0, 5.0, 5.0, 30.0],   # extra work every third step (an evaluation)
        [40.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0],     # the first step's one-time work
        [5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0],      # the same every step
    ])
    above = op_trend.stand_out(per_step)
    assert above[0] == pytest.approx(25.0)
    assert above[1] == 0.0 and above[2] == 0.0
