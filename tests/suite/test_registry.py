"""Kernel selection: registered names, module:function paths, declared capabilities."""

import inspect

import pytest
import torch

import specs
from harness.plugins.session import session_of
from kernels import torch_softmax
from specs.registry import USER_CONTRACT, Capabilities, resolve


def test_every_registered_kernel_and_torch_are_selected_by_default_but_the_peers(request):
    names = [spec.name for spec in specs.registered() if spec.by_default]
    assert "torch" in names and "fused_softmax" in names and "liger" not in names
    if not request.config.getoption("kernel"):
        assert [spec.name for spec in session_of(request.config).kernels] == names


def test_a_path_resolves_to_a_callable_held_to_torchs_contract():
    spec = resolve("kernels.torch_softmax:softmax")
    assert spec.softmax is torch_softmax.softmax
    assert spec.capabilities == USER_CONTRACT
    assert USER_CONTRACT.refusal(torch.zeros(2, 3, 4).transpose(0, 2), 1) is None


def test_a_callable_may_declare_narrower_capabilities(monkeypatch):
    def only_fp32(x, dim):
        return torch.softmax(x, dim)

    only_fp32.capabilities = Capabilities(dtypes=frozenset({torch.float32}))
    monkeypatch.setattr(torch_softmax, "only_fp32", only_fp32, raising=False)
    spec = resolve("kernels.torch_softmax:only_fp32")
    assert isinstance(spec.capabilities.refusal(torch.zeros(2, dtype=torch.float16), -1), TypeError)


def test_a_precision_model_takes_the_one_call(monkeypatch):
    """A user's ``precision`` takes the whole call (oracles.call.Call); one of another signature (the old
    (backend, x, dim, log)) is refused by name, not judged with a model that cannot be called."""
    def softmax(x, dim):
        return torch.softmax(x, dim)

    softmax.precision = lambda backend, x, dim, log=False: None
    monkeypatch.setattr(torch_softmax, "old_precision", softmax, raising=False)
    with pytest.raises(ValueError, match=r"old_precision'.*precision\(call\) -> PrecisionProfile.*got precision"
                                         r"\(backend, x, dim, log=False\)"):
        resolve("kernels.torch_softmax:old_precision")
    softmax.precision = precision = lambda call: None
    assert inspect.unwrap(resolve("kernels.torch_softmax:old_precision").precision) is precision


def test_a_kernel_that_cannot_take_the_suites_calls_is_refused_at_start_naming_the_call(monkeypatch):
    """A softmax without dim, or a declared backward without y, would fail every test alike: refused when named."""
    def softmax(x):
        return torch.softmax(x, -1)

    monkeypatch.setattr(torch_softmax, "no_dim", softmax, raising=False)
    with pytest.raises(ValueError, match=r"no_dim'.*calls its softmax as softmax\(x, dim\); softmax\(x\) cannot"):
        resolve("kernels.torch_softmax:no_dim")

    def with_backward(x, dim):
        return torch.softmax(x, dim)

    with_backward.capabilities = Capabilities(backward=True)
    with_backward.softmax_backward = lambda grad, dim: grad
    monkeypatch.setattr(torch_softmax, "with_backward", with_backward, raising=False)
    with pytest.raises(ValueError, match=r"softmax backward as softmax_backward\(grad, y, dim\)"):
        resolve("kernels.torch_softmax:with_backward")
    with_backward.softmax_backward = lambda grad, y, dim: grad
    assert resolve("kernels.torch_softmax:with_backward").softmax_backward is with_backward.softmax_backward

    def without_out_dtype(x, dim):
        return torch.softmax(x, dim)

    without_out_dtype.capabilities = Capabilities(out_dtype=True)
    monkeypatch.setattr(torch_softmax, "without_out_dtype", without_out_dtype, raising=False)
    with pytest.raises(ValueError, match=r"softmax\(x, dim, out_dtype=torch.float32\)"):
        resolve("kernels.torch_softmax:without_out_dtype")


@pytest.mark.parametrize("selector,message", [
    ("kernels.torch_softmax:nothing_here", "no callable"),
    ("nowhere", "not a registered kernel"),
    ("examples/my_kernels.py", r"name the kernel's function .* \(--kernel examples/my_kernels\.py:FUNCTION\)"),
    ("../mine/k.py", r"as path/to/file\.py:function \(--kernel \.\./mine/k\.py:FUNCTION\)"),
])
def test_bad_selectors_are_refused(selector, message):
    with pytest.raises(ValueError, match=message):
        resolve(selector)


def test_a_user_kernel_path_runs_the_suite(run_pytest):
    result = run_pytest("-v", "--device", "cpu", "--kernel", "kernels.torch_softmax:softmax",
                        "tests/kernel/test_refusals.py", "-k", "refused_exactly")
    assert result.returncode == 0, result.stdout[-2000:]
    assert "kernels: kernels.torch_softmax:softmax (declares no precision: judged by the loosest known " \
           "arithmetic's bounds" in result.stdout
    assert ("rows drawn up to 4096 elements (32768 for seams and the sides of declared boundaries), 32768 an input"
            in result.stdout)  # cpu's caps
    assert "capabilities[kernels.torch_softmax:softmax] PASSED" in result.stdout


def test_a_kernel_files_neighbours_are_imported_but_never_taken_for_the_suites_modules(run_pytest, tmp_path):
    """A user's folder beside the kernel's file: the file imports its neighbours, at its import and in its calls;
    files there named as modules the suite imports late (the report's plots, Hypothesis's) must not replace them."""
    (tmp_path / "my_softmax.py").write_text("import torch\nimport first_helper\n\n\ndef softmax(x, dim):\n"
                                            "    import later_helper\n    return later_helper.softmax(x, dim)\n")
    (tmp_path / "first_helper.py").write_text("")
    (tmp_path / "later_helper.py").write_text("import torch\n\n\ndef softmax(x, dim):\n"
                                              "    return torch.softmax(x, dim)\n")
    for module in ("secrets", "matplotlib"):
        (tmp_path / f"{module}.py").write_text(f"raise ImportError('the folder of my_softmax.py gave {module}')\n")
    result = run_pytest("--device", "cpu", "--kernel", f"{tmp_path / 'my_softmax.py'}:softmax",
                        "tests/kernel/test_accuracy.py", "-k", "test_output_within and -softmax- and float32",
                        f"--accuracy-report={tmp_path / 'report'}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "report" / "ulp_histograms.png").is_file()


@pytest.mark.parametrize("imports, said", [
    ("import report", "imports report by a name its folder's own module has, and got another"),
    ("from report import SCALE", "raised ImportError: cannot import name 'SCALE'"),
], ids=["import", "from-import"])
def test_a_kernel_files_neighbour_named_as_a_module_imported_before_it_is_named_in_the_refusal(tmp_path, imports, said):
    """report.py beside a kernel: the kernel's 'import report' gets the suite's report package, imported before it,
    and the kernel would fail, or run with the wrong module, for a reason the user cannot see."""
    (tmp_path / "report.py").write_text("SCALE = 1.0\n")
    stem = f"neighbour_report_kernel{'' if imports.startswith('import') else '_from'}"
    (tmp_path / f"{stem}.py").write_text(f"import torch\n{imports}\n\n\ndef softmax(x, dim):\n"
                                         "    return torch.softmax(x, dim)\n")
    with pytest.raises(ValueError) as refused:
        resolve(f"{tmp_path / stem}.py:softmax")
    message = str(refused.value)
    assert said in message, message
    assert "'report' is already " in message and f"never reaches its neighbour in {tmp_path}" in message, message
