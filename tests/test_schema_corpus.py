"""The CI sample of the schema corpus (``tests/schema_corpus.py``): one torch schema per construct
class must either work end to end or be refused at its column. ``python -m tests.schema_corpus
--all`` runs every distinct construct set."""

from __future__ import annotations

from tests import schema_corpus


def test_every_sampled_torch_schema_works_or_is_refused_at_its_construct():
    cases = schema_corpus.run(schema_corpus.sample_cases())
    print(schema_corpus.summary(cases))
    failures = [f"{c.source}: {c.text}\n  {c.reason}" for c in cases if c.outcome == "FAIL"]
    assert not failures, "\n".join(failures)
    outcomes = {c.source: c.outcome for c in cases}
    # Pinned: the constructs the generator supports stay supported.
    for source in ("aten::add.Tensor", "aten::cat", "aten::index.Tensor", "aten::conv2d"):
        assert outcomes[source] == "works", source
    assert outcomes["aten::_foreach_add.List"] == "works"  # a Tensor[] return
    for source in ("aten::size.int", "aten::view"):
        assert outcomes[source] == "refused", source


def test_a_refusal_without_a_column_is_a_failure(monkeypatch):
    cases = schema_corpus.sample_cases()
    view = next(c for c in cases if c.source == "aten::view")
    line, col = 10, 20
    schema_corpus._refusal(view, [(line, col, "no column")], {view.name: (line + 1, col)})
    assert view.outcome == "FAIL"
