package scenarios

import (
	"encoding/json"
	"strings"
	"testing"
)

type orderBody struct {
	Customer string `json:"customer"`
	Items    []struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	} `json:"items"`
	Card  string `json:"card"`
	Total int64  `json:"total"`
}

// The order domain's body template draws what the older generator drew: a
// customer, one or two lines of distinct SKUs with 1–3 units, a card that
// carries the outcome token, and the total at 100·(1 + i mod 7) per unit of
// the i-th SKU.
func TestOrderDomainBodies(t *testing.T) {
	s, _ := Load("gateway-ambiguous")
	sc, err := Generate(s, 3, testCatalog)
	if err != nil {
		t.Fatal(err)
	}
	stock := sc.Workload.Resources["stock"]
	if len(stock) < 2 || len(stock) > 5 {
		t.Fatalf("stock %v: want 2–5 SKUs", stock)
	}
	tokens := map[string]int{}
	for i, p := range sc.Workload.Sagas {
		var b orderBody
		if err := json.Unmarshal(p.Body, &b); err != nil {
			t.Fatalf("saga %d body %s: %v", i, p.Body, err)
		}
		if !strings.HasPrefix(b.Customer, "c-") || len(b.Items) < 1 || len(b.Items) > 2 {
			t.Fatalf("saga %d body %s", i, p.Body)
		}
		var want int64
		seen := map[string]bool{}
		for _, it := range b.Items {
			if _, ok := stock[it.SKU]; !ok || seen[it.SKU] || it.Qty < 1 || it.Qty > 3 {
				t.Fatalf("saga %d item %+v (stock %v)", i, it, stock)
			}
			seen[it.SKU] = true
			var idx int
			for j := 1; j <= 5; j++ {
				if it.SKU == "sku-"+itoa(j) {
					idx = j - 1
				}
			}
			want += int64(it.Qty) * int64(100*(1+idx%7))
		}
		if b.Total != want {
			t.Fatalf("saga %d total %d, want %d (%s)", i, b.Total, want, p.Body)
		}
		switch {
		case strings.HasPrefix(b.Card, "tok_decline_"):
			tokens["decline"]++
		case strings.HasPrefix(b.Card, "tok_ambiguous_500_"), strings.HasPrefix(b.Card, "tok_ambiguous_hang_"):
			tokens["ambiguous"]++
		case b.Card == "tok_visa":
		default:
			t.Fatalf("saga %d card %q", i, b.Card)
		}
		if p.Key != "k-"+itoa(i+1) {
			t.Fatalf("saga %d key %q", i, p.Key)
		}
	}
	if tokens["ambiguous"] == 0 {
		t.Fatalf("ambiguous_rate 0.25 drew no ambiguous card in %d sagas", len(sc.Workload.Sagas))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// An older scenario file (orders, skus, stock, qty, lines) still runs: its
// order ranges become params of the order domain.
func TestOlderScenarioFile(t *testing.T) {
	s, err := Load("testdata/soak-10k.json")
	if err != nil {
		t.Fatal(err)
	}
	if s.Sagas.Min != 10000 || s.Params["skus"].Min != 20 || s.Params["stock"].Max != 1200 || s.Params["lines"].Max != 2 {
		t.Fatalf("spec %+v", s)
	}
	s.Sagas = Range{Min: 30, Max: 30}
	sc, err := Generate(s, 1, testCatalog)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sc.Workload.Resources["stock"]); n != 20 {
		t.Fatalf("%d SKUs, want 20", n)
	}
	s.Params["seats"] = Range{Min: 1, Max: 2}
	if _, err := Generate(s, 1, testCatalog); err == nil || !strings.Contains(err.Error(), `field params.seats: the target declares no range "seats"`) {
		t.Fatalf("unknown param: %v", err)
	}
}

// An older scenario.json (initial_stock, orders with their fields) reads
// back as today's workload.
func TestOlderScenarioJSON(t *testing.T) {
	var sc Scenario
	err := json.Unmarshal([]byte(`{"name":"calm","seed":1,"workload":{"initial_stock":{"sku-1":5},"clients":1,
		"orders":[{"key":"k-1","customer":"c-1","items":[{"sku":"sku-1","qty":2}],"card":"tok_visa","total":200,"client":0}]},
		"limits":{"time_limit":"1s","quiesce":"1s","client_timeout":"1s"}}`), &sc)
	if err != nil {
		t.Fatal(err)
	}
	w := sc.Workload
	if w.Resources["stock"]["sku-1"] != 5 || len(w.Sagas) != 1 ||
		string(w.Sagas[0].Body) != `{"customer":"c-1","items":[{"sku":"sku-1","qty":2}],"card":"tok_visa","total":200}` {
		t.Fatalf("workload %+v body %s", w, w.Sagas[0].Body)
	}
}
