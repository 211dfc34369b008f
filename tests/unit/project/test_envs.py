"""The tested versions: constraints.txt locks every requirement within pyproject.toml's ranges; the conda
environments parse, each rule's env declares every package its code imports, and they pin the locked versions."""

import ast
import re
import sys
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from support.workflow_runs import REPO

CONDA_NAME = {
    "torch": "pytorch",
    "yaml": "pyyaml",
    "matplotlib": "matplotlib-base",
    "huggingface_hub": "huggingface_hub",
    "xxhash": "python-xxhash",
}
RULE = re.compile(  # a rule by its name, or one a loop makes (figures.smk): rule: with name: and an expression
    r"^\s*rule(?: (\w+):|:\s*name:\s*([\w.]+))"
    r".*?conda:\s*\"\.\./\.\./envs/(\w+)\.yaml\".*?script:\s*\"\.\./scripts/(\w+)\.py\"",
    re.M | re.S,
)


def locked_versions() -> dict[str, str]:
    """constraints.txt as {canonical name: version}."""
    lines = (REPO / "constraints.txt").read_text().splitlines()
    pins = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    assert all(len(pin.specifier) == 1 and next(iter(pin.specifier)).operator == "==" for pin in pins)
    return {canonicalize_name(pin.name): next(iter(pin.specifier)).version for pin in pins}


def test_the_lock_pins_every_requirement_but_torch_within_its_range():
    """Every requirement of ctxvar and of its test and slurm extras (the README's install line) has one version in
    constraints.txt, within pyproject.toml's range; torch has none, so a GPU workstation keeps its CUDA build."""
    table = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = table["optional-dependencies"]
    locked = locked_versions()
    assert "torch" not in locked
    for spec in table["dependencies"] + extras["test"] + extras["slurm"]:
        name = canonicalize_name(Requirement(spec).name)
        if name != "torch":
            assert name in locked, f"{name} is not in constraints.txt: python .ci/lock.py"
            assert Requirement(spec).specifier.contains(locked[name]), f"{name} {locked[name]} is outside {spec}"


def test_ci_and_the_readme_install_the_locked_versions():
    install = (REPO / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]" -c constraints.txt' in install


def requirement(spec: str) -> tuple[str, str]:
    name, _, bound = re.match(r"([A-Za-z0-9_.-]+)(\[.*\])?(.*)", spec).group(1, 2, 3)
    return name.lower(), bound.strip()


def env_packages(env: str) -> dict[str, str]:
    dependencies = yaml.safe_load((REPO / "envs" / f"{env}.yaml").read_text())["dependencies"]
    return dict(requirement(d) for d in dependencies if isinstance(d, str))


def ctxvar_file(name: str) -> Path | None:
    """The file of the ctxvar module (or package) ``name``, if there is one."""
    relative = REPO / "src" / Path(*name.split("."))
    return next((f for f in (relative.with_suffix(".py"), relative / "__init__.py") if f.exists()), None)


def imported_packages(path: Path, seen: set) -> set[str]:
    """Top-level third-party modules imported by ``path`` and, recursively, by the ctxvar modules it imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module.startswith("ctxvar")]
        else:
            continue
        for name in names:
            if not name.startswith("ctxvar"):
                found.add(name.split(".")[0])
            elif (target := ctxvar_file(name)) and target not in seen:  # from ctxvar.models import hub: the module
                seen.add(target)
                found |= imported_packages(target, seen)
    return {m for m in found if m not in sys.stdlib_module_names}


RULES = [
    (name or made, env, script)
    for name, made, env, script in RULE.findall(
        "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    )
]


def test_every_rule_with_a_script_has_an_env():
    scripts = sum(p.read_text().count("script:") for p in (REPO / "workflow" / "rules").glob("*.smk"))
    assert len(RULES) == scripts >= 16  # the regex finds every rule that runs a script


@pytest.mark.parametrize("rule, env, script", RULES, ids=[r[0] for r in RULES])
def test_rule_env_declares_what_its_code_imports(rule, env, script):
    packages = env_packages(env)
    needed = imported_packages(REPO / "workflow" / "scripts" / f"{script}.py", set()) - {"ctxvar"}
    missing = {m for m in needed if CONDA_NAME.get(m, m).lower() not in packages}
    assert not missing, f"rule {rule}: envs/{env}.yaml lacks {sorted(missing)}"


@pytest.mark.parametrize("env", ["extract", "analysis"])
def test_env_pins_the_locked_versions_within_pyproject_ranges(env):
    """Each package but Python and PyTorch (a CPU or CUDA build, as the machine has) is pinned to the version
    ``constraints.txt`` locks (``python .ci/lock.py`` writes both), which is within pyproject.toml's range."""
    table = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    gguf = [d for d in table["optional-dependencies"]["example"] if d.startswith("gguf")]  # GGUF checkpoints
    project = {canonicalize_name(Requirement(d).name): Requirement(d).specifier for d in table["dependencies"] + gguf}
    locked = locked_versions()
    pip_name = {
        "pytorch": "torch",
        "matplotlib-base": "matplotlib",
        "python-xxhash": "xxhash",
        "huggingface_hub": "huggingface-hub",
    }
    for name, bound in env_packages(env).items():
        if name == "pytorch":
            assert bound == str(project["torch"]), f"{name} in envs/{env}.yaml"
        elif name != "python":
            pip = pip_name.get(name, name)
            assert bound == f"={locked[pip]}", f"{name} in envs/{env}.yaml is not the locked {locked[pip]}"
            assert project[pip].contains(locked[pip]), f"{name} {locked[pip]} is outside pyproject.toml's range"


def test_the_testing_doc_names_the_locked_versions():
    text = " ".join((REPO / "docs" / "testing.md").read_text().split())
    section = text[text.index("## Tested versions") :]
    named = re.findall(r"([a-z][a-z0-9\-]+) (\d+(?:\.\d+)+)", section[: section.index("(Python")])
    locked = locked_versions()
    assert len(named) >= 10
    for name, version in named:
        expected = "2.13.0" if name == "torch" else locked[canonicalize_name(name)]
        assert version == expected, f"docs/testing.md names {name} {version}, constraints.txt {expected}"
