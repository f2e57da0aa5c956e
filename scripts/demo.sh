#!/usr/bin/env bash
# Set up a virtual environment from the project's own files and run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q -e ".[scipy,threads]"
exec .venv/bin/python samples/train_mlp.py "$@"
