"""Writing a report's JSON and Markdown side by side, atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic


def report_json(report: Any) -> str:
    """Canonical JSON text of a report; NaN or infinity is an error, not `NaN` in the file."""
    return json.dumps(report, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def write_report_files(
    report: dict[str, Any], markdown: str, out_dir: Path, stem: str
) -> tuple[Path, Path]:
    """Write `<stem>.json` and `<stem>.md` under `out_dir`; returns (json path, markdown path)."""
    out_dir = Path(out_dir)
    json_path = write_text_atomic(out_dir / f"{stem}.json", report_json(report))
    md_path = write_text_atomic(out_dir / f"{stem}.md", markdown)
    return json_path, md_path
