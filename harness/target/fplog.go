package target

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"sync"
	"time"

	"github.com/sagachaos/sagachaos/models"
)

// failpointPoll is how often the failpoint log is read while the target
// runs; a crash also reads it at once.
const failpointPoll = 50 * time.Millisecond

// failpointLog tails SAGACHAOS_FAILPOINT_LOG: every complete line the
// components append is handed to onLine once, in file order, while the
// run goes on (a poller), when a component crashes (drain) and at the end
// (stop).
type failpointLog struct {
	path   string
	onLine func(models.FailpointEvent) string

	mu   sync.Mutex // serialises reads: one reader, lines in order
	off  int64
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// line is the format components write (docs/target-contract.md).
type line struct {
	Instance  string `json:"instance"`
	Failpoint string `json:"failpoint"`
	Hit       int    `json:"hit"`
	Action    string `json:"action"`
}

func newFailpointLog(path string, onLine func(models.FailpointEvent) string) *failpointLog {
	return &failpointLog{path: path, onLine: onLine, quit: make(chan struct{})}
}

func (l *failpointLog) start() {
	l.wg.Go(func() {
		tk := time.NewTicker(failpointPoll)
		defer tk.Stop()
		for {
			select {
			case <-l.quit:
				return
			case <-tk.C:
				l.drain()
			}
		}
	})
}

// drain reads every complete line appended since the last read and
// returns the ids of the faults that fired in them.
func (l *failpointLog) drain() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	fired := map[string]bool{}
	if l.path == "" {
		return fired
	}
	f, err := os.Open(l.path)
	if err != nil {
		return fired // no component has written one yet
	}
	defer f.Close()
	r := bufio.NewReader(io.NewSectionReader(f, l.off, 1<<62))
	for {
		b, err := r.ReadBytes('\n')
		if err != nil {
			return fired // a partial last line is read next time, whole
		}
		l.off += int64(len(b))
		var ln line
		if json.Unmarshal(bytes.TrimSpace(b), &ln) != nil || ln.Failpoint == "" {
			continue
		}
		ev := models.FailpointEvent{Instance: ln.Instance, Failpoint: ln.Failpoint, Hit: ln.Hit, Action: ln.Action, Fired: ln.Action != ""}
		if id := l.onLine(ev); id != "" {
			fired[id] = true
		}
	}
}

// stop ends the poller and reads what is left. It is idempotent.
func (l *failpointLog) stop() {
	l.once.Do(func() { close(l.quit) })
	l.wg.Wait()
	l.drain()
}
