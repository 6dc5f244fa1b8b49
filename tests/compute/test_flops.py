from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from clustersim.compute import model_flops_per_step
from clustersim.workload.model_spec import ModelSpec
from tests.conftest import preset


def eq7(b: int, s: int, layers: int, h: int, v: int) -> float:
    """Korthikanti et al. 2022 eq. 7: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)), in exact arithmetic."""
    return float(72 * b * s * layers * h**2 * (1 + Fraction(s, 6 * h) + Fraction(v, 12 * layers * h)))


def test_gpt3_175b_equals_eq7_exactly():
    m = preset("gpt3-175b")
    # 72 * 1536 * 2048 * 96 * 12288^2 * (1 + 2048/73728 + 51200/14155776) = 3.3862e18
    assert model_flops_per_step(m, 1536) == eq7(1536, 2048, 96, 12288, 51200)
    assert abs(model_flops_per_step(m, 1536) - 3.38620e18) / 3.38620e18 < 1e-5


@given(st.integers(1, 64), st.sampled_from([512, 1024, 2048, 4096]), st.integers(1, 96),
       st.sampled_from([8, 16, 32]), st.integers(1000, 200000))
def test_dense_gpt_matches_eq7(b, s, layers, heads, v):
    h = heads * 128
    m = ModelSpec("x", layers=layers, hidden=h, heads=heads, vocab=v, seq_len=s)
    got, want = model_flops_per_step(m, b), eq7(b, s, layers, h, v)
    assert got == want


def test_gqa_swiglu_moe_generalisation():
    # llama3-8b, one sequence: per layer fwd = 2 T h (h + 2*1024) + 2 T h^2 + 4 s^2 h + 2 T h f * 3
    m = preset("llama3-8b")
    t, h, s, f = 8192, 4096, 8192, 14336
    per_layer = 2 * t * h * (h + 2 * 1024) + 2 * t * h * h + 4 * s * s * h + 2 * t * h * f * 3
    want = 3 * (32 * per_layer + 2 * t * h * 128256)
    assert model_flops_per_step(m, 1) == want
    moe = preset("mixtral-8x7b")   # top-2 of 8 experts: MLP counted twice, router 2 T h E
    dense = ModelSpec("d", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, ffn_act="swiglu",
                      vocab=32000, seq_len=4096)
    t = 4096
    extra = 3 * 32 * (2 * t * 4096 * 14336 * 3 + 2 * t * 4096 * 8)
    assert model_flops_per_step(moe, 1) == model_flops_per_step(dense, 1) + extra
