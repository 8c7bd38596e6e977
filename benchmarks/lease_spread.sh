#!/bin/bash
# One lease of a many-core machine, in one command: the threaded add that
# sorts a long batch to parts of the filter (spread: parallel.hpp) against
# the build before it, both compiled there by pip (no network:
# --no-build-isolation), with variants of the spread's chunk (keys a unit)
# made by CXXFLAGS, and t1: the tree with threads=1 sent through the threaded
# add on one thread (so a long batch is spread there too). Then many_cores.py measure of each build in its own
# process, the builds taking turns: the 1B-key build with its probe, and
# adds of 200M uint64 and 20M URL keys at 1 thread and every CPU. Figures
# land in $OUT (default: ./lease-out), one folder per build and round.
#
#   git archive -o .lease/base.tar BASE-COMMIT   # here, then on the machine, from a checkout
#   of the spread (commit 86881f1: its CXXFLAGS variants need its macros):
#   bash benchmarks/lease_spread.sh .lease/base.tar
#
# VARIANTS (default "base tree k2 k8 t1") picks the builds, SCALE shrinks the
# measures for a trial run. benchmarks/NOTES.md says what each lease ran.
set -u
OUT=${OUT:-$PWD/lease-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
BASE_TAR=${1:?a git archive of the build to compare against}
VARIANTS=${VARIANTS:-base tree k2 k8 t1}
SCALE=${SCALE:-1}
exec > >(tee "$OUT/log.txt") 2>&1
date -u; nproc; $PY -V
lscpu | grep -E 'Model name|L2 cache|L3 cache|NUMA node\(s\)'
free -g | head -2

root=/tmp/lease
rm -rf "$root" && mkdir -p "$root/src" "$root/b"
source_of() {  # NAME: its source folder
    local dst="$root/src/$1"
    mkdir -p "$dst"
    if [ "$1" = base ]; then
        tar -xf "$BASE_TAR" -C "$dst"
    else
        tar --exclude=./build --exclude=./.git --exclude=./.lease --exclude=./lease-out -cf - . | tar -xf - -C "$dst"
    fi
    if [ "$1" = t1 ]; then
        sed -i 's/if (threads <= 1) return f.add_keys(src, n, out);/if (threads == 0) return f.add_keys(src, n, out);/' \
            "$dst/cpp/include/bloomline/parallel.hpp"
        grep -q 'if (threads == 0) return f.add_keys' "$dst/cpp/include/bloomline/parallel.hpp" || { echo "t1: no line"; exit 1; }
    fi
    echo "$dst"
}
flags_of() {  # NAME: its CXXFLAGS
    case "$1" in
        k2) echo "-DBLOOMLINE_SPREAD_KEYS_PER_UNIT=2" ;;
        k8) echo "-DBLOOMLINE_SPREAD_KEYS_PER_UNIT=8" ;;
        *) echo "" ;;
    esac
}
set -- $VARIANTS
export CMAKE_BUILD_PARALLEL_LEVEL=$(( $(nproc) / $# + 1 ))
start=$(date +%s)
pids=()
for name in "$@"; do
    src=$(source_of "$name")
    ( CXXFLAGS="$(flags_of "$name")" timeout 400 $PY -m pip install -q --no-build-isolation --no-deps --no-index \
        --target "$root/b/$name" "$src" > "$root/build-$name.log" 2>&1 \
        || { echo "build $name failed"; tail -30 "$root/build-$name.log"; exit 1; } ) & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
echo "built in $(( $(date +%s) - start )) s: $*"

cpus=$(nproc)
measure() {  # NAME ROUND PARTS REPEATS
    echo "== $1 round $2: $3"
    BLOOMLINE_MANY_CORES_THREADS="1,$cpus" PYTHONPATH="$root/b/$1" timeout 240 $PY benchmarks/many_cores.py measure \
        --out "$OUT/$1-$2" --parts "$3" --repeats "$4" --scale "$SCALE" || echo "measure $1 round $2 failed"
}
for round in 0 1; do
    for name in "$@"; do
        case "$name" in
            base|tree) measure "$name" "$round" billion,uint64,S 2 ;;
            t1) [ "$round" = 0 ] && measure "$name" "$round" uint64 1 ;;
            *) [ "$round" = 0 ] && measure "$name" "$round" billion 1 ;;
        esac
    done
done
date -u
