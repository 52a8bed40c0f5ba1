package failpoint

// CDCCatalogue lists the failpoints of the CDC relay (package cdcrelay).
// Their component is "relay", the process name both flavours run under, so
// that scenarios aiming at "relay.*" reach them. `reftarget
// --list-failpoints cdc` lists them with the services' points and without
// the polling relay's (which a CDC relay never reaches).
var CDCCatalogue = []Point{
	{Name: "relay.after-decode", Component: "relay", Description: "CDC: a committed transaction's outbox rows decoded from the slot, nothing produced yet"},
	{Name: "relay.before-confirm", Component: "relay", Description: "CDC: the broker acknowledged the rows, the slot's position not yet confirmed"},
	{Name: "relay.after-confirm", Component: "relay", Description: "CDC: the slot's position confirmed past the published transactions"},
}

func init() {
	for _, p := range CDCCatalogue {
		points[p.Name] = &point{}
	}
}

// ForFlavour is the catalogue a relay flavour's target declares: "cdc" has
// the services' points and the CDC relay's; anything else (the polling
// flavour) is Catalogue.
func ForFlavour(flavour string) []Point {
	if flavour != "cdc" {
		return Catalogue
	}
	var out []Point
	for _, p := range Catalogue {
		if p.Component != "relay" {
			out = append(out, p)
		}
	}
	return append(out, CDCCatalogue...)
}
