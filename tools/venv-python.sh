#!/usr/bin/env bash
# Runs python from tpnode's test venv (made by tools/install-deps.sh), or the system python3
# when there is none (scripts then skip with exit 77 when a package is missing).
VENV=${TPNODE_VENV:-$HOME/.cache/tpnode/venv}
if [ -x "$VENV/bin/python3" ]; then exec "$VENV/bin/python3" "$@"; fi
exec python3 "$@"
