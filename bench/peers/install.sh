#!/usr/bin/env bash
# Installs the peer servers bench/run.py compares skillwire with (its targets `fasta2a` and `a2a-js`):
#   bench/peers/.venv-fasta2a              a virtualenv with fasta2a 2.1.1 and uvicorn (uvloop, httptools)
#   bench/peers/a2a_js_echo/node_modules   @a2a-js/sdk 1.3.0, express and @grpc/grpc-js, exactly the
#                                          versions of the committed package-lock.json (npm ci)
# Run it again at any time: the virtualenv is kept (pip adds what is missing), node_modules is made afresh.
# PYTHON names the interpreter of the virtualenv (default python3).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"

if [ ! -x "$here/.venv-fasta2a/bin/python" ]; then
    "$python" -m venv "$here/.venv-fasta2a"
fi
"$here/.venv-fasta2a/bin/python" -m pip install --quiet --disable-pip-version-check \
    "fasta2a==2.1.1" uvicorn uvloop httptools

# No install scripts: none of these packages needs one at run time (protobufjs, under @grpc/grpc-js, has a
# postinstall that only warns about how packages depending on it spell its version), and npm versions
# differ on whether they run them.
(cd "$here/a2a_js_echo" && npm ci --ignore-scripts --no-audit --no-fund)

echo "installed: $here/.venv-fasta2a (fasta2a $("$here/.venv-fasta2a/bin/python" -c \
    'import importlib.metadata as m; print(m.version("fasta2a"))')), $here/a2a_js_echo/node_modules"
