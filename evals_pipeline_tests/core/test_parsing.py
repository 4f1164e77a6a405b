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


def test_leading_whitespace_before_a_clean_object_is_still_clean() -> None:
    parsed, status = parse_structured(' \n\t{"edges": []}\n', EdgesReply)
    assert status == "clean" and parsed is not None


def test_a_json_document_that_is_not_an_object_is_malformed_not_searched() -> None:
    # json.loads accepts these, so the reply is valid JSON of the wrong shape: never recovered
    # from a `{` further in (the fast path that skips json.loads must not change this).
    for text in ('"{\\"edges\\": []}"', '["{\\"edges\\": []}"]', "null", "-1", "NaN"):
        assert parse_structured(text, EdgesReply) == (None, "malformed"), text


def test_the_fenced_object_wins_over_a_brace_in_the_prose_before_it() -> None:
    text = 'Using {braces}: {"edges": "bad"}\n```json\n{"edges": []}\n```'
    parsed, status = parse_structured(text, EdgesReply)
    assert status == "recovered" and parsed is not None and parsed.edges == []
