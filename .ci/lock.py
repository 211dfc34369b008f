"""Write ``constraints.txt``: the version of every package that ``pip install -e ".[test,slurm]"`` brings in, as
installed in the environment the whole suite last passed in, so that a fresh machine installs what was tested.

    python .ci/lock.py            # after `python -m pytest -m ""` passed: rewrite constraints.txt and envs/*.yaml
    python .ci/lock.py --check    # exit 1 when they differ from what this environment would write

The lock holds the dependency closure of ctxvar's requirements (the ``test`` and ``slurm`` extras included), read
from the installed packages' own metadata, with environment markers evaluated here. torch is left out, with what
only torch requires: the README's first install line pins the CPU build, and a GPU workstation keeps the CUDA torch
it has (a constraint would make pip replace it). ``envs/*.yaml`` pin the same versions of the packages they name
(conda-forge's names, which are PyPI's but for a few: :data:`CONDA_NAMES`).
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "constraints.txt"
ENVS = sorted((ROOT / "envs").glob("*.yaml"))
EXTRAS = ("test", "slurm")
LEFT_OUT = {"torch"}  # pinned by the README's first line, or the workstation's own CUDA build
CONDA_NAMES = {"pytorch": "torch", "python-xxhash": "xxhash", "matplotlib-base": "matplotlib"}
HEADER = (
    '# The versions the whole suite (python -m pytest -m "") last passed with, on Python {python}: the closure of\n'
    "# ctxvar's requirements with the extras {extras}, torch left out (README: Install). Written by\n"
    '# `python .ci/lock.py`; pip install -e ".[test]" -c constraints.txt installs them.\n'
)


def requirements_of(name: str, extras: tuple[str, ...] = ()) -> list[Requirement]:
    """The requirements of installed package ``name`` that apply here, with ``extras``."""
    found = []
    for text in distribution(name).requires or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in ("", *extras)):
            found.append(requirement)
    return found


def closure() -> dict[str, str]:
    """Every installed package ctxvar (with :data:`EXTRAS`) requires, directly or not, by its canonical name →
    its installed version; :data:`LEFT_OUT` and what only they require are not followed."""
    versions: dict[str, str] = {}
    pending = [(requirement.name, tuple(requirement.extras)) for requirement in requirements_of("ctxvar", EXTRAS)]
    seen: set[tuple[str, tuple]] = set()
    while pending:
        name, extras = pending.pop()
        key = canonicalize_name(name)
        if key in LEFT_OUT or (key, extras) in seen:
            continue
        seen.add((key, extras))
        try:
            versions[key] = distribution(name).version
        except PackageNotFoundError:
            sys.exit(f'{name} is required but not installed: pip install -e ".[{",".join(EXTRAS)}]" first')
        pending += [(requirement.name, tuple(requirement.extras)) for requirement in requirements_of(name, extras)]
    return versions


def lock_text(versions: dict[str, str]) -> str:
    python = ".".join(map(str, sys.version_info[:2]))
    lines = [f"{name}=={version}\n" for name, version in sorted(versions.items())]
    return HEADER.format(python=python, extras=", ".join(EXTRAS)) + "".join(lines)


def pinned_env(text: str, versions: dict[str, str]) -> str:
    """An ``envs/*.yaml`` with each package the lock holds pinned to its version (``name=version``)."""

    def pin(match: re.Match) -> str:
        name = match.group(2)
        version = versions.get(canonicalize_name(CONDA_NAMES.get(name, name)))
        return match.group(0) if version is None else f"{match.group(1)}{name}={version}"

    return re.sub(r"^(  - )([A-Za-z0-9_.\-]+)(?:[<>=!~][^\s#]*)?", pin, text, flags=re.M)


def main(argv: list[str]) -> int:
    versions = closure()
    wanted = {LOCK: lock_text(versions), **{env: pinned_env(env.read_text(), versions) for env in ENVS}}
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} differs from this environment's versions: python .ci/lock.py")
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
