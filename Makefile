# Quick start (see README.md):
#   make suite   set up .venv and run the suite on this machine (config/local.py)
#   make test    set up .venv and run the tests
#
# ARGS are passed to reframe (make suite ARGS='-n MMoCLIP --mode smoke'),
# PYTEST_ARGS to pytest (make test PYTEST_ARGS='-m "not integration"').

PYTHON ?= python3
VENV ?= .venv
STAMP := $(VENV)/.installed

.PHONY: suite test setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-e '.[pytorch,tensorflow,test]'
	$(VENV)/bin/python -m hpctestlib_ml.venv_config
	touch $@

suite: $(STAMP)
	$(VENV)/bin/hpcml suite $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf var
