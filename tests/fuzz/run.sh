#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time and prints a table of executions.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS FUZZER...
#
# A target starts from its checked-in corpus (tests/fuzz/corpus/<name>/, when there is one), read
# only: new inputs go to a scratch folder, so the checkout is not modified. Exits non-zero when a
# target finds a crash, a leak or a sanitizer report (the reproducer is kept in the scratch
# folder, whose path is printed). FUZZ_JOBS targets run at once (default 1; make fuzz uses its
# JOBS): each is one process on one core for SECONDS.
set -uo pipefail

if (($# < 3)); then
  echo "usage: $0 BUILD_DIR SECONDS FUZZER..." >&2
  exit 2
fi
build=$1
seconds=$2
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/chgate-fuzz.XXXXXX")
parallel=${FUZZ_JOBS:-1}  # targets fuzzing at once (each uses one core)
for fuzzer in "$@"; do
  if [[ ! -x $build/tests/$fuzzer ]]; then
    echo "fuzz: $build/tests/$fuzzer is missing (build it with -DCHGATE_FUZZ=ON and clang)" >&2
    exit 2
  fi
done

# One target for `seconds`; its exit code goes to $work/rc.
run_one() {
  local fuzzer=$1 work=$scratch/$1
  mkdir -p "$work/new" "$work/artifacts"
  local corpora=("$work/new")
  [[ -d $root/tests/fuzz/corpus/$fuzzer ]] && corpora+=("$root/tests/fuzz/corpus/$fuzzer")
  "$build/tests/$fuzzer" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "${corpora[@]}" >"$work/log.txt" 2>&1
  echo $? >"$work/rc"
}

for fuzzer in "$@"; do
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n; done
  run_one "$fuzzer" &
done
wait

rows=()
failed=0
for fuzzer in "$@"; do
  work=$scratch/$fuzzer
  log=$work/log.txt
  rc=$(cat "$work/rc" 2>/dev/null || echo 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | awk '{print $2}')
  status=ok
  if ((rc != 0)); then
    status="FAILED (rc $rc; see $log)"
    failed=1
    tail -n 40 "$log" >&2
  fi
  rows+=("$(printf '%-16s %12s %8s %10s  %s' "$fuzzer" "${runs:-?}" "${cov:-?}" \
    "$((${runs:-0} / seconds))" "$status")")
done
printf '\n%-16s %12s %8s %10s  %s\n' target executions coverage "execs/s" result
printf '%s\n' "${rows[@]}"
echo "(${seconds}s each, $parallel at a time; scratch folder $scratch)"
if ((failed == 0)); then rm -rf "$scratch"; fi
exit "$failed"
