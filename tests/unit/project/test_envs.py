"""Conda environments: they parse, each rule's env declares every package its code imports,
and their lower bounds agree with pyproject.toml."""

import ast
import re
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

from support.workflow_runs import REPO

CONDA_NAME = {
    "torch": "pytorch",
    "yaml": "pyyaml",
    "matplotlib": "matplotlib-base",
    "huggingface_hub": "huggingface_hub",
    "xxhash": "python-xxhash",
}
RULE = re.compile(
    r"^rule (\w+):.*?conda:\s*\"\.\./\.\./envs/(\w+)\.yaml\".*?script:\s*\"\.\./scripts/(\w+)\.py\"", re.M | re.S
)


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


RULES = RULE.findall("\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk"))))


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
def test_env_lower_bounds_match_pyproject(env):
    table = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    gguf = [d for d in table["optional-dependencies"]["example"] if d.startswith("gguf")]  # GGUF checkpoints
    project = dict(requirement(d) for d in table["dependencies"] + gguf)
    pip_name = {"pytorch": "torch", "matplotlib-base": "matplotlib", "python-xxhash": "xxhash"}
    for name, bound in env_packages(env).items():
        if name != "python":
            assert project[pip_name.get(name, name)] == bound, f"{name} in envs/{env}.yaml"
