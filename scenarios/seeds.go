package scenarios

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSeeds reads "7", "1-50" or "1,4,9-12" into a list of seeds.
func ParseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seeds %q: %q is not a seed", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
				return nil, fmt.Errorf("seeds %q: %q is not a seed", s, hi)
			}
		}
		if b < a {
			return nil, fmt.Errorf("seeds %q: range %d-%d is backwards", s, a, b)
		}
		if b-a > 1_000_000 {
			return nil, fmt.Errorf("seeds %q: more than a million seeds", s)
		}
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("seeds %q: no seed", s)
	}
	return out, nil
}

// Shard keeps the seeds of shard i of n ("3/10", 1-based): seed k goes to
// shard (k mod n)+1, so shards are disjoint, cover everything, and a seed's
// shard does not depend on the range it came with.
func Shard(seeds []uint64, spec string) ([]uint64, error) {
	if spec == "" {
		return seeds, nil
	}
	is, ns, ok := strings.Cut(spec, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return nil, fmt.Errorf("shard %q: want i/n with 1 ≤ i ≤ n", spec)
	}
	var out []uint64
	for _, s := range seeds {
		if int(s%uint64(n))+1 == i {
			out = append(out, s)
		}
	}
	return out, nil
}
