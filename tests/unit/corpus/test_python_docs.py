"""The Python documentation as a corpus (ctxvar.corpus.python_docs): prose without headings, code or grammar, split
into sentences after full stops but not abbreviations; real English, with its provenance recorded."""

import json

from ctxvar.corpus.sentences import write_sentences


def test_python_docs_prose_drops_headings_code_and_grammar():
    from ctxvar.corpus.python_docs import prose_paragraphs

    text = (
        'The "if" statement\n******************\n\n'
        'The "if" statement is used for\nconditional execution:\n\n'
        '   if_stmt ::= "if" assignment_expression ":" suite\n\n'
        "   >>> print(1)\n   1\n\n"
        "object.__radd__(self, other)\n\n"
        "   Called to implement the binary operations with *reflected* operands.\n\n"
        "* A list item is prose as well.\n\n"
        "str.isalnum()\n"
    )
    assert prose_paragraphs(text) == [
        'The "if" statement is used for conditional execution:',
        "Called to implement the binary operations with reflected operands.",
        "A list item is prose as well.",
    ]


def test_python_docs_sentences_split_after_full_stops_but_not_abbreviations():
    from ctxvar.corpus.python_docs import split_sentences

    paragraph = 'Use a tuple, e.g. (1, 2), here. It works. Ok. 3 items follow! "Quoted" starts one.'
    assert split_sentences(paragraph) == [
        "Use a tuple, e.g. (1, 2), here.",
        "3 items follow!",
        '"Quoted" starts one.',
    ]  # "It works." and "Ok." have fewer than three words


def test_python_docs_corpus_is_real_english_and_records_its_provenance(tmp_path):
    from ctxvar.corpus.python_docs import python_docs_sentences

    sentences = python_docs_sentences()
    assert 2000 < len(sentences) < 10_000 and sentences == python_docs_sentences()
    words = [w.lower() for s in sentences for w in s.split()]
    assert {"the", "is", "of", "a"} <= set(words[:2000]) and not any(">>>" in s or "::=" in s for s in sentences)
    corpus = {"source": "python-docs", "text_column": "text", "fraction": 1.0, "max_words": 63, "seed": 0}
    counts = write_sentences({**corpus, "sampling": "paper"}, tmp_path / "s.parquet", tmp_path / "c.json")
    assert counts["rows_in_source"] == len(sentences) and counts["sentences"] > 0.99 * len(sentences)
    text = json.loads((tmp_path / "c.json").read_text())["text"]
    assert text["licence"].startswith("PSF License") and len(text["sentences_sha256"]) == 64
