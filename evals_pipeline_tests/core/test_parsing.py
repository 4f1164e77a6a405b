from evals_pipeline.core.parsing import EdgesReply, EntitiesReply, parse_structured


def test_clean_json() -> None:
    parsed, status = parse_structured(
        '{"entities": [{"name": "Ada", "type": "Person"}]}', EntitiesReply
    )
    assert status == "clean"
    assert parsed is not None and parsed.entities[0].name == "Ada"


def test_fenced_json_is_recovered() -> None:
    text = 'Here you go:\n```json\n{"entities": [{"name": "Ada"}]}\n```\nAnything else?'
    parsed, status = parse_structured(text, EntitiesReply)
    assert status == "recovered"
    assert parsed is not None and parsed.entities[0].name == "Ada"


def test_trailing_text_is_recovered() -> None:
    parsed, status = parse_structured('{"edges": []} I hope this helps.', EdgesReply)
    assert status == "recovered"
    assert parsed is not None and parsed.edges == []


def test_leading_prose_with_braces_is_recovered() -> None:
    text = 'The set {x} is small. {"edges": [{"source": "a", "target": "b", "relation": "R"}]}'
    parsed, status = parse_structured(text, EdgesReply)
    assert status == "recovered"
    assert parsed is not None and parsed.edges[0].relation == "R"


def test_malformed_json() -> None:
    assert parse_structured('{"entities": [{"name": "Ada"', EntitiesReply) == (None, "malformed")
    assert parse_structured("no json here", EntitiesReply) == (None, "malformed")


def test_valid_json_of_wrong_shape_is_malformed() -> None:
    assert parse_structured('{"nodes": []}', EntitiesReply) == (None, "malformed")
    assert parse_structured('[{"name": "Ada"}]', EntitiesReply) == (None, "malformed")
