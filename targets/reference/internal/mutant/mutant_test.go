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
	for _, n := range []string{DualWrite, PublishBeforeCommit, MarkBeforeAck, UnkeyedPublish, ParallelRelayReorder,
		NonIdempotentConsumer, NonIdempotentCompensation, NoGatewayIdempotencyKey, CompensationNotRetried,
		VolatileSagaState, NoStepTimeout, EmailBeforePivot, CompensateAfterPivot, NoSemanticLock, OutOfOrderCompensation,
		SkipFailedMessage, RelayIDCursor, CoalescingOutbox, SilentApproval} {
		if _, ok := Implemented[n]; !ok {
			t.Errorf("mutant %s has no switch in the code", n)
		}
	}
	if err := Set(MarkBeforeAck); err != nil || !Is(MarkBeforeAck) || Is(UnkeyedPublish) {
		t.Fatalf("Set(%s): %v", MarkBeforeAck, err)
	}
}
