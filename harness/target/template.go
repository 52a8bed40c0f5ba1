package target

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/sagachaos/sagachaos/scenarios"
)

var templateRE = regexp.MustCompile(`\{\{([a-z]+)(?::([A-Za-z0-9_.-]+))?\}\}`)

// Component ports come from a range below the kernel's ephemeral range
// (32768–60999 by default). A port picked with ":0" and released for the
// child to bind is in the range every outgoing connection draws its source
// port from, and under load one of them takes it first ("address already in
// use" at start, seen in CI-like parallel runs). Each harness process starts
// at a pid-derived offset, so concurrent runs rarely probe the same ports.
const (
	portBase  = 20000
	portRange = 10000
)

var nextPort atomic.Int64

func init() { nextPort.Store(int64(os.Getpid()*7919) % portRange) }

func freeAddr() (string, error) {
	for i := 0; i < portRange; i++ {
		port := portBase + int(nextPort.Add(1)%portRange)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free port in 127.0.0.1:%d-%d", portBase, portBase+portRange-1)
}

// fill replaces the manifest templates of docs/target-contract.md for one
// instance, creating the instance's own links on the way.
func (t *Target) fill(s string, in *instance) (string, error) {
	var ferr error
	out := templateRE.ReplaceAllStringFunc(s, func(m string) string {
		g := templateRE.FindStringSubmatch(m)
		kind, arg := g[1], g[2]
		depends := func(d string) bool {
			for _, x := range in.process.Depends {
				if x == d {
					return true
				}
			}
			ferr = fmt.Errorf("process %s uses %s but does not list %q in depends", in.process.Name, m, d)
			return false
		}
		switch kind {
		case "listen":
			return in.listen
		case "instance":
			return in.name
		case "bin":
			return t.bin
		case "dir":
			d, err := filepath.Abs(t.m.Dir)
			if err != nil {
				ferr = err
			}
			return d
		case "resource":
			amounts, ok := t.resources[arg]
			if !ok {
				ferr = fmt.Errorf("%s: the scenario has no counted resource %q", m, arg)
				return m
			}
			b, _ := json.Marshal(amounts)
			return string(b)
		case "topic":
			return t.env.TopicName(arg)
		case "db":
			if !depends("postgres") {
				return m
			}
			dsn, err := t.env.ProxiedDSN(in.name, arg)
			if err != nil {
				ferr = err
			}
			return dsn
		case "kafka":
			if !depends("kafka") {
				return m
			}
			bs, err := t.env.KafkaBrokersFor(in.name)
			if err != nil {
				ferr = err
			}
			return strings.Join(bs, ",")
		case "url":
			if !depends(arg) {
				return m
			}
			p := t.world.Provider(arg)
			if p == nil {
				ferr = fmt.Errorf("%s: no world provider %q (the manifest's world declares %v)", m, arg, t.world.Names())
				return m
			}
			l, err := t.env.NewLink(scenarios.LinkName(in.name, arg), p.Addr())
			if err != nil {
				ferr = err
				return m
			}
			return "http://" + l.Listen()
		}
		ferr = fmt.Errorf("unknown template %s", m)
		return m
	})
	return out, ferr
}
