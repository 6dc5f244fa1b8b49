"""Transformer layers of each pipeline stage as the frameworks split them (docs/parallel.md).

One function, :func:`framework_split`, decides the split of a layout that sets one of the
framework split settings; without them clustersim's even split applies
(``clustersim.parallel.pipeline.split_layers``). The counts are per *model stage* of the
schedule's stage graph (``chunk * pp + rank`` for GPipe, 1F1B, interleaved 1F1B, ZB-H1 and
DualPipe; the path order of the V schedules), decoder layers only: model stage 0 also runs the
embedding, the last one the output layer, the loss and any multi-token-prediction modules
(clustersim.plan.stage_work).

* ``first_stage_layers`` / ``last_stage_layers`` (Megatron-Core ``--decoder-first-pipeline-num-layers``
  / ``--decoder-last-pipeline-num-layers``): the first (last) pipeline rank holds that many layers,
  split evenly over its ``virtual_stages`` chunks; the other layers split evenly over the middle
  ranks and their chunks. Megatron-Core's rule and checks: megatron/core/transformer/
  transformer_block.py ``get_num_layers_to_build`` (lines 103-186 at d98e8a64d, 2026-08) and
  transformer_config.py ``__post_init__`` (lines 2294-2367: each > 0, each a multiple of the
  virtual stages, the middle layers a multiple of the middle ranks and each middle rank's share a
  multiple of the virtual stages, no middle layers without middle ranks).
* ``account_for_embedding`` / ``account_for_loss`` (Megatron-Core ``--account-for-embedding-in-
  pipeline-split`` / ``--account-for-loss-in-pipeline-split``; torchtitan
  ``pipeline_parallel_first_stage_less_layers`` / ``last_stage_less_layers``): the embedding (the
  loss) counts as that many layers (true = 1). The ``layers + e + l`` effective layers are split
  over the ``S`` model stages, ``(layers + e + l) // S`` each and one more on the first
  ``(layers + e + l) % S`` stages; the first stage then builds ``e`` fewer decoder layers and the
  last ``l`` fewer. This is torchtitan's rule (torchtitan/distributed/pipeline_parallel.py
  ``_generate_llm_fqn_per_model_part`` at b5bcd76c6, 2026-08, unchanged since its 2025-07-30
  introduction in #1416). Megatron-Core computes ``(layers + e + l) / pp`` per rank, divides it by
  the virtual stages and takes one layer off the first chunk of rank 0 and the last chunk of the
  last rank (``get_num_layers_to_build`` lines 147-202); it requires both divisions to be exact,
  and where they are the two rules give the same counts. Where they are not, Megatron-Core refuses
  the job and clustersim splits as torchtitan does, refusing as torchtitan does a weight above the
  least share ``(layers + e + l) // S`` (its balance check; with one stage there is no check).
* ``pipeline_layout`` (Megatron-Core ``--pipeline-model-parallel-layout``): stages separated by
  ``|`` in ``chunk * pp + rank`` order, ``E`` the embedding, ``t`` a decoder layer, ``m`` a
  multi-token-prediction module, ``L`` the loss; ``(...)*n`` and ``x*n`` repeat, commas are
  cosmetic (megatron/core/transformer/pipeline_parallel_layer_layout.py ``parse_str_to_list`` and
  ``validate_layer_layout``). The counts are the ``t`` of each stage; stages may hold no layer.
  clustersim places the embedding on the first stage and the loss on the last, so a layout that
  puts them elsewhere is refused; the MTP modules go where the layout puts them, within Megatron-Core's
  rule (:func:`mtp_rule`, :func:`mtp_model_stage`).

A pipeline rank may hold no decoder layer when it holds model stage 0 (the embedding) or the last
model stage (the output layer and the loss): e.g. the Zero Bubble paper's ZB-V runs, whose code pads
30 / 46 / 62 layers to 2 pp chunks of one layer with the first and the last chunk one fewer
(``--allow-padding-num-layers``, megatron/model/transformer.py ``get_offset`` on the ``arxiv`` branch
of sail-sg/zero-bubble-pipeline-parallelism at f68d3879) and puts both chunks on rank 0, which then
holds only the embedding and the loss; or a layout ``"E|tttt|L"``. A rank that would hold nothing
at all (no layer, no embedding, no loss) is refused.
"""

from __future__ import annotations

import re

from clustersim.errors import InputError
from clustersim.limits import MAX_LAYERS
from clustersim.parallel.pipeline import model_split
from clustersim.parallel.stage_graph import StageGraph, stage_graph

# schedules whose model stage c * pp + r runs on rank r (Megatron's placement); the V schedules put
# model stage 2 pp - 1 - r on rank r, where "first rank" and a layout's stage order mean something else
RANK_ORDER_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-2p", "dualpipe")
LAYOUT_CHARS = "ELtm"
MAX_LAYOUT_CHARS = 4 * MAX_LAYERS   # an expanded layout longer than this is not a pipeline
SPLIT_FIELDS = ("first_stage_layers", "last_stage_layers", "account_for_embedding", "account_for_loss",
                "pipeline_layout")


def megatron_even_split_refusal(layers: int, pp: int, virtual_stages: int = 1) -> tuple[str, object, str] | None:
    """Why Megatron-Core refuses to split ``layers`` over ``pp`` ranks of ``virtual_stages`` chunks
    without a split flag (--decoder-first/last-pipeline-num-layers, --account-for-*-in-pipeline-split,
    --pipeline-model-parallel-layout), as (field, value, what is allowed), or None where it builds
    it: ``layers % pp == 0`` (megatron/training/arguments.py validate_args lines 986-997 at d98e8a64d,
    "Number of layers should be divisible by the pipeline-model-parallel size"; transformer_block.py
    get_num_layers_to_build lines 156-158) and each rank's layers a multiple of the virtual stages
    (get_num_layers_to_build lines 175-178, "num_layers_per_pipeline_rank ... should be divisible
    by vp_size"). The one rule of the importer (clustersim.importers.megatron_split.check_split_asserts)
    and of the sweep's rows (clustersim.sweep.result: a row outside it states its split as
    ``pipeline_layout``, the flag that gives it)."""
    if pp > 1 and layers % pp:
        return ("parallel.pp", pp, f"a divisor of model.layers ({layers}), or a split flag: Megatron-Core asserts "
                                   "num_layers % pipeline_model_parallel_size == 0")
    if pp > 1 and virtual_stages > 1 and (layers // pp) % virtual_stages:
        return ("parallel.virtual_stages", virtual_stages,
                f"a divisor of the {layers // pp} layers per pipeline rank, or a split flag: Megatron-Core asserts "
                "num_layers_per_pipeline_rank % vp_size == 0")
    return None


def layout_string(counts: tuple[int, ...] | list[int], mtp_layers: int = 0, mtp_stage: int = -1) -> str:
    """Megatron-Core's --pipeline-model-parallel-layout for decoder layers ``counts`` per stage
    (``chunk * pp + rank`` order): the embedding on the first stage, the MTP modules on stage
    ``mtp_stage`` (-1: the last) and the loss on the last (what :func:`layout_counts` reads back)."""
    stages = [f"t*{n}" if n > 1 else "t" * n for n in counts]
    stages[0] = "E" + stages[0]
    stages[mtp_stage] += "m" * mtp_layers
    stages[-1] += "L"
    return "|".join(stages)


def flag_layout(schedule: str, pp: int, virtual_stages: int, layers: int, mtp_layers: int = 0) -> str:
    """The --pipeline-model-parallel-layout that states clustersim's even split of ``layers``
    (clustersim.parallel.pipeline.model_split) where Megatron-Core builds that split only from a
    flag (``megatron_even_split_refusal``: 126 layers on pp 16, 40 layers per rank over 14 chunks),
    else "": the one rule of the Megatron export and of the sweep's rows (clustersim.sweep.result)."""
    if megatron_even_split_refusal(layers, pp, virtual_stages) is None:
        return ""
    return layout_string(model_split(stage_graph(schedule, pp, virtual_stages), layers, mtp_layers), mtp_layers)


def split_is_set(layout) -> bool:
    """Whether ``layout`` (a ParallelLayout) sets one of the framework split settings."""
    return bool(layout.first_stage_layers or layout.last_stage_layers or layout.account_for_embedding
                or layout.account_for_loss or layout.pipeline_layout)


def weight_of(field: str, value) -> int:
    """``account_for_embedding`` / ``account_for_loss`` as a layer count: false 0, true 1, or N."""
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_LAYERS:
        raise InputError(f"parallel.{field}", value, f"true, false or a number of layers from 0 to {MAX_LAYERS}")
    return value


def framework_split(layout, layers: int, mtp_layers: int = 0) -> tuple[int, ...]:
    """Decoder layers of each model stage of ``layout`` (a ParallelLayout that sets a split, see
    :func:`split_is_set`), checked; InputError names the field and what is allowed."""
    pp, schedule = layout.pp, layout.schedule
    graph = stage_graph(schedule, pp, layout.virtual_stages)
    stages = graph.num_model_stages
    uneven = bool(layout.first_stage_layers or layout.last_stage_layers)
    weights = bool(layout.account_for_embedding or layout.account_for_loss)
    if layout.layers_per_stage:
        raise InputError("parallel.layers_per_stage", list(layout.layers_per_stage),
                         "left out when first_stage_layers, last_stage_layers, account_for_embedding, "
                         "account_for_loss or pipeline_layout sets the split")
    if layout.pipeline_layout and (uneven or weights):
        raise InputError("parallel.pipeline_layout", layout.pipeline_layout,
                         "left out with first_stage_layers, last_stage_layers, account_for_embedding or "
                         "account_for_loss (Megatron-Core refuses the combination)")
    if uneven and weights:
        field = "first_stage_layers" if layout.first_stage_layers else "last_stage_layers"
        raise InputError(f"parallel.{field}", getattr(layout, field),
                         "left out with account_for_embedding / account_for_loss (Megatron-Core refuses the "
                         "combination)")
    if layout.pipeline_layout:
        _rank_order(schedule, "pipeline_layout", layout.pipeline_layout)
        counts = layout_counts(layout.pipeline_layout, layers, mtp_layers, pp, stages)
    elif uneven:
        field = "first_stage_layers" if layout.first_stage_layers else "last_stage_layers"
        _rank_order(schedule, field, getattr(layout, field))
        counts = uneven_counts(layers, pp, stages // pp, layout.first_stage_layers, layout.last_stage_layers)
    else:
        counts = weighted_counts(layers, stages, weight_of("account_for_embedding", layout.account_for_embedding),
                                 weight_of("account_for_loss", layout.account_for_loss), pp, graph.chunks
                                 if schedule == "interleaved-1f1b" else 1)
    empty = empty_ranks(graph, counts)
    if empty:
        field, value = _setting(layout)
        raise InputError(field, value, f"a split that leaves every pipeline rank a decoder layer, the embedding "
                         f"or the loss (rank {empty[0]} would hold nothing: layers per stage {list(counts)})")
    return counts


def empty_ranks(graph: StageGraph, counts) -> list[int]:
    """The pipeline ranks of ``graph`` that would hold nothing with ``counts`` decoder layers per model
    stage: no layer, not model stage 0 (the embedding) and not the last (the output layer and the loss).
    The one rule of a layerless rank, for a framework split and for ``parallel.layers_per_stage``
    (clustersim.parallel.balance.check_layers_per_stage) alike: a rank may hold only the embedding
    or only the loss (Megatron-Core's layout ``E|t*16|t*16|L``), never nothing."""
    ends = {0, graph.num_model_stages - 1}     # the embedding's model stage and the loss's
    return [r for r in range(graph.pp) if not ends & set(graph.rank_model_stages(r))
            and sum(counts[m] for m in set(graph.rank_model_stages(r))) < 1]


def _setting(layout) -> tuple[str, object]:
    for field in SPLIT_FIELDS:
        if getattr(layout, field):
            return f"parallel.{field}", getattr(layout, field)
    return "parallel.pp", layout.pp


def _rank_order(schedule: str, field: str, value) -> None:
    if schedule not in RANK_ORDER_SCHEDULES:
        raise InputError(f"parallel.{field}", value,
                         f"left out with {schedule}: it names Megatron's stage order (chunk * pp + rank), which "
                         f"the schedules {', '.join(RANK_ORDER_SCHEDULES)} run")


def uneven_counts(layers: int, pp: int, chunks: int, first: int, last: int) -> tuple[int, ...]:
    """Megatron-Core's uneven first/last pipeline stages (``first``/``last`` 0 = not set): layers
    of each model stage ``chunk * pp + rank``; InputError where Megatron-Core raises."""
    for field, value in (("first_stage_layers", first), ("last_stage_layers", last)):
        if value and pp < 2:
            raise InputError(f"parallel.{field}", value, "left out when pp = 1 (it sets the layers of the first or "
                             "last of several pipeline ranks)")
        if value and value % chunks:
            raise InputError(f"parallel.{field}", value,
                             f"a multiple of virtual_stages ({chunks}): the rank's layers split evenly over its chunks")
    field = "first_stage_layers" if first else "last_stage_layers"
    value = first or last
    middle_ranks = pp - (1 if first else 0) - (1 if last else 0)
    middle_layers = layers - first - last
    per_rank = [0] * pp
    if middle_ranks == 0:
        if middle_layers:
            raise InputError(f"parallel.{field}", value,
                             f"first_stage_layers + last_stage_layers = model.layers ({layers}) when pp = 2")
    else:
        each = middle_layers // middle_ranks if middle_layers > 0 else 0
        if middle_layers <= 0 or each * middle_ranks != middle_layers or each % chunks:
            raise InputError(f"parallel.{field}", value,
                             f"a value that leaves the {middle_ranks} middle pipeline ranks an equal, positive "
                             f"multiple of virtual_stages ({chunks}) layers each (model.layers {layers} - first - last "
                             f"= {middle_layers})")
        per_rank = [each] * pp
    if first:
        per_rank[0] = first
    if last:
        per_rank[-1] = last
    return tuple(per_rank[g % pp] // chunks for g in range(pp * chunks))


def weighted_counts(layers: int, stages: int, embedding: int, loss: int, pp: int = 0,
                    virtual_stages: int = 1) -> tuple[int, ...]:
    """The embedding and the loss counted as ``embedding`` and ``loss`` layers in an even split of
    ``stages`` model stages, extra layers to the first stages (torchtitan's rule, which equals
    Megatron-Core's wherever Megatron-Core accepts the job; see the module docstring). ``pp`` and
    ``virtual_stages``: the layout the stages come from (0: ``stages`` ranks), for the error, which
    names ``parallel.virtual_stages`` where the ranks hold several interleaved chunks, else ``parallel.pp``."""
    effective = layers + embedding + loss
    if effective < stages:
        pp = pp or stages
        per_rank = stages // pp
        field, value, most = (("parallel.virtual_stages", virtual_stages, effective // pp)
                              if virtual_stages > 1 and effective >= pp else ("parallel.pp", pp, effective // per_rank))
        raise InputError(field, value, (f"at most {most}: " if most else "") + "each model stage takes at least one "
                         f"effective layer, and pp ({pp}) x {per_rank} stage(s) per rank = {stages} model stages "
                         f"exceed model.layers + account_for_embedding + account_for_loss ({effective})")
    base, extra = divmod(effective, stages)
    counts = [base + (1 if i < extra else 0) for i in range(stages)]
    if stages > 1:
        # torchtitan's balance check ("input_weight (3) exceeds minimum layers per stage (2)",
        # torchtitan/distributed/pipeline_parallel.py _generate_llm_fqn_per_model_part at fb3b230e2):
        # each weight at most the least share, base, even where the first stage's share is base + 1
        for field, weight, where in (("parallel.account_for_embedding", embedding, "first"),
                                     ("parallel.account_for_loss", loss, "last")):
            if weight > base:
                raise InputError(field, weight, f"at most the least layers per stage of the split ({base}: "
                                 f"{effective} effective layers over {stages} stages; torchtitan refuses a "
                                 f"larger weight on the {where} stage)")
    counts[0] -= embedding
    counts[-1] -= loss
    return tuple(counts)


_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_REPEAT = re.compile(r"([^()|*\d])\*(\d+)")


def parse_layout(text: str) -> tuple[str, ...]:
    """The stages of a Megatron-Core layout string, each as its letters (``"Et|(tt|)*2,tL"`` ->
    ``("Et", "tt", "tt", "tL")``); InputError for anything else."""
    field = "parallel.pipeline_layout"
    allowed = ("stages separated by '|' of E (embedding), t (decoder layer), m (MTP module), L (loss), with "
               "(...)*n and x*n repeats and cosmetic commas, e.g. 'Et|(tt|)*30,mL'")
    if not isinstance(text, str) or not text:
        raise InputError(field, text, allowed)
    body = text.replace(",", "")
    if set(body) - set(LAYOUT_CHARS + "|()*0123456789"):
        raise InputError(field, text, allowed)

    def expand(pattern: re.Pattern[str], s: str) -> str:
        size = len(s)
        for m in pattern.finditer(s):
            size += len(m.group(1)) * int(m.group(2)) - len(m.group(0))
            if size > MAX_LAYOUT_CHARS:
                raise InputError(field, text, f"{allowed}, expanding to at most {MAX_LAYOUT_CHARS} characters")
        return pattern.sub(lambda m: m.group(1) * int(m.group(2)), s)

    body = expand(_REPEAT, expand(_GROUP, body))
    if set(body) - set(LAYOUT_CHARS + "|"):
        raise InputError(field, text, allowed)   # a stray bracket, '*' or number
    return tuple(body.split("|"))


def layout_chunks(text: str, pp: int) -> int:
    """Stages per pipeline rank of a Megatron-Core layout string: its stages over ``pp``, which
    Megatron-Core takes as the virtual pipeline size, running the interleaved schedule when it is
    above 1 (megatron/training/arguments.py validate_args: the layout's stage count must be a
    multiple of the pipeline size, ``virtual_pipeline_model_parallel_size = stages // pp``);
    InputError where it is not a multiple."""
    stages = len(parse_layout(text))
    if pp < 1 or stages % pp:
        raise InputError("parallel.pipeline_layout", text,
                         f"a multiple of pp ({pp}) stages separated by '|' (pp x virtual stages; more than pp "
                         f"runs parallel.schedule interleaved-1f1b); it has {stages}")
    return stages // pp


def layout_schedule(text: str, pp: int, schedule: str, stated: set[str]) -> dict[str, object]:
    """The schedule and virtual stages a ``pipeline_layout`` sets (docs/scenario.md: it sets the
    virtual stages too): a layout of ``pp`` stages sets nothing; one of more stages per rank runs
    interleaved 1F1B with that many virtual stages, as Megatron-Core does (``layout_chunks``), where
    ``parallel.schedule`` is left out or interleaved-1f1b; a stated schedule of one stage per rank
    (gpipe, 1f1b, zb-h1, zb-2p, dualpipe) is refused. ``stated``: the fields the scenario gives
    (a stated ``virtual_stages`` is kept and checked against the layout by ``layout_counts``).
    The V schedules' refusal is ``_rank_order``'s."""
    chunks = layout_chunks(text, pp)
    if chunks == 1:
        return {}
    if "schedule" in stated and schedule != "interleaved-1f1b":
        if schedule not in RANK_ORDER_SCHEDULES:
            return {}
        raise InputError("parallel.schedule", schedule,
                         f"interleaved-1f1b or left out: parallel.pipeline_layout has {chunks * pp} stages, "
                         f"{chunks} per pipeline rank (pp {pp}), which Megatron-Core runs interleaved")
    return {"schedule": "interleaved-1f1b", **({} if "virtual_stages" in stated else {"virtual_stages": chunks})}


def layout_counts(text: str, layers: int, mtp_layers: int, pp: int, stages: int) -> tuple[int, ...]:
    """Decoder layers of each stage of a Megatron-Core layout string, checked against the model and
    the ``stages`` model stages (``pp * virtual_stages``)."""
    field = "parallel.pipeline_layout"
    parts = parse_layout(text)
    if len(parts) != stages:
        raise InputError(field, text, f"{stages} stages (pp * virtual_stages) separated by '|', a multiple of pp "
                         f"({pp}) with parallel.schedule interleaved-1f1b and virtual_stages left out; it has "
                         f"{len(parts)}")
    whole = "".join(parts)
    if whole.count("E") != 1 or "E" not in parts[0]:
        raise InputError(field, text, "the embedding E once, in the first stage")
    if whole.count("L") != 1 or "L" not in parts[-1]:
        raise InputError(field, text, "the loss L once, in the last stage")
    if whole.count("t") != layers:
        raise InputError(field, text, f"model.layers ({layers}) decoder layers t; it has {whole.count('t')}")
    if whole.count("m") != mtp_layers:
        raise InputError(field, text, f"model.mtp_layers ({mtp_layers}) MTP modules m; it has {whole.count('m')}")
    if mtp_layers:
        mtp_rule(text, parts, pp)
    return tuple(p.count("t") for p in parts)


def mtp_rule(text: str, parts: tuple[str, ...], pp: int) -> None:
    """Megatron-Core's placement of the MTP modules in a layout (megatron/core/transformer/
    pipeline_parallel_layer_layout.py ``validate_layer_layout``): all in one stage, that stage the
    last virtual stage of its pipeline rank (stage index >= (chunks - 1) * pp), after every decoder
    layer, and the loss L the layout's last letter. The stage may be on another rank than the
    loss's (Megatron's "mtp_standalone": DeepSeek-V3's ``Et*3|(tt|)*29,m|L``). InputError naming the rule."""
    field = "parallel.pipeline_layout"
    where = [i for i, part in enumerate(parts) if "m" in part]
    chunks = len(parts) // pp
    if len(where) > 1:
        raise InputError(field, text, "all MTP modules m in one stage (Megatron-Core: 'All of the MTP layers must be in "
                         "the same one virtual pipeline stage')")
    stage = where[0]
    if stage < (chunks - 1) * pp:
        raise InputError(field, text, f"the MTP modules m in the last virtual stage of their pipeline rank (stages "
                         f"{(chunks - 1) * pp} to {chunks * pp - 1} of {chunks * pp}; Megatron-Core: 'the MTP should be "
                         f"always in the last virtual pipeline stage of that rank'); it puts them in stage {stage}")
    whole = "".join(parts)
    if "t" in whole[whole.index("m"):]:
        raise InputError(field, text, "the MTP modules m after every decoder layer t (Megatron-Core: 'decoder layers "
                         "must be placed before MTP layers')")
    if whole[-1] != "L":
        raise InputError(field, text, "the loss L last, after the MTP modules m (Megatron-Core: 'The last layer must be "
                         "loss')")


def mtp_model_stage(layout, num_model_stages: int) -> int:
    """The model stage that runs the multi-token-prediction modules: the one whose layout stage holds
    the ``m``s where ``pipeline_layout`` places them (``mtp_rule``; a layout's stage order is the
    model stages' under the schedules that take one), else the last, with the loss."""
    if layout.pipeline_layout and "m" in layout.pipeline_layout:
        return next(i for i, part in enumerate(parse_layout(layout.pipeline_layout)) if "m" in part)
    return num_model_stages - 1
