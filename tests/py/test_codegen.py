"""What the compiler made of the kernels, checked on the built objects.

Software prefetches are invisible to every other test: results do not depend
on them. GCC's interprocedural pure-const pass marks a static function whose
body only prefetches as `const`, and a call to a const function returning
void is dead code: the attention kernels' `prefetch_rows` (static inline but
too big for the early inliner once the AVX-512 kernels were added, ca776d1)
vanished from every GCC build while clang kept it, and B=16 decode ran
13-17% slower (docs/batching.md). A source file that asks for a prefetch, in
itself or in a header of src/kernels it includes, must have one in its
object."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OBJ = ROOT / "build" / "obj"
INTRINSIC = re.compile(r"\b(_mm_prefetch|__builtin_prefetch)\s*\(")
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def asks_for_prefetch(src: Path, seen=None) -> bool:
    """A prefetch intrinsic in src or in a project header it includes
    (transitively; every includer of such a header calls its helper)."""
    seen = set() if seen is None else seen
    if src in seen or not src.exists():
        return False
    seen.add(src)
    text = re.sub(r"/\*.*?\*/", "", src.read_text(), flags=re.S)
    return bool(INTRINSIC.search(text)) or any(asks_for_prefetch(ROOT / "src" / inc, seen)
                                               for inc in INCLUDE.findall(text))


def sources_with_prefetch():
    return sorted(p for p in (ROOT / "src").rglob("*.c") if asks_for_prefetch(p))


def prefetches_in(obj: Path) -> int:
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    return len(re.findall(r"\bprefetch(?:t0|t1|t2|nta|w)\b", out))


@pytest.mark.skipif(not OBJ.exists() or not shutil.which("objdump"), reason="build/obj or objdump missing")
def test_every_requested_prefetch_is_compiled():
    srcs = sources_with_prefetch()
    names = {p.relative_to(ROOT).as_posix() for p in srcs}
    # the kernels known to prefetch are found (the scan itself works)
    assert {"src/kernels/attn_avx2.c", "src/kernels/attn_avx512.c", "src/kernels/r8_avx512.c",
            "src/exec_cpu.c"} <= names, sorted(names)
    missing = []
    for src in srcs:
        obj = OBJ / src.relative_to(ROOT).with_suffix(".o")
        if not obj.exists():
            continue
        if prefetches_in(obj) == 0:
            missing.append(src.relative_to(ROOT).as_posix())
    assert missing == [], f"prefetches compiled out of {missing}"
