# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Another interpreter: `make test PYTHON=python3.13 VENV=.venv313` (a name pyenv knows but has not put on PATH
# is looked up in pyenv's versions).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# The patched durable-rules wheel (third_party/durable-rules/README.md), one per interpreter, and its sdist.
WHEELS ?= build/wheels
DURABLE_RULES := third_party/durable-rules
PYTHON_EXE = $(shell $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null \
	|| ls -d $$(pyenv root 2>/dev/null)/versions/*/bin/$(PYTHON) 2>/dev/null | sort -V | tail -n 1)
EXAMPLE := examples/ascend-level1-2ranks
# synthetic PyTorch traces (see its README)
GPU_EXAMPLE := examples/gpu-synthetic-2ranks
# the PyTorch profiler tutorial's real ResNet-50 traces, DataLoader num_workers 0 then 4: the demo's before/after pair
TUTORIAL := tests/fixtures/pytorch-tutorial-resnet50

.PHONY: demo test wheels crosscheck schema docs fact-examples screenshot corpus clean

# The distribution is ascend-perf-advisor (the command and the module are advisor; PyPI's `advisor` is another
# project): a venv made before the rename holds this one as `advisor`, which the uninstall takes out.
$(BIN)/advisor: pyproject.toml $(DURABLE_RULES)/build_wheel.py $(DURABLE_RULES)/durable-rules-2.0.28-py313.patch
	@test -n "$(PYTHON_EXE)" || { echo "error: no Python interpreter '$(PYTHON)' on PATH or in pyenv's versions" >&2; exit 1; }
	$(PYTHON_EXE) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python $(DURABLE_RULES)/build_wheel.py --wheel-dir $(WHEELS)
	$(BIN)/python -m pip uninstall --quiet --yes advisor 2>/dev/null || true
	$(BIN)/python -m pip install --quiet --find-links $(WHEELS) -e '.[dev]'
	touch $@

demo: $(BIN)/advisor
	$(BIN)/advisor diagnose $(EXAMPLE)
	mkdir -p out
	$(BIN)/advisor diagnose $(EXAMPLE) -o out/report.md
	$(BIN)/advisor diagnose $(EXAMPLE) -o out/report.html
	$(BIN)/advisor diagnose $(EXAMPLE) -o out/report.json
	$(BIN)/advisor diagnose $(EXAMPLE) --lang zh -o out/report.zh.html
	$(BIN)/advisor diagnose $(GPU_EXAMPLE) -o out/gpu-report.html
	$(BIN)/advisor compare $(TUTORIAL)/num_workers_0 $(TUTORIAL)/num_workers_4 -o out/compare.html

test: $(BIN)/advisor
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Only the patched durable-rules wheel, for $(PYTHON), into $(WHEELS).
wheels:
	@test -n "$(PYTHON_EXE)" || { echo "error: no Python interpreter '$(PYTHON)' on PATH or in pyenv's versions" >&2; exit 1; }
	$(PYTHON_EXE) $(DURABLE_RULES)/build_wheel.py --wheel-dir $(WHEELS)

# Optional tools for the cross-check tests (skipped without them): the CPU build of torch records real
# PyTorch traces, Holistic Trace Analysis checks the GPU figures (installed without its Jupyter dependencies).
crosscheck: $(BIN)/advisor
	$(BIN)/python -m pip install --quiet 'torch==2.13.0' plotly networkx pydot psutil
	$(BIN)/python -m pip install --quiet --no-deps 'holistictraceanalysis==0.5.0'

schema: $(BIN)/advisor
	$(BIN)/python -c "from advisor.report import write_schema; write_schema()"

corpus: $(BIN)/advisor  # write the hardening corpus (tests/corpus/cases.py) to out/corpus, with manifest.json
	rm -rf out/corpus
	$(BIN)/python tests/corpus/cases.py out/corpus

screenshot: $(BIN)/advisor
	$(BIN)/python docs/img/screenshot.py

docs: $(BIN)/advisor
	$(BIN)/python -c "from advisor.facts.catalogue import catalogue_markdown; open('docs/facts.md', 'w').write(catalogue_markdown())"
	$(BIN)/advisor rules docs -o docs/rules
	$(BIN)/python docs/readme_excerpt.py
	$(BIN)/python docs/seed_coverage.py
	$(BIN)/python docs/command_outputs.py

fact-examples: $(BIN)/advisor
	$(BIN)/python docs/fact_examples.py

clean:
	rm -rf $(VENV) out build dist .pytest_cache
