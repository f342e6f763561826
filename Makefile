# Quick start (see README.md):
#   make suite   set up .venv and run the suite on this machine (config/local.py)
#   make test    set up .venv and run the tests
#   make image   build the suite's container image (hpcml image; Podman,
#                else Apptainer) for the *Container checks
#   make docs    set up .venv and build the documentation (docs/_build/html)
#
# ARGS are passed to reframe (make suite ARGS='-n MMoCLIP --mode smoke'),
# or to hpcml image (make image ARGS='--base nvcr.io/nvidia/pytorch:25.02-py3'),
# PYTEST_ARGS to pytest (make test PYTEST_ARGS='-m "not integration"').

PYTHON ?= python3
VENV ?= .venv
STAMP := $(VENV)/.installed

.PHONY: suite test image docs setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-e '.[pytorch,tensorflow,test,docs]'
	$(VENV)/bin/python -m hpctestlib_ml.venv_config
	touch $@

suite: $(STAMP)
	$(VENV)/bin/hpcml suite $(ARGS)

image: $(STAMP)
	$(VENV)/bin/hpcml image $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

# Warnings are errors (-W), as in CI; nitpicky (-n): every cross-reference
# resolves (docs/conf.py declares the deliberate exceptions); --keep-going
# lists them all.
docs: $(STAMP)
	$(VENV)/bin/sphinx-build -n -W --keep-going -q -b html docs docs/_build/html

clean:
	rm -rf var
