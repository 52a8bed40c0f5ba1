#!/usr/bin/env bash
# explore-bench: per planted bug, `sagachaos explore` from the general
# generator against a plain `sagachaos run --seeds 1-…` sweep of the same
# scenario, each given the same wall time, run side by side so both see the
# same machine load. Prints one TSV row per mutant: the time to the first
# violation of each (empty: not caught within the budget), runs made, and
# the checker that fired.
#
#   scripts/explore-bench.sh [-b 4m] [-s everything] [-o DIR] [mutant ...]
#
# Run from the repository root; SAGACHAOS (default: a fresh build) is the
# binary.
set -u
budget=4m scenario=${SCENARIO:-} out=explore-bench
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
	"$bin" explore --mutant "$m" --scenario "$scenario" --budget "$budget" --seed 1 --out "$d/explore" >"$d/explore.out" 2>"$d/explore.err" &
	ex=$!
	# the sweep: seeds 1, 2, … until its first violation or the same wall
	# time (counted from its first run, as explore's from its first
	# candidate, both after building the target).
	"$bin" run --mutant "$m" --scenario "$scenario" --seeds 1-100000 --out "$d/sweep" >"$d/sweep.out" 2>&1 &
	sw=$!
	t0="" sf=""
	while kill -0 $sw 2>/dev/null; do
		now=$(date +%s)
		if [ -z "$t0" ] && grep -q " seed 1: " "$d/sweep.out"; then t0=$now; fi
		if [ -n "$t0" ] && [ -z "$sf" ] && grep -q "^sagachaos: INVALID" "$d/sweep.out"; then
			sf=$((now - t0))
			kill -INT $sw
			break
		fi
		if [ -n "$t0" ] && [ $((now - t0)) -ge "$limit" ]; then
			kill -INT $sw
			break
		fi
		sleep 1
	done
	wait $sw
	wait $ex
	sum=$(ls "$d"/explore/*/campaign.json 2>/dev/null | head -1)
	ef="" er="" ec=""
	if [ -n "$sum" ]; then
		ef=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f" % d["first_violation_at_s"] if d.get("first_violation_at_s") else "")' "$sum")
		er=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"])' "$sum")
		ec=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get("violations") or {}; print(",".join(sorted(v)))' "$sum")
	fi
	sseed=$(awk '/^sagachaos: INVALID/{for(i=1;i<=NF;i++) if ($i ~ /^seed=/) {sub("seed=","",$i); print $i; exit}}' "$d/sweep.out")
	sr=$(grep -cE "^sagachaos: (VALID|INVALID|UNKNOWN)" "$d/sweep.out")
	sc=$(awk '/^sagachaos: INVALID/{f=1; next} f && $1 == "FAIL" {print $2; exit}' "$d/sweep.out")
	st=$sf
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$ef" "$er" "$ec" "$st" "$sr" "$sseed" "$sc"
done
