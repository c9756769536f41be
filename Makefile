# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
export PYTHON
STAMP := .make/installed

.PHONY: install docker image demo test lint bench

install: $(STAMP)
$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh
	@mkdir -p .make && touch $(STAMP)

docker: install
	bash scripts/ensure-docker.sh

image: docker
	$(PYTHON) -m sandbox image build

# A short GRPO run of the embedded SmolLM2-135M-Instruct on single-digit addition,
# printing held-out accuracy before and after.
demo: install
	$(PYTHON) -m learner.demo

test: image
	$(PYTHON) -m ruff check .
	$(PYTHON) -m pytest -q

lint: install
	$(PYTHON) -m ruff check .
