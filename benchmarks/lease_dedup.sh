#!/bin/bash
# One lease of a many-core machine, in one command: builds compiled there
# by pip (no network: --no-build-isolation), then dedup's builds side by
# side (dedup_steps.py, dedup_blocks.py), then many_cores.py measure of the
# working tree's build. Figures land in $OUT (default: ./lease-out).
#
#   bash benchmarks/lease_dedup.sh NAME=SOURCE.tar ...   # from the repository's root
#
# Each NAME=SOURCE.tar is a `git archive` of a build to compare; the working
# tree itself is built as "tree". LEASE_MB, MEASURE_SCALE, MEASURE_PARTS and
# MEASURE_S shrink it for a trial run. benchmarks/NOTES.md says what each lease ran.
set -u
OUT=${OUT:-$PWD/lease-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
exec > >(tee "$OUT/log.txt") 2>&1
date -u; nproc; $PY -V; $PY -c 'import numpy, sys; print("numpy", numpy.__version__, sys.executable)'

builds="tree=/tmp/lease/b/tree"
pids=()
build() {  # NAME SOURCE-DIR
    timeout 300 $PY -m pip install -q --no-build-isolation --no-deps --no-index --target "/tmp/lease/b/$1" "$2" \
        > "/tmp/lease/build-$1.log" 2>&1 || { echo "build $1 failed"; tail -30 "/tmp/lease/build-$1.log"; exit 1; }
}
mkdir -p /tmp/lease/src /tmp/lease/b
export CMAKE_BUILD_PARALLEL_LEVEL=$(( $(nproc) / ($# + 1) + 1 ))
start=$(date +%s)
build tree . & pids+=($!)
for spec in "$@"; do
    name=${spec%%=*}
    mkdir -p "/tmp/lease/src/$name" && tar -xf "${spec#*=}" -C "/tmp/lease/src/$name"
    build "$name" "/tmp/lease/src/$name" & pids+=($!)
    builds="$name=/tmp/lease/b/$name,$builds"
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
echo "built in $(( $(date +%s) - start )) s: $builds"
# The working tree's build with the CLI's blocks 4 MiB a thread (1 MiB in the tree): a Python variant.
cp -a /tmp/lease/b/tree /tmp/lease/b/tree-4mib
sed -i 's/^BLOCK = 1 << 20 /BLOCK = 1 << 22 /' /tmp/lease/b/tree-4mib/bloomline/cli/_input.py
grep -q '^BLOCK = 1 << 22 ' /tmp/lease/b/tree-4mib/bloomline/cli/_input.py || { echo "tree-4mib: no BLOCK line"; exit 1; }
$PY -m compileall -q /tmp/lease/b/tree-4mib/bloomline/cli
builds="$builds,tree-4mib=/tmp/lease/b/tree-4mib"

# A fresh venv beside the machine's own interpreter (hundreds of packages),
# with NumPy linked in for the start-up row that imports it.
$PY -m venv --without-pip /tmp/lease/clean
site=$(/tmp/lease/clean/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
np_dir=$($PY -c 'import numpy, os; print(os.path.dirname(numpy.__path__[0]))')
for d in numpy numpy.libs; do [ -e "$np_dir/$d" ] && ln -s "$np_dir/$d" "$site/"; done
pythons="machine=$(command -v $PY),clean=/tmp/lease/clean/bin/python"

cpus=$(nproc)
PYTHONPATH=/tmp/lease/b/tree timeout 200 $PY benchmarks/dedup_steps.py --mb "${LEASE_MB:-400}" --threads "1,$cpus" --repeats 3 --start-runs 5 \
    --builds "$builds" --pythons "$pythons" --out "$OUT/dedup_steps.json"
dirs=$(echo "${builds%,tree-4mib=*}" | tr ',' '\n' | cut -d= -f2 | tr '\n' ' ')
timeout 90 $PY benchmarks/dedup_blocks.py $dirs --mb "${LEASE_MB:-400}" --rounds 3 --blocks 16,64 --threads "$cpus" \
    --json "$OUT/dedup_blocks.json"
PYTHONPATH=/tmp/lease/b/tree timeout "${MEASURE_S:-220}" $PY benchmarks/many_cores.py measure --out "$OUT" \
    --parts "${MEASURE_PARTS:-dedup,probe,billion,uint64,S}" --repeats 3 --scale "${MEASURE_SCALE:-1}"
date -u
