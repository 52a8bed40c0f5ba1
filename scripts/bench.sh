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
exit $gate
