#!/usr/bin/env bash
# explore-bench: per planted bug, `sagachaos explore` from the general
# generator, then a plain `sagachaos run --seeds 1-…` sweep of the same
# scenario given the same wall time. One after the other, never together:
# two chaos runs at once on a small machine slow each other and time one
# another's step timeouts out. Prints one TSV row per mutant: the seconds to
# the first violation of each (empty: not caught within the budget), the
# runs each made, and what fired.
#
#   scripts/explore-bench.sh [-b 5m] [-s everything] [-o DIR] [mutant ...]
#
# Run from the repository root; SAGACHAOS (default: a fresh build) is the
# binary. The sweep's clock starts when it is launched (the target build is
# cached by then: explore built it), explore's at its first candidate.
set -u
budget=5m scenario=${SCENARIO:-} out=explore-bench
while getopts b:s:o: opt; do
	case $opt in
	b) budget=$OPTARG ;; s) scenario=$OPTARG ;; o) out=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
bin=${SAGACHAOS:-}
if [ -z "$bin" ]; then
	bin=$(mktemp -d)/sagachaos
	go build -o "$bin" ./cmd/sagachaos || exit 2
fi
if [ -z "$scenario" ]; then
	if "$bin" list scenarios | grep -q '^swarm '; then scenario=swarm; else scenario=everything; fi
fi
mutants=("$@")
if [ ${#mutants[@]} -eq 0 ]; then
	mapfile -t mutants < <("$bin" list mutants | awk 'NR > 1 {print $1}')
fi
secs() { # a Go duration of minutes or seconds → seconds
	case $1 in *m) echo $((${1%m} * 60)) ;; *s) echo "${1%s}" ;; *) echo "$1" ;; esac
}
limit=$(secs "$budget")
mkdir -p "$out"
printf 'mutant\texplore_first_s\texplore_runs\texplore_checker\tsweep_first_s\tsweep_runs\tsweep_seed\tsweep_checker\n'
for m in "${mutants[@]}"; do
	d="$out/$m"
	rm -rf "$d"
	mkdir -p "$d"
	# explore: stops by itself at its first violation or at the budget.
	"$bin" explore --mutant "$m" --scenario "$scenario" --budget "$budget" --seed 1 --out "$d/explore" >"$d/explore.out" 2>"$d/explore.err"
	# the sweep: seeds 1, 2, … until its first violation or the same wall
	# time; interrupted, it stops the run in progress (not counted).
	"$bin" run --mutant "$m" --scenario "$scenario" --seeds 1-100000 --out "$d/sweep" >"$d/sweep.out" 2>"$d/sweep.err" &
	sw=$!
	t0=$(date +%s) sf=""
	while kill -0 $sw 2>/dev/null; do
		now=$(date +%s)
		if grep -q '"status":"invalid"' "$d/sweep/summary.jsonl" 2>/dev/null; then
			sf=$((now - t0))
			kill -INT $sw
			break
		fi
		if [ $((now - t0)) -ge "$limit" ]; then
			kill -INT $sw
			break
		fi
		sleep 1
	done
	wait $sw
	sum=$(ls "$d"/explore/*/campaign.json 2>/dev/null | head -1)
	ef="" er="" ec=""
	if [ -n "$sum" ]; then
		ef=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f" % d["first_violation_at_s"] if d.get("first_violation_at_s") else "")' "$sum")
		er=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"])' "$sum")
		ec=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get("violations") or {}; print(",".join(sorted(v)))' "$sum")
	fi
	read -r sr sseed sc < <(python3 - "$d/sweep/summary.jsonl" <<'PY'
import json, sys
runs, seed, what = 0, "-", "-"
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError:
    lines = []
for l in lines:
    try:
        x = json.loads(l)
    except ValueError:
        continue
    runs += 1
    v = x.get("verdict") or {}
    if v.get("status") == "invalid" and seed == "-":
        seed = str((v.get("run") or {}).get("seed", x.get("dir", "?")))
        what = ",".join(sorted({r.get("checker", "?") for r in v.get("results") or [] if r.get("status") == "invalid"})) or "?"
print(runs, seed, what)
PY
)
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$ef" "$er" "$ec" "$sf" "$sr" "$sseed" "$sc"
done
