"""compile-super-kernel and static-kernel-compile-fixes: the patched Python, run on CPU.

The patched modules import vLLM and torch_npu, so the classes and functions the patches change are
taken out of the patched files with ``ast`` and run with fakes for what they import: a logger that
records warnings, ``vllm_ascend.utils.is_310p``, ``torch_npu.__version__``, and a stand-in for the
CausalConv1d custom op that records what it is called with. On 0.30.0rc2 compile-super-kernel is
upstream: the same checks run on the pristine tree's own code (the option, the hash factor, the
default that follows enable_static_kernel); static-kernel-compile-fixes' 0001 runs on both trees
(0002 has no 0.30 counterpart: npu_causal_conv1d_custom is gone). Whether npugraph_ex accepts
super_kernel_optimize and whether CausalConv1d compiles as a static kernel needs an NPU.
"""

from __future__ import annotations

import __future__
import ast
import functools
import os
import sys
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for compat_support

from compat_support import pristine  # noqa: E402
from patched_tree import patched_tree  # noqa: E402

pytestmark = [pytest.mark.tree]


UPSTREAM = "0.30.0rc2"  # compile-super-kernel is upstream there


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return patched_tree(tmp_path_factory.mktemp("compile"), ["compile-super-kernel", "static-kernel-compile-fixes"])


@pytest.fixture(scope="module", params=["0.23.0", "0.30.0rc2"])
def cann_tree(request, tmp_path_factory):
    """A release tree with static-kernel-compile-fixes' patches for it applied."""
    return patched_tree(tmp_path_factory.mktemp(f"cann-{request.param}"), ["static-kernel-compile-fixes"],
                        request.param)


def run_defs(path: Path, qualnames: list[str], namespace: dict, undecorated: bool = False) -> dict:
    """Execute the definitions ``qualnames`` (``name`` or ``Class.method``) of ``path`` in ``namespace``
    (``undecorated``: without their decorators, e.g. a pydantic validator run as a plain function)."""
    module = ast.parse(path.read_text(encoding="utf-8"), str(path))
    nodes = []
    for qualname in qualnames:
        node: ast.AST = module
        for part in qualname.split("."):
            node = next(n for n in node.body if getattr(n, "name", None) == part or _assigns(n, part))
        if undecorated:
            node.decorator_list = []
        nodes.append(node)
    code = compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)
    return namespace


def _assigns(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets)


class Logger:
    def __init__(self):
        self.warnings: list[str] = []

    def warning(self, msg, *args, **kwargs):
        self.warnings.append(msg % args if args else msg)

    warning_once = warning

    def info(self, *args, **kwargs):
        pass

    info_once = info


@pytest.fixture
def fake_modules(monkeypatch):
    """vllm_ascend.utils (for is_310p) and torch_npu, as the patched code imports them."""
    on_310p = SimpleNamespace(value=False)
    package, utils = ModuleType("vllm_ascend"), ModuleType("vllm_ascend.utils")
    utils.is_310p = lambda: on_310p.value
    monkeypatch.setitem(sys.modules, "vllm_ascend", package)
    monkeypatch.setitem(sys.modules, "vllm_ascend.utils", utils)
    monkeypatch.setitem(sys.modules, "torch_npu", SimpleNamespace(__version__="2.10.0.post4"))
    return on_310p


@pytest.fixture
def config_cls(tree, fake_modules):
    logger = Logger()
    ns = run_defs(tree / "vllm_ascend/ascend_config.py", ["AscendCompilationConfig"], {"logger": logger})
    return ns["AscendCompilationConfig"], logger, fake_modules


# --------------------------------------------------------------------------- compile-super-kernel


def test_enable_super_kernel_is_a_real_key(config_cls):
    cls, logger, _ = config_cls
    config = cls(enable_static_kernel=True, enable_super_kernel=True)
    assert config.enable_super_kernel is True and logger.warnings == []
    assert cls().enable_super_kernel is False


def test_super_kernel_requires_static_kernel(config_cls):
    cls, _, _ = config_cls
    with pytest.raises(AssertionError, match="enable_static_kernel"):
        cls(enable_super_kernel=True)


def test_310p_disables_super_kernel_with_a_warning(config_cls):
    cls, logger, on_310p = config_cls
    on_310p.value = True
    config = cls(enable_static_kernel=True, enable_super_kernel=True)
    assert (config.enable_npugraph_ex, config.enable_static_kernel, config.enable_super_kernel) == (False,) * 3
    assert any("super kernel" in w for w in logger.warnings)


@pytest.mark.parametrize("kwargs, warned", [
    ({"fuse_muls_add": False}, []),
    ({"enable_npu_graph_ex": False}, ["Ignoring unknown ascend_compilation_config keys: enable_npu_graph_ex"]),
    ({"zeta": 1, "alpha": 2}, ["Ignoring unknown ascend_compilation_config keys: alpha, zeta"]),
], ids=["known-kwargs-key", "typo-from-the-docs", "sorted"])
def test_unknown_keys_are_named(config_cls, kwargs, warned):
    cls, logger, _ = config_cls
    cls(**kwargs)
    assert logger.warnings == warned


def backend_options(tree, config, vllm_config) -> dict:
    ns = run_defs(tree / "vllm_ascend/compilation/compiler_interface.py",
                  ["_compute_decode_cudagraph_batch_sizes", "_configure_backend"],
                  {"os": os, "logger": Logger()})
    captured = {}
    ns["_configure_backend"](SimpleNamespace(), config, vllm_config,
                             process_kwargs_options=lambda cfg, kw: captured.update(kw["options"]))
    return captured


@pytest.fixture
def vllm_config(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    return SimpleNamespace(
        speculative_config=None, scheduler_config=SimpleNamespace(max_num_seqs=8),
        compilation_config=SimpleNamespace(cudagraph_capture_sizes=[1, 2, 4, 8, 16]))


@pytest.mark.parametrize("static, super_, expected", [
    (True, True, True), (True, False, None), (False, False, None),
], ids=["static+super", "static-only", "neither"])
def test_super_kernel_option_beside_static_kernel(tree, config_cls, vllm_config, static, super_, expected):
    cls, _, _ = config_cls
    options = backend_options(tree, cls(enable_static_kernel=static, enable_super_kernel=super_), vllm_config)
    assert options.get("super_kernel_optimize") is expected
    assert options.get("static_kernel_compile") is (True if static else None)


@pytest.mark.parametrize("static, super_, expected", [
    (True, True, True), (True, False, None), (False, False, None),
], ids=["static+super", "static-only", "neither"])
def test_upstream_sets_the_same_option(vllm_config, static, super_, expected):
    """0.30.0rc2's own _configure_backend: super_kernel_optimize beside static_kernel_compile, as the patch did
    (upstream adds super_kernel_optimize_options)."""
    config = SimpleNamespace(enable_static_kernel=static, enable_super_kernel=super_)
    options = backend_options(pristine(UPSTREAM), config, vllm_config)
    assert options.get("super_kernel_optimize") is expected
    assert options.get("static_kernel_compile") is (True if static else None)


@pytest.mark.parametrize("given, expected", [
    ({"enable_static_kernel": True}, True),
    ({"enable_static_kernel": False}, False),
    ({"enable_static_kernel": True, "enable_super_kernel": False}, False),
    ({}, None),
], ids=["follows-static-on", "follows-static-off", "explicit-off-wins", "neither-given"])
def test_upstream_super_kernel_follows_static_kernel(given, expected):
    """0.30.0rc2 AscendCompilationConfig's before-validator: the upstream knob is enable_static_kernel."""
    from pydantic_core import ArgsKwargs

    ns = run_defs(pristine(UPSTREAM) / "vllm_ascend/ascend_config.py",
                  ["AscendCompilationConfig._default_super_kernel_to_static_kernel"], {"ArgsKwargs": ArgsKwargs, "Any": object},
                  undecorated=True)
    data = ns["_default_super_kernel_to_static_kernel"](None, dict(given))
    assert data.get("enable_super_kernel") is expected


def compile_hash(tree, config) -> str:
    ns = run_defs(tree / "vllm_ascend/compilation/compiler_interface.py", ["AscendCompiler.compute_hash"],
                  {"logger": Logger(), "get_ascend_config": lambda: SimpleNamespace(ascend_compilation_config=config)})
    return ns["compute_hash"](SimpleNamespace(), None)


def test_toggling_super_kernel_changes_the_compile_hash_only_when_on(tree, config_cls, fake_modules):
    cls, _, _ = config_cls
    static = compile_hash(tree, cls(enable_static_kernel=True))
    assert compile_hash(tree, cls(enable_static_kernel=True, enable_super_kernel=True)) != static
    # Off, the hash is 0.23.0's, so caches compiled before the patch stay valid.
    assert compile_hash(pristine(), SimpleNamespace(enable_npugraph_ex=True, enable_static_kernel=True)) == static


def test_upstream_hash_has_the_super_kernel_factor(fake_modules):
    on = SimpleNamespace(enable_npugraph_ex=True, enable_static_kernel=True, enable_super_kernel=True)
    off = SimpleNamespace(enable_npugraph_ex=True, enable_static_kernel=True, enable_super_kernel=False)
    assert compile_hash(pristine(UPSTREAM), on) != compile_hash(pristine(UPSTREAM), off)


# --------------------------------------------------------------------------- static-kernel 0002


OPTIONALS = ["bias_opt", "query_start_loc_opt", "cache_indices_opt", "initial_state_mode_opt",
             "num_accepted_tokens_opt"]


@pytest.fixture
def conv1d(tree):
    calls = []
    fake_torch = SimpleNamespace(
        int32=torch.int32, empty=torch.empty, Tensor=torch.Tensor, dtype=torch.dtype, device=torch.device,
        ops=SimpleNamespace(_C_ascend=SimpleNamespace(
            npu_causal_conv1d_custom=lambda *args, **kwargs: calls.append((args, kwargs)) or args[0])))
    ns = run_defs(tree / "vllm_ascend/ops/gdn.py",
                  ["_CAUSAL_CONV1D_OPTIONAL_INPUTS", "_npu_causal_conv1d", "_static_kernel_enabled", "_empty_input"],
                  {"torch": fake_torch, "functools": functools})
    return ns, calls


def call_conv1d(ns, **optionals):
    x = torch.zeros(3, 8, dtype=torch.bfloat16)
    kwargs = {name: None for name in OPTIONALS} | optionals
    ns["_npu_causal_conv1d"](torch.empty_like(x), x, torch.zeros(4, 8, dtype=torch.bfloat16),
                             conv_state=torch.zeros(2, 3, 8), activation_mode=1, pad_slot_id=-1, run_mode=1,
                             **kwargs)


def test_none_inputs_pass_through_without_static_kernel(conv1d):
    ns, calls = conv1d
    ns["_static_kernel_enabled"] = lambda: False
    call_conv1d(ns)
    assert all(calls[0][1][name] is None for name in OPTIONALS)


def test_static_kernel_gets_empty_placeholders_and_keeps_given_inputs(conv1d):
    ns, calls = conv1d
    ns["_static_kernel_enabled"] = lambda: True
    query_start_loc = torch.tensor([0, 3], dtype=torch.int32)
    call_conv1d(ns, query_start_loc_opt=query_start_loc)
    call_conv1d(ns)
    first, second = calls[0][1], calls[1][1]
    assert first["query_start_loc_opt"] is query_start_loc
    for name in OPTIONALS:
        assert second[name].numel() == 0 and second[name].ndim == 1
    assert second["bias_opt"].dtype == torch.bfloat16  # CausalConv1d pairs bias's dtype with x's
    assert {second[name].dtype for name in OPTIONALS[1:]} == {torch.int32}
    assert second["bias_opt"] is first["bias_opt"]  # one shared placeholder per dtype and device
    assert first["activation_mode"] == 1 and first["run_mode"] == 1


def test_static_kernel_gate_reads_the_ascend_config(conv1d, monkeypatch):
    ns, _ = conv1d
    compilation = SimpleNamespace(enable_static_kernel=True)
    config_module = ModuleType("vllm_ascend.ascend_config")
    config_module.get_ascend_config = lambda: SimpleNamespace(ascend_compilation_config=compilation)
    monkeypatch.setitem(sys.modules, "vllm_ascend", ModuleType("vllm_ascend"))
    monkeypatch.setitem(sys.modules, "vllm_ascend.ascend_config", config_module)
    assert ns["_static_kernel_enabled"]() is True


# --------------------------------------------------------------------------- static-kernel 0001


BUILD_TIME_INCLUDE = "-include/tmp/pip-build/csrc/common/include/cann_compat.h"


def generated_include_rewrite(tree) -> str:
    """The part of a generated op-implementation script that picks the cann_compat.h include."""
    path = tree / "csrc/cmake/scripts/util/ascendc_impl_build.py"
    impl_api = next(ast.literal_eval(n.value) for n in ast.parse(path.read_text(encoding="utf-8")).body
                    if _assigns(n, "IMPL_API"))
    # The values AdpBuilder._write_impl fills in, for an op with one input x.
    script = impl_api.format("Op", "para_check.REQUIRED_INPUT", "op", "x", "op", "", "", "x", "{}", "{}",
                             "op", "op", "op", "op.cpp")
    compile(script, "generated_op.py", "exec")  # the template still formats into valid Python
    start, end = script.index("    cann_compat_header ="), script.index("    origin_func_name =")
    return textwrap.dedent(script[start:end])


@pytest.mark.parametrize("shipped, expected", [
    (True, "-include{pyf_path}/cann_compat.h"), (False, BUILD_TIME_INCLUDE),
], ids=["installed-package", "build-tree-copy-of-the-script"])
def test_generated_script_includes_the_shipped_header(cann_tree, tmp_path, shipped, expected):
    if shipped:
        (tmp_path / "cann_compat.h").write_text("#pragma once\n")
    scope = {"os": os, "PYF_PATH": str(tmp_path),
             "options": ["-x", "cce", BUILD_TIME_INCLUDE, "-Wno-ignored-attributes", "-includeother.h"]}
    exec(generated_include_rewrite(cann_tree), scope)
    assert scope["options"] == ["-x", "cce", expected.format(pyf_path=tmp_path), "-Wno-ignored-attributes",
                                "-includeother.h"]
