# sagachaos — common tasks. The two set-up commands of the README are
# `make run` (a chaos run against the reference target) and `make test`.
GO       ?= go
SEEDS    ?= 1-3
SCENARIO ?= swarm
SEED     ?= 1
SCALE    ?= 1

PG_IMAGE ?= sagachaos/postgres:15-local

.PHONY: run test race test-short bench lint selftest scenarios soak fuzz rss clean docker docker-down anywhere

## run: one chaos run of the reference target on the embedded defaults
run:
	$(GO) run ./cmd/sagachaos run --target reference --scenario $(SCENARIO) --seed $(SEED) --scale $(SCALE)

## test: the whole test suite, then the race detector on the quick path, as CI runs it
test:
	$(GO) test -count=1 -timeout 25m ./...
	$(MAKE) race

## race: the short tests of every package that starts goroutines, under the race detector
RACE_PKGS ?= ./harness/... ./scenarios/... ./models/...
race:
	$(GO) test -race -short -count=1 -timeout 20m $(RACE_PKGS)

## test-short: the quick path for a laptop
test-short:
	$(GO) test -short -count=1 -timeout 10m ./...

## docker: the testcontainers path on a real engine — installs docker.io if absent, starts a private
## dockerd (scripts/docker-up.sh), builds $(PG_IMAGE) from the host's PostgreSQL package
## (scripts/pg-image.sh), runs the -tags docker tests (a db-crash chaos run on a container beside the
## embedded one, Ctrl-C and SIGKILL leave nothing). The engine stays up for the next call: make docker-down.
docker:
	@eval "$$(scripts/docker-up.sh)" && scripts/pg-image.sh $(PG_IMAGE) >/dev/null && \
	  TESTCONTAINERS_RYUK_DISABLED=true SAGACHAOS_PG_IMAGE=$(PG_IMAGE) \
	  $(GO) test -tags docker -count=1 -timeout 15m -v -run 'Container|Testcontainers' ./harness/env/ ./cmd/sagachaos/

## anywhere: go install …/cmd/sagachaos@version (the checkout published to a local file:// proxy) into a
## fresh GOPATH and module cache, then a calm run of the reference from an empty directory outside the checkout
anywhere:
	$(GO) test -tags install -count=1 -timeout 30m -v -run 'TestInstalledBinaryWorksAnywhere' ./cmd/sagachaos/

## docker-down: stop the engine make docker started (containers of runs are removed first)
docker-down:
	scripts/docker-down.sh

## bench: one table — time to catch each mutant, cold start, checker throughput, orders/s, gate wall time
bench:
	./scripts/bench.sh

## selftest: the gate — every mutant caught by its intended checker, the reference valid on every named scenario with 2 seeds
selftest:
	$(GO) run ./cmd/sagachaos selftest --mutant-seeds 6 --reference-seeds 2 --out runs/selftest

## lint: formatting and vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## scenarios: every named scenario with seeds $(SEEDS) against the reference (must all be valid)
scenarios:
	@fail=0; for s in $$($(GO) run ./cmd/sagachaos list scenarios | awk '{print $$1}'); do \
	  $(GO) run ./cmd/sagachaos run --target reference --scenario $$s --seeds $(SEEDS) --out runs/scenarios || fail=1; \
	done; $(GO) run ./cmd/sagachaos report runs/scenarios >/dev/null; exit $$fail

## soak: many seeds of the swarm scenario (the reference must stay valid)
soak:
	$(GO) run ./cmd/sagachaos run --target reference --scenario swarm --seeds 1-50 --out runs/soak

## fuzz: every parser of untrusted input, $(FUZZTIME) each (a finding lands in its package's testdata/fuzz/ and then runs in every `go test`)
FUZZTIME ?= 60s
FUZZ_TARGETS = models:FuzzReadHistory checkers:FuzzFastDecode scenarios:FuzzParseSpec targets:FuzzParseManifest \
	reports:FuzzParseVerdict reports:FuzzCheckRender
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "== $$fn (./$$pkg)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./$$pkg/ || exit 1; \
	done

clean:
	rm -rf runs

## rss: peak memory (RSS) of the harness on a 10,000-order run (target < 500 MB)
rss:
	$(GO) build -o /tmp/sagachaos-rss ./cmd/sagachaos
	mkdir -p runs
	/usr/bin/time -v /tmp/sagachaos-rss run --target reference --scenario scenarios/testdata/soak-10k.json --seed 1 --out runs/rss 2> runs/rss.time || true
	@grep -E "Maximum resident set size|Elapsed \(wall" runs/rss.time
