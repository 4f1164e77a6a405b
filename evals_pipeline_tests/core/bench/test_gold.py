from evals_pipeline.core.bench.gold import oracle_shortfalls


def test_oracle_shortfalls_name_the_row_and_rate() -> None:
    report = {
        "kind": "cases",
        "rows": {"oracle": {"rates": {"entity_f1": 1.0, "edge_f1": 0.5, "mention": None}}},
    }
    assert oracle_shortfalls(report, ["oracle"]) == ["oracle edge_f1=0.5"]
    assert oracle_shortfalls(report, []) == []
