"""A run finished by a ctxvar that did not record the corpus sample (no corpus_hash in counts.json or run.json) is
refused by load_results with a line that says why the sample reads None, not only that the samples differ."""

from __future__ import annotations

import pytest

from ctxvar.config.hashes import CORPUS_HASH
from ctxvar.errors import StatisticsError
from ctxvar.files.atomic import read_json, write_json
from ctxvar.results import load_results
from ctxvar.stats.provenance import FINISH

from .test_results import finished_run


def test_a_run_of_a_ctxvar_before_the_sample_was_recorded_says_so(tmp_path):
    folder = tmp_path / "study"
    finished_run(folder)
    for path in (folder / "corpus" / "counts.json", folder / "a" / "run.json", folder / "b" / "run.json"):
        record = read_json(path)
        record.pop(CORPUS_HASH)
        write_json(record, path)
    with pytest.raises(StatisticsError) as error:
        load_results(folder)
    message = str(error.value)
    assert "\n" not in message and message.endswith(FINISH)
    assert "(None: a file written before ctxvar recorded the sample)" in message
