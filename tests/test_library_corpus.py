"""The CI sample of the kernel-library corpus (``tests/library_corpus.py``): schemas of public
kernel libraries, with their own argument names, must work end to end or be refused at their
construct; the ones that work today stay working. ``python -m tests.library_corpus`` runs all."""

from __future__ import annotations

import collections
import json

import torch

from tests import library_corpus, schema_corpus


def test_the_data_file_holds_distinct_parseable_schemas_of_many_libraries():
    entries = library_corpus.load()
    assert len(entries) >= 500
    assert len({(e.library, e.schema) for e in entries}) == len(entries)  # deduplicated
    assert len({e.key for e in entries}) == len(entries)
    assert len({e.library for e in entries}) >= 8
    pairs, skipped = library_corpus.make_cases(entries)
    assert not skipped, skipped
    for e, case in pairs:
        assert "/" in e.source and ":" in e.source, e
        # The written arguments reach the spec unchanged, names and spacing included.
        written_args = e.schema[: schema_corpus._close(e.schema, 0) + 1]
        assert case.text.startswith(written_args), (e.key, case.text)
        torch._C.parse_schema(f"corpus::x{case.text}")


def test_the_sample_covers_every_library():
    entries = library_corpus.load()
    sample = library_corpus.sample_entries(entries)
    assert {e.library for e in sample} == {e.library for e in entries}


def test_every_sampled_library_schema_works_or_is_refused_at_its_construct(tmp_path):
    out = tmp_path / "sample.json"
    code = library_corpus.main(["--sample", "--jobs", "2", "--json", str(out)])
    report = json.loads(out.read_text())
    results = {r["key"]: r for r in report["results"]}
    outcomes = collections.Counter(r["outcome"] for r in report["results"])
    failures = [
        f"{k}: {r['schema']}\n  {r['problem']}"
        for k, r in results.items()
        if r["outcome"] == "FAIL"
    ]
    assert not failures, "\n".join(failures)
    assert code == 0
    assert report["torch"] == torch.__version__
    assert sum(outcomes.values()) == len(library_corpus.SAMPLE)
    for key, expected in library_corpus.SAMPLE.items():
        r = results[key]
        if expected == "works":  # pinned: these stay supported
            assert r["outcome"] == "works", (key, r["reason"])
        else:  # refused today, located; working one day is fine
            assert r["outcome"] in ("refused", "works"), (key, r)
            assert r["outcome"] == "works" or r["reason"], key


def test_a_launcher_receiving_another_value_than_the_caller_passed_is_a_failure(monkeypatch):
    # The launcher records its arguments rotated by one: the check must notice.
    honest = "CALLS.setdefault(name, []).append((args, kwargs))"
    assert honest in schema_corpus.LAUNCH
    monkeypatch.setattr(
        schema_corpus,
        "LAUNCH",
        schema_corpus.LAUNCH.replace(
            honest, "CALLS.setdefault(name, []).append((args[1:] + args[:1], kwargs))"
        ),
    )
    entries = [e for e in library_corpus.load() if e.key == "tensorrt_llm::renorm_moe_routing_op"]
    pairs, _ = library_corpus.make_cases(entries)
    library_corpus.run(pairs)
    ((_, case),) = pairs
    assert case.outcome == "FAIL", (case.outcome, case.reason)
    assert "AssertionError" in case.reason


def _case(written: str):
    parsed = torch._C.parse_schema(f"corpus::f{written}")
    return schema_corpus.transform(parsed, 0, written=written, keep_names=True)


def test_a_refusal_not_at_the_construct_it_quotes_is_a_failure():
    case = _case("(Tensor input, Tensor(a!)? out=None) -> Tensor")
    line, col = 10, 16  # where the schema text starts
    where = {case.name: (line, col)}
    # At the opening quote, where the generator reports argument names today.
    schema_corpus._refusal(case, [(line, col - 1, "argument name 'input' shadows 'input'")], where)
    assert case.outcome == "FAIL" and "not located" in case.reason
    # Inside the schema, but at another construct than the one it quotes.
    at = case.text.index("Tensor(a!)?")
    schema_corpus._refusal(case, [(line, col + at, "argument name 'input' shadows 'input'")], where)
    assert case.outcome == "FAIL" and "does not quote" in case.reason
    # At the construct: refused, the argument's own name normalized away.
    message = "argument 'out' of type 'Tensor(a!)?' is optional and updated in place"
    schema_corpus._refusal(case, [(line, col + at, message)], where)
    assert case.outcome == "refused", case.reason
    assert case.reason == "argument '<name>' of type 'Tensor(a!)?' is optional and updated in place"


def test_refusal_reasons_group_alias_set_spellings():
    reason = "argument '<name>' of type '{}' is optional and updated in place"
    groups = {
        library_corpus.group(reason.format(t))
        for t in ("Tensor!?", "Tensor(a3!)?", "Tensor(out!)?")
    }
    assert groups == {reason.format("Tensor(<set>!)?")}
    assert library_corpus.group("no argument is a Tensor (the first is 'str'); x") == (
        "no argument is a Tensor (the first is '<type>'); x"
    )
