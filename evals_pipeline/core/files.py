"""Reading YAML and JSON inputs so that every failure names the file and the line or field."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .errors import ConfigError, InputFileError

M = TypeVar("M", bound=BaseModel)


def field_path(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as `relation_types[1].source`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def real_path(path: Path | str) -> Path:
    """`path` made absolute with its symbolic links followed, as `Path.resolve()` does, but
    never raising: on Python 3.11 `resolve()` raised RuntimeError on a loop of links (and
    PermissionError under a folder it may not list), a traceback where the read or write that
    follows names the file and what is wrong with it."""
    return Path(os.path.realpath(path))


def _link_loop(path: Path | str) -> bool:
    """Whether `path` is a loop of symbolic links (which `exists()` reads as not there)."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


LINK_LOOP = "a loop of symbolic links, which leads to no file or folder"


def _file_in_the_way(path: Path | str) -> Path | None:
    """The nearest existing ancestor of `path` that is not a folder (so `path` can be neither
    made nor read: the OS says only "Not a directory"), or None."""
    for parent in Path(path).parents:
        try:
            if parent.exists():
                return None if parent.is_dir() else parent
        except OSError:  # a folder this user cannot search: the write will say why
            return None
    return None


def cannot_be_made(path: Path | str) -> str | None:
    """Why `path` cannot be made (a file stands where one of its folders goes, or it or one of
    its folders is a loop of symbolic links), or None."""
    path = Path(path)
    for at in (*reversed(path.parents), path):  # the outermost loop is the one to name
        if _link_loop(at):
            return f"cannot be made: {at} is {LINK_LOOP}"
    blocker = _file_in_the_way(path)
    return None if blocker is None else f"cannot be made: {blocker} is a file, not a folder"


# As the process writes: the effective user (a setuid-nobody test, a sudo -u run).
_EFFECTIVE = {"effective_ids": True} if os.access in os.supports_effective_ids else {}


def not_writable(path: Path | str, *, in_place: bool = False) -> str | None:
    """Why the process cannot write `path`, or None: the folder it would be made in (or, with
    `in_place`, an existing file appended to where it is) is not writable: a read-only mount,
    another user's folder. Had failed a step after the run's calls with a bare OSError. Where
    the answer is unclear (a folder it cannot search), None: the write says why."""
    path = Path(path)
    try:
        if in_place and path.is_file():
            return None if os.access(path, os.W_OK, **_EFFECTIVE) else f"{path} is not writable"
        folder = next((p for p in (path, *path.parents) if p.is_dir()), None)
    except OSError:
        return None
    if folder is not None and not os.access(folder, os.W_OK | os.X_OK, **_EFFECTIVE):
        return f"cannot be made: {folder} is not writable"
    return None


def refuse_overwrite(flag: str, target: Path, uses: list[tuple[str, Path, bool]]) -> None:
    """ConfigError when writing `target` would overwrite one of `uses` (field, path, whether a
    folder), or write into one of its folders: an extra output named like an input had
    replaced it (a cassette, the corpus, a golden example) with report JSON, exit 0. Compared
    resolved, so any name of one file is that file."""
    at = real_path(target)
    for field, path, folder in uses:
        where = real_path(path)
        if at == where:
            raise ConfigError(f"{flag} {target}: that is {field}, which this run uses")
        if folder and where in at.parents:
            raise ConfigError(f"{flag} {target}: that is in {field}, which this run uses")


def no_such_path(path: Path | str) -> str:
    """'no such file or folder', or that `path` is a loop of links, for a path not there."""
    return LINK_LOOP if _link_loop(path) else "no such file or folder"


def not_found(path: Path | str) -> str:
    """'file not found', saying why where a file stands in place of one of its folders, or
    where `path` is a loop of symbolic links."""
    if _link_loop(path):
        return LINK_LOOP
    blocker = _file_in_the_way(path)
    return "file not found" + (f" ({blocker} is a file, not a folder)" if blocker else "")


def read_input_bytes(path: Path | str, error: type[InputFileError] = InputFileError) -> bytes:
    """A whole input file; a missing file, a folder or an unreadable one is `error`."""
    path = Path(path)
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # missing, or under a file
        raise error(path, not_found(path)) from None
    except IsADirectoryError:
        raise error(path, "is a folder, not a file") from None
    except OSError as exc:
        raise error(path, f"cannot be read: {exc.strerror or exc}") from None


def read_input_text(path: Path | str, error: type[InputFileError] = InputFileError) -> str:
    """`read_input_bytes` as UTF-8 text; other bytes are `error` naming the offset."""
    try:
        return read_input_bytes(path, error).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(path, f"not UTF-8 text (byte offset {exc.start})") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, except that a key given twice in one mapping is an error: YAML's "last one
    wins" would silently drop a whole `backends:` block or a setting."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor`: merged keys may be overridden, as YAML allows
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool):
                continue  # an unhashable key is the parent's typed error
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"key {key!r} is given twice",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError as exc:  # past Python's 4,300-digit conversion limit: a traceback
            raise yaml.constructor.ConstructorError(
                None, None, f"a number too long ({exc})", node.start_mark
            ) from None


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


def load_yaml(path: Path | str, error: type[InputFileError] = InputFileError) -> Any:
    """Parse a YAML file; a syntax error or a repeated key becomes `error` with the 1-based
    line of the problem."""
    path = Path(path)
    text = read_input_text(path, error)
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise error(path, f"invalid YAML: {exc.problem or exc}", line=line) from None
    except yaml.YAMLError as exc:
        raise error(path, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise error(path, "invalid YAML: nested too deeply") from None


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def parse_json(
    path: Path | str,
    text: str,
    *,
    line: int | None = None,
    error: type[InputFileError] = InputFileError,
) -> Any:
    """Parse the JSON text of input file `path` (or of its JSONL line `line`).

    A syntax error names the line and column. A key given twice in one object is an error too:
    JSON's "last one wins" would silently drop a chunk's expected graph, a price or a label.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise error(
            path,
            f"invalid JSON: {exc.msg} (column {exc.colno})",
            line=line if line is not None else exc.lineno,
        ) from None
    except _RepeatedKey as exc:
        raise error(path, f"key {exc.args[0]!r} is given twice in one object", line=line) from None
    except RecursionError:
        raise error(path, "invalid JSON: nested too deeply", line=line) from None
    except ValueError as exc:  # an integer past Python's 4,300-digit conversion limit
        raise error(path, f"invalid JSON: a number too long ({exc})", line=line) from None


def load_json(path: Path | str, error: type[InputFileError] = InputFileError) -> Any:
    """A whole JSON input file (`read_input_text`, then `parse_json`), as `load_yaml` is for
    YAML: unreadable, non-UTF-8 or invalid content is `error` naming the file and the line."""
    return parse_json(path, read_input_text(path, error), error=error)


def validate_file_model(
    model: type[M],
    data: Any,
    path: Path | str,
    error: type[InputFileError] = InputFileError,
    *,
    line: int | None = None,
    within: tuple[int | str, ...] = (),
    kind: str | None = None,
    problem: Callable[[ErrorDetails], str] | None = None,
) -> M:
    """Validate parsed content of file `path` (or of its JSONL line `line`); the first failure
    names its field path, starting at `within` (where `data` sits in the file). `kind` ("a
    corpus line") words the error when `data` is not a JSON object at all; `problem` words a
    pydantic error where the model's own message would not help."""
    if kind is not None and not isinstance(data, dict):
        raise error(path, f"{kind} must be a JSON object, not {type(data).__name__}", line=line)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        loc, message = _first_problem(exc.errors(), data, problem)
        raise error(path, message, line=line, field=field_path((*within, *loc))) from None


_SHOULD_BE = "Input should be "
_NOWHERE = object()


def _value_at(data: Any, loc: tuple[int | str, ...]) -> Any:
    """The validated data at `loc`, or _NOWHERE where the path does not lead into it."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return _NOWHERE
    return data


def _first_problem(
    errors: list[ErrorDetails], data: Any, problem: Callable[[ErrorDetails], str] | None
) -> tuple[tuple[int | str, ...], str]:
    """The first error's field and message. A value a union refused is reported once per
    member, each at the field plus the member's name (`scope.constrained-int`): those are one
    problem, at the field, saying every form the value could take ("a valid integer or
    'all'"). A member's name is told from a field's by the data: the value at the field is
    not an object holding that name."""
    first = errors[0]
    loc = tuple(first["loc"])
    message = problem(first) if problem is not None else first["msg"]
    if problem is None and first["type"] == "model_type":  # not "... instance of _Expected"
        message = "Input should be a mapping of fields"
    at = _value_at(data, loc[:-1])
    members = [  # none for an error at the top (loc ()), which has no field to group under
        e
        for e in errors
        if loc
        and len(e["loc"]) == len(loc)
        and tuple(e["loc"])[:-1] == loc[:-1]
        and isinstance(e["loc"][-1], str)
        and e["type"] not in ("missing", "extra_forbidden")
        and not (isinstance(at, dict) and e["loc"][-1] in at)
    ]
    if at is not _NOWHERE and first in members and len({e["loc"][-1] for e in members}) > 1:
        loc = loc[:-1]
        if problem is None:
            said = list(dict.fromkeys(e["msg"] for e in members))
            if all(m.startswith(_SHOULD_BE) for m in said):
                message = _SHOULD_BE + " or ".join(m[len(_SHOULD_BE) :] for m in said)
            else:
                message = "; or ".join(said)
    if isinstance(first.get("input"), date):
        message += " (YAML reads an unquoted date as a date: put it in quotes to keep it text)"
    return loc, message


def line_problem(error: ErrorDetails, raw: bytes) -> str:
    """The first pydantic error of a JSONL line as a message: the field it is about, or, for
    a line that is not JSON, why (a byte-order mark reads as "expected value at column 1")."""
    if error["type"] != "json_invalid":
        return f"{field_path(tuple(error['loc']))}: {error['msg']}"
    if raw.startswith(b"\xef\xbb\xbf"):
        return "Unexpected UTF-8 BOM: save the file as UTF-8 without a byte-order mark"
    try:  # pydantic reads bytes that are not UTF-8 as "expected value" or the like
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start} of the line)"
    return error["msg"]


def jsonl_lines(path: Path, data: bytes) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of each non-blank line of a JSONL file's bytes; a line that
    is not UTF-8 raises InputFileError naming the line and the byte."""
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputFileError(
                path, f"not UTF-8 text (byte {exc.start} of the line)", line=lineno
            ) from None
        if text.strip():
            yield lineno, text


def local_storage_path(storage: str) -> str | None:
    """The folder `storage` (asset_storage) names on this disk (a path, or a file:// or
    local:// URL), or None for a remote filesystem's URL."""
    scheme, sep, rest = storage.partition("://")
    if not sep:
        return storage
    return rest if scheme in ("file", "local") else None


def storage_problem(storage: str, *, installed: bool = False) -> str | None:
    """Why `storage` (asset_storage: a folder or an fsspec URL) cannot hold the asset values,
    or None: a file in a folder's way, or a scheme fsspec does not know (the run had failed
    its first step, with no reason shown). `installed`: also that the scheme's package is
    there (s3fs for s3://), which only a run needs; loading the definitions does not."""
    if (local := local_storage_path(storage)) is not None:
        return cannot_be_made(local)
    import fsspec  # Dagster's UPathIOManager stores through it

    scheme = storage.partition("://")[0]
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError:
        return (
            f"unknown storage scheme {scheme!r}: give a folder or an fsspec URL such as "
            "s3://bucket/evals (see docs/scale-out.md)"
        )
    except ImportError as exc:
        return str(exc) if installed else None
    return None
