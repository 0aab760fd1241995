#!/usr/bin/env bash
# The claim cost of limits, before and after (issue 21), in one run: the engine bench's no-limit
# drain (one tuned worker) by a release build without limit code (branch prelimits-bench, never
# merged: its claims read no limit and no quiet flag) and by this tree, alternately
# A B A B A B under the same environment, medians of 3; then this tree's rows with limits in
# force (median of 3 each, alternating with its own no-limit drain). SQLite always; PostgreSQL
# too when BW_TEST_PG is set. Prints one table.
#
#   benches/compare-limits.sh                       # BW_BENCH_JOBS=20000: 10,000 due per drain
#   BW_TEST_PG=postgres://... benches/compare-limits.sh
#
# BEFORE_REF names the build without limit code (default prelimits-bench); it is extracted with
# `git archive` to target/prelimits-bench/src and built to its own target dir beside it.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
before_ref=${BEFORE_REF:-prelimits-bench}
export BW_BENCH_JOBS=${BW_BENCH_JOBS:-20000}
root=$PWD
work=$root/target/prelimits-bench

# The engine bench executable of the tree in $1, built in the bench profile into target dir $2.
bench_bin() {
    (cd "$1" && CARGO_TARGET_DIR=$2 cargo bench --bench engine --no-run --message-format=json-render-diagnostics) |
        jq -r 'select(.reason == "compiler-artifact" and .target.name == "engine" and .executable != null)
               | .executable' | tail -n 1
}

commit=$(git rev-parse --verify "$before_ref^{commit}")
if [[ "$(cat "$work/src.commit" 2>/dev/null)" != "$commit" ]]; then
    rm -rf "$work/src"
    mkdir -p "$work/src"
    # -m: the files dated now, not at the commit, so that cargo sees them as newer than any
    # artifact it holds.
    git archive "$commit" | tar -x -m -C "$work/src"
    echo "$commit" >"$work/src.commit"
fi
after_target=${CARGO_TARGET_DIR:-$root/target}
after=$(bench_bin "$root" "$after_target")
# The first build of the other tree starts from a copy of this one's release artifacts, so that
# only what differs (this crate) is compiled again.
if [[ ! -d "$work/target/release" && -d "$after_target/release" ]]; then
    mkdir -p "$work/target"
    cp -a "$after_target/release" "$work/target/"
    # This crate's own artifacts are this tree's: forgotten, so that cargo builds the other's.
    rm -rf "$work/target/release/.fingerprint/backwave-"*
fi
before=$(bench_bin "$work/src" "$work/target")
[[ -x "$before" && -x "$after" ]] || { echo "compare-limits: a bench build failed" >&2; exit 1; }

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
# `limits-row<TAB>backend<TAB>what<TAB>jobs/s` lines of one bench run, tagged with $1.
run() {
    local tag=$1 bin=$2
    shift 2
    env "$@" "$bin" --bench | awk -F'\t' -v tag="$tag" '$1 == "limits-row" { print tag "\t" $2 "\t" $3 "\t" $4 }' >>"$rows"
}
for round in 1 2 3; do
    echo "compare-limits: round $round of 3, before (no limit code)" >&2
    run before "$before" BW_BENCH_LIMITS=none BW_BENCH_ROUNDS=1
    echo "compare-limits: round $round of 3, after" >&2
    run after "$after" BW_BENCH_LIMITS=none BW_BENCH_ROUNDS=1
done
echo "compare-limits: after, with limits in force" >&2
run inforce "$after" BW_BENCH_LIMITS=1 BW_BENCH_ROUNDS=3

# The median of the values of one tag and backend (and, for `inforce`, one row).
median() {
    awk -F'\t' -v tag="$1" -v backend="$2" -v what="${3:-}" \
        '$1 == tag && $2 == backend && (what == "" || $3 == what) { print $4 }' "$rows" |
        sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b != "-") printf "%+.1f%%", 100 * (b - a) / a; else print "-" }'; }

due=$((BW_BENCH_JOBS / 2))
echo
echo "Drain of $due due no-op jobs by one tuned worker (32 threads, 5 ms poll), jobs/s"
printf '| %-8s | %-44s | %22s | %10s | %-22s |\n' backend "limit in force" "before (no limit code)" after change
printf '|%s|%s|%s|%s|%s|\n' ---------- ---------------------------------------------- ------------------------: -----------: ------------------------
for backend in $(cut -f2 "$rows" | sort -u); do
    b=$(median before "$backend")
    a=$(median after "$backend")
    printf '| %-8s | %-44s | %22s | %10s | %-22s |\n' "$backend" "none (median of 3 runs, A B alternating)" "$b" "$a" "$(pct "$b" "$a")"
    base=$(median inforce "$backend" "no limit")
    awk -F'\t' -v backend="$backend" '$1 == "inforce" && $2 == backend && $3 != "no limit" { print $3 }' "$rows" |
        while IFS= read -r what; do
            v=$(median inforce "$backend" "$what")
            printf '| %-8s | %-44s | %22s | %10s | %-22s |\n' "$backend" "$what" "-" "$v" "$(pct "$base" "$v") vs none ($base)"
        done
done
