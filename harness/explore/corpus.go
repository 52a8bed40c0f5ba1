package explore

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sagachaos/sagachaos/harness/runstore"
)

// A corpus is a directory of concrete scenarios, one JSON file each in the
// format of a run directory's scenario.json (target, mutant, scenario):
// `sagachaos run --scenario FILE` runs one against any target and mutant
// (the flags decide), `sagachaos repro FILE` against the ones it names.
// A campaign given a corpus directory runs its entries first and adds to
// it.

// LoadCorpus reads every *.json of dir, sorted by name. A missing
// directory is an empty corpus; a file that is not a concrete scenario is
// an error naming it.
func LoadCorpus(dir string) ([]Entry, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []Entry
	for _, n := range names {
		path := filepath.Join(dir, n)
		sf, err := runstore.ReadScenarioFile(path)
		if err != nil {
			return nil, fmt.Errorf("corpus %s: %w", path, err)
		}
		out = append(out, Entry{Name: strings.TrimSuffix(n, ".json"), File: path, Origin: "corpus " + path, Scenario: sf.Scenario})
	}
	return out, nil
}

// Saver writes corpus entries into a directory.
type Saver struct {
	Dir string
	// Prefix starts every file name ("s7-": entries of the campaign with
	// seed 7), so campaigns can share a corpus directory.
	Prefix string
	// Target, TargetPath and Mutant are recorded in each file, as a run
	// directory's scenario.json records them.
	Target, TargetPath, Mutant string
}

// Save writes e as <Prefix><e.Name>.json and returns the path.
func (s Saver) Save(e Entry) (string, error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return "", fmt.Errorf("corpus: %w", err)
	}
	path := filepath.Join(s.Dir, s.Prefix+e.Name+".json")
	err := runstore.WriteJSON(path, runstore.Scenario{Target: s.Target, TargetPath: s.TargetPath, Mutant: s.Mutant, Scenario: e.Scenario})
	return path, err
}
