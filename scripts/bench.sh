#!/usr/bin/env bash
# make bench: one table of the numbers that matter — how fast each planted bug
# is caught, then environment cold start, checker throughput, report
# rendering, reference orders/s, and the whole gate's wall time.
# Speed is measured here, never asserted in tests.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${BENCH_OUT:-runs/bench}
mkdir -p "$out"
go build -o "$out/sagachaos" ./cmd/sagachaos || exit 2

echo "== benchmarks (go test -bench) =="
go test -run '^$' -bench 'BenchmarkColdStart' -benchtime 5x ./harness/env/ 2>&1 | tee "$out/env.txt" | grep -E '^Benchmark'
go test -run '^$' -bench 'BenchmarkCheckAll' -benchtime 3x ./checkers/ 2>&1 | tee "$out/checkers.txt" | grep -E '^Benchmark'
go test -run '^$' -bench 'BenchmarkWriteHTML100k' -benchtime 2x ./reports/ 2>&1 | tee "$out/reports.txt" | grep -E '^Benchmark'
go test -run '^$' -bench 'BenchmarkThroughput' -benchtime 200x -timeout 20m ./targets/reference/ 2>&1 | tee "$out/reference.txt" | grep -E '^Benchmark'

echo
echo "== mutant zoo: time to detect over 3 catching seeds (wall time from run start to verdict) =="
start=$(date +%s)
"$out/sagachaos" selftest -q --mutant-seeds 6 --detect-seeds 3 --reference-seeds 1 --out "$out/selftest" | tee "$out/selftest.txt"
gate=$?
end=$(date +%s)

echo
echo "== mutant zoo on the general scenarios alone (swarm, everything): no scenario tuned to a bug =="
gstart=$(date +%s)
"$out/sagachaos" selftest -q --scenarios swarm,everything --mutant-seeds 5 --detect-seeds 1 --reference-seeds 1 --out "$out/selftest-general" | tee "$out/selftest-general.txt"
general=$?
gend=$(date +%s)

echo
echo "== seeds and time to catch each planted bug: focused scenarios beside the general ones =="
awk -F'\t' '
  FNR == 1 { file++; next }
  file == 1 { fs[$1] = $4; ft[$1] = $5; fsc[$1] = $3; order[++n] = $1 }
  file == 2 { gs[$1] = $4; gt[$1] = $5; gsc[$1] = $3; if (!($1 in fs)) order[++n] = $1 }
  END {
    printf "%-30s %-22s %6s %10s   %-12s %6s %10s\n", "mutant", "focused scenario", "seed", "to catch", "general", "seed", "to catch"
    for (i = 1; i <= n; i++) { m = order[i]
      printf "%-30s %-22s %6s %9ss   %-12s %6s %9ss\n", m, fsc[m], fs[m], ft[m], gsc[m], gs[m], gt[m] }
  }' "$out/selftest/gate.tsv" "$out/selftest-general/gate.tsv"

metric() { # file benchmark-regexp unit
  grep -E "$2" "$1" | head -1 | awk -v u="$3" '{for (i=1;i<=NF;i++) if ($i==u) print $(i-1)}'
}
echo
echo "== summary =="
printf '%-44s %s\n' "environment cold start (ms)" "$(metric "$out/env.txt" BenchmarkColdStart up-ms)"
printf '%-44s %s\n' "checker throughput, 100k ops (ops/s)" "$(metric "$out/checkers.txt" 'ops=100000' ops/s)"
printf '%-44s %s\n' "checker throughput, 1M ops (ops/s)" "$(metric "$out/checkers.txt" 'ops=1000000' ops/s)"
printf '%-44s %s\n' "report render, 100k ops (ns/op)" "$(metric "$out/reports.txt" BenchmarkWriteHTML100k ns/op)"
printf '%-44s %s\n' "report size, 100k ops (bytes)" "$(metric "$out/reports.txt" BenchmarkWriteHTML100k bytes/report)"
printf '%-44s %s\n' "reference end-to-end (orders/s)" "$(metric "$out/reference.txt" saga-e2e orders/s)"
printf '%-44s %s\n' "postgres commits on the same cluster (/s)" "$(metric "$out/reference.txt" postgres-commits commits/s)"
printf '%-44s %s\n' "selftest gate wall time (s)" "$((end - start))"
printf '%-44s %s\n' "general-scenario gate wall time (s)" "$((gend - gstart))"
[ "$gate" -ne 0 ] && exit $gate
exit $general
