package explore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/sagachaos/sagachaos/models"
	"github.com/sagachaos/sagachaos/scenarios"
)

// Runner runs one candidate: for real (HarnessRunner), or in a test, as a
// pretence. An error means the campaign cannot go on (bad input, an
// interrupt); a run that ended without a verdict is a Result with Err.
type Runner interface {
	Run(ctx context.Context, c Candidate) (Result, error)
}

// Discarder is a Runner that can drop what a run left behind once the
// campaign has no use for it (a valid run that reached nothing new).
type Discarder interface {
	Discard(r Result)
}

// Candidate is one scenario the campaign runs.
type Candidate struct {
	// N counts candidates from 1; Name is "c0007".
	N    int
	Name string
	// Origin says where it came from: "fresh seed 123", "corpus FILE",
	// "c0003: shift f2 4→17; add kill".
	Origin string
	// Parents are the corpus entries it was made from.
	Parents  []string
	Scenario scenarios.Scenario
	// fresh marks a candidate drawn fresh from the generator.
	fresh bool
}

// Digest identifies the candidate's scenario (its JSON): two campaigns made
// the same choice when they made candidates with the same digest.
func (c Candidate) Digest() string {
	b, _ := json.Marshal(c.Scenario)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// Result is what a run of a candidate produced.
type Result struct {
	RunDir string
	// Status is the verdict ("" when the run ended without one: Err).
	Status models.Status
	// Violations are the signatures (checker/kind) of the verdict's
	// violations, sorted, each once.
	Violations []string
	Signature  Signature
	Err        string
	Elapsed    time.Duration
}

// Entry is one scenario of the corpus.
type Entry struct {
	Name     string
	File     string // where the corpus keeps it (set by the corpus)
	Origin   string
	Scenario scenarios.Scenario
	// Signature is what its run reached; Added the features it reached
	// first.
	Signature Signature
	Added     []string
	// At is when, in the campaign, it was added.
	At time.Duration
}

// Record is one candidate as the campaign journal (candidates.jsonl)
// keeps it.
type Record struct {
	N          int      `json:"n"`
	Name       string   `json:"name"`
	Origin     string   `json:"origin"`
	Parents    []string `json:"parents,omitempty"`
	Digest     string   `json:"digest"`
	Sagas      int      `json:"sagas"`
	Faults     int      `json:"faults"`
	Status     string   `json:"status,omitempty"`
	Violations []string `json:"violations,omitempty"`
	Err        string   `json:"error,omitempty"`
	// New counts the features this run reached first; Kept says it joined
	// the corpus (as File).
	New  int    `json:"new"`
	Kept bool   `json:"kept,omitempty"`
	File string `json:"file,omitempty"`
	// Coverage and Corpus are the campaign's totals after this run.
	Coverage int `json:"coverage"`
	Corpus   int `json:"corpus"`
	// AtSeconds is the campaign time when the run ended; RunSeconds how
	// long it took.
	AtSeconds  float64 `json:"at_s"`
	RunSeconds float64 `json:"run_s"`
	RunDir     string  `json:"run_dir,omitempty"`
}

// Options configure a campaign.
type Options struct {
	Mutator *Mutator
	Runner  Runner
	// Budget bounds the campaign's wall time (a run still going at the end
	// is stopped and not counted); MaxRuns, when positive, bounds the
	// candidates.
	Budget  time.Duration
	MaxRuns int
	// KeepGoing runs on after a violation (grouping violations by
	// signature) instead of stopping at the first.
	KeepGoing bool
	// Initial are corpus entries to run first (a corpus directory of an
	// earlier campaign).
	Initial []Entry
	// FreshPercent is the share of candidates drawn fresh from the
	// generator once the corpus has entries (default 25), unless
	// AdaptiveFresh.
	FreshPercent int
	// AdaptiveFresh sets the fresh share from what each kind of candidate
	// has added so far (freshShare) instead of FreshPercent.
	AdaptiveFresh bool
	// Keep, when set, stores an entry that reached something new and
	// returns where (the corpus directory).
	Keep func(Entry) (string, error)
	// Journal, when set, hears about every finished candidate.
	Journal func(Record)
	// Progress, when set, hears when a candidate starts and ends.
	Progress func(Progress)
	// Clock is the campaign's elapsed time (default: wall time since Run
	// began); tests may replace it.
	Clock func() time.Duration
}

// Progress is the state of a campaign, for a status line.
type Progress struct {
	Elapsed, Budget time.Duration
	Runs            int
	Corpus          int
	Coverage        int
	Violations      int
	// Running is the candidate being run (nil between runs); Last the
	// record of the last one finished.
	Running *Candidate
	Last    *Record
}

// Report is a finished campaign.
type Report struct {
	Records  []Record
	Corpus   []Entry
	Coverage *Coverage
	// Violations groups the violating runs by signature (their verdict's
	// checker/kind pairs).
	Violations map[string][]Record
	// First is the first violating run (nil: none).
	First *Record
	// Stopped says why the campaign ended: "violation", "budget", "runs",
	// "interrupted".
	Stopped string
	Elapsed time.Duration
}

// ErrTooManyErrors ends a campaign whose runs keep failing to produce a
// verdict: the environment or the target is broken, not the search.
var ErrTooManyErrors = errors.New("three runs in a row ended without a verdict")

// Run is the campaign loop (AFL's, over fault schedules): draw a candidate
// — a corpus entry to replay first, a fresh scenario, or a mutant of corpus
// entries — run it, compute its coverage signature, keep it in the corpus
// if it reached anything no earlier run did, and stop at the first
// violation, at the budget or after MaxRuns. Every choice is made from the
// mutator's one random source and from what earlier runs reached: the same
// seed and the same outcomes make the same candidates, whatever the clock
// says.
func Run(ctx context.Context, o Options) (Report, error) {
	start := time.Now()
	if o.Clock == nil {
		o.Clock = func() time.Duration { return time.Since(start) }
	}
	if o.FreshPercent == 0 {
		o.FreshPercent = 25
	}
	c := &campaign{o: o, cov: NewCoverage(), rep: Report{Violations: map[string][]Record{}}}
	c.rep.Coverage = c.cov
	err := c.loop(ctx)
	c.rep.Elapsed = o.Clock()
	c.rep.Corpus = c.corpus
	return c.rep, err
}

type campaign struct {
	o      Options
	cov    *Coverage
	corpus []Entry
	rep    Report
	errRun int // runs in a row without a verdict
	// What fresh candidates and mutants have added: runs and new features.
	freshRuns, freshNew, mutantRuns, mutantNew int
}

// freshShare is the percent of candidates drawn fresh once the corpus has
// entries: FreshPercent, or with AdaptiveFresh a two-armed bandit on the
// new features per run each kind of candidate has brought, each arm
// starting from one pretend run at the campaign's mean so that neither is
// starved, kept between 25 % and 90 %. When every mutant of the corpus
// reaches less than a fresh draw does, the campaign draws fresh more often
// — a seed sweep's diversity — and the other way round.
func (c *campaign) freshShare() int {
	if !c.o.AdaptiveFresh {
		return c.o.FreshPercent
	}
	runs := c.freshRuns + c.mutantRuns
	if runs == 0 {
		return c.o.FreshPercent
	}
	prior := float64(c.freshNew+c.mutantNew) / float64(runs)
	f := (float64(c.freshNew) + prior) / float64(c.freshRuns+1)
	m := (float64(c.mutantNew) + prior) / float64(c.mutantRuns+1)
	if f+m == 0 {
		return c.o.FreshPercent
	}
	return min(90, max(25, int(math.Round(100*f/(f+m)))))
}

func (c *campaign) progress(running *Candidate, last *Record) {
	if c.o.Progress == nil {
		return
	}
	viol := 0
	for _, v := range c.rep.Violations {
		viol += len(v)
	}
	c.o.Progress(Progress{Elapsed: c.o.Clock(), Budget: c.o.Budget, Runs: len(c.rep.Records), Corpus: len(c.corpus),
		Coverage: c.cov.Len(), Violations: viol, Running: running, Last: last})
}

func (c *campaign) loop(ctx context.Context) error {
	for n := 1; ; n++ {
		switch {
		case ctx.Err() != nil:
			c.rep.Stopped = "interrupted"
			return ctx.Err()
		case c.o.MaxRuns > 0 && n > c.o.MaxRuns:
			c.rep.Stopped = "runs"
			return nil
		case c.o.Budget > 0 && c.o.Clock() >= c.o.Budget:
			c.rep.Stopped = "budget"
			return nil
		}
		cand, err := c.next(n)
		if err != nil {
			return err
		}
		c.progress(&cand, nil)
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if c.o.Budget > 0 {
			rctx, cancel = context.WithTimeout(ctx, c.o.Budget-c.o.Clock())
		}
		res, err := c.o.Runner.Run(rctx, cand)
		budgetOut := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if budgetOut {
			// The budget ran out during the run: it is not a result.
			c.rep.Stopped = "budget"
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				c.rep.Stopped = "interrupted"
			}
			return err
		}
		rec := c.observe(cand, res)
		c.progress(nil, &rec)
		if rec.Status == string(models.Invalid) && !c.o.KeepGoing {
			c.rep.Stopped = "violation"
			return nil
		}
		if c.errRun >= 3 {
			return fmt.Errorf("%w (last: %s)", ErrTooManyErrors, res.Err)
		}
	}
}

// next draws candidate n.
func (c *campaign) next(n int) (Candidate, error) {
	cand := Candidate{N: n, Name: fmt.Sprintf("c%04d", n)}
	m := c.o.Mutator
	if i := n - 1; i < len(c.o.Initial) {
		e := c.o.Initial[i]
		cand.Origin, cand.Scenario = "corpus "+e.File, e.Scenario
		return cand, nil
	}
	if len(c.corpus) > 0 && m.Rand.IntN(100) >= c.freshShare() {
		for range 5 {
			p := c.pick(-1)
			var other *scenarios.Scenario
			q := -1
			if len(c.corpus) > 1 {
				q = c.pick(p)
				other = &c.corpus[q].Scenario
			}
			sc, ops, err := m.Mutate(c.corpus[p].Scenario, other)
			if err != nil {
				continue
			}
			cand.Parents = []string{c.corpus[p].Name}
			if q >= 0 && slicesContain(ops, "combine") {
				cand.Parents = append(cand.Parents, c.corpus[q].Name)
			}
			cand.Origin = strings.Join(cand.Parents, "×") + ": " + strings.Join(ops, "; ")
			sc.Description = fmt.Sprintf("explore %s: %s", cand.Name, cand.Origin)
			cand.Scenario = sc
			return cand, nil
		}
	}
	sc, seed, err := m.Fresh()
	if err != nil {
		return cand, err
	}
	cand.Origin, cand.fresh = fmt.Sprintf("fresh seed %d", seed), true
	sc.Description = fmt.Sprintf("explore %s: %s of %s", cand.Name, cand.Origin, m.Spec.Name)
	cand.Scenario = sc
	return cand, nil
}

// pick draws a corpus entry other than not, favouring entries that hold
// rare features: an entry weighs 1 plus, for each feature of its
// signature, one over the number of runs that reached it.
func (c *campaign) pick(not int) int {
	w := make([]float64, len(c.corpus))
	total := 0.0
	for i, e := range c.corpus {
		if i == not {
			continue
		}
		w[i] = 1
		for _, f := range e.Signature {
			if h := c.cov.Hits(f); h > 0 {
				w[i] += 1 / float64(h)
			}
		}
		total += w[i]
	}
	x := c.o.Mutator.Rand.Float64() * total
	for i := range w {
		if i == not {
			continue
		}
		if x < w[i] {
			return i
		}
		x -= w[i]
	}
	for i := len(w) - 1; i >= 0; i-- {
		if i != not {
			return i
		}
	}
	return 0
}

// observe folds a result into the campaign.
func (c *campaign) observe(cand Candidate, res Result) Record {
	rec := Record{N: cand.N, Name: cand.Name, Origin: cand.Origin, Parents: cand.Parents, Digest: cand.Digest(),
		Sagas: len(cand.Scenario.Workload.Sagas), Faults: len(cand.Scenario.Faults),
		Status: string(res.Status), Violations: res.Violations, Err: res.Err, RunDir: res.RunDir, RunSeconds: res.Elapsed.Seconds()}
	if res.Err != "" {
		c.errRun++
	} else {
		c.errRun = 0
	}
	fresh := c.cov.Add(res.Signature)
	rec.New = len(fresh)
	switch {
	case res.Err != "":
	case cand.fresh:
		c.freshRuns, c.freshNew = c.freshRuns+1, c.freshNew+len(fresh)
	case len(cand.Parents) > 0: // a mutant; an initial corpus entry has none
		c.mutantRuns, c.mutantNew = c.mutantRuns+1, c.mutantNew+len(fresh)
	}
	switch {
	case res.Status == models.Invalid:
		key := strings.Join(res.Violations, " + ")
		c.rep.Violations[key] = append(c.rep.Violations[key], rec)
	case len(fresh) > 0 && res.Err == "":
		e := Entry{Name: cand.Name, Origin: cand.Origin, Scenario: cand.Scenario, Signature: res.Signature, Added: fresh, At: c.o.Clock()}
		if c.o.Keep != nil {
			file, err := c.o.Keep(e)
			if err == nil {
				e.File = file
			}
		}
		c.corpus = append(c.corpus, e)
		rec.Kept, rec.File = true, e.File
	default:
		if d, ok := c.o.Runner.(Discarder); ok {
			d.Discard(res)
		}
	}
	rec.Coverage, rec.Corpus, rec.AtSeconds = c.cov.Len(), len(c.corpus), c.o.Clock().Seconds()
	if res.Status == models.Invalid && c.rep.First == nil {
		r := rec
		c.rep.First = &r
	}
	c.rep.Records = append(c.rep.Records, rec)
	if c.o.Journal != nil {
		c.o.Journal(rec)
	}
	return rec
}

// ViolationKeys lists the verdict's violation signatures, sorted, each once.
func ViolationKeys(v models.Verdict) []string {
	set := map[string]bool{}
	for _, r := range v.Results {
		for _, x := range r.Violations {
			ch := x.Checker
			if ch == "" {
				ch = r.Checker
			}
			set[ch+"/"+x.Kind] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func slicesContain(ops []string, prefix string) bool {
	for _, o := range ops {
		if strings.HasPrefix(o, prefix) {
			return true
		}
	}
	return false
}

// NewRand is the campaign's one random source for a seed.
func NewRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5a6a_c4a0_5ca0_5eed)) }
