package target

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/scenarios"
	"github.com/sagachaos/sagachaos/targets"
)

// Find resolves --target: a path to a manifest file, or the name of a
// directory under targets/, searched from the working directory upwards
// and then in the source of the sagachaos module this binary was built from
// (moduleSource: an installed binary finds its built-in targets from any
// directory).
func Find(nameOrPath string) (*targets.Manifest, error) {
	if strings.HasSuffix(nameOrPath, ".json") {
		return targets.LoadManifest(nameOrPath)
	}
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, "targets", nameOrPath, "manifest.json")
		if _, err := os.Stat(p); err == nil {
			return targets.LoadManifest(p)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			src, err := moduleSource(context.Background())
			if err == nil {
				p := filepath.Join(src, "targets", nameOrPath, "manifest.json")
				if _, serr := os.Stat(p); serr == nil {
					return targets.LoadManifest(p)
				}
				err = fmt.Errorf("%s has no targets/%s", src, nameOrPath)
			}
			return nil, fmt.Errorf("unknown target %q: no targets/%s/manifest.json above the working directory, and not built in: %v (pass a manifest path)", nameOrPath, nameOrPath, err)
		}
		dir = parent
	}
}

// ManifestPath is the absolute path of the manifest m was read from ("" for
// a manifest that was not read from a file).
func ManifestPath(m *targets.Manifest) string {
	path := m.Path
	if path == "" && m.Dir != "" {
		path = filepath.Join(m.Dir, "manifest.json")
	}
	if path == "" {
		return ""
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	return p
}

// ValidateMutant checks a mutant name against the manifest's catalogue.
func ValidateMutant(m *targets.Manifest, name string) error {
	if name == "" {
		return nil
	}
	var known []string
	for _, mu := range m.Mutants {
		if mu.Name == name {
			return nil
		}
		known = append(known, mu.Name)
	}
	return fmt.Errorf("unknown mutant %q for target %s (known: %s)", name, m.Name, strings.Join(known, ", "))
}

// Catalog builds the generator's view of a target.
func Catalog(m *targets.Manifest, fps []targets.Failpoint) scenarios.Catalog {
	// The saga the checkers judge (the manifest's; nil for an outbox-only
	// target) is the one the generator aims faults at.
	c := scenarios.Catalog{APIProcess: m.API.Process}
	if m.Saga != nil {
		saga := *m.Saga
		c.Saga = &saga
	}
	for _, p := range m.Processes {
		sp := scenarios.Process{Name: p.Name, Role: p.Role, Depends: p.Depends, Replicas: p.Replicas}
		for _, c := range p.Consumes {
			sp.Consumes = sp.Consumes || c.Group != ""
			for _, ty := range c.Types {
				if !slices.Contains(sp.Types, ty) {
					sp.Types = append(sp.Types, ty)
				}
			}
		}
		c.Processes = append(c.Processes, sp)
		for _, s := range p.Slots {
			c.Slots = append(c.Slots, scenarios.SlotRef{DB: s.DB, Process: p.Name})
		}
	}
	for _, f := range fps {
		c.Failpoints = append(c.Failpoints, scenarios.FailpointRef{Name: f.Name, Component: f.Component, Kind: f.Kind})
	}
	// The manifest's workload was validated when it was loaded.
	c.Domain, _ = scenarios.NewDomain(m.Workload, m.Resources)
	for _, p := range m.World {
		for _, a := range p.Actions {
			if a.Ambiguous {
				c.Ambiguous = append(c.Ambiguous, p.Name+"/"+a.Name)
			}
		}
	}
	sort.Strings(c.Ambiguous)
	return c
}
