package env

import (
	"strings"
	"testing"
)

func TestParseRefusals(t *testing.T) {
	log := strings.Join([]string{
		`2026-12-01 12:14:00.182 UTC [16643] LOG:  starting PostgreSQL 15.18`,
		`2026-12-01 12:14:00.971 UTC [16700] ERROR:  logical decoding requires wal_level >= logical`,
		`2026-12-01 12:14:00.971 UTC [16700] STATEMENT:  CREATE_REPLICATION_SLOT outbox_orders LOGICAL pgoutput NOEXPORT_SNAPSHOT`,
		`2026-12-01 12:14:01.002 UTC [16701] ERROR:  logical decoding requires wal_level >= logical`,
		`2026-12-01 12:14:01.100 UTC [16702] FATAL:  number of requested standby connections exceeds max_wal_senders (currently 2)`,
		`2026-12-01 12:14:01.200 UTC [16703] LOG:  logical decoding requires wal_level >= logical`, // not an error line
		`2026-12-01 12:14:01.300 UTC [16704] ERROR:  duplicate key value violates unique constraint "outbox_pkey"`,
	}, "\n")
	got := parseRefusals(log)
	if len(got) != 2 {
		t.Fatalf("refusals %+v, want wal_level and max_wal_senders", got)
	}
	if got[0].Setting != "wal_level=logical" || got[0].Count != 2 || !strings.Contains(got[0].Line, "12:14:00.971") {
		t.Errorf("first refusal %+v", got[0])
	}
	if !strings.HasPrefix(got[1].Setting, "max_wal_senders") || got[1].Count != 1 {
		t.Errorf("second refusal %+v", got[1])
	}
	if parseRefusals("") != nil {
		t.Error("an empty log refused something")
	}
}
