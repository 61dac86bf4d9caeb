#!/usr/bin/env bash
# All set-up for `make run` / `make test` on a fresh Debian machine, idempotent:
# Debian packages (with apt-get when root), the Python venv the tests use, and
# the default model. Prints what it does; does nothing when all is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

# libmicrohttpd: the HTTP server of `llmk serve` (linked into the command only,
# not libllmk); libedit: line editing in `llmk chat` (the command only too);
# nginx: the two-replica proxy test of the server.
packages=(make gcc clang libpcre2-dev libcjson-dev libmicrohttpd-dev libedit-dev nginx python3-venv)
missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# python3-venv is only needed when the python3 in PATH cannot make a venv.
if [ ${#missing[@]} -gt 0 ] && python3 -m venv --help >/dev/null 2>&1; then
    missing=("${missing[@]/python3-venv}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing ${missing[*]}"
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    elif command -v sudo >/dev/null; then
        echo "setup: installing ${missing[*]} (sudo)"
        sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    else
        echo "setup: please install: ${missing[*]}" >&2
        exit 1
    fi
fi

# Python is for tests and reference tooling only.
if [ ! -x .venv/bin/python ] || ! cmp -s tests/requirements.txt .venv/requirements.txt; then
    echo "setup: creating .venv for the tests"
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
    cp tests/requirements.txt .venv/requirements.txt
fi

bash scripts/fetch_model.sh
