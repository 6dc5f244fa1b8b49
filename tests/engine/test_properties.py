"""Properties of the step engine over random valid layouts (hypothesis).

For any scenario the loader accepts: the simulation finishes, the breakdown adds up to the step
time with no negative cause, and the event engine (links shared) is never faster than its
contention-free closed-form twin.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clustersim.api import estimate, simulate
from clustersim.engine.timeline import CAUSES
from clustersim.errors import InputError
from clustersim.scenario import scenario_from_dict


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    model = draw(st.sampled_from(["megatron-1.7b", "llama3-8b", "mixtral-8x7b", "megatron-3.6b"]))
    nodes = draw(st.sampled_from([1, 2, 4]))
    tp, pp, cp = (draw(st.sampled_from(v)) for v in ([1, 2, 4, 8], [1, 2, 4], [1, 2]))
    assume((nodes * 8) % (tp * pp * cp) == 0)
    dp = nodes * 8 // (tp * pp * cp)
    schedule = draw(st.sampled_from(["gpipe", "1f1b", "interleaved-1f1b"]))
    micro_batch = draw(st.sampled_from([1, 2]))
    return {
        "model": {"preset": model, "seq_len": 1024},
        "cluster": {"preset": draw(st.sampled_from(["dgx-a100", "dgx-h100", "hgx-h200"])), "nodes": nodes,
                    "scale_out": draw(st.sampled_from(["ib-hdr", "ib-ndr", "roce-400g", "eth-100g"]))},
        "parallel": {"tp": tp, "pp": pp, "dp": dp, "cp": cp,
                     "ep": draw(st.sampled_from([1, 2, 4])) if model == "mixtral-8x7b" else 1,
                     "micro_batch": micro_batch,
                     "global_batch": dp * micro_batch * pp * draw(st.sampled_from([1, 2, 4])),
                     "schedule": schedule, "virtual_stages": 2 if schedule == "interleaved-1f1b" else 1,
                     "zero_stage": draw(st.sampled_from([0, 1, 2, 3])),
                     "recompute": draw(st.sampled_from(["none", "selective", "full"])),
                     "sequence_parallel": draw(st.booleans()), "tp_comm_overlap": draw(st.booleans()),
                     "overlap_grad_reduce": draw(st.booleans()), "overlap_param_gather": draw(st.booleans())},
        "training": {"dtype": draw(st.sampled_from(["bf16", "fp16", "fp32"])),
                     "attention": draw(st.sampled_from(["auto", "flash", "standard"]))},
    }


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(scenarios())
def test_any_valid_layout_simulates_consistently(data: dict) -> None:
    try:
        sc = scenario_from_dict(data)
    except InputError:
        assume(False)
        return
    event, closed = simulate(sc), estimate(sc)
    assert event.step_time_s > 0
    assert math.isclose(sum(event.breakdown[c] for c in CAUSES), event.step_time_s, rel_tol=1e-6)
    assert all(v >= -1e-12 for v in event.breakdown.values()), event.breakdown
    assert event.step_time_s >= closed.step_time_s * (1 - 1e-9)
