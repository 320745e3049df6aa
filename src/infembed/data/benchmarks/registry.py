"""The named benchmarks, declared as data: one :class:`BenchmarkSpec` each (name, hub repo, revision, main
score, citation) in :data:`REGISTRY`, with the families' citations.

=========================  ==========================================  ===================  ===============
name                       source                                      main score           changed instr.
=========================  ==========================================  ===================  ===============
``followir/robust04``      ``jhu-clsp/robust04-instructions``          ``map_at_1000``      yes (p-MRR)
``followir/core17``        ``jhu-clsp/core17-instructions``            ``map_at_1000``      yes (p-MRR)
``followir/news21``        ``jhu-clsp/news21-instructions``            ``ndcg_at_5``        yes (p-MRR)
``bright/<domain>``        ``xlangai/BRIGHT`` (12 domains)             ``ndcg_at_10``       no
``mair/<task>[/<split>]``  ``MAIR-Bench/MAIR-Queries`` + ``-Docs``     ``ndcg_at_10``       no
=========================  ==========================================  ===================  ===============

The family modules (:mod:`~infembed.data.benchmarks.followir`, ``bright``, ``mair``) read a spec's tables;
:func:`infembed.data.benchmarks.load_named_benchmark` turns a name into a benchmark.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from infembed.data.errors import DataError

#: the metrics evaluation computes (``infembed.evaluate.metrics.trec_scores``), by family, each ``<family>_at_<k>``
METRIC_FAMILIES = ("map", "ndcg", "recall", "precision", "mrr")
_METRIC = re.compile(rf"({'|'.join(METRIC_FAMILIES)})_at_([1-9][0-9]*)")
VALID_METRICS = "map_at_K, ndcg_at_K, recall_at_K, precision_at_K or mrr_at_K with a whole K >= 1 (e.g. map_at_1000, ndcg_at_10, ndcg_at_5)"


def is_metric_name(name: object) -> bool:
    """Whether ``name`` is a metric the evaluation computes, so it can be a benchmark's headline (main score)."""
    return isinstance(name, str) and _METRIC.fullmatch(name) is not None


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


def list_benchmarks(family: str | None = None) -> list[str]:
    """The registered names, optionally of one family (``followir``, ``bright``, ``mair``)."""
    return [name for name, spec in REGISTRY.items() if family is None or spec.family == family]


def get_spec(name: str) -> BenchmarkSpec:
    """The spec of a registered name (case-insensitive); for ``mair/<task>/<split>`` the task's spec."""
    spec, _ = resolve(name)
    return spec


def resolve(name: str) -> tuple[BenchmarkSpec, str | None]:
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
        "all in infembed.data.benchmarks.registry.MAIR_TASKS). A local benchmark dir holds qrels_og.tsv (instruction benchmark) "
        "or qrels/<split>.tsv (BEIR)."
    )
    if close:
        text += f" Did you mean {' or '.join(close)}?"
    return text
