"""The shared library exports exactly the declared API: every function marked
LLMK_API in the public headers, nothing else (the library is built with
-fvisibility=hidden). A declaration without a definition, or an internal
function that leaks into the dynamic symbol table, fails here."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("LLMK_BIN", ROOT / "build" / "llmk"))
LIB = Path(os.environ.get("LLMK_LIB", BIN.parent / "libllmk.so"))
HEADERS = sorted((ROOT / "include").glob("*.h"))


def declared():
    names = set()
    for h in HEADERS:
        text = re.sub(r"/\*.*?\*/", "", h.read_text(), flags=re.S)
        names |= set(re.findall(r"^LLMK_API [^;{]*?\b(llmk_[a-z0-9_]+)\(", text, re.M | re.S))
        # every function declaration in a public header is marked
        for m in re.finditer(r"^([^\n#]*?)\b(llmk_[a-z0-9_]+)\(", text, re.M):
            head = m.group(1)
            assert "LLMK_API" in head or "typedef" in head or not head.strip(), (h.name, m.group(0))
    return names


@pytest.mark.skipif(not LIB.exists() or not shutil.which("nm"), reason="libllmk.so or nm missing")
def test_exports_are_exactly_the_declared_api():
    out = subprocess.run(["nm", "-D", "--defined-only", str(LIB)], capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in out.stdout.splitlines() if line.split()[1] in "TWDBR"}
    want = declared()
    assert len(want) > 150
    assert sorted(want - exported) == [], "declared but not defined in the library"
    assert sorted(exported - want) == [], "exported but not declared"


def test_headers_are_self_contained(tmp_path):
    """Each public header compiles on its own (C11)."""
    for h in HEADERS:
        src = tmp_path / "t.c"
        src.write_text(f'#include "{h.name}"\nint main(void) {{ return 0; }}\n')
        r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "include"),
                            "-fsyntax-only", str(src)], capture_output=True, text=True)
        assert r.returncode == 0, (h.name, r.stderr)


@pytest.mark.skipif(not LIB.exists() or not shutil.which("nm"), reason="libllmk.so or nm missing")
def test_library_reads_no_environment():
    """Configuration is explicit (llmk_configure): the library imports no
    getenv/secure_getenv; only app/ and bench/ read LLMK_* variables."""
    out = subprocess.run(["nm", "-D", "--undefined-only", str(LIB)], capture_output=True, text=True, check=True)
    imported = {line.split()[-1].split("@")[0] for line in out.stdout.splitlines()}
    assert not imported & {"getenv", "secure_getenv", "__secure_getenv"}, sorted(imported)
