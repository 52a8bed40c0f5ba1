// Package explore is `sagachaos explore`: a coverage-guided campaign over
// fault schedules (AFL's loop; Antithesis's lesson that search steered by
// what was newly reached finds the rare interleavings uniform sampling
// needs thousands of runs for).
//
// A campaign draws candidates — fresh scenarios from a spec's generator and
// mutants of corpus entries (Mutator: shift a trigger, retarget a fault,
// change its window or a parameter, add, drop or duplicate one, change a
// workload feature, combine two entries), each a concrete scenario.json the
// fault registry validates — runs each for real (HarnessRunner), computes
// its coverage signature from the history (Compute: failpoints and markers
// reached while a fault acted on their component, saga transitions under
// a fault acting on their actors, the saga moments each fault met — the
// (fault kind × component × saga step) triples —, failpoints fired, final
// trails), and keeps in the corpus every scenario that reached a feature no
// earlier run did. It stops at the first violation, or keeps going and
// groups violations by signature. Every choice comes from one *rand.Rand
// seeded by the campaign seed and from what earlier runs reached, never
// from the clock: a campaign's choices are a function of its seed and its
// runs' coverage.
package explore
