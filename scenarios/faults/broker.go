package faults

import (
	"context"
	"strconv"

	"pgregory.net/rapid"
)

// This file holds what the two broker kinds share: an injected error on a
// request the broker has already acted on.

func drawCount(t *rapid.T, hi int) int { return rapid.IntRange(1, hi).Draw(t, "count") }

func applyBroker(s System, req string, count int) (Effect, error) {
	b, err := s.Broker()
	if err != nil {
		return Effect{}, err
	}
	bf, err := b.AfterAct(req, count)
	if err != nil {
		return Effect{}, err
	}
	return Effect{
		Detail: map[string]string{"effect": "armed", "count": strconv.Itoa(count)},
		Undo: func(context.Context) (map[string]string, error) {
			hits := bf.Hits()
			bf.Remove()
			return map[string]string{"hits": strconv.Itoa(hits)}, nil
		},
	}, nil
}
