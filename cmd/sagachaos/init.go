package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sagachaos/sagachaos/targets"
)

// initFile is what `sagachaos init` writes in the working directory.
const initFile = "sagachaos.json"

// cmdInit writes a commented manifest skeleton (targets.Skeleton) for the
// user's own service into the working directory.
func cmdInit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "the target's name (default: the directory's name)")
	force := fs.Bool("force", false, "overwrite an existing "+initFile)
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2}
	}
	if fs.NArg() != 0 {
		return fail(2, "init: no arguments expected (got %v); it writes ./%s", fs.Args(), initFile)
	}
	if *name == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fail(2, "init: %v", err)
		}
		*name = strings.Trim(regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(strings.ToLower(filepath.Base(wd)), "-"), "-")
		if *name == "" {
			*name = "myservice"
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if *force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(initFile, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fail(2, "init: %s exists; edit it, or pass --force to overwrite it", initFile)
	}
	if err != nil {
		return fail(2, "init: %v", err)
	}
	if _, err := f.Write(targets.Skeleton(*name)); err != nil {
		f.Close()
		return fail(2, "init: %v", err)
	}
	if err := f.Close(); err != nil {
		return fail(2, "init: %v", err)
	}
	fmt.Fprintf(stdout, "wrote %s (target %q): fill in the TODOs, then\n  sagachaos run --target ./%s --scenario calm --seed 1\n", initFile, *name, initFile)
	return nil
}
