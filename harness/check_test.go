package harness

import (
	"flag"
	"os"
	"testing"
	"time"
)

// Check tells rapid its budget through rapid's own flags: Runs becomes
// -rapid.checks (times 5 under -short, which rapid divides by 5), whatever
// other code in the process set before; a flag the user gave on the command
// line wins; every flag is put back afterwards.
func TestRapidBudget(t *testing.T) {
	checks := flag.Lookup("rapid.checks")
	shrink := flag.Lookup("rapid.shrinktime")
	orig, origShrink := checks.Value.String(), shrink.Value.String()
	t.Cleanup(func() { flag.Set("rapid.checks", orig); flag.Set("rapid.shrinktime", origShrink) })
	// Other code (another test) set and restored the flag: not the user.
	flag.Set("rapid.checks", "100")
	wd, _ := os.Getwd()
	cfg := checkConfig{runs: 3, shrinkTime: 90 * time.Second}
	for _, tc := range []struct {
		short bool
		want  string
	}{{false, "3"}, {true, "15"}} {
		restore, err := setRapidFlags(cfg, tc.short, wd)
		if err != nil {
			t.Fatal(err)
		}
		if got := checks.Value.String(); got != tc.want {
			t.Errorf("short=%v: -rapid.checks=%s, want %s", tc.short, got, tc.want)
		}
		if got := shrink.Value.String(); got != "1m30s" {
			t.Errorf("-rapid.shrinktime=%s, want 1m30s", got)
		}
		restore()
		if got := checks.Value.String(); got != "100" {
			t.Errorf("after restore -rapid.checks=%s, want 100", got)
		}
	}
	// The user's -rapid.checks on the command line wins.
	args := os.Args
	t.Cleanup(func() { os.Args = args })
	os.Args = append([]string{args[0], "-test.v", "-rapid.checks=7"}, args[1:]...)
	flag.Set("rapid.checks", "7")
	restore, err := setRapidFlags(cfg, false, wd)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	if got := checks.Value.String(); got != "7" {
		t.Errorf("with -rapid.checks=7 on the command line: %s", got)
	}
	if got := shrink.Value.String(); got != "1m30s" {
		t.Errorf("-rapid.shrinktime=%s, want 1m30s (only -rapid.checks was given)", got)
	}
}
