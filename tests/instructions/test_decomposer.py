"""The learned decomposer: labels -> token tags -> Instruction round trip, the data reader's errors, training a
tiny one from labelled rows (the real training code, two epochs), that model on hostile input, and missing or
corrupt weight files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from infembed.data.errors import DataError
from infembed.instructions import Instruction, split_instruction
from infembed.instructions.clauses import sentence_spans
from infembed.instructions.tagging import BEGIN, CUE, INSIDE, KEEP, decode, labelled_from_json, token_tags

ROWS = [
    (
        {
            "text": "Find reviews of hybrid cars, not electric cars.",
            "aspects": ["electric cars"],
            "clauses": [", not electric cars"],
        },
        Instruction("Find reviews of hybrid cars.", ["electric cars"], ["Find reviews of hybrid cars."]),
    ),
    (
        {
            "text": "Skip hostels, motels and campsites; I want boutique hotels in Porto.",
            "aspects": ["hostels", "motels", "campsites"],
            "clauses": ["Skip hostels, motels and campsites;"],
        },
        Instruction("I want boutique hotels in Porto.", ["hostels", "motels", "campsites"]),
    ),
    (
        {
            "text": "Papers on graph neural networks. Surveys earn no credit here.",
            "aspects": ["Surveys"],
            "clauses": ["Surveys earn no credit here."],
        },
        Instruction("Papers on graph neural networks.", ["Surveys"]),
    ),
    (
        {"text": "Hotels in Lisbon near the river.", "aspects": [], "clauses": []},
        Instruction("Hotels in Lisbon near the river."),
    ),
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from infembed.model.retriever import default_model_path

    return AutoTokenizer.from_pretrained(default_model_path())


@pytest.mark.parametrize(("row", "expected"), ROWS, ids=[r[0]["text"][:20] for r in ROWS])
def test_gold_tags_decode_to_the_labelled_split(tokenizer, row, expected):
    item = labelled_from_json(row)
    enc = tokenizer(item.text, return_offsets_mapping=True)
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    tags = token_tags(item, offsets)
    split = decode(item.text, offsets, tags)
    assert split == expected
    assert split.guards == list(expected.guards) or not any(expected.guards)
    # coordinated items are separate aspects: each begins with its own BEGIN tag
    assert sum(t == BEGIN for t in tags) == len(row["aspects"])
    assert set(tags) <= {KEEP, CUE, BEGIN, INSIDE, -100}


@pytest.mark.parametrize(
    ("text", "excluded", "clause"),
    [
        # an exception or reason clause after an exclusion: the model tags it as part of the exclusion (cue), but
        # what it names is not excluded
        (
            "Spin liquids. Muon studies are off-topic unless they also report neutron data.",
            ["Muon studies"],
            "unless they also report neutron data",
        ),
        (
            "Lenses for canon, nothing from outside the EU because of import taxes.",
            ["outside the EU"],
            "because of import taxes",
        ),
        # a reason before the exclusion is no exception; a clause joined on after the reason excludes again
        ("Because I am vegan, skip anything with meat.", ["meat"], "Because I am vegan, skip anything with"),
        (
            "Phones, nothing with a tiny screen because his eyes are bad, and no flip phones.",
            ["tiny screen", "flip phones"],
            "because his eyes are bad, and no",
        ),
        # a turn back to what is wanted after the exclusion; "don't focus on" is none
        (
            "Soil claims: skip the marketing copy and stick to field trials.",
            ["marketing copy"],
            "skip the marketing copy and stick to field trials",
        ),
        (
            "Energy: skip wind farms, and don't focus on solar either.",
            ["wind farms", "solar"],
            "skip wind farms, and don't focus on solar",
        ),
        # a carve-out from an exclusion is wanted; "except" with nothing excluded before it excludes what it names;
        # a clause joined on after the carve-out excludes again
        (
            "Drop surgical papers, except those comparing open with keyhole repair; keep those.",
            ["surgical papers"],
            "Drop surgical papers, except those comparing open with keyhole repair",
        ),
        ("Skip the sequels apart from the third one.", ["sequels"], "Skip the sequels apart from the third one"),
        ("List every lake in the region except Lake Ohrid.", ["Lake Ohrid"], "except"),
        (
            "No pastries other than croissants, and no bread.",
            ["pastries", "bread"],
            "No pastries other than croissants, and no bread",
        ),
    ],
)
def test_an_exception_or_reason_clause_is_not_excluded(tokenizer, text, excluded, clause):
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    named = {
        "Muon studies",
        "neutron data",
        "outside the EU",
        "import taxes",
        "meat",
        "tiny screen",
        "flip phones",
    }
    named |= {"marketing copy", "field trials", "wind farms", "solar"}
    named |= {"surgical papers", "keyhole repair", "sequels", "third one", "Lake Ohrid", "pastries", "croissants", "bread"}
    spans = [(text.index(n), text.index(n) + len(n)) for n in named if n in text]
    cue = (text.index(clause), text.index(clause) + len(clause))
    tags = []
    for a, b in offsets:
        inside = next((s for s, e in spans if s <= a < e), None)
        if inside is not None:
            tags.append(BEGIN if a == inside else INSIDE)
        elif cue[0] <= a < cue[1] or text[a:b] in ("are", "off", "-", "topic", "nothing", "from"):
            tags.append(CUE)
        else:
            tags.append(KEEP)
    assert decode(text, offsets, tags).exclude == excluded


def test_a_hyphenated_compound_is_never_cut_into_aspects_at_its_hyphens(tokenizer):
    # the model may tag a hyphen inside "shock-boundary-layer interaction" as cue (it links list items elsewhere):
    # the compound stays one word, so the aspect is not cut into "shock", "boundary", "layer interaction"
    text = "Skip papers on shock-boundary-layer interaction and on children's kites - the rest is fine."
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    start, end = text.index("shock"), text.index(" and on")
    kite = text.index("children"), text.index(" - the")
    tags = []
    for a, b in offsets:
        if text[a:b] == "-" and start < a < end:
            tags.append(CUE)
        elif a == start or a == kite[0]:
            tags.append(BEGIN)
        elif start < a < end or kite[0] < a < kite[1]:
            tags.append(INSIDE)
        elif text[a:b] in ("Skip", "and"):
            tags.append(CUE)
        else:
            tags.append(KEEP)
    split = decode(text, offsets, tags)
    assert split.exclude == ["shock-boundary-layer interaction", "children's kites"]


@pytest.mark.parametrize(
    ("text", "excluded", "keep"),
    [
        ("vite ssr hydration mismatch -webpack", ["webpack"], "vite ssr hydration mismatch"),
        ("wireguard site-to-site -tailscale -zerotier", ["tailscale", "zerotier"], "wireguard site-to-site"),
        ('hiking boots -"gore tex" waterproof', ["gore tex"], "hiking boots waterproof"),
        ("-reddit tokio vs smol -site:medium.com.", ["reddit", "medium.com"], "tokio vs smol"),
        # a minus before a number, a hyphen inside a word, a dash between spaces: no operator
        ("winter lows of -40 degrees in e-mail archives - a dash", [], None),
        # command-line flags are no operators
        ("why does ls -la hide files; java -jar app.jar; gcc -std=c++20; docker run -it", [], None),
        # a line holding a flag with its argument is a command line: none of its minus signs excludes
        ("find . -type f -size +100M -mtime -7 -user backup", [], None),
        # the minus sign U+2212 is arithmetic as often: none
        ("spending tracker: +income \u2212expenses \u2192 balance", [], None),
        # a filter line's negated fields: != (or <>) and "not in (...)"
        (
            "domain=clinical; population!=paediatric; publisher in (NICE, GOLD)",
            ["paediatric"],
            "domain=clinical; publisher in (NICE, GOLD)",
        ),
        (
            "source: CISA | vendor not in (Microsoft, 'Cisco') | year: 2024",
            ["Microsoft", "Cisco"],
            "source: CISA | | year: 2024",
        ),
        ('region != "North America"; tier: gold', ["North America"], "tier: gold"),
        ("Iceland itinerary, tours \u2260 wanted, self-drive only", [], None),  # the sign is prose as often
        ("status: open & owner <> bot-account", ["bot-account"], "status: open &"),
        # no filter line: a question about the operator, a lone comparison, "not in" without a list
        ("why is a != b true in JavaScript", [], None),
        ("x != y", [], None),
        ("files not in git (untracked ones) keep showing up", [], None),
        # query languages pasted into the search box: SQL, Lucene / Elasticsearch, Kusto, MongoDB, PubMed
        (
            "SELECT * FROM trials WHERE phase = 3 AND sponsor <> 'Pfizer' AND country NOT IN ('US', 'CA')",
            ["Pfizer", "US", "CA"],
            "SELECT * FROM trials WHERE phase = 3 AND AND",
        ),
        (
            'genre:thriller AND NOT author:"Dan Brown" AND -format:(audiobook OR ebook)',
            ["Dan Brown", "audiobook", "ebook"],
            "genre:thriller AND AND",
        ),
        (
            'Incidents | where Severity == "High" and Source !in~ ("test", "staging") | where Title !contains "drill"',
            ["test", "staging", "drill"],
            'Incidents | where Severity == "High" and | where',
        ),
        (
            '{"team": "infra", "label": {"$nin": ["wontfix", "duplicate"]}, "state": {"$ne": "closed"}}',
            ["wontfix", "duplicate", "closed"],
            '{"team": "infra", "label": { }, "state": { }}',
        ),
        (
            "WHERE region = 'EU' AND NOT (channel = 'retail' OR segment:\"SMB\")",
            ["retail", "SMB"],
            "WHERE region = 'EU' AND",
        ),
        (
            "(ketamine[tiab] AND depress*[tiab]) NOT (rat[tiab] OR mice[tiab])",
            ["rat", "mice"],
            "(ketamine[tiab] AND depress*[tiab])",
        ),
        ("lang:go ctx -repo:archive/ -path:**/generated/**", ["archive", "generated"], "lang:go ctx"),
        # arXiv's ANDNOT (session 24)
        ("cat:cs.LG AND ti:transformer ANDNOT abs:(vision OR speech)", ["vision", "speech"], "cat:cs.LG AND ti:transformer"),
        # a bare value ends at a separator or a keyword in capitals, so "and" inside a name stays in it
        ("vendor <> Johnson and Johnson; year: 2020", ["Johnson and Johnson"], "year: 2020"),
        # no topic: a comparison with zero, null or N/A is a constraint; prose in capitals; a question about SQL
        ("WHERE refunded_amount <> 0 AND status != 'N/A'", [], None),
        ("it is NOT (yet) available in stores", [], None),
        ("why does WHERE x <> NULL never match", [], None),
        # the logic sign is a minus; a field ends at any space before a keyword, U+0085 too
        ("mould remediation ¬bleach ¬ozone-generators", ["bleach", "ozone-generators"], "mould remediation"),
        ("WHERE tier = 'gold' AND carrier <> 'Acme'\x85AND year = 2024", ["Acme"], "WHERE tier = 'gold' AND AND year = 2024"),
    ],
)
def test_a_search_box_minus_excludes_its_term_where_the_model_tags_nothing(tokenizer, text, excluded, keep):
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    split = decode(text, offsets, [KEEP] * len(offsets))
    assert split.exclude == excluded
    assert split.keep == (keep if keep is not None else text)


@pytest.mark.parametrize(
    ("row", "excluded"),
    [
        # the model tags list links as cue ("around X or in Y" in a long narrative sentence): no exclusion
        (
            {
                "text": "Flows behind shocks, around blunt noses or in expanding nozzles.",
                "aspects": ["blunt noses", "expanding nozzles"],
                "clauses": ["around blunt noses or in expanding nozzles"],
            },
            [],
        ),
        (
            {
                "text": "Studies of X, as well as the effects of suction.",
                "aspects": ["effects of suction"],
                "clauses": [", as well as the effects of suction"],
            },
            [],
        ),
        # a negation that loosens says no exclusion, even with other words tagged as cue
        (
            {
                "text": "Results for plates. Explicit treatment of Joule heating is not required.",
                "aspects": ["Joule heating"],
                "clauses": ["Explicit treatment of Joule heating is not required."],
            },
            [],
        ),
        (
            {
                "text": "Walnut brownies; walnuts are optional.",
                "aspects": ["walnuts"],
                "clauses": ["walnuts are optional"],
            },
            [],
        ),
        # real cues keep their aspects, also beside a loosening sentence
        (
            {
                "text": "Flows around blunt noses are not relevant.",
                "aspects": ["blunt noses"],
                "clauses": ["Flows around blunt noses are not relevant."],
            },
            ["blunt noses"],
        ),
        (
            {
                "text": "Cost data need not be given. Carbon frames are a hard pass.",
                "aspects": ["Carbon frames"],
                "clauses": ["Carbon frames are a hard pass."],
            },
            ["Carbon frames"],
        ),
        (
            {
                "text": "Hybrid cars rather than electric ones.",
                "aspects": ["electric ones"],
                "clauses": [" rather than electric ones"],
            },
            ["electric ones"],
        ),
        # a symbol can be the cue; a clause that only links continues the list before it, or takes the verdict
        # after its question
        (
            {
                "text": "pizza open now, pineapple toppings ❌",
                "aspects": ["pineapple toppings"],
                "clauses": ["pineapple toppings ❌"],
            },
            ["pineapple toppings"],
        ),
        # but a check mark (or a flag) affirms: a filter list of ticks excludes nothing
        (
            {
                "text": "flat to rent | balcony ✓ | pets ✔️ | ships to 🇨🇦",
                "aspects": ["pets", "ships"],
                "clauses": ["pets ✔️", "ships to 🇨🇦"],
            },
            [],
        ),
        (
            {
                "text": "Exclude: bodies of revolution; ogives, cones and wedges.",
                "aspects": ["bodies of revolution", "ogives", "cones", "wedges"],
                "clauses": ["Exclude: bodies of revolution; ogives, cones and wedges."],
            },
            ["bodies of revolution", "ogives", "cones", "wedges"],
        ),
        (
            {
                "text": "Go logging.\nNot looking for:\n- Python tutorials\n- Java tutorials",
                "aspects": ["Python tutorials", "Java tutorials"],
                "clauses": ["Not looking for:\n- Python tutorials\n- Java tutorials"],
            },
            ["Python tutorials", "Java tutorials"],
        ),
        (
            {
                "text": "Refurbished laptops for uni. Chromebooks? Nah.",
                "aspects": ["Chromebooks"],
                "clauses": ["Chromebooks? Nah."],
            },
            ["Chromebooks"],
        ),
        # but a list sentence does not borrow a cue from an unrelated sentence before it
        (
            {
                "text": "Skip reviews. Studies of X, as well as the effects of suction.",
                "aspects": ["reviews", "effects of suction"],
                "clauses": ["Skip reviews.", ", as well as the effects of suction"],
            },
            ["reviews"],
        ),
        # a numbered list's item numbers end no sentence, and its items go on excluding under a cued label
        (
            {
                "text": "Inclusion criteria: 1. Adults with asthma. 2. Lung function outcomes. Exclusion criteria: "
                "1. Smokers. 2. Children with eczema. 3. Non-English publications.",
                "aspects": ["Smokers", "Children with eczema", "Non-English publications"],
                # the items' own clauses hold no cue word: only the label's does
                "clauses": ["Exclusion criteria: 1. Smokers.", "Children with eczema", "Non-English publications"],
            },
            ["Smokers", "Children with eczema", "Non-English publications"],
        ),
        (
            {
                "text": "Reefer monitoring. Please leave these out:\n1. air freight\n2. home fridges\n3. engine telemetry",
                "aspects": ["air freight", "home fridges", "engine telemetry"],
                "clauses": ["Please leave these out:\n1. air freight", "home fridges", "engine telemetry"],
            },
            ["air freight", "home fridges", "engine telemetry"],
        ),
        # but a numbered list after an uncued sentence borrows nothing
        (
            {
                "text": "Skip reviews.\n1. Heat pumps\n2. Solar panels",
                "aspects": ["reviews", "Heat pumps", "Solar panels"],
                "clauses": ["Skip reviews.", "Heat pumps", "Solar panels"],
            },
            ["reviews"],
        ),
        # an aspect ends with its line, even where the tags run on over the line break
        (
            {
                "text": "Meal plan.\nMust avoid:\n- pork\n- shellfish",
                "aspects": ["pork\n- shellfish"],
                "clauses": ["Must avoid:\n- pork\n- shellfish"],
            },
            ["pork", "shellfish"],
        ),
        (
            {
                "text": "Meal plan.\nMust avoid:\u2028- pork\u0085- shellfish",
                "aspects": ["pork\u0085- shellfish"],
                "clauses": ["Must avoid:\u2028- pork\u0085- shellfish"],
            },
            ["pork", "shellfish"],
        ),
    ],
    ids=[
        "links",
        "as-well-as",
        "not-required",
        "optional",
        "real-cue",
        "need-not-beside",
        "rather-than",
        "emoji",
        "check-mark",
        "semicolon-list",
        "colon-lines",
        "question-verdict",
        "no-borrowing",
        "numbered-criteria",
        "numbered-lines",
        "numbered-no-borrowing",
        "line-ends-aspect",
        "unicode-line-ends-aspect",
    ],
)
def test_a_sentence_needs_a_cue_that_excludes(tokenizer, row, excluded):
    item = labelled_from_json(row)
    enc = tokenizer(item.text, return_offsets_mapping=True)
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    split = decode(item.text, offsets, token_tags(item, offsets))
    assert split.exclude == excluded
    if not excluded:
        assert split == Instruction(item.text)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Exclusion criteria: 1. Smokers. 2. Children.", ["Exclusion criteria: 1. Smokers.", " 2. Children."]),
        # a lone number ends its sentence: no list numbered 1, 2
        ("Get me season 2. No spoilers.", ["Get me season 2.", " No spoilers."]),
        ("Studies before 2005. 1. Adults", ["Studies before 2005.", " 1.", " Adults"]),
        ("Exclude: A. Rats. B. Mice.", ["Exclude: A. Rats.", " B. Mice."]),
        ("Ban a. cats b. dogs", ["Ban a. cats b. dogs"]),
        ("Papers on vitamin A. No reviews.", ["Papers on vitamin A.", " No reviews."]),
    ],
)
def test_only_a_numbered_lists_item_numbers_end_no_sentence(text, sentences):
    assert [text[a:b] for a, b in sentence_spans(text)] == sentences


def test_the_guard_is_the_whole_sentence_across_a_semicolon(tokenizer):
    row = {
        "text": "Heat conduction in slabs. Only documents on periodic heating are relevant; documents on a single "
        "heat pulse are not relevant.",
        "aspects": ["a single heat pulse"],
        "clauses": ["documents on a single heat pulse are not relevant."],
    }
    item = labelled_from_json(row)
    enc = tokenizer(item.text, return_offsets_mapping=True)
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    split = decode(item.text, offsets, token_tags(item, offsets))
    assert split.exclude == ["a single heat pulse"]
    assert split.guards == ["Only documents on periodic heating are relevant"]  # as the rules read it
    assert split.guards == split_instruction(item.text, "rules").guards


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"aspects": [], "clauses": []}, "text"),
        ({"text": "  ", "aspects": [], "clauses": []}, "text"),
        ({"text": "Cars, not vans.", "aspects": ["trucks"], "clauses": [", not vans"]}, "aspects"),
        (
            {"text": "Cars, not vans. Vans are great.", "aspects": ["great"], "clauses": [", not vans"]},
            "aspects",
        ),
        ({"text": "Cars, not vans.", "aspects": ["vans"], "clauses": []}, "clauses"),
        ({"text": "Cars, not vans.", "aspects": "vans", "clauses": [", not vans"]}, "aspects"),
        ({"text": "Cars, not vans.", "aspects": ["vans"], "clauses": ["; not vans"]}, "clauses"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path, row, field):
    path = tmp_path / "rows.jsonl"
    path.write_text(
        json.dumps({"text": "Fine.", "aspects": [], "clauses": []}) + "\n" + json.dumps(row) + "\n"
    )
    from infembed.instructions.tagging import read_labelled

    with pytest.raises(DataError) as error:
        read_labelled(path)
    assert error.value.line == 2 and error.value.field == field and str(path) in str(error.value)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from infembed.instructions.decomposer_train import DecomposerTrainConfig, train_decomposer

    root = tmp_path_factory.mktemp("decomposer")
    rows = root / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row, _ in ROWS), encoding="utf-8")
    stages = []
    summary = train_decomposer(
        DecomposerTrainConfig(data=str(rows), output=str(root / "model"), epochs=2, batch_size=4, joins=0.5),
        progress=lambda stage, done, total: stages.append((stage, done, total)),
    )
    assert summary["data"]["rows"] == len(ROWS) and summary["steps"] >= 2
    assert summary["lora"]["rank"] == 16  # the backbone is fine-tuned through an adapter by default
    assert {stage for stage, _, _ in stages} == {"training"} and stages[-1][1] == stages[-1][2]
    return root / "model"


@pytest.fixture(scope="module")
def decomposer(trained):
    from infembed.instructions.decomposer import Decomposer

    return Decomposer(trained)


HOSTILE = [
    "",
    "   ",
    "x" * 30_000,
    "Not " * 4000,
    "\ud800 documents on cats are not relevant",
    "<b>no</b> <i>cats</i>",
    "Keine Dokumente über Katzen.",
    "猫に関する文書は不要です。",
    "\u0085\u2028 no dogs \u2029",
    "!!!???...",
    "no",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_any_text_gives_an_instruction(decomposer, text):
    split = decomposer(text)
    assert isinstance(split, Instruction)
    assert all(isinstance(a, str) and a.strip() for a in split.exclude)
    if not split.exclude:
        assert split.keep == text.strip()


def test_splits_are_deterministic_and_cached(decomposer, trained):
    from infembed.instructions.decomposer import Decomposer

    texts = [
        "Find reviews of hybrid cars, not electric cars.",
        "Hotels in Lisbon near the river.",
        "Cars. " * 300,
    ]
    first = decomposer.batch(texts)
    fresh = Decomposer(trained)  # a second load tags the same way, one at a time or in a batch
    assert [fresh(t) for t in texts] == first == fresh.batch(texts)
    assert decomposer.batch(texts) == first  # from the cache


def test_missing_or_corrupt_decomposer_files_are_one_clear_error(tmp_path, trained):
    from infembed.instructions.decomposer import CONFIG_FILE, WEIGHTS_FILE, Decomposer

    copy = tmp_path / "model"
    shutil.copytree(trained, copy)
    (copy / WEIGHTS_FILE).write_bytes((copy / WEIGHTS_FILE).read_bytes()[:1000])
    with pytest.raises(DataError, match="safetensors") as error:
        Decomposer(copy)
    assert WEIGHTS_FILE in str(error.value)
    (copy / WEIGHTS_FILE).unlink()
    with pytest.raises(DataError, match="weights are missing"):
        Decomposer(copy)
    (copy / CONFIG_FILE).write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        Decomposer(copy)
    (copy / CONFIG_FILE).unlink()
    with pytest.raises(DataError, match="settings file is missing"):
        Decomposer(copy)


def test_cli_split_and_train(tmp_path, trained):
    from typer.testing import CliRunner

    from infembed.cli import _register, app

    _register()
    runner = CliRunner()
    text = "Find reviews of hybrid cars. Electric cars are not relevant."
    result = runner.invoke(app, ["decomposer", "split", text, "Hotels in Lisbon."])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["exclude"] == ["Electric cars"] and lines[1] == {
        "instruction": "Hotels in Lisbon.",
        "keep": "Hotels in Lisbon.",
        "exclude": [],
    }
    result = runner.invoke(app, ["decomposer", "split", text, "--decomposer", str(trained)])
    assert result.exit_code == 0 and json.loads(result.stdout)["instruction"] == text
    result = runner.invoke(app, ["decomposer", "split", text, "--decomposer", str(tmp_path / "none")])
    assert (
        result.exit_code == 2
        and "settings file is missing" in result.stderr
        and "Traceback" not in result.output
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "Cars, not vans.", "aspects": ["trucks"], "clauses": [", not vans"]}\n')
    result = runner.invoke(app, ["decomposer", "train", "--data", str(bad), "--output", str(tmp_path / "m")])
    assert result.exit_code == 2 and "line 1" in result.stderr and "aspects" in result.stderr
    result = runner.invoke(app, ["decomposer", "train", "--data", str(bad), "--feature-layers", "9"])
    assert result.exit_code == 2 and "feature_layers" in result.stderr
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(row) + "\n" for row, _ in ROWS), encoding="utf-8")
    for data in ([good, bad], [good, tmp_path / "missing.jsonl"]):  # every --data is read, the bad one named
        args = [a for path in data for a in ("--data", str(path))]
        result = runner.invoke(app, ["decomposer", "train", *args, "--output", str(tmp_path / "m")])
        assert result.exit_code == 2 and str(data[1]) in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "m").exists()


def test_several_data_paths_are_read_in_order_each_file_once(tmp_path):
    from infembed.instructions.tagging import read_labelled_files

    rows = [
        json.dumps({"text": f"Cars, not vans {k}.", "aspects": [f"vans {k}"], "clauses": [f", not vans {k}"]})
        + "\n"
        for k in range(4)
    ]
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "b.jsonl").write_text(rows[1] + rows[2], encoding="utf-8")
    (folder / "a.jsonl").write_text(rows[0], encoding="utf-8")
    (folder / "notes.txt").write_text("not rows")
    extra = tmp_path / "extra.jsonl"
    extra.write_text(rows[3], encoding="utf-8")
    got, files = read_labelled_files([str(extra), folder, str(folder / "a.jsonl")])
    assert [r.text for r in got] == [f"Cars, not vans {k}." for k in (3, 0, 1, 2)]
    assert [Path(f).name for f in files] == ["extra.jsonl", "a.jsonl", "b.jsonl"]
    alone = read_labelled_files(folder)[0]  # one path, as before
    assert [r.text for r in alone] == [r.text for r in got[1:]]
    for data, match in (([], "no labelled"), ([extra, tmp_path / "empty"], "empty")):
        (tmp_path / "empty").mkdir(exist_ok=True)
        with pytest.raises(DataError, match=match):
            read_labelled_files(data)


def test_the_recorded_digest_is_of_the_rows_read_though_a_file_changes_during_the_run(tmp_path):
    """A long run records the sha256 of the bytes its rows were read from: a data file moved, edited or deleted
    while it trains (shipping data, a writer's fix) neither loses the run nor is recorded as trained on."""
    import hashlib

    from infembed.instructions.decomposer_train import DecomposerTrainConfig, train_decomposer

    folder = tmp_path / "data"
    folder.mkdir()
    first, second = folder / "a.jsonl", folder / "b.jsonl"
    first.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(row) + "\n" for row, _ in ROWS[:2]).encode())
    second.write_text("\n".join(json.dumps(row) for row, _ in ROWS[2:]), encoding="utf-8")  # no final newline
    read = hashlib.sha256(first.read_bytes() + second.read_bytes()).hexdigest()[:16]
    changed = []

    def change_the_data(stage, done, total):  # the files change once the rows are read, as in a real run
        if stage == "training" and not changed:
            first.rename(tmp_path / "moved.jsonl")
            second.write_text(json.dumps(ROWS[0][0]) + "\n", encoding="utf-8")
            changed.append(stage)

    summary = train_decomposer(
        DecomposerTrainConfig(data=str(folder), output=str(tmp_path / "m"), epochs=1, batch_size=4, lora_rank=0),
        progress=change_the_data,
    )
    assert changed and not first.exists()
    recorded = json.loads((tmp_path / "m" / "decomposer.json").read_text())["data"]
    assert recorded == summary["data"] and recorded["sha256"] == read
    assert recorded["files"] == ["a.jsonl", "b.jsonl"] and recorded["rows"] == len(ROWS)


def test_train_never_replaces_an_output_silently(tmp_path, trained):
    from infembed.instructions.decomposer_train import DecomposerTrainConfig, train_decomposer

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row, _ in ROWS), encoding="utf-8")
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    copy = tmp_path / "model"
    shutil.copytree(trained, copy)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    for output, match in ((other, "other files"), (copy, "already"), (other / "keep.txt", "not a directory")):
        with pytest.raises(DataError, match=match):
            train_decomposer(DecomposerTrainConfig(data=str(rows), output=str(output), epochs=1))
    assert (other / "keep.txt").read_text() == "mine"
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before
    train_decomposer(
        DecomposerTrainConfig(data=str(rows), output=str(copy), epochs=1, batch_size=4, overwrite=True)
    )
    assert (copy / "decomposer.json").is_file()


def test_a_device_it_cannot_use_is_one_clear_error(tmp_path):
    import torch

    from infembed.data.errors import SettingsError
    from infembed.instructions.decomposer_train import DecomposerTrainConfig, train_decomposer

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row, _ in ROWS), encoding="utf-8")
    bad = ["tpu"] + ([] if torch.cuda.is_available() else ["cuda"])
    for device in bad:
        with pytest.raises(SettingsError, match=f"device '{device}'"):
            train_decomposer(DecomposerTrainConfig(data=str(rows), output=str(tmp_path / "m"), device=device))
    assert not (tmp_path / "m").exists()


def test_the_adapter_is_saved_and_merged_into_the_backbone(trained, decomposer):
    """The saved dir holds the head and the LoRA adapter; loading merges the adapter, so the backbone differs
    from the packaged one, and a dir whose adapter weights are gone is one clear error."""
    import torch
    from safetensors.torch import load_file, save_file

    from infembed.instructions.decomposer import LORA_PREFIX, WEIGHTS_FILE, Decomposer, load_backbone
    from infembed.model.retriever import default_model_path

    weights = load_file(str(trained / WEIGHTS_FILE))
    adapter = [k for k in weights if k.startswith(LORA_PREFIX)]
    assert adapter and all("lora_" in k for k in adapter)
    plain = load_backbone(default_model_path()).state_dict()
    merged = decomposer.model.state_dict()
    assert set(merged) == set(plain)  # merged: no adapter modules left at inference
    assert any(not torch.equal(merged[k], plain[k]) for k in plain)
    copy = trained.parent / "no-adapter"
    shutil.copytree(trained, copy, dirs_exist_ok=True)
    save_file({k: v for k, v in weights.items() if k not in adapter}, str(copy / WEIGHTS_FILE))
    with pytest.raises(DataError, match="no adapter weights"):
        Decomposer(copy)


def _exports() -> dict[str, int]:
    from infembed import cache_dir

    return {
        p.parent.name: p.stat().st_mtime_ns for p in (cache_dir() / "openvino").glob("*/openvino_model.bin")
    }


def test_the_openvino_runtime_tags_as_torch_and_its_export_is_reused_only_for_the_same_weights(
    trained, decomposer, tmp_path
):
    """Where OpenVINO is installed the decomposer runs on it (2.3x faster on 2 cores, docs/instructions.md) and
    tags exactly as torch does; its export is cached per weights: reused by a second load, never by a decomposer
    with other weights."""
    from safetensors.torch import load_file, save_file

    from infembed.instructions.decomposer import WEIGHTS_FILE, Decomposer

    on_torch = Decomposer(trained, runtime="torch")
    assert on_torch.runtime is None and decomposer.runtime is not None
    texts = [*HOSTILE, "Find reviews of hybrid cars, not electric cars.", "Cars. " * 300, "Vans; no trucks."]
    assert decomposer.batch(texts) == on_torch.batch(texts)
    before = _exports()
    again = Decomposer(trained)
    assert again.runtime is not None and _exports() == before  # the same weights: the same export, untouched
    other = tmp_path / "other"
    shutil.copytree(trained, other)
    weights = load_file(str(other / WEIGHTS_FILE))
    weights["out.bias"] = weights["out.bias"] + 2.0  # another head: every tag probability moves
    save_file(weights, str(other / WEIGHTS_FILE))
    changed = Decomposer(other)
    assert len(_exports()) == len(before) + 1 and all(_exports()[k] == v for k, v in before.items())
    assert changed.batch(texts) == Decomposer(other, runtime="torch").batch(texts)


def test_an_openvino_graph_that_tags_otherwise_is_never_used(trained, monkeypatch, caplog):
    """The exported graph must give torch's probabilities on a probe text; where it does not, the default falls
    back to torch with a warning and an explicit ``runtime="openvino"`` is one clear error."""
    from infembed.data.errors import SettingsError
    from infembed.instructions import decomposer as module
    from infembed.instructions import decomposer_openvino

    monkeypatch.setattr(decomposer_openvino, "PROBE_TOLERANCE", -1.0)  # no graph can meet it
    assert module.Decomposer(trained).runtime is None
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "the decomposer runs on torch: OpenVINO failed (the OpenVINO graph does not tag as torch does)"
    ]
    with pytest.raises(SettingsError, match="cannot run on OpenVINO"):
        module.Decomposer(trained, runtime="openvino")
    with pytest.raises(SettingsError, match="runtime must be one of"):
        module.Decomposer(trained, runtime="onnx")


def test_a_frozen_backbone_head_still_trains_and_loads(tmp_path):
    from infembed.instructions.decomposer import Decomposer
    from infembed.instructions.decomposer_train import DecomposerTrainConfig, train_decomposer

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row, _ in ROWS), encoding="utf-8")
    stages = []
    config = DecomposerTrainConfig(
        data=str(rows), output=str(tmp_path / "m"), epochs=1, batch_size=4, lora_rank=0
    )
    summary = train_decomposer(config, progress=lambda stage, done, total: stages.append(stage))
    assert summary["lora"] is None and {"encoding", "training"} == set(stages)
    assert isinstance(Decomposer(tmp_path / "m")("Cars, not vans."), Instruction)


def test_members_are_the_seeds_trained_alone_and_their_probabilities_are_averaged(tmp_path, trained):
    """``--members 2`` trains member k exactly as ``--seed seed+k`` alone would (so the shipped members can be
    checked one by one) and inference averages their tag probabilities, on torch and on OpenVINO alike."""
    import torch
    from safetensors.torch import load_file

    from infembed.instructions.decomposer import CONFIG_FILE, WEIGHTS_FILE, Decomposer
    from infembed.instructions.decomposer_train import DecomposerTrainConfig, train_decomposer

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row, _ in ROWS), encoding="utf-8")
    settings = {"data": str(rows), "epochs": 2, "batch_size": 4, "joins": 0.5}  # the `trained` fixture's
    stages = []
    summary = train_decomposer(
        DecomposerTrainConfig(**settings, output=str(tmp_path / "two"), members=2),
        progress=lambda stage, done, total: stages.append(stage),
    )
    assert [m["seed"] for m in summary["members"]] == [0, 1]
    assert [m["weights"] for m in summary["members"]] == [WEIGHTS_FILE, "decomposer-2.safetensors"]
    assert {"training 1/2", "training 2/2"} == set(stages)
    train_decomposer(DecomposerTrainConfig(**settings, output=str(tmp_path / "seed1"), seed=1))
    for member, alone in [(WEIGHTS_FILE, trained / WEIGHTS_FILE), ("decomposer-2.safetensors", None)]:
        alone = alone or tmp_path / "seed1" / WEIGHTS_FILE
        got, expected = load_file(str(tmp_path / "two" / member)), load_file(str(alone))
        assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)

    two = Decomposer(tmp_path / "two", runtime="torch")
    ones = [Decomposer(trained, runtime="torch"), Decomposer(tmp_path / "seed1", runtime="torch")]
    ids, mask = two._inputs([two._windows("Find reviews of hybrid cars, not electric cars.")[0]])
    with torch.inference_mode():
        average = (ones[0].graph(ids, mask) + ones[1].graph(ids, mask)) / 2
        assert torch.allclose(two.graph(ids, mask), average, atol=1e-6)
    texts = [*HOSTILE, "Find reviews of hybrid cars, not electric cars.", "Vans; no trucks."]
    on_default = Decomposer(tmp_path / "two")  # OpenVINO where installed: one export of both members
    assert on_default.batch(texts) == two.batch(texts)

    config = json.loads((tmp_path / "two" / CONFIG_FILE).read_text())
    for members, message in [
        ([{"weights": "../decomposer.safetensors"}], "members"),
        ([], "members"),
        ("decomposer.safetensors", "members"),
        ([{"weights": WEIGHTS_FILE}, {"weights": "decomposer-3.safetensors"}], "weights are missing"),
    ]:
        (tmp_path / "two" / CONFIG_FILE).write_text(json.dumps({**config, "members": members}))
        with pytest.raises(DataError, match=message) as error:
            Decomposer(tmp_path / "two")
        assert "decomposer" in str(error.value)


def test_members_trained_as_parallel_jobs_are_the_seeds_trained_alone_with_their_threads(tmp_path):
    """``--members 2 --jobs 2`` trains both members at once in spawned processes, each with half the threads; a
    member is bit for bit what ``--seed`` alone trains with that many threads, and both progress bars report."""
    import torch
    from safetensors.torch import load_file

    from infembed.instructions.decomposer import WEIGHTS_FILE
    from infembed.instructions.decomposer_train import DecomposerTrainConfig, train_decomposer

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row, _ in ROWS), encoding="utf-8")
    settings = {"data": str(rows), "epochs": 1, "batch_size": 4, "joins": 0.5, "seed": 3}
    stages = []
    summary = train_decomposer(
        DecomposerTrainConfig(**settings, output=str(tmp_path / "two"), members=2, jobs=2),
        progress=lambda stage, done, total: stages.append((stage, done, total)),
    )
    threads = max(1, torch.get_num_threads() // 2)
    assert [(m["seed"], m["threads"]) for m in summary["members"]] == [(3, threads), (4, threads)]
    assert {stage for stage, _, _ in stages} == {"training 1/2", "training 2/2"}
    assert all((stage, total, total) in stages for stage, _, total in stages)  # each ran to its last step
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for seed in (3, 4):
            train_decomposer(
                DecomposerTrainConfig(**{**settings, "seed": seed}, output=str(tmp_path / f"s{seed}"))
            )
    finally:
        torch.set_num_threads(before)
    for member, seed in [(WEIGHTS_FILE, 3), ("decomposer-2.safetensors", 4)]:
        got = load_file(str(tmp_path / "two" / member))
        expected = load_file(str(tmp_path / f"s{seed}" / WEIGHTS_FILE))
        assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)


def test_auto_is_the_shipped_decomposer_with_the_rules_as_fallback(monkeypatch):
    from infembed.instructions import split, split_instruction, split_instructions

    texts = [
        "Find reviews of hybrid cars. Electric cars are not relevant.",
        "Hotels in Lisbon near the river.",
        "Recipes with lentils; anything with peanuts is a hard pass for me.",
        "",
    ]
    decomposer = split.shipped_decomposer()
    learned = decomposer.batch(texts)

    def fallback(text: str, found: Instruction) -> Instruction:
        if found.exclude or not text:
            return found
        cued = decomposer.cue_score(text) >= split.CUE_FALLBACK
        return split_instruction(text, "rules") if cued else Instruction(text)

    expected = [fallback(t, found) for t, found in zip(texts, learned)]
    split._AUTO_CACHE.clear()
    assert split_instructions(texts, "auto") == expected == [split_instruction(t, "auto") for t in texts]
    assert split_instruction(texts[0]) == expected[0]  # auto is the default
    assert expected[0].exclude == ["Electric cars"] and not expected[1].exclude


@pytest.mark.parametrize(
    ("text", "readable"),
    [
        ("<b>no</b> <i>cats</i>", "no cats"),
        (
            "Find papers on pets.<br>Exclude:<ul><li>cats</li><li>dogs</li></ul>",
            "Find papers on pets.\nExclude:\n- cats\n- dogs",
        ),
        ('<span class="x">Hybrid cars</span>, <EM>not</EM> vans.', "Hybrid cars , not vans."),
        ("a<b and no c>d", "a<b and no c>d"),  # a comparison, not a tag
        ("<script>no cats</script>", "<script>no cats</script>"),  # not formatting: left as written
        ("Exclude crypto &amp; NFTs", "Exclude crypto & NFTs"),  # a character reference, escaped without tags
        ("<p>Grants for R&amp;D&nbsp;&#8211; nothing on tax credits</p>", "Grants for R&D\xa0\u2013 nothing on tax credits"),
        ("AT&T phones, no Samsung; Smith&parents", "AT&T phones, no Samsung; Smith&parents"),  # no semicolon: text
    ],
)
@pytest.mark.parametrize("splitter", ["auto", "rules"])
def test_pasted_markup_is_read_without_its_tags(text, readable, splitter):
    """Tags are not words: the split is that of the text without them (no tag debris in keep or an aspect), and
    an instruction that excludes nothing still comes back whole, as written."""
    from infembed.instructions import split_instruction
    from infembed.instructions.split import without_markup

    assert without_markup(text) == readable
    split = split_instruction(text, splitter)
    if split.exclude:
        assert split == split_instruction(readable, splitter)
        if readable != text:
            assert "<" not in split.keep and not any("<" in a for a in split.exclude)
    else:
        assert split == Instruction(text)


def test_a_corrupt_shipped_decomposer_is_one_clear_error_not_a_silent_fallback(tmp_path, monkeypatch):
    from infembed.instructions import split, split_instruction
    from infembed.instructions.decomposer import WEIGHTS_FILE

    copy = tmp_path / "shipped"
    shutil.copytree(split.SHIPPED_DECOMPOSER, copy)
    (copy / WEIGHTS_FILE).write_bytes(b"torn")
    monkeypatch.setattr(split, "SHIPPED_DECOMPOSER", copy)
    monkeypatch.setattr(split, "_AUTO_CACHE", {})
    split.shipped_decomposer.cache_clear()
    try:
        with pytest.raises(DataError, match="safetensors") as error:
            split_instruction("Cars, not vans.", "auto")
        assert str(copy / WEIGHTS_FILE) in str(error.value)
    finally:
        split.shipped_decomposer.cache_clear()


def test_first_concurrent_use_loads_once_and_answers_every_caller():
    """A service's first requests arrive together: every thread gets its split (a fresh process, so the shipped
    decomposer is not loaded yet; before the lock, two of three threads failed inside transformers' lazy
    imports)."""
    import subprocess
    import sys

    script = (
        "import threading\n"
        "from infembed.instructions import split_instruction\n"
        "out = {}\n"
        "def go(i):\n"
        "    out[i] = split_instruction(f'Find cars {i}. Ignore anything about trucks {i}.', 'auto').exclude\n"
        "threads = [threading.Thread(target=go, args=(i,)) for i in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "assert out == {i: [f'trucks {i}'] for i in range(4)}, out\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
