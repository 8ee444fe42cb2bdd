# Two commands on a fresh machine: `make demo` and `make test`. Each creates or
# refreshes .venv (Python 3.11+) and installs the package before it runs.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FULL_STAMP := $(VENV)/.installed-all
SHARED ?= $(abspath ../shared)

# Offline assets of this workplace, when ../shared exists; a connected machine
# without it downloads models the usual way.
ifneq ($(wildcard $(SHARED)/models/all-MiniLM-L6-v2/onnx/model.onnx),)
export RAGBUDGET_EMBEDDING_MODEL_PATH ?= $(SHARED)/models/all-MiniLM-L6-v2/onnx
endif
ifneq ($(wildcard $(SHARED)/tiktoken_cache),)
export TIKTOKEN_CACHE_DIR ?= $(SHARED)/tiktoken_cache
endif
ifneq ($(wildcard $(SHARED)/data/scifact),)
export RAGBUDGET_SCIFACT_DIR ?= $(SHARED)/data/scifact
endif
export ANONYMIZED_TELEMETRY := False
export HF_HUB_DISABLE_TELEMETRY := 1

.PHONY: help demo test test_lowest integration_tests chromium notebooks bench bench_scale bench_ingest eval tune lint format check_imports clean

help:  ## Show the targets
	@grep -E '^[a-z_]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# make demo and make test need the package, its extras and the test tools; the
# notebooks' Jupyter stack and the benchmarks' reference libraries come on demand.
$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,llm,agents,postgres,index,eval,int8,otel]'
	touch $(STAMP)

$(FULL_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench,notebooks,llm,agents,postgres,index,eval,int8,otel]'
	touch $(FULL_STAMP)

demo: $(STAMP)  ## Run the pipeline on the bundled sample corpus
	$(BIN)/ragbudget demo

test: $(STAMP)  ## Unit tests (offline, small corpora)
	$(BIN)/pytest tests/unit_tests -q -rs

LOWEST := .venv-lowest
USER_CACHE := $(or $(RAGBUDGET_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/langchain-ragbudget)

test_lowest:  ## Unit tests on the oldest direct dependency versions pyproject.toml allows (own venv: .venv-lowest)
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/pip install --quiet --upgrade pip uv
	$(LOWEST)/bin/uv pip install --quiet --python $(LOWEST)/bin/python \
		--resolution lowest-direct --only-binary :all: -r pyproject.toml --all-extras
	$(LOWEST)/bin/uv pip install --quiet --python $(LOWEST)/bin/python --no-deps -e .
	$(LOWEST)/bin/uv pip list --python $(LOWEST)/bin/python > $(LOWEST)/versions.txt
	mkdir -p $(LOWEST)/cache
	# a cache written by a newer chromadb cannot be read by an older one: the lowest
	# versions build their own (the sample corpus; FlashRank's model is copied over)
	if [ -d "$(USER_CACHE)/flashrank" ]; then cp -rn "$(USER_CACHE)/flashrank" $(LOWEST)/cache/; fi
	RAGBUDGET_CACHE_DIR=$(abspath $(LOWEST))/cache $(LOWEST)/bin/pytest tests/unit_tests -q -rs -p no:cacheprovider

integration_tests: $(FULL_STAMP)  ## Slower tests against real models and data (the notebooks too)
	@command -v chromium >/dev/null || echo "note: no chromium; the JupyterLab display test skips (make chromium)"
	$(BIN)/pytest tests/integration_tests -q -rs

chromium:  ## Install headless Chromium (Debian) for the JupyterLab display test
	apt-get update && apt-get install -y chromium

notebooks: $(FULL_STAMP)  ## Run every notebook top to bottom offline (nbclient, a temporary folder)
	$(BIN)/pytest tests/integration_tests/test_notebooks.py -q -rs

bench: $(FULL_STAMP)  ## Import cost; SciFact: retrieval, the hybrid against its floor, the budget stage (BENCHMARKS.md)
	$(BIN)/python benchmarks/bench_import.py
	$(BIN)/python benchmarks/bench_retrieval.py
	$(BIN)/python benchmarks/bench_breakdown.py
	$(BIN)/python benchmarks/bench_breakdown.py --k 100
	$(BIN)/python benchmarks/bench_breakdown.py --int8
	$(BIN)/python benchmarks/bench_budget.py
	$(BIN)/python benchmarks/bench_fusion.py
	$(BIN)/python benchmarks/bench_relevance_docs.py
	$(BIN)/python benchmarks/bench_dense_recall.py
	$(BIN)/python benchmarks/bench_memory.py
	$(BIN)/python benchmarks/bench_history.py
	$(BIN)/python benchmarks/bench_warnings.py

bench_scale: $(FULL_STAMP)  ## Synthetic 10k/100k/1M chunks and a Chroma server (long; BENCHMARKS.md)
	nice -n 10 $(BIN)/python benchmarks/bench_scale.py

bench_ingest: $(FULL_STAMP)  ## Ingest all of SciFact into a fresh index (a few minutes)
	$(BIN)/python benchmarks/bench_ingest.py

eval: $(FULL_STAMP)  ## Evaluate every stage on SciFact (and chunked: ~25 min the first time; weak evidence fitted on train); rewrites BENCHMARKS.md; CONFIG=tuned.yml to measure another setting
	$(BIN)/ragbudget eval $${RAGBUDGET_SCIFACT_DIR:-../shared/data/scifact} $(if $(CONFIG),--config $(CONFIG)) \
		--chunk-size 64 --chunk-size 128 --chunk-size 256 --chunker sentences --chunker recursive \
		--weak-fit train --weak-evidence-yaml benchmarks/results/scifact_weak_evidence.yml \
		--calibration-plot benchmarks/results/scifact_weak_calibration.png \
		--json benchmarks/results/scifact_eval.json \
		--plot benchmarks/results/scifact_survival.png --update BENCHMARKS.md

tune: $(FULL_STAMP)  ## Tune fusion on SciFact's train split; then: make eval CONFIG=benchmarks/results/scifact_tuned.yml
	$(BIN)/ragbudget tune $${RAGBUDGET_SCIFACT_DIR:-../shared/data/scifact} --split train \
		--out benchmarks/results/scifact_tuned.yml

lint: $(FULL_STAMP)  ## ruff check, ruff format --diff, mypy, the import layers contract
	$(BIN)/ruff check .
	$(BIN)/ruff format --diff .
	$(BIN)/mypy langchain_ragbudget tests benchmarks docs
	$(BIN)/lint-imports

format: $(STAMP)  ## Apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

check_imports: $(STAMP)  ## Import every module of the package
	$(BIN)/python -c "import importlib, pkgutil, langchain_ragbudget as p; [importlib.import_module(m.name) for m in pkgutil.walk_packages(p.__path__, 'langchain_ragbudget.')]"

clean:  ## Remove the virtual environment and caches
	rm -rf $(VENV) $(LOWEST) .pytest_cache .mypy_cache .ruff_cache
