package mutant

import "testing"

func TestSet(t *testing.T) {
	defer Set("")
	if err := Set(""); err != nil || Is(MarkBeforeAck) {
		t.Fatalf("empty mutant: %v", err)
	}
	if err := Set("no-such-bug"); err == nil {
		t.Fatal("unknown mutant accepted")
	}
	if err := Set(CompensateAfterPivot); err == nil {
		t.Fatal("a mutant without a switch in the code was accepted")
	}
	if err := Set(MarkBeforeAck); err != nil || !Is(MarkBeforeAck) || Is(UnkeyedPublish) {
		t.Fatalf("Set(%s): %v", MarkBeforeAck, err)
	}
}
