"""Named benchmarks and training data from the Hugging Face hub, read into the project's records.

A benchmark is declared as data (:class:`BenchmarkSpec`: name, hub repo, revision, main score, citation) in
:data:`REGISTRY`, and :func:`load_named_benchmark` turns a name into a :class:`~infembed.data.records.Benchmark`:

=========================  ==========================================  ===================  ===============
name                       source                                      main score           changed instr.
=========================  ==========================================  ===================  ===============
``followir/robust04``      ``jhu-clsp/robust04-instructions``          ``map_at_1000``      yes (p-MRR)
``followir/core17``        ``jhu-clsp/core17-instructions``            ``map_at_1000``      yes (p-MRR)
``followir/news21``        ``jhu-clsp/news21-instructions``            ``ndcg_at_5``        yes (p-MRR)
``bright/<domain>``        ``xlangai/BRIGHT`` (12 domains)             ``ndcg_at_10``       no
``mair/<task>[/<split>]``  ``MAIR-Bench/MAIR-Queries`` + ``-Docs``     ``ndcg_at_10``       no
=========================  ==========================================  ===================  ===============

The work is split in two so that everything but the download is tested offline on fixtures:

* converters, pure functions from rows already loaded (lists of dicts in the hub schema) to a ``Benchmark``:
  :func:`followir_from_rows`, :func:`followir_from_mteb_rows`, :func:`bright_from_rows`,
  :func:`mair_from_rows`, :func:`triplets_from_rows`;
* one thin seam to the hub, :func:`fetch_hub_rows`, which imports ``datasets`` lazily (``infembed[hub]``).

Every converter raises :class:`~infembed.data.errors.DataError` naming the table (a file, or
``hf://datasets/<repo>/<config>/<split>``), the 1-based row (the line, for JSONL) and the field.

Schemas, and where they were settled (hub dataset cards and the loaders that read them):

* **FollowIR** (``jhu-clsp/<x>-instructions``; dataset card, mteb 1.x ``HFDataLoaderInstructions``):
  configs ``corpus`` {``_id``, ``title``, ``text``}, ``queries`` {``_id``, ``text``, ``instruction_og``,
  ``instruction_changed``, ``keywords``, ``short_query``}, ``qrels_og`` and ``qrels_changed`` (split ``test``)
  {``query-id``, ``corpus-id``, ``score`` (float64)}, ``top_ranked`` {``qid``, ``pid``}, one row per candidate.
  mteb 1.x filled its og qrels from ``qrels_changed`` and the reverse (its ``load`` maps each into the other's
  dict), so numbers published with it score the og run against the changed qrels. **We score og against og**;
  p-MRR is unaffected. The mteb 2.x copies (``layout="mteb"``: ``mteb/<Task>InstructionRetrieval`` now,
  ``jhu-clsp/<x>-instructions-mteb`` before; every repo name is also a benchmark name, see
  :data:`HUB_COPIES`) hold one query per instruction, ids ``<qid>-og`` / ``<qid>-changed``, in configs
  ``corpus``, ``queries`` {``_id``, ``text``}, ``instruction`` {``query-id``, ``instruction``}, ``default``
  (qrels, split ``test``), ``top_ranked`` {``query-id``, ``corpus-ids``} and ``qrel_diff`` {``query-id``,
  ``corpus-ids``}, the changed documents mteb 2 scores p-MRR with (kept as ``Benchmark.changed_documents``;
  the original layout has none, so p-MRR recomputes them from the qrels). Otherwise both layouts give the
  same ``Benchmark``. The headline metric is the FollowIR paper's; mteb's main score is p-MRR
  (``main_score_source`` says so).
  Some ``top_ranked`` candidates are not in the corpus (FollowIR issue #1); they are dropped, with a warning.
* **BRIGHT** (``xlangai/BRIGHT``; repo ``run.py``, mteb ``BrightRetrieval``): config ``documents`` (or
  ``long_documents``) {``id``, ``content``} and ``examples`` {``id``, ``query``, ``gold_ids``, ``gold_ids_long``,
  ``excluded_ids``, ``reasoning``, ``gold_answer``}, one split per domain. qrels = ``gold_ids`` at label 1;
  ``excluded_ids`` (``["N/A"]`` means none) become ``Benchmark.excluded``, removed from runs before scoring.
  BRIGHT queries carry no instruction of their own; each query gets its domain's task instruction, the wording
  of BRIGHT's own configs for instruction-tuned embedders, word for word ("Given a biology post, retrieve
  relevant passages that help answer the post"), so that instruction-aware models see what they were evaluated
  with there.
  Pass ``instruction=""`` for none, or any string to replace it. There is no changed instruction (no p-MRR).
* **MAIR** (``MAIR-Bench/MAIR-Queries`` and ``MAIR-Docs``; the MAIR README and ``mair.py``): one config per
  task; queries {``qid``, ``instruction``, ``query``, ``labels``: [{``id``, ``score``}]}, docs {``id``, ``doc``};
  query split ``queries`` pairs with doc split ``docs``, ``<x>_queries`` with ``<x>_docs`` (e.g.
  ``CQADupStack_Android_queries`` with ``CQADupStack_Android_docs``), each pair its own corpus. A task with several splits is named ``mair/<task>/<split>``, or read whole with :func:`load_mair_task`;
  MAIR averages splits weighted by their query counts.
* **InF-IR** (``InF-IR/InF-IR``; the architecture doc, the reference code's data loaders): rows with the
  fields of :data:`~infembed.data.records.TRIPLET_FIELDS`. ``document`` is an older name of
  ``document_positive``; the reference code's releases also suffix every field with ``_fewshot``. Both are
  accepted. The data set has no ``train`` split (the reference code reads ``["msmarco"]``): name one as
  ``NAME:SPLIT``, or every split is read.

A local reader for files in one of these schemas is here too: :func:`load_bright_topics` (BRIGHT examples as
JSONL, e.g. anserini's ``topics.bright-earth-science-original.jsonl.gz``, with or without TREC qrels and
documents).

Example::

    from infembed.data.hub import load_named_benchmark
    bench = load_named_benchmark("followir/news21")   # downloads once into the datasets cache
    bench.main_score, bench.has_changed, bench.top_ranked is not None   # ('ndcg_at_5', True, True)
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError
from infembed.data.jsonl import id_text, iter_jsonl, require_str
from infembed.data.records import TRIPLET_FIELDS, Benchmark, Document, InstructionQuery, Triplet

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------- citations

FOLLOWIR_CITATION = """@misc{weller2024followir,
  title = {FollowIR: Evaluating and Teaching Information Retrieval Models to Follow Instructions},
  author = {Orion Weller and Benjamin Chang and Sean MacAvaney and Kyle Lo and Arman Cohan and Benjamin Van Durme and Dawn Lawrie and Luca Soldaini},
  year = {2024},
  eprint = {2403.15246},
  archivePrefix = {arXiv},
  primaryClass = {cs.IR},
}"""

BRIGHT_CITATION = """@misc{su2024bright,
  title = {BRIGHT: A Realistic and Challenging Benchmark for Reasoning-Intensive Retrieval},
  author = {Hongjin Su and Howard Yen and Mengzhou Xia and Weijia Shi and Niklas Muennighoff and Han-yu Wang and Haisu Liu and Quan Shi and Zachary S. Siegel and Michael Tang and Ruoxi Sun and Jinsung Yoon and Sercan O. Arik and Danqi Chen and Tao Yu},
  year = {2024},
  eprint = {2407.12883},
  archivePrefix = {arXiv},
  primaryClass = {cs.CL},
}"""

MAIR_CITATION = """@inproceedings{sun2024mair,
  title = {MAIR: A Massive Benchmark for Evaluating Instructed Retrieval},
  author = {Weiwei Sun and Zhengliang Shi and Jiulong Wu and Lingyong Yan and Xinyu Ma and Yiding Liu and Min Cao and Dawei Yin and Zhaochun Ren},
  booktitle = {EMNLP},
  year = {2024},
}"""

# --------------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class BenchmarkSpec:
    """One named benchmark, declared as data.

    ``subset`` is the BRIGHT domain or the MAIR task (the hub config or split to read); ``mteb_repo`` and
    ``mteb_revision`` name the copy of a FollowIR set that mteb 2.x reads now (``layout="mteb"``), and
    ``mteb_copies`` every (repo, revision) in that layout, older copies included, each loadable by its repo
    name. ``revision`` pins ``repo`` (see the comments in :func:`_build_registry` for whose pin each is);
    ``None`` reads the newest. ``main_score_source`` says whose choice the headline metric is.
    """

    name: str
    family: str
    repo: str
    main_score: str
    citation: str
    description: str
    revision: str | None = None
    subset: str = ""
    mteb_repo: str | None = None
    mteb_revision: str | None = None
    reference: str = ""
    main_score_source: str = ""
    mteb_copies: tuple[tuple[str, str], ...] = ()


#: BRIGHT's domains, in the order of its paper (the hub splits of ``examples`` and ``documents``).
BRIGHT_DOMAINS: tuple[str, ...] = (
    "biology",
    "earth_science",
    "economics",
    "psychology",
    "robotics",
    "stackoverflow",
    "sustainable_living",
    "pony",
    "leetcode",
    "aops",
    "theoremqa_theorems",
    "theoremqa_questions",
)
#: Domains that also have ``long_documents`` / ``gold_ids_long``.
BRIGHT_LONG_DOMAINS: tuple[str, ...] = BRIGHT_DOMAINS[:8]

#: MAIR's 126 tasks (hub config names) -> domain, from MAIR's ``config.py`` (``TASK_CONFIG``).
MAIR_TASKS: dict[str, str] = {
    **dict.fromkeys(
        (
            "Competition-Math ProofWiki_Proof ProofWiki_Reference Stacks_Proof Stacks_Reference Stein_Proof "
            "Stein_Reference Trench_Proof Trench_Reference TAD TAS2 StackMathQA SciDocs SciFact LitSearch "
            "FairRanking_2020"
        ).split(),
        "Academic",
    ),
    **dict.fromkeys(
        (
            "APPS CodeEditSearch CodeSearchNet Conala HumanEval-X LeetCode MBPP RepoBench TLDR SWE-Bench-Lite "
            "FoodAPI HuggingfaceAPI PytorchAPI SpotifyAPI TMDB TensorAPI ToolBench WeatherAPI"
        ).split(),
        "Code",
    ),
    **dict.fromkeys(
        "Apple ConvFinQA FinQA FinanceBench HC3Finance TAT-DQA Trade-the-event FiQA".split(),
        "Finance",
    ),
    **dict.fromkeys(
        (
            "AILA2019-Case AILA2019-Statutes BSARD BillSum CUAD GerDaLIR LeCaRDv2 LegalQuAD REGIR-EU2UK "
            "REGIR-UK2EU TREC-Legal_2011"
        ).split(),
        "Legal",
    ),
    **dict.fromkeys(
        (
            "NFCorpus Trec-Covid Monant CARE PrecisionMedicine_2017 PrecisionMedicine_2018 PrecisionMedicine_2019 "
            "PrecisionMedicine-Article_2019 PrecisionMedicine-Article_2020 CliniDS_2014 CliniDS_2015 CliniDS_2016 "
            "ClinicalTrials_2021 ClinicalTrials_2022 ClinicalTrials_2023 Genomics-AdHoc_2004 Genomics-AdHoc_2005 "
            "Genomics-AdHoc_2006 Genomics-AdHoc_2007"
        ).split(),
        "Medical",
    ),
    **dict.fromkeys(
        (
            "AY2 ELI5 Fever TREx WnCw WnWi WoW zsRE ArguAna CQADupStack Quora TopiOCQA Touche ACORDAR CPCD "
            "ChroniclingAmericaQA NTCIR PointRec ProCIS-Dialog ProCIS-Turn QuanTemp WebTableSearch MISeD SParC "
            "SParC-SQL Spider Spider-SQL CAsT_2019 CAsT_2020 CAsT_2021 CAsT_2022 Core_2017 Microblog_2011 "
            "Microblog_2012 Microblog_2013 Microblog_2014 DD_2015 DD_2016 DD_2017 FairRanking_2021 "
            "FairRanking_2022 NeuCLIR-Tech_2023 NeuCLIR_2022 NeuCLIR_2023 ProductSearch_2023 ToT_2023 ToT_2024 "
            "ExcluIR Core17 News21 Robust04 InstructIR NevIR IFEval"
        ).split(),
        "Web",
    ),
}


#: FollowIR's headline metrics are its authors' choice; mteb reports p-MRR as these tasks' main score.
FOLLOWIR_MAIN_SCORE_SOURCE = "FollowIR paper (mteb's main score is p-MRR)"


def _followir(
    short: str, revision: str, mteb_copies: tuple[tuple[str, str], ...], main_score: str, title: str
) -> BenchmarkSpec:
    return BenchmarkSpec(
        name=f"followir/{short}",
        family="followir",
        repo=f"jhu-clsp/{short}-instructions",
        revision=revision,
        mteb_repo=mteb_copies[0][0],
        mteb_revision=mteb_copies[0][1],
        mteb_copies=mteb_copies,
        main_score=main_score,
        main_score_source=FOLLOWIR_MAIN_SCORE_SOURCE,
        citation=FOLLOWIR_CITATION,
        description=f"FollowIR {title}: TREC narratives as instructions, each with a changed (narrower) one; "
        "rerank the ~1000 BM25 candidates per topic; p-MRR over the docs that lost relevance.",
        reference="https://arxiv.org/abs/2403.15246",
    )


def _build_registry() -> dict[str, BenchmarkSpec]:
    specs = [
        # FollowIR revisions are the ones mteb pins: 1.x for the original jhu-clsp repos; for the mteb layout
        # first the mteb/<Task> copies that mteb 2 reads now, then the jhu-clsp/<x>-instructions-mteb copies
        # that earlier 2.x releases read (still accepted by name).
        _followir(
            "robust04",
            "a5a1c4fe2bc528ac12e83f8cdf82178da85d2f1d",
            (
                ("mteb/Robust04InstructionRetrieval", "0495a5cb69aa8fa5bca81bd56ac248911c19eeb6"),
                ("jhu-clsp/robust04-instructions-mteb", "0a3efedfcac0a7f859c46cff3a0fac0f8747b28f"),
            ),
            "map_at_1000",
            "Robust04",
        ),
        _followir(
            "core17",
            "e39ff896cf3efbbdeeb950e6bd7c79f266995b07",
            (
                ("mteb/Core17InstructionRetrieval", "67d8733dd0691f08f34ed9dda5941578cba8d91c"),
                ("jhu-clsp/core17-instructions-mteb", "7030c7efc3585d9020f243b12862997889243b78"),
            ),
            "map_at_1000",
            "Core17",
        ),
        _followir(
            "news21",
            "e0144086b45fe31ac125e9ac1a83b6a409bb6ca6",
            (
                ("mteb/News21InstructionRetrieval", "c6fffeb9cdd95c1ffa81c62c687b48b56352872b"),
                ("jhu-clsp/news21-instructions-mteb", "39db677749b3b783bb277d0e2d4712f5f133f52b"),
            ),
            "ndcg_at_5",
            "News21",
        ),
    ]
    for domain in BRIGHT_DOMAINS:
        specs.append(
            BenchmarkSpec(
                name=f"bright/{domain}",
                family="bright",
                repo="xlangai/BRIGHT",
                # Not mteb's pin: mteb's BrightRetrieval reads a75a0eb483f6a5233a6efc2d63d71540a4443dfb, an
                # earlier commit. This later one is the commit our BRIGHT loader was written against, with the
                # excluded_ids we score with; mteb's loader never reads excluded_ids, and we have not checked
                # that its earlier commit holds them. Pass revision="a75a0eb..." to read mteb's data.
                revision="3066d29c9651a576c8aba4832d249807b181ecae",
                subset=domain,
                main_score="ndcg_at_10",
                main_score_source="BRIGHT paper and mteb",
                citation=BRIGHT_CITATION,
                description=f"BRIGHT {domain}: reasoning-intensive retrieval over the whole corpus; "
                "excluded ids removed before scoring.",
                reference="https://arxiv.org/abs/2407.12883",
            )
        )
    for task, domain in MAIR_TASKS.items():
        specs.append(
            BenchmarkSpec(
                name=f"mair/{task}",
                family="mair",
                repo="MAIR-Bench/MAIR-Queries",
                subset=task,
                main_score="ndcg_at_10",
                main_score_source="MAIR paper",
                citation=MAIR_CITATION,
                description=f"MAIR {task} ({domain}): instructed retrieval, top-100 search per split.",
                reference="https://arxiv.org/abs/2410.10127",
            )
        )
    return {spec.name: spec for spec in specs}


#: Every named benchmark, by name.
REGISTRY: dict[str, BenchmarkSpec] = _build_registry()
#: FollowIR's hub repos, lower-cased -> (registered name, repo, revision, layout): each is also a name.
HUB_COPIES: dict[str, tuple[str, str, str | None, str]] = {
    repo.lower(): (spec.name, repo, revision, layout)
    for spec in REGISTRY.values()
    if spec.family == "followir"
    for repo, revision, layout in [(spec.repo, spec.revision, "original")]
    + [(r, rev, "mteb") for r, rev in spec.mteb_copies]
}
MAIR_DOCS_REPO = "MAIR-Bench/MAIR-Docs"
INF_IR_REPO = "InF-IR/InF-IR"


def list_benchmarks(family: str | None = None) -> list[str]:
    """The registered names, optionally of one family (``followir``, ``bright``, ``mair``)."""
    return [name for name, spec in REGISTRY.items() if family is None or spec.family == family]


def get_spec(name: str) -> BenchmarkSpec:
    """The spec of a registered name (case-insensitive); for ``mair/<task>/<split>`` the task's spec."""
    spec, _ = _resolve(name)
    return spec


def _resolve(name: str) -> tuple[BenchmarkSpec, str | None]:
    key = name.strip().strip("/")
    lowered = {n.lower(): n for n in REGISTRY}
    if key.lower() in lowered:
        return REGISTRY[lowered[key.lower()]], None
    if key.lower() in HUB_COPIES:
        return REGISTRY[HUB_COPIES[key.lower()][0]], None
    head, _, tail = key.rpartition("/")
    if head.lower() in lowered and REGISTRY[lowered[head.lower()]].family == "mair" and tail:
        return REGISTRY[lowered[head.lower()]], tail
    raise DataError(_unknown_name_message(name))


def _unknown_name_message(name: str) -> str:
    close = difflib.get_close_matches(name, list(REGISTRY), n=3, cutoff=0.6)
    examples = ", ".join(list(MAIR_TASKS)[:4])
    text = (
        f"{name!r} is neither an existing path nor a registered benchmark name. Known names: "
        "followir/robust04, followir/core17, followir/news21 (also by hub repo: jhu-clsp/<x>-instructions, "
        "jhu-clsp/<x>-instructions-mteb, mteb/<X>InstructionRetrieval); "
        f"bright/<domain> with domain one of {', '.join(BRIGHT_DOMAINS)}; "
        f"mair/<task>[/<split>] with one of MAIR's {len(MAIR_TASKS)} tasks (e.g. {examples}; "
        "all in infembed.data.hub.MAIR_TASKS). A local benchmark dir holds qrels_og.tsv (instruction benchmark) "
        "or qrels/<split>.tsv (BEIR)."
    )
    if close:
        text += f" Did you mean {' or '.join(close)}?"
    return text


# --------------------------------------------------------------------------------------------- rows


@dataclass
class Rows:
    """The rows of one table (a hub config/split, or a JSONL file) and where they came from.

    ``source`` names the table in error messages; ``lines`` are the rows' 1-based line numbers when they were
    read from a file (blank lines skipped), else rows are numbered from 1.
    """

    source: str
    rows: Sequence[Mapping[str, Any]]
    lines: Sequence[int] | None = None

    @classmethod
    def from_jsonl(cls, path: str | Path) -> Rows:
        """Rows of a JSONL(.gz) file, keeping each row's line number for error messages."""
        pairs = list(iter_jsonl(path))
        return cls(str(path), [obj for _, obj in pairs], [line for line, _ in pairs])

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any]]]:
        for index, row in enumerate(self.rows):
            line = self.lines[index] if self.lines is not None else index + 1
            if not isinstance(row, Mapping):
                raise DataError(f"expected an object (a dict), got {type(row).__name__}", self.source, line)
            yield line, row

    def __len__(self) -> int:
        return len(self.rows)


def _as_rows(table: Rows | Sequence[Mapping[str, Any]] | None, default_source: str) -> Rows:
    if table is None:
        return Rows(default_source, [])
    if isinstance(table, Rows):
        return table
    return Rows(default_source, list(table))


def _field(row: Mapping[str, Any], names: Sequence[str]) -> str:
    """The first of ``names`` present in ``row`` (the hub schemas are not always spelled one way), else the
    first name, so a missing field is reported under its canonical name."""
    for name in names:
        if name in row:
            return name
    return names[0]


def _text(row: Mapping[str, Any], names: Sequence[str], table: Rows, line: int, *, allow_empty: bool) -> str:
    key = _field(row, names)
    if key in row and row[key] is None and allow_empty:
        return ""
    return require_str(row, key, table.source, line, allow_empty=allow_empty)  # type: ignore[arg-type]


def _id_value(value: Any, source: str, line: int, field: str) -> str:
    return id_text(value, source, line, field)


def _ident(row: Mapping[str, Any], names: Sequence[str], table: Rows, line: int) -> str:
    key = _field(row, names)
    if key not in row:
        raise DataError("missing", table.source, line, key)
    return _id_value(row[key], table.source, line, key)


def _string_list(
    row: Mapping[str, Any], key: str, table: Rows, line: int, *, required: bool, what: str = "ids"
) -> list[str]:
    if key not in row or row[key] is None:
        if required:
            raise DataError("missing", table.source, line, key)
        return []
    value = row[key]
    if not isinstance(value, (list, tuple)):
        raise DataError(f"expected a list of {what}, got {type(value).__name__}", table.source, line, key)
    out = []
    for position, item in enumerate(value):
        if what == "ids":
            out.append(_id_value(item, table.source, line, f"{key}[{position}]"))
        elif isinstance(item, str):
            out.append(item)
        else:
            raise DataError(
                f"expected a string, got {type(item).__name__}", table.source, line, f"{key}[{position}]"
            )
    return out


def _score(value: Any, table: Rows, line: int, key: str) -> int:
    """A relevance label as an int. The hub stores them as float64; a fractional, non-finite or non-numeric
    label is an error rather than something to round."""
    if isinstance(value, bool) or value is None:
        raise DataError(f"relevance {value!r} is not an integer", table.source, line, key)
    if isinstance(value, int):
        return value
    number: float
    if isinstance(value, float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise DataError(f"relevance {value!r} is not an integer", table.source, line, key) from None
    else:
        raise DataError(f"relevance {value!r} is not an integer", table.source, line, key)
    if not math.isfinite(number) or not number.is_integer():
        raise DataError(f"relevance {value!r} is not an integer", table.source, line, key)
    return int(number)


_QUERY_ID = ("query-id", "query_id", "qid")
_CORPUS_ID = ("corpus-id", "corpus_id", "doc_id", "docid", "pid")


def _qrels(table: Rows) -> dict[str, dict[str, int]]:
    """BEIR-style qrels rows {query-id, corpus-id, score}; conflicting duplicates are an error."""
    qrels: dict[str, dict[str, int]] = {}
    for line, row in table:
        qid = _ident(row, _QUERY_ID, table, line)
        did = _ident(row, _CORPUS_ID, table, line)
        if "score" not in row:
            raise DataError("missing", table.source, line, "score")
        score = _score(row["score"], table, line, "score")
        docs = qrels.setdefault(qid, {})
        if did in docs and docs[did] != score:
            raise DataError(
                f"document {did!r} of query {qid!r} is judged twice ({docs[did]} and {score})",
                table.source,
                line,
                "score",
            )
        docs[did] = score
    return qrels


def _corpus(
    table: Rows, id_names: Sequence[str], text_names: Sequence[str], title_names: Sequence[str] = ()
) -> dict[str, Document]:
    corpus: dict[str, Document] = {}
    for line, row in table:
        did = _ident(row, id_names, table, line)
        if did in corpus:
            raise DataError(f"duplicate document id {did!r}", table.source, line, _field(row, id_names))
        title = _text(row, title_names, table, line, allow_empty=True) if title_names else ""
        text = _text(row, text_names, table, line, allow_empty=True)
        corpus[did] = Document(title=title, text=text)
    if not corpus:
        raise DataError("the corpus is empty", table.source)
    return corpus


def _top_ranked(
    table: Rows, corpus: Mapping[str, Document], queries: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Candidates per query, in the table's order. Accepts one row per candidate ({qid, pid}, FollowIR's
    original layout) or one row per query ({query-id, corpus-ids}, mteb 2.x). Candidates missing from the
    corpus and queries not in the benchmark are dropped, with a warning (FollowIR has both)."""
    top: dict[str, list[str]] = {}
    seen: dict[str, set[str]] = {}
    missing_docs = 0
    unknown_queries: set[str] = set()
    for line, row in table:
        qid = _ident(row, ("qid", "query-id", "query_id"), table, line)
        if "corpus-ids" in row or "corpus_ids" in row:
            ids = _string_list(row, _field(row, ("corpus-ids", "corpus_ids")), table, line, required=True)
        else:
            ids = [_ident(row, ("pid", "corpus-id", "corpus_id", "doc_id"), table, line)]
        if qid not in queries:
            unknown_queries.add(qid)
            continue
        bucket = top.setdefault(qid, [])
        done = seen.setdefault(qid, set())
        for did in ids:
            if did not in corpus:
                missing_docs += 1
            elif did not in done:
                done.add(did)
                bucket.append(did)
    if missing_docs:
        logger.warning("%s: %d candidate ids are not in the corpus; dropped", table.source, missing_docs)
    if unknown_queries:
        logger.warning(
            "%s: %d query ids are not benchmark queries; ignored", table.source, len(unknown_queries)
        )
    return top


def _check_qrels_queries(
    qrels: dict[str, dict[str, int]], queries: Mapping[str, Any], table: Rows
) -> dict[str, dict[str, int]]:
    unknown = sorted(q for q in qrels if q not in queries)
    if unknown:
        logger.warning(
            "%s: qrels for %d query ids not in the queries (e.g. %r); ignored",
            table.source,
            len(unknown),
            unknown[0],
        )
    return {q: d for q, d in qrels.items() if q in queries}


# --------------------------------------------------------------------------------------------- FollowIR


def followir_from_rows(
    corpus: Rows | Sequence[Mapping[str, Any]],
    queries: Rows | Sequence[Mapping[str, Any]],
    qrels_og: Rows | Sequence[Mapping[str, Any]],
    qrels_changed: Rows | Sequence[Mapping[str, Any]],
    top_ranked: Rows | Sequence[Mapping[str, Any]] | None = None,
    *,
    name: str = "followir",
    main_score: str = "map_at_1000",
    source: str = "",
) -> Benchmark:
    """A FollowIR benchmark from the tables of ``jhu-clsp/<x>-instructions`` (schema in the module docstring).

    og qrels come from ``qrels_og`` and changed qrels from ``qrels_changed`` (not swapped, unlike mteb 1.x).
    As in mteb, queries without og judgments are dropped.
    """
    corpus_rows = _as_rows(corpus, "corpus")
    query_rows = _as_rows(queries, "queries")
    docs = _corpus(corpus_rows, ("_id", "id"), ("text",), ("title",))
    parsed: dict[str, InstructionQuery] = {}
    for line, row in query_rows:
        qid = _ident(row, ("_id", "id"), query_rows, line)
        if qid in parsed:
            raise DataError(
                f"duplicate query id {qid!r}", query_rows.source, line, _field(row, ("_id", "id"))
            )
        parsed[qid] = InstructionQuery(
            text=_text(row, ("text", "query"), query_rows, line, allow_empty=False),
            instruction_og=_text(row, ("instruction_og",), query_rows, line, allow_empty=True),
            instruction_changed=_text(row, ("instruction_changed",), query_rows, line, allow_empty=True),
        )
    og_rows = _as_rows(qrels_og, "qrels_og")
    changed_rows = _as_rows(qrels_changed, "qrels_changed")
    og = _check_qrels_queries(_qrels(og_rows), parsed, og_rows)
    changed = _check_qrels_queries(_qrels(changed_rows), parsed, changed_rows)
    kept = _with_og_judgments(parsed, og, og_rows.source)
    top = None
    if top_ranked is not None:
        table = _as_rows(top_ranked, "top_ranked")
        top = _top_ranked(table, docs, kept)
        without = sorted(set(kept) - set(top))
        if without:
            logger.warning(
                "%s: %d queries have no candidates (e.g. %r)", table.source, len(without), without[0]
            )
    return Benchmark(name=name, corpus=docs, queries=kept, qrels_og=og, qrels_changed=_only(changed, kept),
                     top_ranked=top, main_score=main_score, source=source)


def _with_og_judgments(parsed: dict[str, InstructionQuery], og: Mapping[str, Any], source: str) -> dict[str, InstructionQuery]:
    """As in mteb, queries without og judgments are dropped; none left is an error."""
    kept = {qid: q for qid, q in parsed.items() if qid in og}
    if not kept:
        raise DataError("no query has og judgments", source, hint="check that query ids match queries")
    return kept


def _only(table: dict[str, Any], keys: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if k in keys}


_OG, _CHANGED = "-og", "-changed"


def _split_followir_id(qid: str, table: Rows, line: int, key: str) -> tuple[str, str]:
    if qid.endswith(_OG):
        return qid[: -len(_OG)], "og"
    if qid.endswith(_CHANGED):
        return qid[: -len(_CHANGED)], "changed"
    raise DataError(f"query id {qid!r} ends in neither '-og' nor '-changed'", table.source, line, key)


def followir_from_mteb_rows(
    corpus: Rows | Sequence[Mapping[str, Any]],
    queries: Rows | Sequence[Mapping[str, Any]],
    qrels: Rows | Sequence[Mapping[str, Any]],
    instructions: Rows | Sequence[Mapping[str, Any]] | None = None,
    top_ranked: Rows | Sequence[Mapping[str, Any]] | None = None,
    qrel_diff: Rows | Sequence[Mapping[str, Any]] | None = None,
    *,
    name: str = "followir",
    main_score: str = "map_at_1000",
    source: str = "",
) -> Benchmark:
    """A FollowIR benchmark from mteb 2.x's copies (``mteb/<Task>InstructionRetrieval``,
    ``jhu-clsp/<x>-instructions-mteb``), where each topic is two queries ``<qid>-og`` and ``<qid>-changed``.
    The instruction comes from the ``instruction`` table {query-id, instruction} or, where mteb merged it, from
    an ``instruction`` column of the queries. ``qrel_diff`` rows {query-id (without -og), corpus-ids} are the
    data set's own changed documents, which mteb 2 scores p-MRR with; they become
    ``Benchmark.changed_documents`` (without them p-MRR recomputes the changed documents from the qrels)."""
    docs = _corpus(_as_rows(corpus, "corpus"), ("_id", "id"), ("text",), ("title",))
    instruction_rows = _as_rows(instructions, "instruction")
    instruction_of: dict[str, str] = {}
    for line, row in instruction_rows:
        qid = _ident(row, _QUERY_ID, instruction_rows, line)
        instruction_of[qid] = _text(row, ("instruction",), instruction_rows, line, allow_empty=True)
    query_rows = _as_rows(queries, "queries")
    texts: dict[str, dict[str, str]] = {}
    instr: dict[str, dict[str, str]] = {}
    for line, row in query_rows:
        key = _field(row, ("_id", "id"))
        full = _ident(row, (key,), query_rows, line)
        base, side = _split_followir_id(full, query_rows, line, key)
        if side in texts.get(base, {}):
            raise DataError(f"duplicate query id {full!r}", query_rows.source, line, key)
        texts.setdefault(base, {})[side] = _text(row, ("text",), query_rows, line, allow_empty=False)
        if "instruction" in row:
            instruction = _text(row, ("instruction",), query_rows, line, allow_empty=True)
        elif full in instruction_of:
            instruction = instruction_of[full]
        else:
            raise DataError(
                f"no instruction for query {full!r} (neither an 'instruction' column nor a row in "
                f"{instruction_rows.source})",
                query_rows.source,
                line,
                "instruction",
            )
        instr.setdefault(base, {})[side] = instruction
    parsed: dict[str, InstructionQuery] = {}
    for base, sides in texts.items():
        if "og" not in sides:
            continue  # a changed query without its original cannot be scored
        parsed[base] = InstructionQuery(
            text=sides["og"],
            instruction_og=instr[base]["og"],
            instruction_changed=instr[base].get("changed"),
        )
    qrel_rows = _as_rows(qrels, "qrels")
    for line, row in qrel_rows:  # first, every query id names its side (with the row, for the error)
        key = _field(row, _QUERY_ID)
        _split_followir_id(_ident(row, _QUERY_ID, qrel_rows, line), qrel_rows, line, key)
    og: dict[str, dict[str, int]] = {}
    changed: dict[str, dict[str, int]] = {}
    for qid, judged in _qrels(qrel_rows).items():
        base, side = _split_followir_id(qid, qrel_rows, 0, "query-id")
        (og if side == "og" else changed)[base] = judged
    og = _check_qrels_queries(og, parsed, qrel_rows)
    kept = _with_og_judgments(parsed, og, qrel_rows.source)
    top = None
    if top_ranked is not None:
        table = _as_rows(top_ranked, "top_ranked")
        # Both sides rerank the same BM25 candidates; read the og lists, then any side missing them.
        merged: dict[str, list[str]] = {}
        for qid, ids in _top_ranked(table, docs, _SuffixView(kept)).items():
            base, side = qid.rsplit("-", 1)
            if side == "og" or base not in merged:
                merged[base] = ids
        top = merged
    changed_documents = None if qrel_diff is None else _qrel_diff(_as_rows(qrel_diff, "qrel_diff"), kept)
    return Benchmark(name=name, corpus=docs, queries=kept, qrels_og=og, qrels_changed=_only(changed, kept),
                     top_ranked=top, main_score=main_score, source=source, changed_documents=changed_documents)


def _qrel_diff(table: Rows, queries: Mapping[str, Any]) -> dict[str, list[str]]:
    """FollowIR's ``qrel_diff`` rows {query-id, corpus-ids} as qid -> changed doc ids (queries not in the
    benchmark are ignored, with a warning; a benchmark query without a row has no changed document)."""
    changed: dict[str, list[str]] = {qid: [] for qid in queries}
    unknown: list[str] = []
    for line, row in table:
        qid = _ident(row, _QUERY_ID, table, line)
        ids = _string_list(row, _field(row, ("corpus-ids", "corpus_ids")), table, line, required=True)
        if qid not in queries:
            unknown.append(qid)
        else:
            changed[qid] = list(dict.fromkeys(changed[qid] + ids))
    if unknown:
        logger.warning(
            "%s: %d query ids are not benchmark queries (e.g. %r); ignored", table.source, len(unknown), unknown[0]
        )
    return changed


class _SuffixView(Mapping[str, Any]):
    """``<qid>-og`` / ``<qid>-changed`` membership over a dict keyed by ``<qid>`` (for mteb top_ranked rows)."""

    def __init__(self, queries: Mapping[str, Any]) -> None:
        self._queries = queries

    def __getitem__(self, key: str) -> Any:
        for suffix in (_OG, _CHANGED):
            if key.endswith(suffix) and key[: -len(suffix)] in self._queries:
                return self._queries[key[: -len(suffix)]]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        for qid in self._queries:
            yield qid + _OG
            yield qid + _CHANGED

    def __len__(self) -> int:
        return 2 * len(self._queries)


# --------------------------------------------------------------------------------------------- BRIGHT


def bright_instruction(domain: str, long_context: bool = False) -> str:
    """The default instruction of a BRIGHT domain: BRIGHT's own task instruction for instruction-tuned
    embedders (its e5-mistral, SFR, Qwen and GritLM configs) without the model-specific frame
    (``Instruct: ...\\nQuery:``), word for word, the domain spelled as BRIGHT spells it (``earth_science``)."""
    unit = "documents" if long_context else "passages"
    if domain == "pony":
        return f"Given a pony question, retrieve relevant {unit} that help answer the question"
    if domain == "leetcode":
        return "Given a coding problem, retrieve relevant examples that help answer the problem"
    if domain == "theoremqa_theorems":
        return "Given a Math problem, retrieve relevant theorems that help answer the problem"
    # aops: its config is not among those we could read; it is the same task as theoremqa_questions
    # (mteb gives both the same prompt), so it gets the same words.
    if domain in ("aops", "theoremqa_questions"):
        return "Given a Math problem, retrieve relevant examples that help answer the problem"
    return f"Given a {domain} post, retrieve relevant {unit} that help answer the post"


def _bright_queries(
    table: Rows,
    *,
    domain: str,
    long_context: bool,
    instruction: str | None,
) -> tuple[dict[str, InstructionQuery], dict[str, dict[str, int]], dict[str, list[str]]]:
    text_instruction = bright_instruction(domain, long_context) if instruction is None else instruction
    gold_key = "gold_ids_long" if long_context else "gold_ids"
    queries: dict[str, InstructionQuery] = {}
    qrels: dict[str, dict[str, int]] = {}
    excluded: dict[str, list[str]] = {}
    for line, row in table:
        qid = _ident(row, ("id", "_id", "qid"), table, line)
        if qid in queries:
            raise DataError(f"duplicate query id {qid!r}", table.source, line, "id")
        queries[qid] = InstructionQuery(
            text=_text(row, ("query",), table, line, allow_empty=False), instruction_og=text_instruction
        )
        gold = _string_list(row, gold_key, table, line, required=True)
        drop = [d for d in _string_list(row, "excluded_ids", table, line, required=False) if d != "N/A"]
        overlap = sorted(set(gold) & set(drop))
        if overlap:
            raise DataError(
                f"document {overlap[0]!r} is both gold and excluded", table.source, line, "excluded_ids"
            )
        if gold:
            qrels[qid] = dict.fromkeys(gold, 1)
        if drop:
            excluded[qid] = drop
    if not queries:
        raise DataError("no queries", table.source)
    return queries, qrels, excluded


def bright_from_rows(
    documents: Rows | Sequence[Mapping[str, Any]],
    examples: Rows | Sequence[Mapping[str, Any]],
    *,
    domain: str,
    long_context: bool = False,
    instruction: str | None = None,
    name: str | None = None,
    source: str = "",
) -> Benchmark:
    """A BRIGHT domain from its ``documents`` (or ``long_documents``) and ``examples`` rows.

    ``instruction=None`` gives each query :func:`bright_instruction` of the domain; ``""`` gives none.
    With ``long_context`` the qrels come from ``gold_ids_long`` and the main score is ``recall_at_1`` (as in
    BRIGHT's long-document setting and mteb); otherwise ``ndcg_at_10``.
    """
    docs = _corpus(_as_rows(documents, "documents"), ("id", "_id"), ("content", "text"))
    queries, qrels, excluded = _bright_queries(
        _as_rows(examples, "examples"), domain=domain, long_context=long_context, instruction=instruction
    )
    return Benchmark(
        name=name or f"bright/{domain}" + ("-long" if long_context else ""),
        corpus=docs,
        queries=queries,
        qrels_og=qrels,
        excluded=excluded,
        main_score="recall_at_1" if long_context else "ndcg_at_10",
        source=source,
    )


def _bright_domain(topics: Path, domain: str | None) -> str:
    """The BRIGHT domain given (BRIGHT's ``earth_science`` or anserini's ``earth-science``) or, when none is,
    read from a file name such as anserini's ``topics.bright-earth-science-original.jsonl.gz``. An unknown or
    unreadable domain is an error: each domain has its own instruction, and a wrong one changes the scores."""
    known = {d.replace("_", "-"): d for d in BRIGHT_DOMAINS}
    if domain is not None:
        if domain.replace("_", "-").lower() in known:
            return known[domain.replace("_", "-").lower()]
        raise DataError(
            f"unknown BRIGHT domain {domain!r}", topics, field="domain", hint=f"one of {', '.join(BRIGHT_DOMAINS)}"
        )
    match = re.search(r"bright-([a-z0-9_-]+?)(?:-original|-long|-[a-z0-9]+-reason)?\.jsonl", topics.name.lower())
    if match and match.group(1).replace("_", "-") in known:
        return known[match.group(1).replace("_", "-")]
    raise DataError(
        "no BRIGHT domain in the file name" + (f" ({match.group(1)!r} is none)" if match else ""),
        topics,
        field="domain",
        hint=f"name it topics.bright-<domain>-original.jsonl.gz or pass domain= one of {', '.join(BRIGHT_DOMAINS)}",
    )


def load_bright_topics(
    topics: str | Path,
    *,
    qrels: str | Path | None = None,
    documents: str | Path | None = None,
    domain: str | None = None,
    long_context: bool = False,
    instruction: str | None = None,
    name: str | None = None,
) -> Benchmark:
    """BRIGHT from local files: ``topics`` holds BRIGHT ``examples`` rows as JSONL(.gz) (anserini ships them
    as ``topics.bright-<domain>-original.jsonl.gz``), ``qrels`` optional TREC qrels that replace the
    ``gold_ids``, ``documents`` optional JSONL(.gz) rows {``id``, ``content``}.

    Without documents the corpus is empty: such a benchmark can score runs made elsewhere (an anserini run
    read with :func:`~infembed.data.formats.read_trec_run`) but cannot be searched. The domain (for the default
    instruction) is read from the file name when not given (BRIGHT's ``earth_science`` or anserini's
    ``earth-science``); an unknown domain is a :class:`DataError`.
    """
    from infembed.data.formats import read_trec_qrels

    topics_path = Path(topics)
    domain = _bright_domain(topics_path, domain)
    table = Rows.from_jsonl(topics_path)
    queries, gold, excluded = _bright_queries(
        table, domain=domain, long_context=long_context, instruction=instruction
    )
    judged = gold
    if qrels is not None:
        judged = read_trec_qrels(qrels)
        for qid, docs in judged.items():
            if qid not in queries:
                raise DataError(f"query id {qid!r} is not in {topics_path.name}", qrels, field="qid")
            clash = sorted(set(docs) & set(excluded.get(qid, ())))
            if clash:
                raise DataError(
                    f"document {clash[0]!r} of query {qid!r} is judged and excluded", qrels, field="docid"
                )
    corpus: dict[str, Document] = {}
    if documents is not None:
        corpus = _corpus(Rows.from_jsonl(documents), ("id", "_id"), ("content", "text"))
    return Benchmark(
        name=name or f"bright/{domain}",
        corpus=corpus,
        queries=queries,
        qrels_og=judged,
        excluded=excluded,
        main_score="recall_at_1" if long_context else "ndcg_at_10",
        source=str(topics_path),
    )


# --------------------------------------------------------------------------------------------- MAIR


def mair_from_rows(
    queries: Rows | Sequence[Mapping[str, Any]],
    docs: Rows | Sequence[Mapping[str, Any]],
    *,
    name: str = "mair",
    source: str = "",
) -> Benchmark:
    """One MAIR split from its query rows {qid, instruction, query, labels: [{id, score}]} and doc rows
    {id, doc}. Each query keeps its own instruction (og); there is no changed one."""
    corpus = _corpus(_as_rows(docs, "docs"), ("id", "_id"), ("doc", "text", "content"))
    table = _as_rows(queries, "queries")
    parsed: dict[str, InstructionQuery] = {}
    qrels: dict[str, dict[str, int]] = {}
    for line, row in table:
        qid = _ident(row, ("qid", "id", "_id"), table, line)
        if qid in parsed:
            raise DataError(f"duplicate query id {qid!r}", table.source, line, "qid")
        parsed[qid] = InstructionQuery(
            text=_text(row, ("query", "text"), table, line, allow_empty=False),
            instruction_og=_text(row, ("instruction",), table, line, allow_empty=True),
        )
        labels = row.get("labels")
        if not isinstance(labels, (list, tuple)):
            what = (
                "missing"
                if labels is None
                else f"expected a list of {{id, score}}, got {type(labels).__name__}"
            )
            raise DataError(what, table.source, line, "labels")
        judged: dict[str, int] = {}
        for position, label in enumerate(labels):
            field = f"labels[{position}]"
            if not isinstance(label, Mapping):
                raise DataError(
                    f"expected {{id, score}}, got {type(label).__name__}", table.source, line, field
                )
            did = _id_value(label.get("id"), table.source, line, f"{field}.id")
            judged[did] = _score(label.get("score", 1), table, line, f"{field}.score")
        if judged:
            qrels[qid] = judged
    if not parsed:
        raise DataError("no queries", table.source)
    return Benchmark(
        name=name, corpus=corpus, queries=parsed, qrels_og=qrels, main_score="ndcg_at_10", source=source
    )


def _mair_docs_split(query_split: str) -> str:
    """The doc split of a query split, as MAIR's ``mair.py`` pairs them: ``queries`` -> ``docs``,
    ``CQADupStack_Android_queries`` -> ``CQADupStack_Android_docs``."""
    if query_split == "queries":
        return "docs"
    if query_split.endswith("_queries"):
        return query_split[: -len("_queries")] + "_docs"
    return query_split


def load_mair_task(
    task: str,
    *,
    revision: str | None = None,
    docs_revision: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Benchmark]:
    """Every split of a MAIR task, as ``{split: Benchmark}`` (MAIR averages them weighted by query count).
    ``revision`` pins ``MAIR-Queries`` and ``docs_revision`` ``MAIR-Docs`` (two repos, two histories)."""
    spec = get_spec(f"mair/{task}")
    query_tables = fetch_hub_rows(spec.repo, spec.subset, revision=revision, cache_dir=cache_dir)
    return {
        split: _mair_split(spec, split, table, docs_revision, cache_dir)
        for split, table in query_tables.items()
    }


def _mair_split(
    spec: BenchmarkSpec, split: str, table: Rows, docs_revision: str | None, cache_dir: str | None
) -> Benchmark:
    doc_split = _mair_docs_split(split)
    tables = fetch_hub_rows(
        MAIR_DOCS_REPO, spec.subset, doc_split, revision=docs_revision, cache_dir=cache_dir
    )
    name = spec.name if split == "queries" else f"{spec.name}/{split}"
    bench = mair_from_rows(
        table, tables[doc_split], name=name, source=f"hf://datasets/{spec.repo}/{spec.subset}/{split}"
    )
    bench.main_score_source = spec.main_score_source
    return bench


# --------------------------------------------------------------------------------------------- hub seam


def fetch_hub_rows(
    repo: str,
    config: str | None,
    split: str | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Rows]:
    """``{split: Rows}`` of one hub dataset config (all its splits, or just ``split``), via
    ``datasets.load_dataset``. The only function here that touches the network; tests replace it."""
    try:
        import datasets
    except ImportError:
        raise DataError(
            "reading from the Hugging Face hub needs the 'datasets' package",
            f"hf://datasets/{repo}",
            hint="pip install 'infembed[hub]'",
        ) from None
    where = f"hf://datasets/{repo}" + (f"/{config}" if config else "")
    try:
        loaded = datasets.load_dataset(repo, config, split=split, revision=revision, cache_dir=cache_dir)
    except Exception as error:  # any hub failure (network, missing config/split) becomes one clear message
        raise DataError(
            f"could not load{' split ' + repr(split) if split else ''} ({type(error).__name__}: {error})",
            where,
            hint="check the name and the network, or set HF_HUB_OFFLINE=1 after one download; "
            "a local benchmark dir works offline",
        ) from None
    splits = {split: loaded} if split is not None else dict(loaded)
    return {name: Rows(f"{where}/{name}", ds.to_list()) for name, ds in splits.items()}


def _only_split(tables: dict[str, Rows], wanted: str | None, where: str) -> Rows:
    if wanted is not None and wanted in tables:
        return tables[wanted]
    if len(tables) == 1:
        return next(iter(tables.values()))
    raise DataError(f"expected split {wanted!r}, found {sorted(tables)}", where)


# --------------------------------------------------------------------------------------------- loading by name

_OPTIONS = {
    "followir": {"layout", "revision", "cache_dir"},
    "bright": {"long_context", "instruction", "reasoning", "revision", "cache_dir"},
    "mair": {"split", "revision", "docs_revision", "cache_dir"},
}


def load_named_benchmark(name: str, **options: Any) -> Benchmark:
    """A registered benchmark by name, read from the hub (cached by ``datasets`` after the first download).

    Options: ``revision`` (a commit; default the registry's), ``cache_dir``; for FollowIR ``layout`` =
    ``"original"`` (``jhu-clsp/<x>-instructions``, default) or ``"mteb"`` (the mteb 2.x copies); for BRIGHT
    ``long_context`` (``long_documents`` and ``gold_ids_long``), ``instruction`` (see :func:`bright_from_rows`)
    and ``reasoning`` (e.g. ``"gpt4"`` for the ``gpt4_reason`` queries); for MAIR ``split`` and
    ``docs_revision`` (``revision`` pins ``MAIR-Queries``, ``docs_revision`` ``MAIR-Docs``).
    A FollowIR hub repo name (``jhu-clsp/core17-instructions``, ``jhu-clsp/core17-instructions-mteb``,
    ``mteb/Core17InstructionRetrieval``) reads that repo, in its layout, at the revision mteb pins for it.
    Raises :class:`DataError` listing the known names for an unknown one.
    """
    spec, split = _resolve(name)
    unknown = sorted(set(options) - _OPTIONS[spec.family])
    if unknown:
        raise DataError(
            f"unknown option(s) {', '.join(unknown)} for {spec.name}",
            spec.name,
            hint=f"known: {', '.join(sorted(_OPTIONS[spec.family]))}",
        )
    revision = options.get("revision")
    cache_dir = options.get("cache_dir")
    if spec.family == "followir":
        copy = HUB_COPIES.get(name.strip().strip("/").lower())
        if copy is None:
            return _load_followir(spec, options.get("layout", "original"), revision, cache_dir)
        _, repo, pinned, layout = copy
        if options.get("layout", layout) != layout:
            raise DataError(
                f"{repo} is in the {layout!r} layout", name, field="layout", hint="leave layout out for a repo name"
            )
        return _load_followir(spec, layout, revision, cache_dir, copy=(repo, pinned))
    if spec.family == "bright":
        return _load_bright(spec, options, revision, cache_dir)
    return _load_mair(spec, options.get("split") or split, revision, options.get("docs_revision"), cache_dir)


def _load_mair(
    spec: BenchmarkSpec,
    split: str | None,
    revision: str | None,
    docs_revision: str | None,
    cache_dir: str | None,
) -> Benchmark:
    query_tables = fetch_hub_rows(spec.repo, spec.subset, revision=revision, cache_dir=cache_dir)
    if split is None:
        if len(query_tables) != 1:
            choices = ", ".join(f"{spec.name}/{s}" for s in sorted(query_tables))
            raise DataError(
                f"MAIR task {spec.subset} has {len(query_tables)} splits, each with its own corpus",
                spec.name,
                hint=f"name one: {choices}; or load all with infembed.data.hub.load_mair_task",
            )
        split = next(iter(query_tables))
    if split not in query_tables:  # names are case-insensitive (cqadupstack_android_queries)
        split = {s.lower(): s for s in query_tables}.get(split.lower(), split)
    if split not in query_tables:
        raise DataError(f"no split {split!r}", spec.name, hint=f"splits: {', '.join(sorted(query_tables))}")
    bench = _mair_split(spec, split, query_tables[split], docs_revision, cache_dir)
    bench.source = f"hf://datasets/{spec.repo}@{revision or 'main'}/{spec.subset}/{split}"
    return bench


def _load_followir(
    spec: BenchmarkSpec,
    layout: str,
    revision: str | None,
    cache_dir: str | None,
    copy: tuple[str, str | None] | None = None,
) -> Benchmark:
    """``copy`` (repo, revision) reads that hub repo (one of :data:`HUB_COPIES`) instead of the layout's
    default one."""
    if layout == "original":
        repo, rev = copy or (spec.repo, spec.revision)
    elif layout == "mteb" and spec.mteb_repo:
        repo, rev = copy or (spec.mteb_repo, spec.mteb_revision)
    else:
        raise DataError(f"unknown layout {layout!r}", spec.name, field="layout", hint="'original' or 'mteb'")
    rev = revision or rev

    def table(config: str, split: str | None = None) -> Rows:
        return _only_split(fetch_hub_rows(repo, config, revision=rev, cache_dir=cache_dir), split, repo)

    def optional_table(config: str) -> Rows | None:
        try:
            return table(config)
        except DataError as error:
            logger.warning("%s: no %s table (%s)", repo, config, error)
            return None

    common = {
        "name": spec.name,
        "main_score": spec.main_score,
        "source": f"hf://datasets/{repo}@{rev or 'main'}",
    }
    if layout == "original":
        bench = followir_from_rows(
            table("corpus"),
            table("queries"),
            table("qrels_og", "test"),
            table("qrels_changed", "test"),
            table("top_ranked"),
            **common,
        )
    else:
        corpus, queries, qrels = table("corpus"), table("queries"), table("default", "test")
        qrel_diff = optional_table("qrel_diff")
        if qrel_diff is None:
            logger.warning("%s: p-MRR's changed documents are recomputed from the qrels instead", repo)
        bench = followir_from_mteb_rows(
            corpus,
            queries,
            qrels,
            optional_table("instruction"),  # some copies hold the instruction as a column of the queries
            table("top_ranked"),
            qrel_diff,
            **common,
        )
    bench.main_score_source = spec.main_score_source
    return bench


def _load_bright(
    spec: BenchmarkSpec, options: dict[str, Any], revision: str | None, cache_dir: str | None
) -> Benchmark:
    long_context = bool(options.get("long_context", False))
    if long_context and spec.subset not in BRIGHT_LONG_DOMAINS:
        raise DataError(
            f"BRIGHT {spec.subset} has no long documents",
            spec.name,
            field="long_context",
            hint=f"long documents exist for {', '.join(BRIGHT_LONG_DOMAINS)}",
        )
    rev = revision or spec.revision
    reasoning = options.get("reasoning")
    query_config = f"{reasoning}_reason" if reasoning else "examples"
    doc_config = "long_documents" if long_context else "documents"
    documents = fetch_hub_rows(spec.repo, doc_config, spec.subset, revision=rev, cache_dir=cache_dir)[
        spec.subset
    ]
    examples = fetch_hub_rows(spec.repo, query_config, spec.subset, revision=rev, cache_dir=cache_dir)[
        spec.subset
    ]
    bench = bright_from_rows(
        documents,
        examples,
        domain=spec.subset,
        long_context=long_context,
        instruction=options.get("instruction"),
        name=spec.name + ("-long" if long_context else "") + (f"-{reasoning}" if reasoning else ""),
        source=f"hf://datasets/{spec.repo}@{rev or 'main'}",
    )
    bench.main_score_source = spec.main_score_source
    return bench


# --------------------------------------------------------------------------------------------- InF-IR rows

_FEWSHOT = "_fewshot"


def triplets_from_rows(rows: Rows | Sequence[Mapping[str, Any]], limit: int | None = None) -> list[Triplet]:
    """InF-IR rows (hub schema) as :class:`Triplet`s. Accepts ``document`` for ``document_positive`` and
    the reference code's ``<field>_fewshot`` names; errors name the table, row and field."""
    from infembed.data.formats import parse_triplet

    table = _as_rows(rows, "InF-IR rows")
    out: list[Triplet] = []
    for line, row in table:
        if limit is not None and len(out) >= limit:
            break
        # a hub table gives every row every column, None where a row lacks it (e.g. `document` beside
        # `document_positive` in a mixed release): None means absent here
        obj = {key: value for key, value in row.items() if value is not None}
        for key in [k for k in obj if k.endswith(_FEWSHOT)]:
            base = key[: -len(_FEWSHOT)]
            if base in (*TRIPLET_FIELDS, "document") and base not in obj:
                obj[base] = obj.pop(key)
        out.append(parse_triplet(obj, table.source, line))
    if not out and limit != 0:
        raise DataError("no InF-IR rows found", table.source)
    return out


def load_inf_ir(
    name_or_path: str | Path = INF_IR_REPO, split: str | None = None, limit: int | None = None
) -> list[Triplet]:
    """InF-IR training rows from a local JSONL file or dir (:func:`~infembed.data.formats.read_triplets`) or
    a hub dataset (``InF-IR/InF-IR`` by default; any dataset with the InF-IR fields works).

    A hub name may name its split, ``NAME:SPLIT`` (``InF-IR/InF-IR:msmarco``; ``split`` does the same). With
    no split every split is read, in the data set's order, and the splits are logged: ``InF-IR/InF-IR`` has no
    ``train`` split (the reference code reads ``load_dataset("InF-IR/InF-IR")["msmarco"]``). ``limit`` reads
    only the first rows (with a split named, only those are downloaded and converted)."""
    from infembed.data.formats import read_triplets

    path = Path(name_or_path)
    if path.exists():
        return read_triplets(path, limit=limit)
    text = str(name_or_path)
    match = re.fullmatch(r"([\w.-]+/[\w.-]+)(?::([\w.-]+))?", text)
    if match is None or match.group(1).endswith((".jsonl", ".json", ".gz")):
        raise DataError(
            "no such file or directory",
            text,
            hint="give an InF-IR JSONL file or dir, or a hub dataset name such as InF-IR/InF-IR or "
            "InF-IR/InF-IR:msmarco (NAME:SPLIT)",
        )
    repo, named = match.group(1), match.group(2)
    if named is not None and split is not None and named != split:
        raise DataError(f"split {named!r} in the name but split={split!r}", text, field="split")
    return _inf_ir_from_hub(repo, named or split, limit)


def _inf_ir_from_hub(repo: str, split: str | None, limit: int | None) -> list[Triplet]:
    if split is not None:
        wanted = split if limit is None else f"{split}[:{limit}]"
        tables = fetch_hub_rows(repo, None, wanted)
        return triplets_from_rows(next(iter(tables.values())), limit=limit)
    tables = fetch_hub_rows(repo, None)
    logger.warning(
        "%s: no split named, so every split is read: %s (name one as %s:SPLIT)",
        repo,
        ", ".join(f"{name} ({len(rows)} rows)" for name, rows in tables.items()),
        repo,
    )
    rows: list[Triplet] = []
    for table in tables.values():
        if limit is not None and len(rows) >= limit:
            break
        rows += triplets_from_rows(table, limit=None if limit is None else limit - len(rows))
    return rows


__all__ = [
    "BRIGHT_DOMAINS",
    "BRIGHT_LONG_DOMAINS",
    "INF_IR_REPO",
    "MAIR_TASKS",
    "REGISTRY",
    "BenchmarkSpec",
    "Rows",
    "bright_from_rows",
    "bright_instruction",
    "fetch_hub_rows",
    "followir_from_mteb_rows",
    "followir_from_rows",
    "get_spec",
    "list_benchmarks",
    "load_bright_topics",
    "load_inf_ir",
    "load_mair_task",
    "load_named_benchmark",
    "mair_from_rows",
    "triplets_from_rows",
]
