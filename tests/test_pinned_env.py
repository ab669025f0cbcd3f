"""The pinned environments (requirements/*.lock, written by scripts/lock) cover what they lock.

A dependency added to pyproject.toml or to a vLLM requirements file without running scripts/lock
would install unpinned on a fresh machine; these cases catch that before a newcomer does.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if match:
            pins[_name(match[1])] = match[2]
    return pins


def _requirements(path: Path) -> list[Requirement]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [Requirement(line) for line in lines if line]


def _project() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(text) for text in project["dependencies"] + project["optional-dependencies"]["test"]]


def _cases():
    yield pytest.param("test.lock", _project(), id="pyproject-and-test-extra")
    yield pytest.param("test.lock", _requirements(ROOT / "tests/requirements-vllm-0.23.txt"), id="suite-vllm-0.23")
    for source in sorted(ROOT.glob("tests/requirements-vllm-*.*.txt")):
        version = source.stem.removeprefix("requirements-vllm-")
        yield pytest.param(f"vllm-{version}.lock", _requirements(source), id=f"venv-vllm-{version}")


@pytest.mark.parametrize("lock, requirements", list(_cases()))
def test_every_requirement_is_pinned_within_its_range(lock, requirements):
    pins = _pins(LOCKS / lock)
    missing = [str(req) for req in requirements if _name(req.name) not in pins]
    outside = [f"{req} (locked {pins[_name(req.name)]})" for req in requirements
               if _name(req.name) in pins and not req.specifier.contains(pins[_name(req.name)], prereleases=True)]
    assert not missing and not outside, f"requirements/{lock} is stale (run bash scripts/lock): " \
        f"not pinned {missing}, outside the range {outside}"


@pytest.mark.parametrize("lock", sorted(path.name for path in LOCKS.glob("*.lock")))
def test_a_lock_names_no_machine_of_ours(lock):
    text = (LOCKS / lock).read_text(encoding="utf-8")
    assert not re.search(r"file://|/opt/|/work/|/tmp/|/root/|--find-links|--index-url|--extra-index-url", text)
    assert all(line.startswith(("#", " ")) or "==" in line for line in text.splitlines() if line), \
        "every requirement of a lock is pinned with =="


@pytest.mark.parametrize("lock", sorted(path.name for path in LOCKS.glob("*.lock")))
def test_a_lock_pins_versions_pypi_serves(lock):
    """PyPI serves no local builds (`torch==2.13.0+cpu`): a lock naming one fails on a machine whose pip
    sees PyPI alone. scripts/lock writes the version only; pip takes a CPU build where it sees one."""
    text = (LOCKS / lock).read_text(encoding="utf-8")
    labelled = re.findall(r"^\S+==\S+\+\S+$", text, flags=re.M)
    assert labelled == [], f"requirements/{lock} pins a local build PyPI does not serve: {labelled}"
    assert re.search(r"^torch==[0-9.]+$", text, flags=re.M) or "torch" not in _pins(LOCKS / lock)


def test_lock_diff_takes_a_local_build_for_the_locked_version(tmp_path):
    (tmp_path / "a.lock").write_text("torch==2.13.0\nclick==8.1.8\n")
    assert _lock_diff(tmp_path, "torch==2.13.0+cpu\nclick==8.1.8\n", "a.lock").splitlines() == [
        "--latest: 0 package(s) differ from a.lock"]
    assert _lock_diff(tmp_path, "torch==2.14.0+cpu\nclick==8.1.8\n", "a.lock").splitlines()[1:] == [
        "  torch 2.14.0+cpu (locked 2.13.0)"]


def test_the_scripts_run_python3_as_a_stock_debian_has_it():
    """A Debian/Ubuntu system has python3, not python: the scripts call $PYTHON (default python3)."""
    for script in ("scripts/test", "scripts/vllm-venv", "scripts/fresh-run"):
        code = [line for line in (ROOT / script).read_text(encoding="utf-8").splitlines()
                if not line.lstrip().startswith("#")]
        assert not [line for line in code if re.search(r"(^|[\s(])python(\s|$)", line)], script


def test_the_virtualenv_the_readme_makes_is_ignored():
    assert ".venv/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_the_readme_makes_the_virtualenv_before_it_installs():
    """A Debian/Ubuntu system Python refuses `pip install` (externally managed): the virtualenv comes first."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.index("python3 -m venv") < readme.index("pip install .")


def test_the_test_command_installs_the_lock():
    script = (ROOT / "scripts/test").read_text(encoding="utf-8")
    assert "-r requirements/test.lock" in script and "--no-deps -e ." in script


def _lock_diff(tmp_path: Path, freeze: str, *args: str) -> str:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(ROOT / "scripts/lock-diff"), *args], input=freeze,
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_test_command_names_what_a_shared_interpreter_has_beside_the_lock(tmp_path):
    """CI runs the suite in a shared interpreter: a pytest plugin it had (pytest-benchmark) loaded into
    every pytest the tests started. scripts/test names such packages before the verdict."""
    (tmp_path / "a.lock").write_text("click==8.1.8\n    # via optkit\npyyaml==6.0.2\n")
    (tmp_path / "more.txt").write_text("# comment\nuvicorn==0.54.0\n")
    freeze = "click==8.1.8\nPyYAML==6.0.2\nuvicorn==0.54.0\nvllm==0.23.0\npytest_benchmark==5.1.0\n"
    out = _lock_diff(tmp_path, freeze, "--beside", "a.lock", "more.txt", "vllm==0.23.0")
    assert out.splitlines()[1:] == ["  pytest-benchmark==5.1.0"] and "beside a.lock" in out
    assert _lock_diff(tmp_path, freeze.replace("pytest_benchmark==5.1.0\n", ""), "--beside", "a.lock", "more.txt",
                      "vllm==0.23.0") == ""
    assert _lock_diff(tmp_path, "click==8.2.0\npyyaml==6.0.2\n", "a.lock").splitlines() == [
        "--latest: 1 package(s) differ from a.lock:", "  click 8.2.0 (locked 8.1.8)"]
    script = (ROOT / "scripts/test").read_text(encoding="utf-8")
    assert "lock-diff --beside requirements/test.lock tests/requirements-vllm-cli.txt vllm==0.23.0" in script


def test_a_failed_install_stops_the_vllm_venv_build_and_what_it_started(tmp_path):
    """scripts/test builds the vLLM virtualenv beside the install; when the install fails, the build
    stops whole: the processes scripts/vllm-venv started (pip) too, not only its shell."""
    import os
    import signal
    import subprocess
    import time

    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts/test").write_text((ROOT / "scripts/test").read_text(encoding="utf-8"))
    pidfile = tmp_path / "builder.pid"
    # the stand-in build starts a child (as scripts/vllm-venv starts pip) and writes its pid
    (tmp_path / "scripts/vllm-venv").write_text(f"sleep 120 & echo $! > {pidfile}\nwait\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "shellcheck").write_text("#!/bin/sh\nexit 0\n")  # present: scripts/test installs none
    # `python3 -m pip install …` fails, once the build has started; other calls (the virtualenv check) pass
    (bin_dir / "python3").write_text(f"#!/bin/sh\ncase \"$*\" in *'-m pip'*) ;; *) exit 0;; esac\n"
                                     f"while [ ! -s {pidfile} ]; do sleep 0.1; done\n"
                                     "echo 'pip: no such package' >&2\nexit 1\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "scripts/test"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "pip: no such package" in proc.stderr
    child = int(pidfile.read_text())
    for _ in range(50):  # the kill is sent at exit; give the child a moment to go
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("scripts/test exited but the vLLM virtualenv build's child still runs")


# What PyPI's torch (its CUDA build on x86_64 Linux, the one a pip that sees PyPI alone installs) pins exactly,
# read from torch 2.13.0's wheel metadata: a lock naming another version of these cannot install beside it.
TORCH_PYPI_PINS = {"2.13.0": {"triton": "3.7.1"}}


@pytest.mark.parametrize("lock", sorted(path.name for path in LOCKS.glob("*.lock")))
def test_a_lock_installs_beside_pypis_torch(lock):
    pins = _pins(LOCKS / lock)
    wanted = TORCH_PYPI_PINS.get(pins.get("torch", ""), {})
    clash = {name: (pins[name], version) for name, version in wanted.items() if name in pins and pins[name] != version}
    assert clash == {}, f"requirements/{lock}: PyPI's torch {pins.get('torch')} pins {clash} (locked, torch's)"
