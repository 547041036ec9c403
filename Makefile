# The two commands a new user runs (see README):
#   make run    install what the app needs, then start it on the embedded sample rig
#   make test   install what the tests need (Python packages + Debian's Chromium), check style (ruff)
#               and the layer contracts (lint-imports), then run every test
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
PORT ?= 8501

.PHONY: install install-dev chromium run lint test bench sample-data real-sample wheel

# pyproject.toml declares every dependency; each install is the package itself, editable
# (requirements.txt / requirements-dev.txt say the same for pip -r), which puts the
# `bevviz` command on PATH. Outside a checkout: pip install <wheel or folder>, then
# `bevviz app` / `bevviz check real-nuscenes` from any folder.
install:
	$(PIP) install -r requirements.txt

install-dev:
	$(PIP) install -r requirements-dev.txt

# Browser tests use Debian's Chromium, never a browser downloaded by playwright.
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update && $$SUDO apt-get install -y chromium; \
	fi

run: install
	$(PYTHON) -m bevviz app --port $(PORT)

# Style and architecture: a wrong import arrow (see docs/architecture.md) fails here.
lint:
	$(PYTHON) -m ruff check .
	lint-imports

test: install-dev chromium lint
	$(PYTHON) -m pytest -n 2 --dist loadfile

bench: install
	$(PYTHON) -m bevviz.bench

sample-data: install
	$(PYTHON) -m bevviz.synthetic --out sample_data

# Rebuild sample_data/real_nuscenes (one real nuScenes keyframe, CC BY-NC-SA 4.0) from the
# nuScenes demo data of open-mmlab/mmdetection3d: make real-sample SRC=<that folder>.
real-sample:
	@test -n "$(SRC)" || { echo "usage: make real-sample SRC=<folder of the mmdetection3d nuScenes demo data>"; exit 2; }
	$(MAKE) --no-print-directory install
	$(PYTHON) scripts/build_real_nuscenes.py --src "$(SRC)" --out sample_data/real_nuscenes

# A wheel that carries the embedded samples and the app (setup.py), in dist/.
wheel:
	$(PIP) wheel --no-deps --no-build-isolation -w dist .
