// Package env brings up the infrastructure of one run — PostgreSQL, Kafka and
// in-process toxiproxy links — from real parts, on a bare machine, in about
// two seconds, and tears all of it down again.
//
// Providers: PostgreSQL "local" (an ephemeral cluster from the local server
// binaries, cloned from a cached initdb template), "dsn" (an existing server,
// per-run databases) or "testcontainers" (a container on a fixed loopback
// port: crash = docker kill -s KILL, restart = docker start; labelled
// containers removed by a supervisor.Reaper if the harness dies); Kafka
// "kfake" (franz-go's in-process cluster speaking the real protocol over
// TCP), "brokers" (an existing cluster, per-run topic prefix) or
// "testcontainers" (Redpanda: compiled, but no image can be had without a
// registry).
//
// Links. Every component gets its own toxiproxy link per dependency, named
// "component→dependency", so one link can be cut without the others:
//
//   - "C→postgres" (PostgresLink, ProxiedDSN): per component, every provider.
//   - "C→kafka" (KafkaBrokersFor) with kfake: per component. A broker
//     advertises its own address in Metadata and FindCoordinator responses,
//     which would send clients around the proxy. Each component's link
//     therefore has its own upstream door into the kfake broker, and on
//     connections that came through that door the advertised port is
//     rewritten to the component's proxy port. Cutting "relay-1→kafka" stops
//     relay-1 and nobody else.
//   - "C→kafka" with "brokers" or "testcontainers": NOT interposed. An
//     external broker advertises its own addresses, so KafkaBrokersFor
//     returns the direct broker list and Kafka link faults are unavailable
//     (ErrUnsupported); use kfake for Kafka network faults.
//   - generic links (NewLink) for world services and client traffic.
//
// The harness's own observer uses DirectDSN and DirectBrokers, which never
// cross a link.
package env
