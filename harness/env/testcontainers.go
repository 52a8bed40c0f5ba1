package env

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/modules/redpanda"
)

// dockerAvailable checks up front that testcontainers can reach Docker, so
// a missing engine is one line, not a stack of container errors.
func dockerAvailable(ctx context.Context, what string) error {
	if os.Getenv("DOCKER_HOST") == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			if _, err2 := os.Stat(os.ExpandEnv("$XDG_RUNTIME_DIR/docker.sock")); err2 != nil {
				return unavailable(what+": testcontainers selected but Docker is not reachable (no DOCKER_HOST, no /var/run/docker.sock)",
					"start Docker or use the embedded default", nil)
			}
		}
	}
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return unavailable(what+": testcontainers selected but Docker is not reachable", "start Docker or use the embedded default", err)
	}
	defer p.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Health(cctx); err != nil {
		return unavailable(what+": testcontainers selected but Docker is not healthy", "start Docker or use the embedded default", err)
	}
	return nil
}

// containerPG is a PostgreSQL container; crash/restart are not offered
// (a container restart is not a postmaster SIGKILL).
type containerPG struct {
	*dsnPG
	c *tcpostgres.PostgresContainer
}

func startContainerPG(ctx context.Context) (*containerPG, error) {
	if err := dockerAvailable(ctx, "postgres"); err != nil {
		return nil, err
	}
	c, err := tcpostgres.Run(ctx, "postgres:15-alpine",
		tcpostgres.WithDatabase("postgres"), tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		if c != nil {
			_ = c.Terminate(context.Background())
		}
		return nil, fmt.Errorf("postgres: testcontainers run: %w", err)
	}
	dsn, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = c.Terminate(context.Background())
		return nil, fmt.Errorf("postgres: testcontainers dsn: %w", err)
	}
	d, err := openDSNPG(ctx, dsn, "the container")
	if err != nil {
		_ = c.Terminate(context.Background())
		return nil, err
	}
	return &containerPG{dsnPG: d, c: c}, nil
}

func (p *containerPG) describe() string { return "testcontainers " + p.dsnPG.describe() }

func (p *containerPG) close() error {
	err := p.dsnPG.close()
	if terr := p.c.Terminate(context.Background()); terr != nil && err == nil {
		err = fmt.Errorf("postgres: terminate container: %w", terr)
	}
	return err
}

// containerKafka is a Redpanda container speaking the Kafka protocol.
type containerKafka struct {
	*externalKafka
	c *redpanda.Container
}

func startContainerKafka(ctx context.Context, topics []Topic, prefix string) (*containerKafka, error) {
	if err := dockerAvailable(ctx, "kafka"); err != nil {
		return nil, err
	}
	c, err := redpanda.Run(ctx, "docker.redpanda.com/redpandadata/redpanda:v24.1.1")
	if err != nil {
		if c != nil {
			_ = c.Terminate(context.Background())
		}
		return nil, fmt.Errorf("kafka: testcontainers redpanda: %w", err)
	}
	addr, err := c.KafkaSeedBroker(ctx)
	if err != nil {
		_ = c.Terminate(context.Background())
		return nil, fmt.Errorf("kafka: redpanda seed broker: %w", err)
	}
	k, err := openExternalKafka(ctx, "testcontainers", []string{addr}, "the container", topics, prefix)
	if err != nil {
		_ = c.Terminate(context.Background())
		return nil, err
	}
	return &containerKafka{externalKafka: k, c: c}, nil
}

func (k *containerKafka) close() error {
	err := k.externalKafka.close()
	if terr := k.c.Terminate(context.Background()); terr != nil && err == nil {
		err = fmt.Errorf("kafka: terminate container: %w", terr)
	}
	return err
}
