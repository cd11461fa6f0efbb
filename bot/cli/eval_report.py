"""An eval as one self-contained HTML page: summary, a plot of deltas, runs side by side."""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_runtime.evals import EvalReport

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;color:#1d1c1d}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}
td,th{border:1px solid #ddd;padding:.3rem .5rem;vertical-align:top;text-align:left}
th{background:#f6f6f6}.agree{color:#1a7f37}.diverge{color:#b42318}
code,pre{font:12px/1.4 ui-monospace,monospace;white-space:pre-wrap;margin:0}
.miss{background:#fdecea}h2{margin-top:2rem}
"""
BAR_HEIGHT = 18
PLOT_WIDTH = 640
LABEL_WIDTH = 110


def render_html(report: EvalReport) -> str:
    """Return the report as an HTML document needing nothing else (no scripts, no fetches)."""
    summary = report.summary()
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>Eval: {escape(report.candidate)}</title><style>{STYLE}</style></head><body>",
        f"<h1>Eval against {escape(report.candidate)}</h1>",
        _summary_table(summary),
        "<h2>Token delta per run</h2>",
        _plot(report),
        *(_run_section(c) for c in report.to_json()["runs"]),
        "</body></html>",
    ]
    return "\n".join(parts)


def _summary_table(summary: dict[str, Any]) -> str:
    rows = [
        ("runs", summary["runs"]),
        ("agreement", f"{summary['agreement_rate'] * 100:.1f} % ({summary['agreeing']} runs)"),
        ("same tool calls", summary["same_calls"]),
        ("same answer", summary["same_answer"]),
        (
            "divergence points",
            ", ".join(
                f"{k} ({v} run{'' if v == 1 else 's'})"
                for k, v in summary["divergence_points"].items()
            )
            or "none",
        ),
        ("token delta", f"{summary['token_delta']:+d}"),
        ("cost delta", f"{summary['cost_delta_usd']:+.6f} USD"),
        *_approval_rows(summary["approvals"]),
    ]
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table class=summary>{cells}</table>"


def _plot(report: EvalReport) -> str:
    """A horizontal bar per run: its token delta, green if it agrees, red if not."""
    runs = report.to_json()["runs"]
    largest = max([abs(r["token_delta"]) for r in runs] + [1])
    middle = LABEL_WIDTH + PLOT_WIDTH // 2
    half = PLOT_WIDTH // 2 - 60
    height = BAR_HEIGHT * len(runs) + 20
    parts = [
        f'<line x1="{middle}" y1="0" x2="{middle}" y2="{height - 16}" stroke="#999"/>',
        f'<text x="{middle}" y="{height - 2}" text-anchor="middle">0 tokens</text>',
    ]
    for row, run in enumerate(runs):
        delta = run["token_delta"]
        width = max(abs(delta) * half / largest, 1)
        x = middle if delta >= 0 else middle - width
        y = row * BAR_HEIGHT + 2
        colour = "#1a7f37" if run["agrees"] else "#b42318"
        end = x + width + 4 if delta >= 0 else x - 4
        anchor = "start" if delta >= 0 else "end"
        parts += [
            f'<text x="0" y="{y + BAR_HEIGHT - 7}">{escape(run["run_id"][:12])}</text>',
            f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{BAR_HEIGHT - 4}" '
            f'fill="{colour}"/>',
            f'<text x="{end:.1f}" y="{y + BAR_HEIGHT - 7}" text-anchor="{anchor}">'
            f"{delta:+d}</text>",
        ]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_WIDTH + PLOT_WIDTH}" '
        f'height="{height}" font-size="11" font-family="ui-monospace,monospace" '
        f'role="img" aria-label="token delta per run">{"".join(parts)}</svg>'
        "<p>Bars: each run's re-run tokens minus its recorded tokens; green agrees, red "
        "diverges.</p>"
    )


def _run_section(run: dict[str, Any]) -> str:
    verdict = (
        "<span class=agree>agrees</span>"
        if run["agrees"]
        else "<span class=diverge>diverges</span>"
    )
    recorded, candidate = run["recorded"], run["candidate"]
    rows = []
    for index in range(max(len(recorded["calls"]), len(candidate["calls"]))):
        left = recorded["calls"][index] if index < len(recorded["calls"]) else None
        right = candidate["calls"][index] if index < len(candidate["calls"]) else None
        miss = " class=miss" if right is not None and not right["replayed"] else ""
        rows.append(
            f"<tr{miss}><td>{index + 1}</td><td>{_call(left)}</td><td>{_call(right)}</td></tr>"
        )
    rows.append(
        f"<tr><td>answer</td><td>{_text(recorded['answer'])}</td>"
        f"<td>{_text(candidate['answer'])}</td></tr>"
    )
    rows.append(
        f"<tr><td>ended</td><td>{escape(recorded['ended'])}</td>"
        f"<td>{escape(candidate['ended'])}</td></tr>"
    )
    rows.append(f"<tr><td>usage</td><td>{_usage(recorded)}</td><td>{_usage(candidate)}</td></tr>")
    counts = run["approvals"]
    rows.append(
        f"<tr><td>sign-offs</td><td>{counts['recorded_fields_from_signed']} fields from "
        f"what approvers signed</td><td>{escape(_sign_offs(counts))}</td></tr>"
    )
    return (
        f"<h2>Run {escape(run['run_id'])} — {verdict}</h2>"
        f"<p>{escape(run['task'])}</p><table><tr><th>#</th><th>recorded</th>"
        f"<th>re-run</th></tr>{''.join(rows)}</table>"
    )


def _approval_rows(counts: dict[str, Any]) -> list[tuple[str, Any]]:
    """What the candidate means for approvers, summed over the runs."""
    return [
        ("approvals it would ask for", counts["triggered"]),
        ("its calls people rejected in the recording", counts["rejected_in_recording"]),
        (
            "argument fields from what approvers signed",
            f"{counts['fields_from_signed']} over {counts['signed_compared']} signed calls "
            f"(recorded model: {counts['recorded_fields_from_signed']})",
        ),
    ]


def _sign_offs(counts: dict[str, Any]) -> str:
    return (
        f"{counts['triggered']} approvals asked, {counts['rejected_in_recording']} of its calls "
        f"rejected in the recording, {counts['fields_from_signed']} fields from what "
        f"approvers signed ({counts['signed_compared']} signed calls)"
    )


def _call(call: dict[str, Any] | None) -> str:
    if call is None:
        return "—"
    arguments = json.dumps(call["arguments"], sort_keys=True, ensure_ascii=False)
    result = ("error: " if call["is_error"] else "") + call["result"]
    decision = call.get("decision")
    decided = (
        ""
        if decision is None
        else (
            f"<div>{escape(decision['status'])} by {escape(str(decision['by']))}"
            f"{': ' + escape(decision['reason']) if decision['reason'] else ''}</div>"
        )
    )
    return (
        f"<code>{escape(call['tool'])} {escape(arguments)}</code>{decided}"
        f"<pre>{escape(result)}</pre>"
    )


def _text(value: str | None) -> str:
    return "—" if value is None else f"<pre>{escape(value)}</pre>"


def _usage(trajectory: dict[str, Any]) -> str:
    return escape(
        f"{trajectory['tokens']} tokens, {trajectory['model_calls']} model calls, "
        f"{trajectory['cost_usd']:.6f} USD"
    )
