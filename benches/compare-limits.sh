#!/usr/bin/env bash
# The claim cost of limits, before and after (issue 21), in one run: the engine bench's no-limit
# drain (one tuned worker) by a release build without limit code and by this tree, alternately
# A B, B A, A B under the same environment, medians of 3; then this tree's rows with limits in
# force (median of 3 each, alternating with its own no-limit drain). SQLite always; PostgreSQL
# too when BW_TEST_PG is set. Prints one table.
#
#   benches/compare-limits.sh                       # BW_BENCH_JOBS=20000: 10,000 due per drain
#   BW_TEST_PG=postgres://... benches/compare-limits.sh
#
# "Before" is the committed tree (HEAD) with benches/prelimits.patch applied: the claim without
# its limit and quiet reads, on both backends (the patch is the branch prelimits-bench, never
# merged; taking it over HEAD keeps the two builds equal in everything else after merges).
# BEFORE_REF=<ref> builds that ref's tree as it is instead. The tree is extracted to
# target/prelimits-bench/src and built in release to its own target dir beside it.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
export BW_BENCH_JOBS=${BW_BENCH_JOBS:-20000}
root=$PWD
work=$root/target/prelimits-bench

# The engine bench executable of the tree in $1, built in the bench profile into target dir $2.
bench_bin() {
    (cd "$1" && CARGO_TARGET_DIR=$2 cargo bench --bench engine --no-run --message-format=json-render-diagnostics) |
        jq -r 'select(.reason == "compiler-artifact" and .target.name == "engine" and .executable != null)
               | .executable' | tail -n 1
}

patch=$root/benches/prelimits.patch
if [[ -n "${BEFORE_REF:-}" ]]; then
    commit=$(git rev-parse --verify "$BEFORE_REF^{commit}")
    stamp=$commit
else
    commit=$(git rev-parse --verify HEAD)
    stamp="$commit $(git hash-object "$patch")"
fi
if [[ "$(cat "$work/src.stamp" 2>/dev/null)" != "$stamp" ]]; then
    rm -rf "$work/src"
    mkdir -p "$work/src"
    # -m: the files dated now, not at the commit, so that cargo sees them as newer than any
    # artifact it holds.
    git archive "$commit" | tar -x -m -C "$work/src"
    if [[ -z "${BEFORE_REF:-}" ]]; then
        # Outside any repository (the ceiling), so that git applies it to this directory.
        (cd "$work/src" && GIT_CEILING_DIRECTORIES=$work git apply "$patch") || {
            echo "compare-limits: benches/prelimits.patch no longer applies to HEAD: update it" >&2
            exit 1
        }
    fi
    echo "$stamp" >"$work/src.stamp"
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
# A B, B A, A B: whichever goes first in a round is not always the same build, so a drift
# over the run (a shared server's catalogue growing, the machine warming) favours neither.
for round in 1 2 3; do
    order="before after"
    [[ $round == 2 ]] && order="after before"
    for which in $order; do
        echo "compare-limits: round $round of 3, $which" >&2
        if [[ $which == before ]]; then
            run before "$before" BW_BENCH_LIMITS=none BW_BENCH_ROUNDS=1
        else
            run after "$after" BW_BENCH_LIMITS=none BW_BENCH_ROUNDS=1
        fi
    done
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
for backend in sqlite postgres; do
    cut -f2 "$rows" | grep -qx "$backend" || continue
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
