package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/models"
)

// Selectors let a scenario file aim by what a target's manifest declares
// instead of by the names one target happens to use, so that one general
// scenario runs against any target: "@consumer" in faults.components is
// every consumer instance, "@api.*" in faults.failpoints every failpoint of
// the API process, "@pivot→@world" in faults.links the links from the
// service that runs the saga's pivot step to the world providers it calls.
//
// A selector is a pattern's whole component part (the part before the
// first "." of a failpoint name, either side of a link's "→"); it expands
// to the names it selects and the rest of the pattern is kept, so
// "@relay→kafka" is "relay-1→kafka", "relay-2→kafka" on a run with two
// relays.
var selectors = map[string]string{
	"@api":      "the process with role api (serves the workload API; the orchestrator of an orchestrated saga)",
	"@consumer": "every process with role consumer",
	"@relay":    "every process with role relay",
	"@worker":   "every process with role worker",
	"@pivot":    "the service that runs the saga's pivot step",
	"@steps":    "every service that runs a saga step",
	"@world":    "(the right side of a link) every dependency that is a world provider, not postgres or kafka",
}

// SelectorNames lists the selectors a scenario file may use, sorted.
func SelectorNames() []string { return slices.Sorted(maps.Keys(selectors)) }

// SelectorDoc is what a selector selects, for `sagachaos list` and errors.
func SelectorDoc(name string) string { return selectors[name] }

// infrastructure are the dependencies that are not world providers.
var infrastructure = map[string]bool{"postgres": true, "kafka": true}

// checkSelectors finds the first selector in pats that does not exist, or
// one used where it selects nothing (@world selects a link's right side,
// the others processes): it returns that pattern's index and the problem,
// or -1.
func checkSelectors(pats []string, links bool) (int, string) {
	for i, p := range pats {
		for side, part := range patternParts(p, links) {
			if !strings.HasPrefix(part, "@") {
				continue
			}
			if _, ok := selectors[part]; !ok {
				return i, fmt.Sprintf("unknown selector %q (known: %s)", part, strings.Join(SelectorNames(), ", "))
			}
			world, right := part == "@world", links && side == 1
			switch {
			case world && !right:
				return i, fmt.Sprintf("selector %q selects world providers: it belongs on a link's right side", part)
			case !world && right:
				return i, fmt.Sprintf("selector %q selects processes: a link's right side is a dependency (@world, postgres, kafka or a provider)", part)
			}
		}
	}
	return -1, ""
}

// patternParts splits a pattern into the parts a selector may stand for:
// a link's two sides, or a failpoint's or component's component part.
func patternParts(p string, links bool) []string {
	if links {
		from, to, ok := strings.Cut(p, "→")
		if !ok {
			return []string{p}
		}
		return []string{from, to}
	}
	head, _, _ := strings.Cut(p, ".")
	return []string{head}
}

// selectProcesses is the names of the processes a selector selects.
func (c Catalog) selectProcesses(sel string) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	switch sel {
	case "@api", "@consumer", "@relay", "@worker":
		for _, p := range c.Processes {
			if p.Role == sel[1:] || (sel == "@api" && p.Role == "" && p.Name == c.APIProcess) {
				add(p.Name)
			}
		}
	case "@pivot", "@steps":
		if c.Saga == nil {
			return nil
		}
		for _, st := range c.Saga.Steps {
			if sel == "@steps" || st.Kind == models.Pivot {
				add(st.Service)
			}
		}
	}
	return out
}

// worldDeps is every world provider some process depends on.
func (c Catalog) worldDeps() []string {
	var out []string
	for _, p := range c.Processes {
		for _, d := range p.Depends {
			if !infrastructure[d] && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	sort.Strings(out)
	return out
}

// expand rewrites every selector in pats into the plain patterns it
// stands for on a run with the given instances: instance names for
// components and a link's left side, process names for a failpoint's
// component part, world providers for a link's right side. A pattern
// without a selector is kept as it is; one whose selector selects nothing
// expands to nothing. No pattern stays no pattern (everything); patterns
// that all select nothing become the empty pattern, which matches no name
// (an empty list would match every name).
func (c Catalog) expand(pats []string, inst map[string][]string, field string) []string {
	if len(pats) == 0 {
		return pats
	}
	var out []string
	for _, p := range pats {
		out = append(out, c.expandOne(p, inst, field)...)
	}
	if len(out) == 0 {
		return []string{""}
	}
	return out
}

func (c Catalog) expandOne(p string, inst map[string][]string, field string) []string {
	if !strings.Contains(p, "@") {
		return []string{p}
	}
	instancesOf := func(sel string) []string {
		var out []string
		for _, n := range c.selectProcesses(sel) {
			out = append(out, inst[n]...)
		}
		return out
	}
	side := func(part string, names func(string) []string) []string {
		if !strings.HasPrefix(part, "@") {
			return []string{part}
		}
		return names(part)
	}
	switch field {
	case "faults.links":
		from, to, ok := strings.Cut(p, "→")
		if !ok {
			return side(p, instancesOf)
		}
		var out []string
		for _, f := range side(from, instancesOf) {
			for _, t := range side(to, func(string) []string { return c.worldDeps() }) {
				out = append(out, LinkName(f, t))
			}
		}
		return out
	case "faults.failpoints":
		head, rest, dotted := strings.Cut(p, ".")
		var out []string
		for _, n := range side(head, c.selectProcesses) {
			if dotted {
				n += "." + rest
			}
			out = append(out, n)
		}
		return out
	default:
		return side(p, instancesOf)
	}
}

// RelayProcesses names the processes whose instance count a scenario's
// relays range draws: every process with role relay, or — in a manifest
// that declares no relay role — the process named "relay". A target that
// names its relay otherwise ("outbox-publisher") still gets competing
// relays; without this it ran one instance in every scenario.
func (c Catalog) RelayProcesses() []string {
	out := c.selectProcesses("@relay")
	if len(out) == 0 {
		for _, p := range c.Processes {
			if p.Name == "relay" {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// RelayReplicas is the replica overrides that give every relay process n
// instances.
func (c Catalog) RelayReplicas(n int) map[string]int {
	out := map[string]int{}
	for _, name := range c.RelayProcesses() {
		out[name] = n
	}
	return out
}
