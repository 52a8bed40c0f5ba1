package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/sagachaos/sagachaos/harness/env"
	"github.com/sagachaos/sagachaos/harness/target"
	"github.com/sagachaos/sagachaos/harness/world"
	"github.com/sagachaos/sagachaos/models"
)

// buildVersion is set with -ldflags "-X main.buildVersion=…".
var buildVersion = ""

func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			return "dev-" + rev + dirty + " (" + bi.GoVersion + ")"
		}
		return "dev (" + bi.GoVersion + ")"
	}
	return "dev"
}

func cmdEnv(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "up" {
		return fail(2, "env: want `env up`")
	}
	fs := flag.NewFlagSet("env up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	targetName := fs.String("target", "reference", "create the databases and topics of this target")
	var ef envFlags
	ef.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return &exitError{code: 2}
	}
	cfg := ef.config()
	cfg.Logger = newLogger(stderr, false)
	m, err := target.Find(*targetName)
	if err != nil {
		return fail(2, "%v", err)
	}
	cfg.Databases = m.Databases
	cfg.PostgresSettings = m.PostgresSettings()
	for _, t := range m.Topics {
		cfg.Topics = append(cfg.Topics, env.Topic{Name: t.Name, Partitions: t.Partitions})
	}
	e, err := env.Up(ctx, cfg)
	if err != nil {
		return fail(2, "%v", err)
	}
	defer e.Close()
	rec, _ := models.NewRecorder(nil, models.Header{})
	w, err := world.Start(ctx, rec, m.World)
	if err != nil {
		return fail(2, "start the world: %v", err)
	}
	defer w.Close()
	var world []string
	for _, name := range w.Names() {
		addr := w.Provider(name).Addr()
		if _, err := e.NewLink("example→"+name, addr); err != nil {
			return fail(2, "%v", err)
		}
		world = append(world, name+" http://"+addr)
	}
	e.Describe(stdout)
	fmt.Fprintf(stdout, "world: %s\n", strings.Join(world, "  "))
	fmt.Fprintln(stdout, "up; Ctrl-C tears everything down")
	<-ctx.Done()
	fmt.Fprintln(stdout, "tearing down")
	return nil
}
