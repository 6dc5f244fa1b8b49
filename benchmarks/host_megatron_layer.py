"""One Megatron-Core transformer layer's host time on this CPU (a child process of host_megatron.py).

Runs megatron-core's own TransformerLayer (local implementation: no Transformer Engine) forward
and backward on CPU at tiny shapes, so that what remains is Python, dispatcher and autograd time:
the host side of issuing the layer (clustersim.compute.host ``MEGATRON_LAYER_HOST_S``). Needs
``pip install megatron-core==0.16.1`` (not a clustersim dependency). Prints one JSON line.

Patches that let the CUDA code paths run on CPU (none changes what the layer computes):
  P1 torch.cuda.Stream / Event / current_stream / stream -> stand-ins, so that the alltoall
     dispatcher's host-copy machinery runs; the stand-in event counts the explicit syncs.
  P2 torch.cuda.current_device -> 'cpu'.
  P3 (--grouped) megatron.core.transformer.moe.grouped_gemm_util.ops -> torch._grouped_mm, so
     the grouped-GEMM expert path runs; its CPU time is timed apart (``gmm``): on a GPU the grouped
     GEMM is its launches, which clustersim counts as kernels.
  P4 the CUDA RNG tracker's fork() -> a null context.
  P5 moe_utils.te_general_gemm = None (0.16.1 names it without Transformer Engine).
  P6 (--grouped, fp32) GroupedMLP asserts config.bf16: its module alone gets a config copy with bf16.
"""
import argparse
import collections
import contextlib
import json
import os
import statistics
import sys
import time
import traceback
import warnings

import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument('--kind', default='moe')
ap.add_argument('--experts', type=int, default=128)
ap.add_argument('--topk', type=int, default=8)
ap.add_argument('--hidden', type=int, default=64)
ap.add_argument('--heads', type=int, default=32)
ap.add_argument('--kv', type=int, default=4)
ap.add_argument('--head_dim', type=int, default=4)
ap.add_argument('--ffn', type=int, default=64)
ap.add_argument('--moe_ffn', type=int, default=16)
ap.add_argument('--tokens', type=int, default=256)
ap.add_argument('--iters', type=int, default=30)
ap.add_argument('--repeats', type=int, default=5)
ap.add_argument('--grouped', action='store_true')
ap.add_argument('--count', action='store_true')
ap.add_argument('--stacks', action='store_true')
ap.add_argument('--aux', type=float, default=1e-3)
ap.add_argument('--force_lb', action='store_true')
ap.add_argument('--bf16', action='store_true')
ap.add_argument('--threads', type=int, default=1)
ap.add_argument('--cuda', action='store_true', help='run on the GPU (no stand-ins; wall time per pass, synchronised)')
args = ap.parse_args()
torch.set_num_threads(args.threads)

# ---------------- P1/P2: fake CUDA stream machinery -----------------
SYNC_COUNT = collections.Counter()
GMM_T = [0.0, 0.0]  # seconds inside torch._grouped_mm (CPU loops over experts internally), fwd / bwd


class FakeEvent:
    def __init__(self, *a, **k):
        pass

    def synchronize(self):
        SYNC_COUNT['event.synchronize'] += 1
        if args.stacks:
            SYNC_COUNT['stack:' + ''.join(traceback.format_stack(limit=4)[:-1])] += 1

    def record(self, *a, **k):
        pass

    def wait(self, *a, **k):
        pass


class FakeStream:
    def __init__(self, *a, **k):
        pass

    def wait_stream(self, *a, **k):
        pass

    def record_event(self, *a, **k):
        return FakeEvent()

    def synchronize(self):
        SYNC_COUNT['stream.synchronize'] += 1

    def wait_event(self, *a, **k):
        pass

    def __eq__(self, o):
        return o is self

    def __ne__(self, o):
        return o is not self

    def __hash__(self):
        return id(self)


if not args.cuda:
    _CUR = FakeStream()
    torch.cuda.Stream = FakeStream
    torch.cuda.Event = FakeEvent
    torch.cuda.current_stream = lambda *a, **k: _CUR
    torch.cuda.stream = lambda s=None: contextlib.nullcontext()
    torch.cuda.current_device = lambda: 'cpu'
    torch.Tensor.record_stream = lambda self, s: None
else:
    torch.cuda.set_device(0)
DEVICE = 'cuda' if args.cuda else 'cpu'

os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
os.environ.setdefault('MASTER_PORT', str(29500 + os.getpid() % 1000))
warnings.filterwarnings('ignore')
torch.distributed.init_process_group('nccl' if args.cuda else 'gloo', rank=0, world_size=1)

from megatron.core import parallel_state  # noqa: E402 (after the stand-ins)
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402 (after the stand-ins)
from megatron.core.transformer.moe import moe_utils  # noqa: E402 (after the stand-ins)
from megatron.core.transformer.spec_utils import build_module  # noqa: E402 (after the stand-ins)
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402 (after the stand-ins)

parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=1)
# P4: CUDA RNG tracker fork() (get/set CUDA rng state) -> no-op context
from megatron.core.tensor_parallel.random import get_cuda_rng_tracker  # noqa: E402 (after the stand-ins)

_tr = get_cuda_rng_tracker()
_tr.fork = lambda *a, **k: contextlib.nullcontext()
# P5: megatron-core 0.16.1 bug without TE: moe_utils.te_general_gemm is referenced but never defined
moe_utils.te_general_gemm = None

if args.grouped:
    import megatron.core.transformer.moe.experts as experts_mod
    import megatron.core.transformer.moe.grouped_gemm_util as gg_util

    class _GMM(torch.autograd.Function):
        # mirrors grouped_gemm.ops.gmm: fwd 1 grouped GEMM, bwd 2 grouped GEMMs (dgrad, wgrad)
        @staticmethod
        def forward(ctx, a, b, offs):
            ctx.save_for_backward(a, b, offs)
            t0 = time.perf_counter()
            y = torch._grouped_mm(a, b, offs=offs)
            GMM_T[0] += time.perf_counter() - t0
            return y

        @staticmethod
        def backward(ctx, g):
            a, b, offs = ctx.saved_tensors
            g = g.contiguous()
            t0 = time.perf_counter()
            ga = torch._grouped_mm(g, b.transpose(1, 2), offs=offs)
            gb = torch._grouped_mm(a.t(), g, offs=offs)
            GMM_T[1] += time.perf_counter() - t0
            return ga, gb, None

    class _Ops:
        @staticmethod
        def gmm(a, b, batch_sizes, trans_b=False):
            # batch_sizes is a CPU tensor in Megatron (grouped_gemm wants host sizes)
            offs = torch.cumsum(batch_sizes, 0).to(device=a.device, dtype=torch.int32)
            if trans_b:
                b = b.transpose(1, 2)
            return _GMM.apply(a.contiguous(), b, offs)

    gg_util.ops = _Ops
    gg_util.grouped_gemm = True
    gg_util.grouped_gemm_is_available = lambda: True
    gg_util.assert_grouped_gemm_is_available = lambda: None
    experts_mod.gg = gg_util

moe = args.kind in ('moe', 'moe_only')
cfg = dict(
    num_layers=1,
    hidden_size=args.hidden,
    num_attention_heads=args.heads,
    num_query_groups=args.kv,
    kv_channels=args.head_dim,
    ffn_hidden_size=args.ffn,
    gated_linear_unit=True,
    activation_func=F.silu,
    add_bias_linear=False,
    normalization='RMSNorm',
    qk_layernorm=True,
    use_cpu_initialization=True,
    params_dtype=torch.bfloat16 if args.bf16 else torch.float32,
    bf16=args.bf16,
    hidden_dropout=0.0,
    attention_dropout=0.0,
    bias_activation_fusion=False,
    masked_softmax_fusion=False,
    persist_layer_norm=False,
    bias_dropout_fusion=False,
    apply_rope_fusion=False,
    gradient_accumulation_fusion=False,
    transformer_impl='local',
)
import inspect as _insp  # noqa: E402 (after the stand-ins)

if moe and 'moe_use_legacy_grouped_gemm' in _insp.signature(TransformerConfig).parameters:
    cfg['moe_use_legacy_grouped_gemm'] = args.grouped
if moe:
    cfg.update(
        num_moe_experts=args.experts,
        moe_router_topk=args.topk,
        moe_ffn_hidden_size=args.moe_ffn,
        moe_token_dispatcher_type='alltoall',
        moe_router_load_balancing_type='aux_loss' if args.aux > 0 else 'none',
        moe_aux_loss_coeff=args.aux,
        moe_grouped_gemm=args.grouped,
        moe_router_pre_softmax=False,
        moe_router_force_load_balancing=args.force_lb,
        moe_permute_fusion=False,
        moe_router_fusion=False,
    )
config = TransformerConfig(**cfg)
_sk = dict(num_experts=args.experts if moe else None, moe_grouped_gemm=args.grouped,
           qk_layernorm=True, normalization='RMSNorm')
if 'moe_use_legacy_grouped_gemm' in _insp.signature(get_gpt_layer_local_spec).parameters:
    _sk['moe_use_legacy_grouped_gemm'] = args.grouped
spec = get_gpt_layer_local_spec(**_sk)
layer = build_module(spec, config=config, layer_number=1).to(DEVICE)
layer.train()
if args.grouped and not args.bf16:
    # P6: GroupedMLP.forward asserts config.bf16; give only the experts module a config copy with bf16=True
    import copy as _copy
    _c = _copy.copy(layer.mlp.experts.config)
    _c.bf16 = True
    layer.mlp.experts.config = _c

S, B = args.tokens, 1
x = torch.randn(S, B, args.hidden, dtype=torch.bfloat16 if args.bf16 else torch.float32, device=DEVICE,
                requires_grad=True)
mask = None
if args.kind in ('moe_only', 'dense_mlp_only'):
    mod = layer.mlp
    def fwd():
        out, _ = mod(x)
        return out
else:
    mask = torch.triu(torch.ones(1, 1, S, S, dtype=torch.bool, device=DEVICE), diagonal=1)
    def fwd():
        out, _ = layer(x, attention_mask=mask)
        return out
print('module:', type(layer.mlp).__name__, getattr(layer.mlp, 'experts', None).__class__.__name__
      if moe else '', 'dispatcher:', type(getattr(layer.mlp, 'token_dispatcher', None)).__name__,
      file=sys.stderr)


def step():
    out = fwd()
    loss = out.float().sum()
    loss.backward()


def timed(n):
    tf = tb = 0.0
    GMM_T[0] = GMM_T[1] = 0.0
    for _ in range(n):
        t0 = time.perf_counter()
        out = fwd()
        loss = out.float().sum()
        if args.cuda:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        loss.backward()
        if args.cuda:
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        tf += t1 - t0
        tb += t2 - t1
        x.grad = None
        for p in layer.parameters():
            p.grad = None
        moe_utils.clear_aux_losses_tracker() if hasattr(moe_utils, 'clear_aux_losses_tracker') else None
    return tf / n * 1e3, tb / n * 1e3, GMM_T[0] / n * 1e3, GMM_T[1] / n * 1e3


for _ in range(5):
    step()
res = {}
if args.count:
    from torch.utils._python_dispatch import TorchDispatchMode

    NOKERNEL = {'view', '_unsafe_view', 'slice', 'select', 'transpose', 't', 'expand', 'permute',
                'unsqueeze', 'squeeze', 'as_strided', 'detach', 'alias', 'narrow', 'split',
                'split_with_sizes', 'unbind', 'reshape', 'empty', 'empty_strided', 'empty_like',
                'new_empty', 'new_empty_strided', '_reshape_alias', 'unflatten', 'flatten',
                'lift_fresh', 'numpy_T', 'view_as', 'expand_as', 'chunk', 'movedim', 'set_'}

    class Counter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.c = collections.Counter()
            self.n = 0
            self.k = 0
            self.kc = collections.Counter()
            self.sync_like = collections.Counter()

        def __torch_dispatch__(self, func, types, a=(), kw=None):
            kw = kw or {}
            name = str(func.overloadpacket.__name__)
            self.n += 1
            self.c[name] += 1
            if name not in NOKERNEL:
                self.k += 1
                self.kc[name] += 1
            if name in ('_local_scalar_dense', 'nonzero', 'masked_select', 'item', 'is_nonzero',
                        'equal', 'repeat_interleave', '_assert_async', 'unique', '_unique2'):
                st = [f for f in traceback.extract_stack() if 'megatron' in f.filename]
                where = (f"{st[-1].filename.split('site-packages/')[-1]}:{st[-1].lineno} {st[-1].name}"
                         if st else 'autograd/backward')
                self.sync_like[name + ' @ ' + where] += 1
            return func(*a, **kw)

    SYNC_COUNT.clear()
    cf = Counter()
    with cf:
        out = fwd()
        loss = out.float().sum()
    fsync = dict(SYNC_COUNT)
    SYNC_COUNT.clear()
    cb = Counter()
    with cb:
        loss.backward()
    bsync = dict(SYNC_COUNT)
    res['fwd_ops'] = cf.n
    res['bwd_ops'] = cb.n
    res['fwd_kernel_ops'] = cf.k
    res['bwd_kernel_ops'] = cb.k
    res['fwd_top_kernel'] = cf.kc.most_common(30)
    res['bwd_top_kernel'] = cb.kc.most_common(30)
    res['fwd_sync_like_ops'] = dict(cf.sync_like)
    res['bwd_sync_like_ops'] = dict(cb.sync_like)
    res['fwd_explicit_event_sync'] = fsync
    res['bwd_explicit_event_sync'] = bsync
    x.grad = None
    for p in layer.parameters():
        p.grad = None
else:
    reps = [timed(args.iters) for _ in range(args.repeats)]
    res['fwd_ms_reps'] = [round(r[0], 3) for r in reps]
    res['bwd_ms_reps'] = [round(r[1], 3) for r in reps]
    res['fwd_ms_median'] = round(statistics.median(r[0] for r in reps), 3)
    res['bwd_ms_median'] = round(statistics.median(r[1] for r in reps), 3)
    res['fwd_gmm_ms_median'] = round(statistics.median(r[2] for r in reps), 3)
    res['bwd_gmm_ms_median'] = round(statistics.median(r[3] for r in reps), 3)
res['args'] = vars(args)
res['loadavg'] = os.getloadavg()
print(json.dumps(res))
