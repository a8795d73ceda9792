"""Adapters of the kernels people use (kernels/peers.py), with fake library modules where the libraries are absent."""

import importlib.machinery
import importlib.metadata
import importlib.util
import sys
import types

import pytest
import torch

from kernels import peers
from specs.registry import resolve


def fake_module(monkeypatch, name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attributes)
    monkeypatch.setitem(sys.modules, name, module)
    return module


@pytest.fixture
def fake_liger(monkeypatch):
    calls = []

    class LigerSoftmaxFunction:
        @staticmethod
        def apply(x):
            calls.append(tuple(x.shape))
            return torch.softmax(x, -1)

    fake_module(monkeypatch, "liger_kernel")
    fake_module(monkeypatch, "liger_kernel.ops")
    fake_module(monkeypatch, "liger_kernel.ops.softmax", LigerSoftmaxFunction=LigerSoftmaxFunction)
    return calls


@pytest.fixture
def fake_flag_gems(monkeypatch):
    calls = []

    def op(name, function):
        def call(x, dim, half_to_float=False):
            calls.append((name, dim, half_to_float))
            return function(x, dim, dtype=torch.float32 if half_to_float else None)
        return call

    fake_module(monkeypatch, "flag_gems")
    fake_module(monkeypatch, "flag_gems.ops", softmax=op("softmax", torch.softmax),
                log_softmax=op("log_softmax", torch.log_softmax))
    return calls


@pytest.fixture
def fake_flag_gems_scaled(monkeypatch):
    """FlagGems' scaled_softmax_forward as 5.0.2 asserts its input: 4-D, fp16/bf16, rows of a multiple of 8 and of
    at most 16384, more than one query."""
    calls = []

    def scaled_softmax_forward(x, scale):
        assert x.dim() == 4 and x.dtype in (torch.float16, torch.bfloat16)
        assert x.size(3) % 8 == 0 and x.size(3) <= 16384 and x.size(2) > 1
        calls.append(tuple(x.shape))
        return torch.softmax(x.float() * scale, -1).to(x.dtype)

    fake_module(monkeypatch, "flag_gems")
    fake_module(monkeypatch, "flag_gems.ops", scaled_softmax_forward=scaled_softmax_forward)
    return calls


def test_flag_gems_scaled_softmax_is_called_within_its_asserts_and_refuses_beyond_its_limits(fake_flag_gems_scaled):
    """Rows of another length reach it padded with -inf, a lone query with a copy of itself; the result has the
    input's shape and values (its softmax is the scaled one with a scale of 1)."""
    spec = resolve("flag_gems_scaled")
    inputs = [torch.randn(2, 3, 5, 16, dtype=torch.float16), torch.randn(1, 2, 1, 13, dtype=torch.bfloat16),
              torch.randn(1, 1, 4, 32, dtype=torch.float16)[..., ::2]]  # rows of 16 with a column stride of 2
    for x in inputs:
        torch.testing.assert_close(spec.scaled_softmax(x, 0.125, -1), torch.softmax(x.float() * 0.125, -1).to(x.dtype))
    torch.testing.assert_close(spec.softmax(inputs[0], -1), torch.softmax(inputs[0].float(), -1).to(torch.float16))
    assert fake_flag_gems_scaled == [(2, 3, 5, 16), (1, 2, 2, 16), (1, 1, 4, 16), (2, 3, 5, 16)]
    for x, error in ((torch.randn(2, 8, 8, dtype=torch.float16), "must have rank 4"),
                     (torch.randn(1, 1, 2, 8), "x.dtype must be one of"),
                     (torch.randn(1, 1, 2, 8, dtype=torch.float16).transpose(2, 3), "dim must be the last")):
        with pytest.raises((TypeError, ValueError), match=error):
            spec.scaled_softmax(x, 0.5, 2 if "last" in error else -1)
    assert len(fake_flag_gems_scaled) == 4  # nothing refused reached the library
    assert spec.capabilities.row_limit("cuda") == 16384


@pytest.fixture
def fake_quack(monkeypatch):
    """QuACK's softmax as 0.6.5 takes its input: 2-D, row-major, rows of a multiple of 16 bytes starting on 16."""
    calls = []

    def softmax(x):
        assert x.dim() == 2 and x.is_contiguous() and x.data_ptr() % 16 == 0, "its kernel's layout"
        assert x.size(1) * x.element_size() % 16 == 0, "Input N is not divisible by vector size"
        calls.append(tuple(x.shape))
        return torch.softmax(x, -1)

    fake_module(monkeypatch, "quack", softmax=softmax)
    return calls


def test_the_adapters_are_registered_promising_nothing_and_refusing_as_their_libraries_do():
    for name in ("liger", "flag_gems", "inductor", "quack"):
        spec = resolve(name)
        assert not spec.clear_refusals and not spec.capabilities.promised("cuda"), name
    assert resolve("flag_gems").log_softmax is not None and resolve("inductor").capabilities.out_dtype


@pytest.mark.parametrize("name,op", [("liger", "softmax"), ("flag_gems", "softmax"), ("flag_gems", "log_softmax"),
                                     ("inductor", "softmax"), ("inductor", "log_softmax"), ("quack", "softmax")])
def test_an_adapter_refuses_what_its_kernel_does_not_declare_before_calling_its_library(
        monkeypatch, fake_liger, fake_flag_gems, fake_quack, name, op):
    """An input outside the declared capabilities is refused by the adapter, whatever the library
    would do with it: Inductor returns zeros for an int64 tensor, where eager torch raises."""
    compiled_calls = []
    monkeypatch.setattr(peers, "compiled", lambda function: lambda *args, **kwargs: compiled_calls.append(args))
    integers = torch.ones(2, 2, dtype=torch.int64)
    with pytest.raises(TypeError, match="x.dtype must be one of"):
        getattr(resolve(name), op)(integers, 0)
    assert not fake_liger and not fake_flag_gems and not fake_quack and not compiled_calls


@pytest.mark.parametrize("name,backend,reason", [
    ("flag_gems", "cpu", "FlagGems needs a GPU runtime; runs with --device cuda"),
    ("inductor", "cpu", "Inductor emits C++, not Triton, on the CPU; runs with --device cuda"),
    ("inductor", "npu", "not measured on npu; runs with --device cuda"),
    ("inductor", "cuda", None),
    ("quack", "cpu", "QuACK is CuTe DSL code for NVIDIA GPUs; runs with --device cuda"),
    ("quack", "npu", "not measured on npu; runs with --device cuda"),
])
def test_a_peer_that_cannot_run_on_a_backend_says_why(name, backend, reason):
    assert resolve(name).skip_reason(backend) == reason


@pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is not None, reason="liger-kernel is installed here")
def test_an_absent_library_skips_its_kernels_tests_naming_the_package(run_pytest):
    assert resolve("liger").skip_reason("cpu") == "needs liger-kernel, which is not installed (pip install liger-kernel)"
    result = run_pytest("-rs", "--kernel", "liger", "tests/kernel/test_refusals.py", "-k", "refused_exactly")
    assert result.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout[-2000:]  # judged on nothing
    assert "liger: needs liger-kernel, which is not installed" in result.stdout


def test_liger_is_called_inside_its_limits_and_refuses_beyond_them(fake_liger):
    liger = resolve("liger")
    assert liger.skip_reason("cpu") is None  # the library imports
    x = torch.randn(3, 5, 7)
    torch.testing.assert_close(liger.softmax(x, -1), torch.softmax(x, -1))
    assert fake_liger == [(3, 5, 7)]
    with pytest.raises(ValueError, match="dim must be the last dimension"):
        liger.softmax(x, 1)
    with pytest.raises(ValueError, match="exceeds the row limit of 65536"):
        liger.softmax(torch.zeros(1, peers.LIGER_MAX_ROW + 1), -1)
    with pytest.raises(TypeError, match="x.dtype"):
        liger.softmax(x.double(), -1)
    assert fake_liger == [(3, 5, 7)]  # nothing refused reached the library


def test_quack_is_called_on_its_layout_and_refuses_beyond_its_limits(fake_quack):
    """QuACK takes 2-D rows of a multiple of 16 bytes, starting on 16: other shapes reach it as such rows, other
    lengths padded with -inf (nothing added to the sum), and the result has the input's shape and values."""
    quack = resolve("quack")
    assert quack.skip_reason("cpu") and peers.QUACK.row_limit("cuda") == peers.QUACK_MAX_ROW
    inputs = [torch.randn(3, 5, 7),  # rows of 7 fp32: 28 bytes
              torch.randn(4, 24, dtype=torch.bfloat16)[:, 1:],  # rows of 23, a strided view
              torch.randn(2, 33)[:, 1:],  # rows of 32 fp32, not contiguous
              torch.randn(65)[1:].view(2, 32)]  # contiguous, starting 4 bytes past an alignment
    for x in inputs:
        torch.testing.assert_close(quack.softmax(x, -1), torch.softmax(x, -1))
    assert fake_quack == [(15, 8), (4, 24), (2, 32), (2, 32)]
    assert quack.softmax(torch.empty(2, 0), -1).shape == (2, 0) and quack.softmax(torch.empty(0, 4), -1).shape == (0, 4)
    with pytest.raises(ValueError, match="dim must be the last dimension"):
        quack.softmax(inputs[0], 1)
    with pytest.raises(TypeError, match="x.dtype"):
        quack.softmax(inputs[0].double(), -1)
    assert len(fake_quack) == 4  # nothing empty or refused reached the library


def test_quack_is_skipped_on_cards_older_than_hopper_and_where_it_does_not_import(monkeypatch, fake_quack):
    from specs import peers as records

    monkeypatch.setattr(records, "import_error", records.import_error.__wrapped__)  # not cached: the fake imports
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda: (8, 0))
    assert resolve("quack").skip_reason("cuda") == (
        "QuACK targets Hopper and Blackwell (compute capability 9.0 and newer); this card is 8.0")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda: (9, 0))
    assert resolve("quack").skip_reason("cuda") is None
    monkeypatch.setattr(records, "import_error", lambda module: "ImportError: libcute_dsl_runtime.so: cannot open")
    assert resolve("quack").skip_reason("cuda") == (
        "quack-kernels does not import here: ImportError: libcute_dsl_runtime.so: cannot open")


def test_flag_gems_gets_half_to_float_for_an_fp32_result_of_half_input(fake_flag_gems):
    gems = resolve("flag_gems")
    assert gems.skip_reason("cuda") is None
    x = torch.randn(4, 6, dtype=torch.float16)
    assert gems.softmax(x, 0, out_dtype=torch.float32).dtype == torch.float32
    assert gems.log_softmax(x, 1).dtype == torch.float16
    assert fake_flag_gems == [("softmax", 0, True), ("log_softmax", 1, False)]
    with pytest.raises(TypeError, match="out_dtype"):
        gems.softmax(x, 0, out_dtype=torch.bfloat16)


LIGER_VERSION = importlib.metadata.version("liger-kernel") if importlib.util.find_spec("liger_kernel") else None


@pytest.mark.skipif(LIGER_VERSION != "0.8.5", reason=f"the finding is about liger-kernel 0.8.5 (here: {LIGER_VERSION})")
@pytest.mark.xfail(strict=True, raises=RuntimeError, reason="docs/findings/liger-kernel.md: rows of length zero")
def test_liger_0_8_5_fails_on_rows_of_length_zero():
    from liger_kernel.ops.softmax import LigerSoftmaxFunction

    x = torch.empty(1, 0)
    assert LigerSoftmaxFunction.apply(x).shape == torch.softmax(x, -1).shape


def test_the_liger_adapter_refuses_rows_of_length_zero(fake_liger):
    with pytest.raises(ValueError, match="no rows of length zero"):
        resolve("liger").softmax(torch.empty(1, 0), -1)
    assert resolve("liger").softmax(torch.empty(0, 5), -1).shape == (0, 5)


FLAG_GEMS_VERSION = importlib.metadata.version("flag-gems") if importlib.util.find_spec("flag_gems") else None
flag_gems_5_0_2_on_a_gpu = pytest.mark.skipif(
    FLAG_GEMS_VERSION != "5.0.2" or not torch.cuda.is_available(),
    reason=f"the findings are about flag-gems 5.0.2 on a GPU (here: {FLAG_GEMS_VERSION}, "
           f"{'a' if torch.cuda.is_available() else 'no'} GPU)")


@flag_gems_5_0_2_on_a_gpu
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/findings/flag-gems.md 1: NaN rows in log_softmax")
def test_flag_gems_5_0_2_log_softmax_of_a_row_holding_a_nan_is_not_nan():
    from flag_gems import ops

    from harness.inputs.catalog import CATALOG

    x, _ = CATALOG["NaN dropped by the max"].make("cuda")
    assert torch.equal(ops.log_softmax(x, 1, False).isnan(), torch.log_softmax(x, 1).isnan())


@flag_gems_5_0_2_on_a_gpu
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/findings/flag-gems.md 2: NaN over a leading dim")
def test_flag_gems_5_0_2_softmax_over_a_leading_dim_drops_nan():
    from flag_gems import ops

    from harness.inputs.strategies import Case, Specials, Values

    x, _ = Case((1025, 16, 34), 0, torch.bfloat16, Values("normal", 0.001), specials=Specials(nan=0.01),
                seed=0).make("cuda")
    assert torch.equal(ops.softmax(x, 0, False).isnan(), torch.softmax(x, 0).isnan())


@flag_gems_5_0_2_on_a_gpu
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/findings/flag-gems.md 3: empty half_to_float")
def test_flag_gems_5_0_2_empty_half_to_float_softmax_keeps_the_half_dtype():
    from flag_gems import ops

    x = torch.empty(1, 0, dtype=torch.bfloat16, device="cuda")
    assert ops.softmax(x, 0, True).dtype == torch.softmax(x, 0, dtype=torch.float32).dtype


@pytest.mark.skipif(not torch.cuda.is_available() or not torch.__version__.startswith("2.11."),
                    reason=f"the finding is about torch 2.11's Inductor on a GPU (here: {torch.__version__}, "
                           f"{'a' if torch.cuda.is_available() else 'no'} GPU)")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/findings/inductor.md: integer tensors")
def test_torch_2_11_compiled_softmax_of_integers_returns_zeros_where_eager_refuses():
    x = torch.tensor([[1, 2], [3, 5]], device="cuda")
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):  # NotImplementedError is one
        torch.softmax(x, 0)
    try:
        y = peers.compiled(torch.softmax)(x, 0)
    except Exception:  # refusing, as eager torch does, is as good as a correct result
        return
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), 0))


def backward_judged_as_unknown(name: str, case_text: str, op: str = "softmax_backward"):
    """The kernel ``name``'s softmax (or log_softmax) backward on the recipe ``case_text`` (on CUDA), judged as a
    kernel of unknown construction: a verdict whose ``ok`` says whether every element is within the bound of a
    correct one."""
    from harness.judging.judge import judge_softmax, unknown_construction
    from harness.replay import parse_case
    from specs.operations import OPERATIONS

    call = parse_case(case_text).call(OPERATIONS[op], "cuda", "cuda")
    kernel = resolve(name)
    return judge_softmax(unknown_construction(kernel), call, kernel.run(call), replay=case_text)


ON_A_GPU_WITH_TORCH_2_11 = pytest.mark.skipif(
    not torch.cuda.is_available() or not torch.__version__.startswith("2.11."),
    reason=f"the finding is about torch 2.11 on a GPU (here: {torch.__version__}, "
           f"{'a' if torch.cuda.is_available() else 'no'} GPU)")


@ON_A_GPU_WITH_TORCH_2_11
@pytest.mark.parametrize("case", [  # docs/findings/softmax-backward.md 1: the wrong sign in fp16, 8.4 ULP in bf16
    "Case((15,), 0, torch.float16, Values('zeros'), Layout((0,), (1,), pad=3), seed=11108, "
    "grad=Values('far-above', 1e6))",
    "Case((257, 2), 0, torch.bfloat16, Values('zeros'), Layout((0, 1), (1, 1), pad=3), seed=10308, "
    "grad=Values('normal', 4.0))"], ids=["float16", "bfloat16"])
@pytest.mark.xfail(strict=True, reason="docs/findings/softmax-backward.md 1: products rounded to the input dtype")
def test_torch_2_11_cuda_softmax_backward_of_half_inputs_is_within_a_correct_constructions_bound(case):
    assert backward_judged_as_unknown("torch", case).ok


@pytest.mark.skipif(LIGER_VERSION != "0.8.5" or not torch.cuda.is_available(),
                    reason=f"the finding is about liger-kernel 0.8.5 on a GPU (here: {LIGER_VERSION})")
@pytest.mark.parametrize("case", [
    "Case((31,), 0, torch.float16, Values('uniform'), Layout((0,), (1,), pad=3), seed=11201, "
    "grad=Values('dominant', 50.0))",
    "Case((1025,), 0, torch.bfloat16, Values('zeros'), Layout((0,), (1,), pad=3), seed=10408, "
    "grad=Values('uniform', 30.0))"], ids=["float16", "bfloat16"])
@pytest.mark.xfail(strict=True, reason="docs/findings/softmax-backward.md 2: grad * y in the input dtype")
def test_liger_0_8_5_softmax_backward_of_half_inputs_is_within_a_correct_constructions_bound(case):
    assert backward_judged_as_unknown("liger", case).ok


@flag_gems_5_0_2_on_a_gpu
@pytest.mark.parametrize("op", ["softmax_backward", "log_softmax_backward"])
@pytest.mark.parametrize("case", [
    "Case((32, 2), 0, torch.float32, Values('equal'), Layout((1, 0), (1, 1)), seed=12202, grad=Values('underflow'))",
    "Case((2, 1), 1, torch.float16, Values('uniform'), Layout((0, 1), (1, 1), pad=3), seed=11001, "
    "grad=Values('equal'))"], ids=["transposed", "padded"])
@pytest.mark.xfail(strict=True, reason="docs/findings/softmax-backward.md 3: a non-contiguous output read as contiguous")
def test_flag_gems_5_0_2_backward_of_a_non_contiguous_output_is_right(case, op):
    assert backward_judged_as_unknown("flag_gems", case, op).ok


@flag_gems_5_0_2_on_a_gpu
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/findings/scaled-softmax.md 1: a -inf first tile")
def test_flag_gems_5_0_2_scaled_softmax_of_a_row_whose_first_tile_is_neg_inf_is_not_nan():
    """A row of 4104 whose first 4096 logits are -inf (a left-padded attention row): its online softmax rescales by
    exp(-inf - (-inf)) = NaN (an H100: NaN; with 128 leading -inf, right)."""
    from flag_gems import ops

    x = torch.randn(1, 1, 2, 4104, dtype=torch.float16, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    x[..., :4096] = -torch.inf
    assert not ops.scaled_softmax_forward(x, 1.0).isnan().any()


@ON_A_GPU_WITH_TORCH_2_11
@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/findings/scaled-softmax.md 2: a unit-stride dim 0")
def test_torch_2_11_compiled_scaled_softmax_over_a_unit_stride_dim_0_of_logits_near_1e30_is_not_nan():
    """softmax(x * s, 0) compiled, over columns of 16 equal logits of 1e30 laid out with dim 0 of unit stride: NaN in
    every entry on an H100 (0.0625 is right; the same values in a contiguous tensor, or over the last dim, come out
    right)."""
    x = torch.full((2, 16), 1e30, device="cuda").t()  # strides (1, 16)
    assert not peers.inductor_scaled_softmax(x, 0.15811388194561005, 0).isnan().any()
