"""Progress is shown in one style (rich, as ``infembed index``): the encoder's bar, the training bar and
transformers' own "Loading weights" bar are ours, not tqdm's; in a log (stderr not a terminal) each finished
bar or step leaves one line with its count and time."""

from __future__ import annotations

import re

from infembed.progress import bar, library_bars_in_our_style, progress_bar, step

TQDM = re.compile(r"\d+%\|.*\|.*(it|text|step)s?/s")  # tqdm's "100%|#####| 64/64 [00:01<00:00, 50.1text/s]"


def test_the_encoder_shows_our_bar(minilm, capsys):
    minilm.encode_passages([f"passage number {i} about wings" for i in range(64)], progress="encoding corpus")
    err = capsys.readouterr().err
    assert not TQDM.search(err), err
    assert re.search(r"encoding corpus 64/64 texts \d+:\d\d:\d\d", err), err


def test_the_training_bar_is_ours(capsys):
    from infembed.train.reporting import log_line
    from infembed.train.reporting import progress_bar as training_bar

    shown = training_bar(3, 1)
    shown.update(1)
    log_line("evaluated at step 2")
    shown.update(1)
    shown.set_postfix(loss="0.4321")
    shown.close()
    err = capsys.readouterr().err
    assert not TQDM.search(err), err
    assert "evaluated at step 2" in err
    assert re.search(r"training 3/3 steps loss 0\.4321 \d+:\d\d:\d\d", err), err


def test_transformers_bars_are_drawn_as_ours(capsys):
    from transformers.utils import logging as hf_logging

    from infembed.model.encoder import load_sentence_transformer
    from infembed.model.retriever import default_model_path

    library_bars_in_our_style()
    try:
        load_sentence_transformer(default_model_path(), device="cpu")
    finally:
        hf_logging.set_tqdm_hook(None)  # the CLI's setting, not every later test's
    err = capsys.readouterr().err
    assert "Loading weights" not in err, err  # transient: nothing left in a log


def test_steps_and_counted_bars_leave_one_line_each_in_a_log(capsys, monkeypatch):
    with step("fitting"):
        with progress_bar("encoding", unit="texts") as update:
            update(5, 10)
            update(10)
    with bar("hidden", 2, transient=True) as shown:
        shown.update(2)
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r" \d+:\d\d:\d\d$", "", line) for line in lines] == ["encoding 10/10 texts", "fitting"], (
        lines
    )
    monkeypatch.setenv("INFEMBED_PROGRESS", "0")
    with step("quiet"), progress_bar("quiet too", 3) as update:
        update(3)
    assert capsys.readouterr().err == ""


def test_a_long_bar_writes_a_line_now_and_then_in_a_log(capsys, monkeypatch):
    import infembed.progress

    monkeypatch.setattr(infembed.progress, "LOG_EVERY_S", 0.0)  # every update, instead of every 30 s
    with bar("training", 3, unit="steps") as shown:
        shown.update(1)
        shown.update(1)
        shown.update(1)
    lines = [re.sub(r" \d+:\d\d:\d\d$", "", line) for line in capsys.readouterr().err.splitlines()]
    assert lines == [
        "training 1/3 steps",
        "training 2/3 steps",
        "training 3/3 steps",
        "training 3/3 steps",
    ], lines
