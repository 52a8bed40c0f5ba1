package reference_test

import (
	"os"
	"regexp"
	"testing"
)

// MUTANTS.md quotes the seed articles; it must cite them by file name, not
// by a path that exists on one machine only (issue 10, item 16).
func TestMutantsDocCitesSeedsByFileName(t *testing.T) {
	b, err := os.ReadFile("MUTANTS.md")
	if err != nil {
		t.Fatal(err)
	}
	local := regexp.MustCompile("(^|[\\s(`'\"])/(work|home|root|tmp|Users|mnt|opt)/[^\\s)`'\"]*")
	for _, m := range local.FindAll(b, -1) {
		t.Errorf("MUTANTS.md cites a machine-local path %q", m)
	}
	for _, name := range []string{"000_972b7405a285594e.txt", "001_10ff58198c9ff13f.txt", "002_695759a15177d333.txt"} {
		if !regexp.MustCompile(regexp.QuoteMeta(name)).Match(b) {
			t.Errorf("MUTANTS.md quotes the seed articles but does not name %s", name)
		}
	}
}
