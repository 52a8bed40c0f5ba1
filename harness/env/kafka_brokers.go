package env

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvKafkaBrokers is the default broker list (comma-separated) of the
// "brokers" provider.
const EnvKafkaBrokers = "SAGACHAOS_KAFKA_BROKERS"

// externalKafka is a cluster the harness does not own (existing brokers or a
// container). Topics get a per-run prefix and are deleted on close.
type externalKafka struct {
	addrs   []string
	created []string
	kind    string
}

// openExternalKafka checks that addrs are reachable brokers and creates the
// run's topics; from names where the list came from in the fix of a message.
func openExternalKafka(ctx context.Context, kind string, addrs []string, from string, topics []Topic, prefix string) (*externalKafka, error) {
	if len(addrs) == 0 {
		return nil, unavailable("kafka: --kafka brokers selected but no brokers given",
			"set "+EnvKafkaBrokers+"=host:9092[,host:9093] or pass --kafka-brokers", nil)
	}
	if from == "" {
		from = "the broker list"
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DialTimeout(3*time.Second))
	if err != nil {
		return nil, unavailable("kafka: bad broker list "+strings.Join(addrs, ","), "fix "+from, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := adm.ListBrokers(cctx); err != nil {
		return nil, unavailable("kafka: cannot reach brokers "+strings.Join(addrs, ","),
			"start them, fix "+from+", or use --kafka kfake", err)
	}
	k := &externalKafka{addrs: addrs, kind: kind}
	for _, t := range topics {
		p := t.Partitions
		if p < 1 {
			p = 1
		}
		name := prefix + t.Name
		resp, err := adm.CreateTopic(cctx, p, -1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			_ = k.close()
			return nil, fmt.Errorf("kafka %s: create topic %s: %w", kind, name, err)
		}
		k.created = append(k.created, name)
	}
	return k, nil
}

func (k *externalKafka) brokers() []string { return k.addrs }

func (k *externalKafka) close() error {
	if len(k.created) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.addrs...))
	if err != nil {
		return fmt.Errorf("kafka %s: delete run topics: %w", k.kind, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, k.created...)
	if err != nil {
		return fmt.Errorf("kafka %s: delete run topics %v: %w", k.kind, k.created, err)
	}
	var errs []error
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", r.Topic, r.Err))
		}
	}
	k.created = nil
	return errors.Join(errs...)
}
