"""An ``init: archive`` entry names one file, which holds one version of the model: ``revision`` or
``revisions`` on it are refused at start-up, as on a local model directory. Accepted, they were ignored:
``revisions: [a, b]`` made two checkpoints of the same weights and a checkpoint figure of nothing."""

from __future__ import annotations

import pytest

from ctxvar.config.checks import check_config
from ctxvar.config.schema import check_schema
from ctxvar.errors import ConfigError

from support.workflow_runs import DEMO

ARCHIVE = {"id": "zipped", "init": "archive", "archive": "m.zip", "sha256": {"model.safetensors": "0" * 64}}
GGUF = {"id": "quantized", "init": "archive", "gguf": "m.gguf", "sha256": {"m.gguf": "0" * 64}}


@pytest.mark.parametrize("entry", [ARCHIVE, GGUF])
@pytest.mark.parametrize("versions", [{"revision": "v1"}, {"revisions": ["step0", "step100"]}])
def test_a_revision_on_an_archive_is_refused_with_one_line(entry, versions):
    config = {**DEMO, "models": [{**entry, **versions}]}
    check_schema(config)
    with pytest.raises(ConfigError) as error:
        check_config(config)
    message = str(error.value)
    assert f"entry {entry['id']!r}" in message and "holds one version of the model" in message
    assert f"remove {next(iter(versions))}" in message and "\n" not in message


def test_an_archive_without_revisions_passes():
    config = {**DEMO, "models": [ARCHIVE]}
    check_schema(config)
    check_config(config)
