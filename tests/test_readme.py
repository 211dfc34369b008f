"""The README's install and test commands are exactly what CI runs."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commands_under(heading: str) -> list[str]:
    section = re.search(rf"^## {heading}\n(.*?)(?=^## )", (REPO / "README.md").read_text(), flags=re.M | re.S).group(1)
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_install_and_test_commands_in_order():
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    expected = commands_under("Install") + commands_under("Tests")
    assert [line for line in ci if line in expected] == expected


def test_readme_demo_command_uses_the_shipped_demo_config():
    assert commands_under("Quick start: the offline demo") == ["snakemake --cores 2 --configfile config/demo.yaml"]
    assert (REPO / "config" / "demo.yaml").exists()
