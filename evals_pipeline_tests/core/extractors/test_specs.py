from pathlib import Path

import pytest

from evals_pipeline.core.errors import BackendSpecError
from evals_pipeline.core.extractors.specs import parse_backend_spec, parse_named_backend


@pytest.mark.parametrize(
    ("spec", "kind", "params"),
    [
        ("anthropic", "anthropic", {}),
        ("anthropic:model=claude-haiku-4-5", "anthropic", {"model": "claude-haiku-4-5"}),
        (
            "oai-http:url=http://127.0.0.1:8765/v1/chat/completions,model=local",
            "oai-http",
            {"url": "http://127.0.0.1:8765/v1/chat/completions", "model": "local"},
        ),
        ("oai-uds:path=/tmp/mlx.sock", "oai-uds", {"path": "/tmp/mlx.sock"}),
        ("cassette:path=baseline.jsonl", "cassette", {"path": "baseline.jsonl"}),
        ("oracle", "oracle", {}),
    ],
)
def test_reference_specs_parse(spec: str, kind: str, params: dict[str, str]) -> None:
    parsed = parse_backend_spec(spec)
    assert parsed.kind == kind
    assert dict(parsed.params) == params


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("antropic", "unknown backend kind 'antropic'"),
        ("oai-http:model=x", "oai-http needs url="),
        ("oai-http:url=http://x,modle=y", "unknown parameter 'modle'"),
        ("cassette:path", "is not NAME=VALUE"),
        ("cassette:path=", "is empty"),
        ("cassette:path=a,path=b", "given twice"),
        ("anthropic:", "nothing after"),
        ("oracle:model=x", "unknown parameter 'model' for oracle"),
        ("anthropic:timeout=soon", "timeout='soon' must be a number of seconds above 0"),
        ("anthropic:timeout=0", "timeout='0' must be"),
        ("anthropic:timeout=nan", "timeout='nan' must be"),
        ("anthropic:timeout=inf", "timeout='inf' must be"),
        ("oai-uds:path=s,retries=-1", "retries='-1' must be a whole number from 0 to 10"),
        ("oai-uds:path=s,retries=11", "retries='11' must be"),
        # A digit int() refuses ('²' passes str.isdigit) had raised ValueError, a traceback.
        ("oai-uds:path=s,retries=\u00b2", "retries='\u00b2' must be a whole number"),
        ("oai-uds:path=s,retries=\u0663", "retries='\u0663' must be"),  # Arabic-Indic 3
        ("anthropic:timeout=1_0", "timeout='1_0' must be"),
        ("cassette:path=c.jsonl,timeout=5", "unknown parameter 'timeout' for cassette"),
    ],
)
def test_typos_are_usage_errors_naming_the_spec(spec: str, problem: str) -> None:
    with pytest.raises(BackendSpecError) as err:
        parse_backend_spec(spec)
    assert problem in str(err.value)
    assert repr(spec) in str(err.value)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            "oai-http:url=http://user:PW-SECRET-1@127.0.0.1:9/v1?api-key=QKEY-SECRET-2,modle=m",
            "unknown parameter 'modle'",
        ),
        ("oai-http:url=http://user:PW-SECRET-1@[::1/v1?api-key=QKEY-SECRET-2", "does not parse"),
        # A mistyped URL had been echoed with its user info: no scheme, one slash, a comma or
        # an @ in the password (the comma splits the spec, and the problem quotes a piece).
        ("oai-http:url=user:PW-SECRET-1@127.0.0.1:9/v1", "url '127.0.0.1:9/v1' must be"),
        ("oai-http:url=http:/user:PW-SECRET-1@127.0.0.1:9/v1", "url 'http:/127.0.0.1:9/v1' must"),
        # A /, ? or # in the password (Python's parse error had quoted the part before it),
        # a stray prefix, a mistyped parameter name, a second url=, backslashes, a query.
        ("oai-http:url=http://u:PW/SECRET@h/v1", "url 'http://h/v1' does not parse"),
        ("oai-http:url=http://u:PW?SECRET@h/v1", "url 'http://h/v1' does not parse"),
        ("oai-http:url=//u:PW-SECRET@h/v1", "url 'h/v1' must be"),
        ("oai-http:url==http:/u:PW-SECRET@h/v1", "url 'h/v1' must be"),
        ("oai-http:URL=u:PW-SECRET@h/v1", "unknown parameter 'URL'"),
        ("oai-http:url=http://h/v1,url=u:PW-SECRET@h2/v1", "'url' given twice"),
        ("oai-http:url=http:\\\\u:PW-SECRET@h/v1", "url 'h/v1' must be"),
        ("oai-http:url=h/v1?key=PW-SECRET", "url 'h/v1' must be"),
        # A bare token before the host, a tab in the password, a secret in a fragment.
        ("oai-http:url=sk-PW-SECRET@h:8000/v1", "url 'h:8000/v1' must be"),
        ("oai-http:url=http://u:PW-SECRET\t@h:8000/v1,modle=m", "url=http://h:8000/v1,modle"),
        ("oai-http:url=http://h/v1#a,PW-SECRET", "is not NAME=VALUE"),
        # The parser strips spaces around a name: `, url =` is a url= too.
        ("oai-http:model=m, url=user:PW-SECRET-1@h/v1", "url 'h/v1' must be"),
        ("oai-http:url =user:PW-SECRET-1@h/v1", "url 'h/v1' must be"),
        ("oai-http:url=http://user:PW-SEC,RET-1@127.0.0.1:9/v1", "'127.0.0.1:9/v1' is not NAME"),
        ("oai-http:url=http://user:PW@SECRET-1@127.0.0.1:9/v1,modle=m", "unknown parameter"),
        ("oai-http:url=http://u:PW-SECRET-1@127.0.0.1:9/v1,model=c@2024,modle=m", "'modle'"),
        # A URL that parses but is refused (a bad escape, a space) is shown without its secrets.
        ("oai-http:url=http://u:PW-SECRET@h/v1%?k=PW-SECRET", "url 'http://h/v1%' has a '%'"),
        ("oai-http:url=http://h/v 1?k=PW-SECRET", "url 'http://h/v 1' has a space"),
        ("oai-http:url=http://h/v1?k=PW-SECRET\x01z", "url 'http://h/v1' has a control char"),
    ],
)
def test_a_spec_error_shows_no_url_credential(spec: str, problem: str) -> None:
    """The error reaches the terminal and CI logs: a mistyped spec's URL password and query
    key are not in it, as they are not in `describe()`; the rest of the spec still is."""
    with pytest.raises(BackendSpecError) as err:
        parse_backend_spec(spec)
    message = str(err.value)
    assert problem in message and "oai-http:" in message
    assert "SECRET" not in message and "SECRET" not in err.value.spec + err.value.problem
    assert "PW" not in message
    assert "model=c@2024" in message or "c@2024" not in spec  # only the URL's is user info


def test_a_named_spec_error_shows_no_url_credential() -> None:
    with pytest.raises(BackendSpecError) as err:
        parse_named_backend("curl=oai-http:url=http://u:PW-SEC,RET-1@127.0.0.1:9/v1")
    assert "SEC" not in str(err.value) and "RET-1" not in str(err.value)


def test_named_backend() -> None:
    name, spec = parse_named_backend("baseline=cassette:path=a.jsonl")
    assert name == "baseline" and spec.kind == "cassette"
    with pytest.raises(BackendSpecError, match="NAME=SPEC"):
        parse_named_backend("anthropic")
    with pytest.raises(BackendSpecError, match="backend name"):
        parse_named_backend("my backend=anthropic")


def test_describe_drops_user_info_and_query_where_a_key_could_hide() -> None:
    from evals_pipeline.core.extractors.specs import parse_backend_spec

    spec = parse_backend_spec(
        "oai-http:url=https://user:s3cret@llm.example:8443/v1/chat/completions?api_key=s3cret,model=m"
    )
    shown = spec.describe()
    assert "s3cret" not in shown and "user" not in shown
    assert shown == "oai-http:url=https://llm.example:8443/v1/chat/completions,model=m"
    assert parse_backend_spec("cassette:path=a.jsonl").describe() == "cassette:path=a.jsonl"


@pytest.mark.parametrize(
    "url",
    ["http://[::1]:8080/v1", "http://LLM.Example:9999/v1", "http://h/v1?", "http://h/v1#"],
)
def test_describe_shows_a_url_with_nothing_secret_exactly_as_written(url: str) -> None:
    spec = parse_backend_spec(f"oai-http:url={url}")
    assert spec.describe() == spec.raw


def test_describe_drops_a_fragment_and_keeps_an_ipv6_host() -> None:
    shown = parse_backend_spec("oai-http:url=http://u:k@[::1]:8080/v1#k").describe()
    assert shown == "oai-http:url=http://[::1]:8080/v1"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("127.0.0.1:8000/v1/chat/completions", "must be http:// or https://"),  # no scheme
        ("ftp://models.example/v1", "must be http:// or https://"),
        ("http:///v1", "with a host"),
        ("http://[::1", "does not parse"),  # had been a raw ValueError
        ("http://h:http/v1", "does not parse"),
        # httpx had sent these percent-encoded or as written: a 404 on every call.
        ("http://127.0.0.1:8000/v1/chat completions", "has a space at its start or end, or in"),
        (" http://127.0.0.1:8000/v1", "has a space at its start or end"),  # urlsplit drops it
        ("http://127.0.0.1:8000/v1/chat\t/completions", "has a control character"),
        ("http://127.0.0.1:8000/v1/%zz", "has a '%' in its host or path not followed by two"),
        ("http://127.0.0.1:8000/v1/100%", "has a '%' in its host or path not followed by two"),
        ("http://ho%zzst:8000/v1", "has a '%' in its host or path not followed by two"),
    ],
)
def test_a_url_that_cannot_reach_a_server_is_a_spec_error(url: str, problem: str) -> None:
    with pytest.raises(BackendSpecError, match=problem):
        parse_backend_spec(f"oai-http:url={url}")


@pytest.mark.parametrize(
    "url",
    [  # httpx sends each as meant: a literal '%' or a space outside the host and path
        "http://user:s3cr%et@127.0.0.1:8000/v1/chat/completions",
        "http://127.0.0.1:8000/v1/chat/completions?q=50%",
        "http://127.0.0.1:8000/v1/chat%20completions",
        "http://[::1%25eth0]:8000/v1",
        "http://user:pa\xa0ss@127.0.0.1:8000/v1",  # a no-break space in a password
    ],
)
def test_a_url_httpx_sends_as_meant_is_no_spec_error(url: str) -> None:
    parse_backend_spec(f"oai-http:url={url}")


def test_timeout_and_retries_reach_the_transport_and_leave_the_fingerprint() -> None:
    """A hung server had cost ~6 minutes a chunk at the fixed 120 s; the spec now says how long.
    How calls are made does not change what they answer, so the cache stays the same."""
    from evals_pipeline.core.cassettes.cache import backend_fingerprint
    from evals_pipeline.core.extractors.specs import build_extractor

    plain = parse_backend_spec("oai-http:url=http://127.0.0.1:9/v1,model=m")
    tuned = parse_backend_spec("oai-http:url=http://127.0.0.1:9/v1,timeout=2.5,model=m,retries=0")
    assert (tuned.timeout_s, tuned.max_retries) == (2.5, 0)
    assert (plain.timeout_s, plain.max_retries) == (None, None)
    assert tuned.answers_identity == "oai-http:url=http://127.0.0.1:9/v1,model=m"
    assert plain.answers_identity == plain.raw  # as written: existing caches keep their name
    assert backend_fingerprint(tuned, corpus_digest="d") == backend_fingerprint(
        plain, corpus_digest="d"
    )
    transport = build_extractor(tuned).transport  # type: ignore[attr-defined]
    assert (transport._timeout_s, transport._max_retries) == (2.5, 0)
    transport = build_extractor(plain).transport  # type: ignore[attr-defined]
    assert (transport._timeout_s, transport._max_retries) == (120.0, 2)


def test_a_comma_in_a_path_is_part_of_the_path(tmp_path: Path) -> None:
    """A project under /data/a,b/: the resolved cassette path had split into a parameter
    "b/corpus/…" that is not NAME=VALUE, and the shipped config failed to load."""
    (tmp_path / "a,b").mkdir()
    spec = parse_backend_spec(f"cassette:path={tmp_path}/a,b/corpus/rules.jsonl")
    assert spec.params["path"] == f"{tmp_path}/a,b/corpus/rules.jsonl"
    uds = parse_backend_spec(f"oai-uds:path={tmp_path}/a,b/llm.sock,model=m,timeout=5")
    assert uds.params == {"path": f"{tmp_path}/a,b/llm.sock", "model": "m", "timeout": "5"}
    with pytest.raises(BackendSpecError, match="'x' is not NAME=VALUE"):
        parse_backend_spec("oai-http:url=http://h:1/v1,x")  # only a path takes commas
    # A typo after a path stays an error: it had become a path that fails every call.
    for typo in (
        "oai-uds:path=/run/llm.sock,model:llama3",
        "oai-uds:path=/run/llm.sock,",
        "oai-uds:path=/run/llm.sock,,model=m",
        "cassette:path=a.jsonl, model",
        "cassette:path=a.jsonl,llama3.1",
        "oai-uds:path=/run/llm.sock,meta-llama/Llama-3.1-8B",  # model= forgotten
    ):
        with pytest.raises(BackendSpecError, match="is not NAME=VALUE"):
            parse_backend_spec(typo)


def test_a_comma_in_a_file_name_that_exists_is_part_of_the_path(tmp_path: Path) -> None:
    (tmp_path / "a,b.jsonl").write_text("")
    spec = parse_backend_spec(f"cassette:path={tmp_path / 'a'},b.jsonl")
    assert spec.params["path"] == str(tmp_path / "a,b.jsonl")


def test_a_file_name_with_several_commas_is_one_path(tmp_path: Path) -> None:
    """A name none of whose shorter prefixes exists had been cut at its second comma, and the
    rest refused as "not NAME=VALUE"; so had a comma then `NAME=` that names no parameter."""
    (tmp_path / "run,v2,final.jsonl").write_text("")
    (tmp_path / "a,model=b.jsonl").write_text("")
    (tmp_path / "x,y,z").mkdir()
    spec = parse_backend_spec(f"cassette:path={tmp_path / 'run'},v2,final.jsonl")
    assert spec.params["path"] == str(tmp_path / "run,v2,final.jsonl")
    spec = parse_backend_spec(f"cassette:path={tmp_path / 'a'},model=b.jsonl")
    assert spec.params["path"] == str(tmp_path / "a,model=b.jsonl")
    uds = parse_backend_spec(f"oai-uds:path={tmp_path / 'x'},y,z/llm.sock,model=m")  # no socket yet
    assert uds.params == {"path": str(tmp_path / "x,y,z" / "llm.sock"), "model": "m"}
    with pytest.raises(BackendSpecError, match="unknown parameter 'model' for cassette"):
        parse_backend_spec(f"cassette:path={tmp_path / 'run,v2,final.jsonl'},model=m")
    with pytest.raises(BackendSpecError, match="'v3' is not NAME=VALUE"):
        parse_backend_spec(f"cassette:path={tmp_path / 'run'},v3,final.jsonl")


def test_a_project_under_a_folder_with_a_comma_loads(tmp_path: Path) -> None:
    from evals_pipeline.core.config import load_config

    root = tmp_path / "a,b"
    root.mkdir()
    (root / "evals.yaml").write_text(
        "backends: {oracle: oracle, rules: 'cassette:path=corpus/rules.jsonl'}\nreference: oracle\n"
    )
    config = load_config(root / "evals.yaml")
    assert config.specs["rules"].params["path"] == str(root / "corpus" / "rules.jsonl")


def test_a_name_too_long_for_a_file_name_is_refused() -> None:
    """A 250-character name had passed, then failed the extraction step: "File name too long"
    (it is part of the cache's file name)."""
    from evals_pipeline.core.extractors.specs import MAX_NAME_LEN, check_name

    assert check_name("a" * MAX_NAME_LEN) is None
    assert "250 characters; at most 100" in str(check_name("a" * 250))
    with pytest.raises(BackendSpecError, match="at most 100"):
        parse_named_backend("a" * 250 + "=oracle")


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ("oai-http:url=http://llm.internal:8000/v1/@latest,timeout=x", "http://llm.internal:8000"),
        ("oai-http:url=http://h:1/v1?user=me@corp.com,timeout=x", "url=http://h:1/v1,timeout"),
        # A mistyped name after a URL with no path: the @ of the next value is not user info.
        ("oai-http:url=http://h:8000,modle=c@2024", "url=http://h:8000,modle=c@2024'"),
        # A space after url= (urlsplit drops it): the message had lost every "1" or space.
        ("oai-http:url= http://u:pw@h:8000/v1,modle=m", "url= http://h:8000/v1,modle=m'"),
        ("oai-http:model=m:tag@x,modle=1", "model=m:tag@x,modle=1"),  # a model is no URL
    ],
)
def test_an_at_sign_past_the_host_is_not_user_info(spec: str, shown: str) -> None:
    """Taking everything up to the URL's last @ as user info had named the wrong host."""
    with pytest.raises(BackendSpecError) as err:
        parse_backend_spec(spec)
    assert shown in str(err.value)
    assert "timeout='x'" in str(err.value) or "timeout" not in spec


def test_a_comma_in_a_relative_path_is_read_against_the_project_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The existence test had been made from the working folder, so a project loaded from
    elsewhere was refused; and a folder named with ", " is a path too."""
    from evals_pipeline.core.config import load_config

    project = tmp_path / "proj"
    (project / "cassettes" / "Smith, John").mkdir(parents=True)
    (project / "cassettes" / "rules,v2.jsonl").write_text("")
    (project / "evals.yaml").write_text(
        "backends:\n  oracle: oracle\n  rules: 'cassette:path=cassettes/rules,v2.jsonl'\n"
        "  smith: 'cassette:path=cassettes/Smith, John/s.jsonl'\nreference: oracle\n"
    )
    monkeypatch.chdir(tmp_path)  # not the project's folder
    config = load_config(project / "evals.yaml")
    assert config.specs["rules"].params["path"] == str(project / "cassettes" / "rules,v2.jsonl")
    assert config.specs["smith"].params["path"].endswith("Smith, John/s.jsonl")
