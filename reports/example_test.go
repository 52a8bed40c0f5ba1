package reports_test

import (
	"os"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/reports"
)

func ExampleWriteTerminal() {
	v := models.Verdict{
		Status: models.Invalid, Ops: 1234,
		Run: models.RunInfo{Target: "reference", Mutant: "non-idempotent-compensation", Scenario: "redelivery", Seed: 42,
			Repro: "sagachaos run --target reference --mutant non-idempotent-compensation --scenario redelivery --seed 42"},
		Results: []models.CheckResult{
			{Checker: "no-double-effect", Status: models.Invalid, Violations: []models.Violation{
				{Checker: "no-double-effect", Kind: "double-refund", Order: "o-17", Message: "2 refunds for one charge", Ops: []int64{60, 71}}}},
			{Checker: "pivot", Status: models.Valid},
			{Checker: "no-lost-event", Status: models.Unknown, Unknown: "no outbox snapshot"},
		},
	}
	reports.WriteTerminal(os.Stdout, v, "runs/20261130-redelivery-42/report.html", false)
	// Output:
	// sagachaos: INVALID  target=reference mutant=non-idempotent-compensation scenario=redelivery seed=42  ops=1234
	//   FAIL no-double-effect  invalid 1 violation(s) — order o-17 double-refund: 2 refunds for one charge
	//   ok   pivot             valid
	//   ??   no-lost-event     unknown no outbox snapshot
	// report: runs/20261130-redelivery-42/report.html
	// repro:  sagachaos run --target reference --mutant non-idempotent-compensation --scenario redelivery --seed 42
}

func ExampleRedact() {
	println := func(s string) { os.Stdout.WriteString(s + "\n") }
	println(reports.Redact("dial postgres://app:hunter2@127.0.0.1:5432/orders"))
	println(reports.Redact("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"))
	// Output:
	// dial postgres://app:***@127.0.0.1:5432/orders
	// Authorization: Bearer ***
}
