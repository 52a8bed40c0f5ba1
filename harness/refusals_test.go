package harness

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// A CDC target whose manifest does not say it needs wal_level=logical is
// an error naming the setting (exit code 2), not a run that ends INVALID
// with every saga stuck — both when its relay gives up (the reference's
// exits 2 when the slot cannot be created) and when it reports healthy
// anyway and only the server's log says what went wrong.
func TestUndeclaredSettingIsAnError(t *testing.T) {
	ctx := context.Background()
	for _, mutant := range []string{"", "cdc-healthy-before-slot"} {
		t.Run("mutant="+mutant, func(t *testing.T) {
			m, err := target.Find("reference-cdc")
			if err != nil {
				t.Fatal(err)
			}
			bin, fps, err := target.Prepare(ctx, m, "")
			if err != nil {
				t.Fatal(err)
			}
			// What a user writes who does not know about wal_level: the
			// CDC relay without the postgres section (and so without
			// declared slots, which the manifest would refuse).
			m.Postgres = nil
			for i := range m.Processes {
				m.Processes[i].Slots = nil
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			spec, err := scenarios.Load("calm")
			if err != nil {
				t.Fatal(err)
			}
			spec.Sagas = scenarios.Range{Min: 5, Max: 5}
			sc, err := scenarios.Generate(spec, 1, target.Catalog(m, fps))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(ctx, Options{Manifest: m, Mutant: mutant, Scenario: sc, Bin: bin, RunDir: filepath.Join(t.TempDir(), "run")})
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("run ended %v with error %v, want an input error (exit 2)", res.Verdict.Status, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "wal_level=logical") || !strings.Contains(msg, `"postgres": {"settings"`) || strings.Contains(msg, "\n") {
				t.Errorf("the error does not name the setting on one line: %s", msg)
			}
			if res.Verdict.Status != models.Unknown || res.Verdict.Error == "" {
				t.Errorf("verdict %v (error %q): want no verdict", res.Verdict.Status, res.Verdict.Error)
			}
			t.Logf("%s", err)
		})
	}
}
