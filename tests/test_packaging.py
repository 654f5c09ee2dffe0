"""The install promises: pyproject and environment.yml agree, the README's
commands and example work, the console script answers."""
import re
import subprocess
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path


import capacity

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower()


def test_every_runtime_dependency_is_in_environment_yml():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = {_name(r) for r in pyproject["project"]["dependencies"]}
    extras = {_name(r) for deps in pyproject["project"]["optional-dependencies"].values() for r in deps}
    conda = set()
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"\s*-\s+([A-Za-z0-9_.\-]+)", line)
        if m and m.group(1) not in ("pip", "-e"):
            conda.add(_name(m.group(1)))
    assert runtime <= conda, f"missing from environment.yml: {sorted(runtime - conda)}"
    assert extras <= conda, f"extras missing from environment.yml: {sorted(extras - conda)}"
    assert pyproject["project"]["requires-python"] == ">=3.10"


def test_public_surface_is_declared():
    for name in capacity.__all__:
        assert hasattr(capacity, name), name
    assert (ROOT / "capacity" / "py.typed").exists()


def test_version_from_the_command_line():
    out = subprocess.run([sys.executable, "-m", "capacity", "--version"], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == f"capacity {capacity.__version__}"


def test_readme_has_exactly_two_quick_start_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", quick, flags=re.S)
    commands = [line for b in blocks for line in b.strip().splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2, commands
    assert "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "venv" in ci and "ci:test-command" in ci


def test_readme_python_example_prints_what_the_readme_says():
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"```python\n(.*?)```", readme, flags=re.S)
    assert m, "README has no python example"
    code = m.group(1)
    expected = re.findall(r"# prints: (.*)", code)
    assert expected, "the README example states what it prints"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines() == [e.strip() for e in expected]
