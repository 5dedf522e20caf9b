# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXAMPLE := examples/ascend-level1-2ranks

.PHONY: demo test schema docs screenshot corpus clean

$(BIN)/advisor: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(BIN)/advisor
	$(BIN)/advisor diagnose $(EXAMPLE)
	mkdir -p out
	$(BIN)/advisor diagnose $(EXAMPLE) -o out/report.md
	$(BIN)/advisor diagnose $(EXAMPLE) -o out/report.html
	$(BIN)/advisor diagnose $(EXAMPLE) -o out/report.json
	$(BIN)/advisor diagnose $(EXAMPLE) --lang zh -o out/report.zh.html

test: $(BIN)/advisor
	$(BIN)/python -m pytest

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

clean:
	rm -rf $(VENV) out build dist .pytest_cache
