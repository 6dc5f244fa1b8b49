"""The sweep's third level (clustersim.sweep.replay): a true bound on the closed form, exact where
nothing but the pipeline costs time, and a branch and bound that ranks as without it."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim import api
from clustersim.api import SWEEP_EVALUATORS
from clustersim.scenario import load_scenario
from clustersim.sweep.executors import SerialExecutor
from clustersim.sweep.pipe_bound import wait_floor_of
from clustersim.sweep.replay import replay_bound_s, replay_ends
from clustersim.sweep.runner import run_sweep, sweep_spec
from clustersim.sweep.screen import Screen
from clustersim.sweep.space import shape_layouts, shapes
from clustersim.sweep.unit_times import UnitSeconds
from tests.sweep.test_screen import DP_SCENARIOS, SCENARIOS, closed_form_without_waits

# DeepSpeed's ZeRO optimizer and its BF16_Optimizer, which adds each micro-batch's gradients into
# fp32 ones after every backward of every stage (FrameworkSpec.micro_batch_grad_bytes_per_param)
DEEPSPEED = ["model.preset=megatron-1.7b", "cluster.preset=dgx-h100", "cluster.nodes=2", "parallel.tp=1",
             "parallel.pp=2", "parallel.dp=8", "parallel.zero_stage=0", "parallel.micro_batch=1",
             "parallel.global_batch=64", "training.dtype=bf16"]
CASES = {**{f"screen{i}": o for i, o in enumerate(SCENARIOS)}, **{f"dp-{k}": o for k, o in DP_SCENARIOS.items()},
         **{fw: [f"framework={fw}", *DEEPSPEED] for fw in ("deepspeed", "deepspeed-bf16")}}


@functools.cache
def _case(which: str):
    s = load_scenario(None, CASES[which])
    layouts = tuple(p for x in shapes(s.model, s.cluster, s.parallel.global_batch)
                    for p in shape_layouts(s.model, x, s.parallel) if p.pp > 1)
    return s, layouts, Screen(s)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(sorted(CASES)), i=st.integers(min_value=0, max_value=10**9))
def test_replay_bound_is_below_the_closed_form(which, i):
    """On random pipelined layouts of dense and MoE models (every ZeRO stage and schedule: GPipe,
    1F1B, interleaved 1F1B, ZB-H1, ZB-V, DualPipe and DualPipe-V pairs; optimizer offload, MoE
    data-parallel stream term; DeepSpeed's ZeRO and BF16 optimizers) the third level stays at
    most the closed form's step time."""
    s, layouts, sc = _case(which)
    p = layouts[i % len(layouts)]
    assert replay_bound_s(sc, p) <= api.estimate(replace(s, parallel=p)).step_time_s


@pytest.mark.parametrize("framework", ["deepspeed", "deepspeed-bf16"])
@pytest.mark.parametrize("pp,m", [(2, 8), (4, 16), (8, 16)])
def test_replay_counts_the_gradient_pass_of_each_stage(framework, pp, m):
    """DeepSpeed's BF16_Optimizer adds every backward's gradients into fp32 ones, one pass over
    the stage's parameters (plan.optimizer_step.micro_batch_grad_pass_s): the third level counts
    it on every stage's backward over that stage's parameters (it had counted it over the whole
    model on the embedding's stage only: 0.3205 s above the closed form's 0.3202 s for TP1 PP2
    DP8), so it stays at most the closed form and within 1.5% of it, on 1F1B (the schedule
    DeepSpeed's pipeline engine runs; its ZeRO optimizer has no such pass)."""
    s = load_scenario(None, [f"framework={framework}", *DEEPSPEED, f"parallel.pp={pp}", f"parallel.dp={16 // pp}",
                             f"parallel.global_batch={m * 16 // pp}"])
    assert s.parallel.num_micro_batches == m
    closed = api.estimate(s).step_time_s
    bound = replay_bound_s(Screen(s), s.parallel)
    assert closed * 0.985 <= bound <= closed


@pytest.mark.parametrize("schedule,v", [("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2), ("interleaved-1f1b", 4),
                                        ("zb-h1", 1), ("zb-v", 1), ("dualpipe", 1), ("dualpipe-v", 1)])
def test_replay_equals_the_closed_form_where_only_the_pipeline_costs(schedule, v):
    """One data-parallel replica, no tensor parallelism, a pipeline inside one node: nothing but
    compute, transfers and the optimizer takes time, so the replay is the closed form (to
    rounding), bubble and exposed transfers included; the second level falls short of it."""
    s = load_scenario(None, ["model.preset=llama2-7b", "model.layers=16", "cluster.preset=dgx-h100",
                             "cluster.nodes=1", "cluster.gpus_per_node=4", "parallel.tp=1", "parallel.pp=4",
                             "parallel.dp=1", "parallel.micro_batch=1", "parallel.global_batch=8",
                             f"parallel.schedule={schedule}", f"parallel.virtual_stages={v}"])
    sc = Screen(s)
    assert replay_bound_s(sc, s.parallel) <= api.estimate(s).step_time_s
    # the bounds count the plan's additive waits only as their floor (Screen.wait_floor_s)
    est = closed_form_without_waits(s) + sc.wait_floor_s(s.parallel, sc.profile(s.parallel))
    replay = replay_bound_s(sc, s.parallel)
    assert replay == pytest.approx(est, rel=2e-9)  # BOUND_SLACK shaves 1e-9
    second = sc.step_bound_s(s.parallel, sc.profile(s.parallel))
    assert second <= replay * (1 + 1e-12)  # equal up to rounding on the schedules the second level prices fully
    if schedule == "interleaved-1f1b":  # the second level charges one fill; the transfers of every chunk add up
        assert second < replay * (1 - 1e-4)


def test_replay_of_a_toy_pipeline():
    """1F1B over 2 ranks, 2 micro-batches, forward 1 s and backward 2 s per stage, transfers 0.5 s.
    Rank 1 runs F0 1.5-2.5, B0 2.5-4.5, F1 4.5-5.5 (its input arrived at 2.5), B1 5.5-7.5; rank 0
    runs F0 F1 by 2, B0 from max(2, 4.5 + 0.5) = 5 to 7, B1 from max(7, 7.5 + 0.5) = 8 to 10."""
    durations = {(g, part): UnitSeconds(t, t, 0.0) for g in (0, 1) for part, t in (("F", 1.0), ("B", 2.0))}
    ends = replay_ends("1f1b", 2, 2, 1, durations, 0.5)
    assert ends == (10.0, 7.5)


def test_replay_waits_for_parameter_gathers_and_counts_final_backwards():
    """The same toy with ZeRO-1/2 gathers: stage 1's forward units wait for their gathers (the
    first ends at 3, the last at 4), so rank 1 runs F0 3-4, B0 4-6, F1 6-7, B1 7-9 and rank 0
    B0 from 6.5 to 8.5, B1 from 9.5 to 11.5. Each rank's final backward of its stage is its B1
    (started at 7 and 9.5): with the stream's 4 s of gathers on rank 1 first, then 3 s of buckets,
    rank 1's stream ends at max(4, 7) + 3 = 10, and with a 1 s optimizer step the rank ends no
    earlier than 11."""
    from clustersim.sweep.dpbound import RankStream
    from clustersim.sweep.replay import replay_times

    durations = {(g, part): UnitSeconds(t, t, 0.0) for g in (0, 1) for part, t in (("F", 1.0), ("B", 2.0))}
    ends, finals, _ = replay_times("1f1b", 2, 2, 1, durations, 0.5, ready=((), ((1, 3.0, 4.0),)))
    assert ends == (11.5, 9.0)
    assert finals == (((0, 9.5),), ((1, 7.0),))
    stream = RankStream(ready=((1, 3.0, 4.0),), buckets=((1, 3.0),), gathers_s=4.0)
    assert stream.bound_s(finals[1], ends[1], 1.0) == 11.0


def test_every_backward_of_a_toy_pipeline():
    """The toy 1F1B above where every backward reduces (ZeRO-2 over several micro-batches): rank
    1's first backward B0 starts at 2.5 (no bucket before it) and F1 (1 s) and B1 (2 s) follow,
    rank 0's B0 starts at 5 and B1 (2 s) follows; from its B0 on each rank's stage reduces
    twice. With 3 s of buckets per backward the stream runs 6 s after rank 1's first backward,
    so its step ends no earlier than 2.5 + 6 + 1 (optimizer); had its first backward started at 4
    with 10 s of kernels after it, the
    kernels, slowed to 0.8 of their rate beside the stream, need 10 + 0.2 x 6, and 2 s of
    blocking collectives hide 2 s of the stream at no cost: 10 + 2 + 0.2 x 4."""
    from clustersim.sweep.dpbound import EveryBackward, RankStream
    from clustersim.sweep.programs import indexed_program
    from clustersim.sweep.replay import every_backward, replay_times

    durations = {(g, part): UnitSeconds(t, t, 0.0) for g in (0, 1) for part, t in (("F", 1.0), ("B", 2.0))}
    starts = replay_times("1f1b", 2, 2, 1, durations, 0.5).starts
    prog = indexed_program("1f1b", 2, 2, 1, False)
    every = tuple(every_backward(prog, r, starts[r], durations) for r in (0, 1))
    assert every == (EveryBackward(5.0, 2.0, 0.0, ((0, 2),)), EveryBackward(2.5, 3.0, 0.0, ((1, 2),)))
    stream = RankStream(buckets=((1, 3.0),))
    assert stream.every_backward_bound_s(every[1], 0.8, 1.0) == 2.5 + 6.0 + 1.0
    assert stream.every_backward_bound_s(EveryBackward(4.0, 10.0, 0.0, ((1, 2),)), 0.8, 1.0) == \
        pytest.approx(4.0 + 10.0 + 0.2 * 6.0 + 1.0)
    assert stream.every_backward_bound_s(EveryBackward(4.0, 10.0, 2.0, ((1, 2),)), 0.8, 1.0) == \
        pytest.approx(4.0 + 12.0 + 0.2 * 4.0 + 1.0)


@functools.cache
def _every_layouts(which: str):
    """The case's layouts whose every backward reduces its gradients, and one Screen for them all
    (as a sweep keeps one per worker)."""
    from clustersim.plan.data_parallel import grads_every_micro_batch

    s = load_scenario(None, CASES[which])
    return s, tuple(p for x in shapes(s.model, s.cluster, s.parallel.global_batch)
                    for p in shape_layouts(s.model, x, s.parallel) if grads_every_micro_batch(p)), Screen(s)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(["dp-dense", "dp-blocking", "dp-mixtral", "screen1"]),
       i=st.integers(min_value=0, max_value=10**9))
def test_every_backward_bound_is_below_the_closed_form(which, i):
    """On random layouts whose every backward reduces its gradients (ZeRO-2, several
    micro-batches; one pipeline stage or more, with and without overlapped reductions, dense and
    MoE) the third level, with the compute slowed beside the stream, stays at most the closed form."""
    s, layouts, sc = _every_layouts(which)
    p = layouts[i % len(layouts)]
    assert replay_bound_s(sc, p) <= api.estimate(replace(s, parallel=p)).step_time_s


@pytest.mark.parametrize("pp,v,above", [(1, 1, 1.03), (4, 5, 1.015)])
def test_every_backward_bound_counts_the_slowed_compute(pp, v, above):
    """Llama 3 70B on 512 H100 with ZeRO-2 over 16 micro-batches: every backward's reduction
    slows the kernels beside it, so the third level lies well above the ZeRO-1 twin's (which
    reduces once) and below the closed form; before this term a single stage had no third level."""
    layout = {"tp": 4 if pp > 1 else 8, "pp": pp, "dp": 512 // (pp * (4 if pp > 1 else 8)), "micro_batch": 1,
              "global_batch": 512 if pp > 1 else 1024, "sequence_parallel": True, "recompute": "none",
              "schedule": "interleaved-1f1b" if v > 1 else "1f1b", "virtual_stages": v}
    s = load_scenario(None, ["model.preset=llama3-70b", "cluster.preset=dgx-h100", "cluster.nodes=64"]
                      + [f"parallel.{k}={x}" for k, x in layout.items()])
    sc = Screen(s)
    zero2, zero1 = replace(s.parallel, zero_stage=2), replace(s.parallel, zero_stage=1)
    bound = replay_bound_s(sc, zero2)
    assert bound > above * replay_bound_s(sc, zero1)
    assert bound > above * sc.step_bound_s(zero2, sc.profile(zero2))
    assert bound <= api.estimate(replace(s, parallel=zero2)).step_time_s


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(sorted(DP_SCENARIOS)), i=st.integers(min_value=0, max_value=10**9))
def test_replay_stream_terms_are_below_the_closed_form(which, i):
    """With the data-parallel stream terms on for dense models too (the sweep keeps them for MoE:
    ``Screen.dp_term``), the third level (each rank's gather waits and stream,
    ``dpbound.RankStream``) and the second stay at most the closed form on random pipelined
    ZeRO 0-2 layouts."""
    from tests.sweep.test_screen import _dp_case, _dp_screen

    s, layouts = _dp_case(which)
    piped = [p for p in layouts if p.pp > 1]
    p = piped[i % len(piped)]
    sc = _dp_screen(which)
    est = api.estimate(replace(s, parallel=p)).step_time_s
    assert replay_bound_s(sc, p) <= est
    assert sc.step_bound_s(p, sc.profile(p)) <= est


@pytest.mark.parametrize("schedule", ["interleaved-1f1b", "zb-h1", "zb-v", "dualpipe", "dualpipe-v"])
def test_replay_counts_the_data_parallel_stream(schedule):
    """On a Mixtral-shaped toy with ZeRO-1 over 8 data-parallel ranks, the stream (gathers at step
    start, each stage's buckets from its final backward) is most of what the pipeline alone
    misses: with it the third level is within 12% of the closed form (measured 0.90-0.996 of
    it), without it (``dp_term`` off) it is not (0.51-0.79)."""
    s = load_scenario(None, DP_SCENARIOS["mixtral"] + [f"parallel.schedule={schedule}", "parallel.zero_stage=1",
                                                       "parallel.global_batch=64",
                                                       f"parallel.virtual_stages={2 if schedule == 'interleaved-1f1b' else 1}"])
    est = closed_form_without_waits(s)   # the bounds count the plan's additive waits only as their floor
    floor = Screen(s).wait_floor_s(s.parallel, Screen(s).profile(s.parallel))
    with_stream = replay_bound_s(Screen(s), s.parallel) - floor
    plain = Screen(s)
    plain.dp_term = False
    without = replay_bound_s(plain, s.parallel) - floor
    assert without < 0.85 * est
    assert 0.88 * est <= with_stream <= api.estimate(s).step_time_s - floor


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(sorted(DP_SCENARIOS)), i=st.integers(min_value=0, max_value=10**9))
def test_param_work_has_the_layouts_parameters_and_stages(which, i):
    """``dpbound.param_work`` (one build for every dp, cp, micro-batch and recompute) has the
    layout's own stages, placement and parameters per unit, so its data-parallel plan is the
    layout's own to the bit."""
    from clustersim.plan.data_parallel import dp_plan, dp_plan_from
    from clustersim.plan.stage_work import build_step_work
    from clustersim.sweep.dpbound import param_work
    from tests.sweep.test_screen import _dp_case

    s, layouts = _dp_case(which)
    p = layouts[i % len(layouts)]
    scenario = replace(s, parallel=p)
    own, canon = build_step_work(scenario), param_work(scenario)
    assert [(x.index, x.unit_params, x.unit_expert_params) for x in own.stages] == \
        [(x.index, x.unit_params, x.unit_expert_params) for x in canon.stages]
    assert (own.graph.placement, own.graph.model_stage, own.graph.chunks) == \
        (canon.graph.placement, canon.graph.model_stage, canon.graph.chunks)
    assert dp_plan_from(scenario, canon) == dp_plan(scenario, own)


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-v", "dualpipe", "dualpipe-v"])
def test_second_level_counts_the_stream_without_the_backward_chain(schedule):
    """The second level's stream floor (``Screen.stream_floor_s``: each rank's final backwards
    no earlier than its actions before them) on the schedules without the backward chain, on the
    Mixtral-shaped toy with ZeRO-1 over 8 data-parallel ranks: it raises the first level (the
    pipeline alone, measured 0.40-0.73 of the closed form) to at least 0.7 of the closed form
    (measured 0.74-0.89), stays at most the third level (0.90-0.996), which adds the waits."""
    s = load_scenario(None, DP_SCENARIOS["mixtral"] + [f"parallel.schedule={schedule}", "parallel.zero_stage=1",
                                                       "parallel.global_batch=64"])
    est = closed_form_without_waits(s)   # the bounds count the plan's additive waits only as their floor
    sc = Screen(s)
    floor = sc.wait_floor_s(s.parallel, sc.profile(s.parallel))
    first = sc.step_bound_s(s.parallel, sc.profile(s.parallel), level=1)
    second = sc.step_bound_s(s.parallel, sc.profile(s.parallel))
    assert first - floor < 0.75 * est
    assert 0.7 * est <= second - floor
    assert second <= replay_bound_s(sc, s.parallel) <= api.estimate(s).step_time_s


@pytest.mark.parametrize("which,keep", [("dp-dense", 3), ("dp-mixtral", 2)])
def test_branch_and_bound_with_replay_ranks_as_without(which, keep):
    """The third level only prunes: the same best ``keep`` with their closed-form numbers, and
    fewer evaluations."""
    s = _case(which)[0]
    spec = sweep_spec(s, evaluators=SWEEP_EVALUATORS)
    assert spec.replay_bounds
    with_replay = run_sweep(spec, SerialExecutor(), rerank=0, keep=keep)
    without = run_sweep(replace(spec, replayer=None), SerialExecutor(), rerank=0, keep=keep)
    assert with_replay.top(keep) == without.top(keep)
    # rounds pick layouts in batches by bound, so the sets differ; the count falls
    assert with_replay.estimated < without.estimated
    assert replace(spec, evaluators=replace(spec.evaluators, bounds_hold=False)).replay_bounds is False


_segment = st.tuples(st.sampled_from(["compute", "comm"]), st.floats(min_value=1e-4, max_value=1.0))


@settings(max_examples=300, deadline=None)
@given(a=st.lists(_segment, min_size=1, max_size=12), b=st.lists(_segment, min_size=1, max_size=12),
       slowdown=st.sampled_from([0.0, 0.1515, 24 / 132, 0.5]),
       external=st.lists(st.tuples(st.floats(0.0, 3.0), st.floats(0.0, 2.0)), max_size=3))
def test_pair_bound_is_below_the_pair_timing(a, b, slowdown, external):
    """``pair_s`` (both streams' loads, each chain alone, and the kernels' slow-down beside the
    pair's collectives) is at most ``engine.pair.pair_timing`` of the same two chains, also
    beside other collectives of the rank, and it decides: kernels beside collectives take
    longer than either stream's load."""
    from clustersim.engine.pair import Segment, pair_timing
    from clustersim.sweep.replay import pair_s

    chains = tuple(tuple(Segment(kind, t, "ep_comm" if kind == "comm" else "compute") for kind, t in chain)
                   for chain in (a, b))
    busy = tuple((s, s + d, "dp_comm") for s, d in external if d > 0)
    end, _ = pair_timing(chains, 0.0, busy, slowdown)

    def tcm(chain):
        c = sum(t for kind, t in chain if kind == "compute")
        m = sum(t for kind, t in chain if kind == "comm")
        return c + m, c, m

    assert pair_s(tcm(a), tcm(b), slowdown) <= end * (1 + 1e-12)


def test_pair_bound_counts_the_slowdown():
    """A forward of kernels beside a backward of one long collective: the kernels run slowed for
    all of it, which ``pair_timing`` and the bound both count (0.3 = the busier stream alone)."""
    from clustersim.engine.pair import Segment, pair_timing
    from clustersim.sweep.replay import pair_s

    s = 24 / 132
    end, _ = pair_timing(((Segment("compute", 0.3, "compute"),), (Segment("comm", 0.2, "ep_comm"),)), 0.0, (), s)
    bound = pair_s((0.3, 0.3, 0.0), (0.2, 0.0, 0.2), s)
    assert bound == pytest.approx(0.3 + s * 0.2)
    assert bound == pytest.approx(end)
    assert pair_s((0.3, 0.3, 0.0), (0.2, 0.0, 0.2)) == pytest.approx(0.3)


@pytest.mark.parametrize("schedule,pp,m,v", [("gpipe", 4, 6, 1), ("1f1b", 1, 5, 1), ("1f1b", 4, 8, 1), ("1f1b", 3, 2, 1),
                                              ("interleaved-1f1b", 2, 4, 3), ("interleaved-1f1b", 4, 8, 2),
                                              ("interleaved-1f1b", 8, 16, 6)])
def test_indexed_classic_schedules_read_from_the_actions_equal_the_program(schedule, pp, m, v):
    """The classic schedules' replay program is read from their actions directly
    (``programs._indexed_classic``): the same events, kinds, finals and numbering as through the
    general program's steps."""
    from clustersim.sweep.programs import indexed_program, indexed_steps, program

    assert indexed_program(schedule, pp, m, v, False) == indexed_steps(program(schedule, pp, m, v, False))


WAIT_CASES = {"deepseek-small": SCENARIOS[0], "mixtral-small": DP_SCENARIOS["mixtral"],
              "mixtral-recompute": DP_SCENARIOS["mixtral"] + ["parallel.recompute=full"]}


@functools.cache
def _wait_case(which: str):
    s = load_scenario(None, WAIT_CASES[which])
    layouts = tuple(p for x in shapes(s.model, s.cluster, s.parallel.global_batch)
                    for p in shape_layouts(s.model, x, s.parallel))
    return s, layouts, Screen(s)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(sorted(WAIT_CASES)), i=st.integers(min_value=0, max_value=10**9))
def test_wait_floor_is_below_every_ranks_waits(which, i):
    """The bounds' floor on the plan's additive waits (Screen.wait_floor_s) is at most the host's
    and the slowest GPU's wait of every rank the plan simulates, each part on its own: the MoE
    layers' own issue deficits (dropless Megatron MoE syncs on its token counts) of the rank with
    the fewest MoE layers, on random layouts (every schedule, EP x ETP, recompute options). A MoE
    layer's own deficit is positive on these host-bound toys, so the floor prunes."""
    from clustersim.plan.step_plan import build_plan

    s, layouts, sc = _wait_case(which)
    p = layouts[i % len(layouts)]
    terms, profile = sc.wait_terms(p), sc.profile(p)
    host_floor = wait_floor_of(terms._replace(frac=0.0), profile, p.num_micro_batches)
    jitter_floor = wait_floor_of(terms._replace(moe_sync_s=0.0, fixed_s=0.0), profile, p.num_micro_batches)
    ranks = build_plan(replace(s, parallel=p)).ranks
    assert terms.moe_sync_s > 0.0 and terms.fixed_s > 0.0
    assert host_floor > terms.fixed_s or profile.least_moe_layers == 0   # a rank with only dense layers
    assert host_floor <= min(rk.host_s for rk in ranks) * (1 + 1e-12)
    assert jitter_floor <= min(rk.jitter_s for rk in ranks) * (1 + 1e-12)


def test_moe_padded_to_capacity_pays_no_dispatch_sync_in_the_floor():
    """With the MoE input padded to capacity no layer waits for its token counts (compute.host),
    so the floor keeps only the step's synchronising calls."""
    s = load_scenario(None, DP_SCENARIOS["mixtral"] + ["model.moe={experts: 8, top_k: 2, expert_ffn_hidden: 4096, "
                                                       "capacity_factor: 1.0, pad_to_capacity: true}"])
    sc = Screen(s)
    terms = sc.wait_terms(s.parallel)
    assert terms.moe_sync_s == 0.0 and terms.fixed_s > 0.0
