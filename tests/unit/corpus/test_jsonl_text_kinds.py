"""A JSON Lines corpus whose text column holds a number, list or object on some row names that row: ``datasets``
reads a column of mixed kinds as JSON, and the line said only "column 'text' holds extension<arrow.json>"."""

from __future__ import annotations

import pytest

from ctxvar.corpus.sentences import sample_sentences
from ctxvar.errors import CorpusError

CORPUS = {
    "source": "jsonl",
    "name": None,
    "config_name": None,
    "split": "train",
    "text_column": "text",
    "fraction": 1.0,
    "max_words": 20,
    "seed": 0,
    "sampling": "paper",
}


@pytest.mark.parametrize(
    "value, kind", [("5", "a number"), ('["x", "y"]', "a list"), ('{"a": 1}', "an object"), ("true", "true or false")]
)
def test_the_first_row_that_is_not_text_is_named(tmp_path, value, kind):
    path = tmp_path / "corpus.jsonl"
    path.write_text(f'{{"text": "a b"}}\n{{"text": null}}\n{{"text": {value}}}\n{{"text": "c"}}\n')
    with pytest.raises(CorpusError) as error:
        sample_sentences({**CORPUS, "path": str(path)})
    message = str(error.value)
    assert message.startswith(f"corpus.path: {path} line 3: 'text' is {kind}") and "\n" not in message
