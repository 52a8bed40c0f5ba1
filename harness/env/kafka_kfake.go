package env

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kfakeKafka is an in-process kfake cluster with one broker. The broker's
// listener is a brokerListener: a direct door (for the harness) plus one
// door per component link, each rewriting the advertised broker port to its
// link's port, so a client that bootstrapped through "C→kafka" stays on it.
type kfakeKafka struct {
	c  *kfake.Cluster
	ln *brokerListener
}

func startKfake(topics []Topic) (*kfakeKafka, error) {
	ln, err := newBrokerListener()
	if err != nil {
		return nil, err
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(string, string) (net.Listener, error) { return ln, nil }),
		// The 6 s default minimum makes every rebalance in a test slow.
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.DefaultNumPartitions(1),
	}
	for _, t := range topics {
		p := t.Partitions
		if p < 1 {
			p = 1
		}
		opts = append(opts, kfake.SeedTopics(p, t.Name))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("kafka: start kfake: %w", err)
	}
	return &kfakeKafka{c: c, ln: ln}, nil
}

func (k *kfakeKafka) brokers() []string { return []string{k.ln.Addr().String()} }

func (k *kfakeKafka) close() error {
	k.c.Close()
	k.ln.Close()
	return nil
}

// brokerListener merges the accepts of several TCP listeners into the one
// listener kfake's broker serves. Addr (what the broker advertises) is the
// direct door's address.
type brokerListener struct {
	direct net.Listener
	port   int
	conns  chan net.Conn
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	doors []net.Listener
}

func newBrokerListener() (*brokerListener, error) {
	d, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kafka: listen: %w", err)
	}
	l := &brokerListener{direct: d, port: d.Addr().(*net.TCPAddr).Port, conns: make(chan net.Conn), done: make(chan struct{})}
	go l.serve(d, nil)
	return l, nil
}

// door opens a new entrance whose connections advertise *advertise instead
// of the direct port (set once the link in front of it has its port).
func (l *brokerListener) door(advertise *atomic.Int32) (string, error) {
	d, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("kafka: open link door: %w", err)
	}
	l.mu.Lock()
	select {
	case <-l.done:
		l.mu.Unlock()
		d.Close()
		return "", net.ErrClosed
	default:
	}
	l.doors = append(l.doors, d)
	l.mu.Unlock()
	go l.serve(d, advertise)
	return d.Addr().String(), nil
}

func (l *brokerListener) serve(ln net.Listener, advertise *atomic.Int32) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if advertise != nil {
			c = &rewriteConn{Conn: c, from: int32(l.port), to: advertise, keys: map[int32]int16{}}
		}
		select {
		case l.conns <- c:
		case <-l.done:
			c.Close()
			return
		}
	}
}

func (l *brokerListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *brokerListener) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for _, d := range l.doors {
			d.Close()
		}
		l.mu.Unlock()
		l.direct.Close()
	})
	return nil
}

func (l *brokerListener) Addr() net.Addr { return l.direct.Addr() }

// rewriteConn is the broker side of a connection that came through a
// component's link. It tracks each request's API key by correlation id and,
// in the responses that carry broker addresses (Metadata 3,
// FindCoordinator 10, DescribeCluster 60), replaces the advertised port with
// the link's port. Host and port keep their length, so framing is intact.
type rewriteConn struct {
	net.Conn
	from int32
	to   *atomic.Int32

	// request-stream parser state (Read is called from one goroutine)
	hdr  [12]byte
	nhdr int
	skip int64

	mu   sync.Mutex
	keys map[int32]int16
}

func (c *rewriteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.track(p[:n])
	return n, err
}

func (c *rewriteConn) track(b []byte) {
	for len(b) > 0 {
		if c.skip > 0 {
			k := min(int64(len(b)), c.skip)
			c.skip -= k
			b = b[k:]
			continue
		}
		k := copy(c.hdr[c.nhdr:], b)
		c.nhdr += k
		b = b[k:]
		if c.nhdr < len(c.hdr) {
			return
		}
		size := int64(binary.BigEndian.Uint32(c.hdr[0:4]))
		key := int16(binary.BigEndian.Uint16(c.hdr[4:6]))
		corr := int32(binary.BigEndian.Uint32(c.hdr[8:12]))
		c.mu.Lock()
		c.keys[corr] = key
		c.mu.Unlock()
		c.nhdr = 0
		c.skip = size - 8
	}
}

var loopbackHost = []byte("127.0.0.1")

func (c *rewriteConn) Write(b []byte) (int, error) {
	to := c.to.Load()
	if len(b) >= 8 && to != 0 {
		corr := int32(binary.BigEndian.Uint32(b[4:8]))
		c.mu.Lock()
		key, ok := c.keys[corr]
		delete(c.keys, corr)
		c.mu.Unlock()
		if ok && (key == 3 || key == 10 || key == 60) {
			old := binary.BigEndian.AppendUint32(append([]byte{}, loopbackHost...), uint32(c.from))
			repl := binary.BigEndian.AppendUint32(append([]byte{}, loopbackHost...), uint32(to))
			b = bytes.ReplaceAll(b, old, repl)
		}
	}
	return c.Conn.Write(b)
}

func portOf(hostport string) int32 {
	_, p, _ := net.SplitHostPort(hostport)
	n, _ := strconv.Atoi(p)
	return int32(n)
}
