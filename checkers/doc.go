// Package checkers proves or disproves the invariants of DESIGN §7 over a
// history. Each checker is a pure function of models.History (no I/O), gives
// a three-way verdict with the op indices that prove each violation, and
// never flags what the history cannot prove.
package checkers
