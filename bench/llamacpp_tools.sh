#!/usr/bin/env bash
# llama.cpp's own command-line tools, llama-batched-bench, llama-quantize and
# llama-server (bench/serve_bench.py's opponent), built from the
# llama-cpp-python sdist of the version installed in the bench venv (its
# vendor/llama.cpp), so they run the same llama.cpp as
# bench/llamacpp_bench.py, with the same ISA flags (no AMX, see
# llamacpp_isa_args). Static binaries land in build/llamacpp-tools/bin
# (git-ignored); a second run reuses them unless the version or the CMake
# flags changed. Needs cmake, a C++ compiler and the venv's pip (to fetch the
# sdist). Not part of CI.
#
#   bench/llamacpp_tools.sh            # build if needed, print the bin folder
#   LLAMACPP_VERSION=0.3.36 bench/llamacpp_tools.sh   # a given version
#
# bench/compare.sh sources this file for llamacpp_isa_args and
# llamacpp_tools_build; run directly, it builds.
set -euo pipefail

# llama.cpp gets every x86 vector extension this CPU has except AMX:
# GGML_NATIVE would compile ggml's AMX matmul in wherever the CPU reports it,
# and on the Xeon VMs here (llama-cpp-python 0.3.36) that build segfaults in
# ggml_backend_amx_mul_mat on its first batch, so llama.cpp's fastest build
# that runs is its AVX-512 VNNI one. LLAMACPP_CMAKE_ARGS overrides.
llamacpp_isa_args() {
    local f a="-DGGML_NATIVE=OFF"
    f=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    if [ "$f" = "  " ]; then echo "-DGGML_NATIVE=ON"; return; fi
    has() { case "$f" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
    has avx && a+=" -DGGML_AVX=ON"
    has avx2 && a+=" -DGGML_AVX2=ON"
    has fma && a+=" -DGGML_FMA=ON"
    has f16c && a+=" -DGGML_F16C=ON"
    has bmi2 && a+=" -DGGML_BMI2=ON"
    has avx_vnni && a+=" -DGGML_AVX_VNNI=ON"
    if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
        a+=" -DGGML_AVX512=ON"
        has avx512_vnni && a+=" -DGGML_AVX512_VNNI=ON"
        has avx512vbmi && a+=" -DGGML_AVX512_VBMI=ON"
        has avx512_bf16 && a+=" -DGGML_AVX512_BF16=ON"
    fi
    echo "$a"
}

# llamacpp_tools_build VENV DIR: builds DIR/bin/llama-batched-bench,
# DIR/bin/llama-quantize and DIR/bin/llama-server (unless already there for
# this version and these flags); progress on stderr.
llamacpp_tools_build() {
    local venv="$1" dir="$2" ver isa stamp src bld t have=1
    local tools=(llama-batched-bench llama-quantize llama-server)
    ver="${LLAMACPP_VERSION:-}"
    if [ -z "$ver" ]; then
        if [ ! -x "$venv/bin/pip" ]; then
            echo "llamacpp_tools: no venv at $venv (run bench/compare.sh once, or set LLAMACPP_VERSION)" >&2
            return 1
        fi
        ver="$("$venv/bin/pip" show llama-cpp-python 2>/dev/null | sed -n 's/^Version: //p')"
        if [ -z "$ver" ]; then
            echo "llamacpp_tools: llama-cpp-python is not installed in $venv (set LLAMACPP_VERSION)" >&2
            return 1
        fi
    fi
    isa="${LLAMACPP_CMAKE_ARGS:-$(llamacpp_isa_args)}"
    stamp="llama-cpp-python $ver; $isa"
    for t in "${tools[@]}"; do [ -x "$dir/bin/$t" ] || have=0; done
    if [ "$have" = 1 ] && [ "$(cat "$dir/bin/STAMP" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    for t in cmake c++; do
        if ! command -v "$t" >/dev/null; then
            echo "llamacpp_tools: $t not found (Debian packages: cmake g++)" >&2
            return 1
        fi
    done
    src="$dir/src/llama_cpp_python-$ver"
    if [ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
        echo "llamacpp_tools: fetching the llama-cpp-python $ver sdist" >&2
        mkdir -p "$dir/src"
        local pip=pip3
        [ -x "$venv/bin/pip" ] && pip="$venv/bin/pip"
        "$pip" download -q --disable-pip-version-check --no-binary :all: --no-deps \
            "llama-cpp-python==$ver" -d "$dir/src" >&2
        tar -xzf "$dir/src/llama_cpp_python-$ver.tar.gz" -C "$dir/src"
        rm -f "$dir/src/llama_cpp_python-$ver.tar.gz"
    fi
    bld="$dir/cmake-$ver"
    echo "llamacpp_tools: building ${tools[*]} ($ver: $isa)" >&2
    # shellcheck disable=SC2086  # $isa is a list of -D flags
    cmake -S "$src/vendor/llama.cpp" -B "$bld" -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF $isa >"$dir/cmake-configure.log" 2>&1 \
        || { echo "llamacpp_tools: cmake configure failed, see $dir/cmake-configure.log" >&2; return 1; }
    cmake --build "$bld" --target "${tools[@]}" -j "$(nproc)" \
        >"$dir/cmake-build.log" 2>&1 \
        || { echo "llamacpp_tools: build failed, see $dir/cmake-build.log" >&2; return 1; }
    mkdir -p "$dir/bin"
    for t in "${tools[@]}"; do
        install -m 755 "$bld/bin/$t" "$dir/bin/$t"
    done
    echo "$stamp" > "$dir/bin/STAMP"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    cd "$(dirname "$0")/.."
    llamacpp_tools_build "${LLAMACPP_VENV:-build/bench-venv}" "${LLAMACPP_TOOLS:-build/llamacpp-tools}"
    echo "${LLAMACPP_TOOLS:-build/llamacpp-tools}/bin"
fi
