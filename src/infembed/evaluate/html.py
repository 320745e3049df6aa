"""``infembed report --html``: one self-contained page (no network) to read evaluation runs at a glance.

The page holds the summary table, the report's figure (a PNG as a data URI) and a per-query explorer: for every
benchmark and query, the query and both instructions (and the keep/exclude split of exclusion-aware runs),
each run's p-MRR, the rank of every document whose relevance the changed instruction removed under the og and
the changed run of every model, and each run's top 10 with the judged-relevant documents marked. It is written
in HTML by Python (readable without JavaScript; tests parse it); a small inline script sorts and filters the
queries and, when it has run without error, sets ``data-ready="ok"`` on ``<body>``.

Numbers are written x100 for reading and, unrounded, in ``data-*`` attributes (``data-pmrr``, ``data-og-rank``,
``data-new-rank``), equal to the per-query entries of results.json.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from infembed.evaluate.report import _fmt, exclusions_label, model_labels, plot_png, run_colors

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.5em auto;max-width:1500px;
  padding:0 1em;color:#222}
h1{margin:.2em 0} h2{margin-top:1.6em;border-bottom:1px solid #ddd} .meta{color:#666}
table{border-collapse:collapse} th,td{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums} th{background:#f6f6f6;position:sticky;top:0}
.swatch{display:inline-block;width:.8em;height:.8em;border-radius:2px;margin-right:.35em;vertical-align:-1px}
img.plot{max-width:100%;border:1px solid #eee;cursor:zoom-in} img.plot.zoom{max-width:none;cursor:zoom-out}
.controls{margin:.5em 0;display:flex;gap:1em;align-items:center;flex-wrap:wrap}
details.query{border:1px solid #ddd;border-radius:4px;margin:.3em 0;padding:.2em .6em}
details.query[open]{background:#fcfcfc} summary{cursor:pointer}
summary .qid{font-family:monospace;color:#555;margin-right:.5em} summary .qtext{font-weight:600}
.chips{float:right} .chip{display:inline-block;min-width:3.6em;text-align:right;margin-left:.25em;padding:0 .3em;
  border-radius:3px;font-variant-numeric:tabular-nums;font-size:12px;border-left:4px solid}
.pos{background:#e3f4e3} .neg{background:#fbe3e3} .zero{background:#eee}
dl{display:grid;grid-template-columns:11em 1fr;gap:.2em .8em;margin:.6em 0} dt{color:#666} dd{margin:0}
.split{font-size:12px;color:#444} .exclude{color:#b00}
table.docs td.down{background:#e3f4e3} table.docs td.up{background:#fbe3e3}
table.top{font-size:12px;margin-top:.6em} table.top td.doc{font-family:monospace;text-align:center;min-width:3em}
td.doc.rel{background:#cdeccd;font-weight:700} td.doc.lost{outline:2px solid #e68a00;outline-offset:-2px}
.legend{font-size:12px;color:#555} .legend span{padding:0 .4em;margin-right:.6em}
.hidden{display:none}
"""

_SCRIPT = """
(function () {
  try {
    document.querySelectorAll('section.benchmark').forEach(function (section) {
      var list = section.querySelector('.queries');
      var sort = section.querySelector('select.sort');
      var filter = section.querySelector('input.filter');
      var items = Array.prototype.slice.call(list.querySelectorAll('details.query'));
      function key(item, how) {
        if (how === 'id') return parseFloat(item.dataset.order);
        var value = how === 'mean' ? item.dataset.pmrrMean : item.getAttribute('data-pmrr-' + how);
        return value === null || value === undefined || value === '' ? null : parseFloat(value);
      }
      function apply() {
        var parts = sort.value.split(':'), how = parts[0], dir = parts[1] === 'desc' ? -1 : 1;
        items.sort(function (a, b) {
          var x = key(a, how), y = key(b, how);
          if (x === null && y === null) return 0;
          if (x === null) return 1;
          if (y === null) return -1;
          return (x < y ? -1 : x > y ? 1 : 0) * dir;
        });
        items.forEach(function (item) { list.appendChild(item); });
      }
      sort.addEventListener('change', apply);
      var wanted = /^#sort=(.+)$/.exec(location.hash);  // e.g. #sort=mean:asc, #sort=0:desc
      if (wanted && sort.querySelector('option[value="' + wanted[1] + '"]')) sort.value = wanted[1];
      filter.addEventListener('input', function () {
        var text = filter.value.toLowerCase();
        items.forEach(function (item) {
          item.classList.toggle('hidden', text !== '' && item.textContent.toLowerCase().indexOf(text) < 0);
        });
      });
      apply();
    });
    var plot = document.querySelector('img.plot');
    if (plot) plot.addEventListener('click', function () { plot.classList.toggle('zoom'); });
    document.querySelectorAll('button.expand').forEach(function (button) {
      button.addEventListener('click', function () {
        var open = button.dataset.open === '1';
        button.closest('section').querySelectorAll('details.query').forEach(function (d) { d.open = open; });
      });
    });
    if (location.hash === '#open-all') {
      document.querySelectorAll('details.query').forEach(function (d) { d.open = true; });
    }
    document.body.setAttribute('data-queries', String(document.querySelectorAll('details.query').length));
    document.body.setAttribute('data-ready', 'ok');
  } catch (error) {
    document.body.setAttribute('data-error', String(error));
  }
})();
"""


def _num(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def _cell(value: float | None) -> str:
    return f'<td class="num">{_fmt(value)}</td>'


def _pmrr_class(value: float | None) -> str:
    return "zero" if value is None or value == 0 else "pos" if value > 0 else "neg"


def _summary(results: Sequence[dict[str, Any]], labels: list[str], colors: dict[str, str]) -> str:
    head = ["benchmark", "model", "p-MRR", "score", "metric", "nDCG@5", "nDCG@10", "changed nDCG@10",
            "exclusions", "queries", "seconds"]  # fmt: skip
    numeric = {"p-MRR", "score", "nDCG@5", "nDCG@10", "changed nDCG@10", "queries", "seconds"}
    rows = []
    for r, label in zip(results, labels):
        og, changed = r.get("og") or {}, r.get("changed") or {}
        rows.append(
            f'<tr class="run" data-benchmark="{escape(str(r["benchmark"]))}" data-model="{escape(label)}" '
            f'data-pmrr="{_num(r.get("p-MRR"))}" data-score="{_num(r.get("score"))}">'
            f"<td>{escape(str(r['benchmark']))}</td>"
            f'<td><span class="swatch" style="background:{colors[label]}"></span>{escape(label)}</td>'
            f"{_cell(r.get('p-MRR'))}{_cell(r.get('score'))}<td>{escape(str(r.get('main_score', '')))}</td>"
            f"{_cell(og.get('ndcg_at_5'))}{_cell(og.get('ndcg_at_10'))}{_cell(changed.get('ndcg_at_10'))}"
            f'<td>{escape(exclusions_label(r))}</td><td class="num">{escape(str(r.get("n_queries", "")))}</td>'
            f'<td class="num">{r.get("seconds") or 0:.1f}</td></tr>'
        )
    header = "".join(f'<th class="num">{h}</th>' if h in numeric else f"<th>{h}</th>" for h in head)
    return f'<table id="summary"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _split(split: dict[str, Any] | None) -> str:
    if not split:
        return "-"
    excluded = "; ".join(escape(str(e)) for e in split.get("exclude", []))
    return f'keep: {escape(str(split.get("keep", "")))} <span class="exclude">| exclude: {excluded}</span>'


def _query_entry(order: int, qid: str, runs: list[tuple[str, dict[str, Any]]], colors: dict[str, str]) -> str:
    """One ``<details>`` per query of a benchmark; ``runs`` are (label, that run's per-query entry)."""
    first = next((entry for _, entry in runs if "text" in entry), {})
    pmrrs = {label: entry.get("p-MRR") for label, entry in runs}
    known = [v for v in pmrrs.values() if v is not None]
    attributes = "".join(f' data-pmrr-{i}="{_num(value)}"' for i, value in enumerate(pmrrs.values()))
    mean = sum(known) / len(known) if known else None
    chips = "".join(
        f'<span class="chip {_pmrr_class(value)}" style="border-color:{colors[label]}" '
        f'title="{escape(label)}: p-MRR x100">{_fmt(value)}</span>'
        for label, value in pmrrs.items()
    )
    text = first.get("text")
    summary = (
        f'<summary><span class="qid">{escape(qid)}</span><span class="qtext">'
        f'{escape(text) if text else "(query text not recorded)"}</span><span class="chips">{chips}</span></summary>'
    )
    facts = [("query", escape(text or "(not recorded: results.json from an older infembed)")),
             ("og instruction", escape(first.get("instruction_og") or "-")),
             ("changed instruction", escape(first.get("instruction_changed") or "-"))]  # fmt: skip
    for label, entry in runs:
        if "split_og" in entry or "split_changed" in entry:
            facts.append((f"split used by {escape(label)}",
                          f'<div class="split">og: {_split(entry.get("split_og"))}</div>'
                          f'<div class="split">changed: {_split(entry.get("split_changed"))}</div>'))  # fmt: skip
    facts_html = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    titles: dict[str, str] = {}
    for _, entry in runs:
        titles.update(entry.get("titles") or {})
    return (
        f'<details class="query" data-qid="{escape(qid)}" data-order="{order}" data-pmrr-mean="{_num(mean)}"'
        f"{attributes}>{summary}<dl>{facts_html}</dl>{_changed_documents(runs, titles)}{_tops(runs, titles)}</details>"
    )


def _changed_documents(runs: list[tuple[str, dict[str, Any]]], titles: dict[str, str]) -> str:
    """Each document whose relevance the changed instruction removed: its rank in the og run -> the changed run,
    per model (green: moved down, as it should; red: moved up)."""
    docs = list(dict.fromkeys(d for _, entry in runs for d in entry.get("changed_documents") or {}))
    if not docs:
        return (
            '<p class="legend">No document changed relevance for this query (or no changed instruction).</p>'
        )
    head = "".join(
        f'<th class="num">{escape(label)}<br>p-MRR {_fmt(entry.get("p-MRR"))}</th>' for label, entry in runs
    )
    rows = []
    for doc in docs:
        cells = []
        for label, entry in runs:
            ranks = (entry.get("changed_documents") or {}).get(doc)
            if ranks is None:
                cells.append('<td class="num">-</td>')
                continue
            og_rank, new_rank = ranks["og_rank"], ranks["new_rank"]
            moved = "down" if new_rank > og_rank else "up" if new_rank < og_rank else "same"
            cells.append(
                f'<td class="num {moved}" data-model="{escape(label)}" data-doc="{escape(doc)}" '
                f'data-og-rank="{og_rank}" data-new-rank="{new_rank}">{og_rank} &rarr; {new_rank}</td>'
            )
        rows.append(
            f'<tr><td class="docid">{escape(doc)}</td><td>{escape(titles.get(doc, ""))}</td>{"".join(cells)}</tr>'
        )
    return (
        '<table class="docs"><thead><tr><th>document</th><th>title</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="legend">rank under the og instruction &rarr; under the changed one, for the documents that are no '
        'longer relevant: <span class="pos">moved down (follows)</span><span class="neg">moved up</span></p>'
    )


def _tops(runs: list[tuple[str, dict[str, Any]]], titles: dict[str, str]) -> str:
    rows = []
    width = 0
    for label, entry in runs:
        lost = set(entry.get("changed_documents") or {})
        for field, name in (("top_og", "og"), ("top_changed", "changed")):
            top = entry.get(field)
            if top is None:
                continue
            width = max(width, len(top))
            cells = "".join(
                f'<td class="doc{" rel" if rel > 0 else ""}{" lost" if doc in lost else ""}" '
                f'title="{escape(titles.get(doc, doc))}">{escape(doc)}</td>'
                for doc, rel in top
            )
            rows.append(f"<tr><th>{escape(label)} &middot; {name}</th>{cells}</tr>")
    if not rows:
        return '<p class="legend">Top 10 not recorded (results.json written by an older infembed).</p>'
    ranks = "".join(f'<th class="num">{i}</th>' for i in range(1, width + 1))
    return (
        f'<table class="top"><thead><tr><th>top 10</th>{ranks}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        '<p class="legend"><span class="pos">judged relevant (under that run\'s instruction)</span>'
        '<span style="outline:2px solid #e68a00">no longer relevant under the changed instruction</span>'
        "hover a document for its title</p>"
    )


def _explorer(results: Sequence[dict[str, Any]], labels: list[str], colors: dict[str, str]) -> str:
    sections = []
    benchmarks = list(dict.fromkeys(str(r["benchmark"]) for r in results))
    for b_index, benchmark in enumerate(benchmarks):
        runs = [(label, r) for r, label in zip(results, labels) if str(r["benchmark"]) == benchmark]
        qids = list(dict.fromkeys(q for _, r in runs for q in (r.get("per_query") or {})))
        options = ['<option value="id:asc">query order</option>', '<option value="mean:asc">mean p-MRR, lowest first</option>',
                   '<option value="mean:desc">mean p-MRR, highest first</option>']  # fmt: skip
        for i, (label, _) in enumerate(runs):
            options += [f'<option value="{i}:asc">p-MRR of {escape(label)}, lowest first</option>',
                        f'<option value="{i}:desc">p-MRR of {escape(label)}, highest first</option>']  # fmt: skip
        entries = "".join(
            _query_entry(
                order, q, [(label, (r.get("per_query") or {}).get(q, {})) for label, r in runs], colors
            )
            for order, q in enumerate(qids)
        )
        legend = "".join(
            f'<span class="chip zero" style="border-color:{colors[label]}">{escape(label)}</span>'
            for label, _ in runs
        )
        sections.append(
            f'<section class="benchmark" id="benchmark-{b_index}" data-benchmark="{escape(benchmark)}" '
            f'data-models="{escape(json.dumps([label for label, _ in runs]))}">'
            f"<h3>{escape(benchmark)} &middot; {len(qids)} queries</h3>"
            f'<div class="controls"><label>sort <select class="sort">{"".join(options)}</select></label>'
            f'<label>filter <input class="filter" type="search" placeholder="query text, instruction, document id">'
            '</label><button class="expand" data-open="1">expand all</button>'
            '<button class="expand" data-open="0">collapse all</button>'
            f'<span class="legend">p-MRR x100 per run: {legend}</span></div>'
            f'<div class="queries">{entries}</div></section>'
        )
    return "".join(sections)


def report_html(results: Sequence[dict[str, Any]], title: str = "infembed report") -> str:
    """The page as a string: summary table, the figure inline, the per-query explorer; no external resource."""
    labels = model_labels(results)
    colors = run_colors(list(dict.fromkeys(labels)))
    png = base64.b64encode(plot_png(results)).decode("ascii")
    benchmarks = len({str(r["benchmark"]) for r in results})
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>'
        f"<body><h1>{escape(title)}</h1>"
        f'<p class="meta">{len(results)} runs, {len(set(labels))} models, {benchmarks} benchmarks. All numbers x100. '
        "p-MRR: how far the documents that the changed instruction makes irrelevant move down (+100: to the bottom, "
        "0: not at all, negative: up).</p>"
        f"<h2>Summary</h2>{_summary(results, labels, colors)}"
        f'<h2>Plots</h2><p class="meta">click the figure to see it at full size</p>'
        '<img class="plot" alt="p-MRR and scores per benchmark and model" '
        f'src="data:image/png;base64,{png}">'
        f"<h2>Per-query explorer</h2>{_explorer(results, labels, colors)}"
        f"<script>{_SCRIPT}</script></body></html>"
    )


def write_html(results: Sequence[dict[str, Any]], path: str | Path, title: str = "infembed report") -> Path:
    """Write :func:`report_html` to ``path`` (atomically)."""
    from infembed.data.jsonl import atomic_write

    page = report_html(results, title)
    with atomic_write(path) as handle:
        handle.write(page)
    return Path(path)


def page_data(page: str) -> list[dict[str, Any]]:
    """Parse a page written by :func:`report_html` back into what it shows per query (for tests and tools):
    ``[{"benchmark", "qid", "pmrr": {model: value}, "ranks": {(model, doc): (og_rank, new_rank)}}]``."""
    from html.parser import HTMLParser

    class Parser(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.entries: list[dict[str, Any]] = []
            self.benchmark = ""
            self.models: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "section" and "data-benchmark" in a:
                self.benchmark = a["data-benchmark"] or ""
                self.models = json.loads(a["data-models"] or "[]")
            elif tag == "details" and a.get("class") == "query":
                pmrr = {
                    self.models[int(k[len("data-pmrr-") :])]: float(v) if v else None
                    for k, v in a.items()
                    if k.startswith("data-pmrr-") and k != "data-pmrr-mean"
                }
                self.entries.append(
                    {"benchmark": self.benchmark, "qid": a["data-qid"], "pmrr": pmrr, "ranks": {}}
                )
            elif tag == "td" and "data-og-rank" in a:
                key = (a["data-model"], a["data-doc"])
                self.entries[-1]["ranks"][key] = (int(a["data-og-rank"] or 0), int(a["data-new-rank"] or 0))

    parser = Parser()
    parser.feed(page)
    return parser.entries
