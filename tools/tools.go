//go:build tools

package tools

import (
	_ "github.com/Shopify/toxiproxy/v2"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/testcontainers/testcontainers-go"
	_ "github.com/testcontainers/testcontainers-go/modules/postgres"
	_ "github.com/testcontainers/testcontainers-go/modules/redpanda"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "pgregory.net/rapid"
)
