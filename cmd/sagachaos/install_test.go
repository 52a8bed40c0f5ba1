//go:build install

// Built only with -tags install (`make anywhere`, run by .ci/run): a real
// go install into a fresh module cache compiles every dependency again
// (the build cache is keyed by source paths), minutes on two cores.

package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// installVersion is the version the test publishes the checkout as.
const installVersion = "v0.0.1-installtest"

// zipFile is a file of the checkout for modzip.Create.
type zipFile struct{ root, rel string }

func (f zipFile) Path() string                 { return f.rel }
func (f zipFile) Lstat() (fs.FileInfo, error)  { return os.Lstat(filepath.Join(f.root, f.rel)) }
func (f zipFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.rel)) }

// publish writes the checkout (its tracked and untracked, not ignored files:
// what a release would contain, with the working tree's changes) as module
// github.com/sagachaos/sagachaos@installVersion into a file:// proxy.
func publish(t *testing.T, proxy string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []modzip.File
	for _, rel := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, err := os.Lstat(filepath.Join(root, rel)); err == nil {
			files = append(files, zipFile{root, rel})
		}
	}
	dir := filepath.Join(proxy, "github.com", "sagachaos", "sagachaos", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	z, err := os.Create(filepath.Join(dir, installVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := modzip.Create(z, module.Version{Path: "github.com/sagachaos/sagachaos", Version: installVersion}, files); err != nil {
		t.Fatalf("module zip of the checkout: %v", err)
	}
	z.Close()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{
		installVersion + ".mod":  string(gomod),
		installVersion + ".info": fmt.Sprintf(`{"Version":%q,"Time":%q}`, installVersion, time.Now().UTC().Format(time.RFC3339)),
		"list":                   installVersion + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInstalledBinaryWorksAnywhere does what a user does: `go install
// github.com/sagachaos/sagachaos/cmd/sagachaos@version` (the checkout
// published as that version in a local file:// proxy; its dependencies
// served from this machine's module cache, also as a file:// proxy), into a
// fresh GOPATH and module cache, then `sagachaos run --target reference
// --scenario calm --seed 1` from an empty directory outside the checkout:
// the binary finds the reference's source in the module cache and builds it.
func TestInstalledBinaryWorksAnywhere(t *testing.T) {
	tmp, err := os.MkdirTemp("", "sagachaos-install-")
	if err != nil {
		t.Fatal(err)
	}
	// The module cache is read-only; make it removable again.
	defer func() { _ = exec.Command("chmod", "-R", "u+w", tmp).Run(); os.RemoveAll(tmp) }()
	cacheOut, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	hostCache := strings.TrimSpace(string(cacheOut))
	proxy := filepath.Join(tmp, "proxy")
	publish(t, proxy)
	gopath := filepath.Join(tmp, "gopath")
	env := append(os.Environ(),
		"GOPATH="+gopath,
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOBIN=",
		"GOFLAGS=-mod=mod",
		"GOPROXY=file://"+proxy+",file://"+filepath.Join(hostCache, "cache", "download"),
		"GOSUMDB=off",
		"GOTOOLCHAIN=local",
	)
	home := filepath.Join(tmp, "home")
	work := filepath.Join(tmp, "work")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	install := exec.Command("go", "install", "github.com/sagachaos/sagachaos/cmd/sagachaos@"+installVersion)
	install.Dir, install.Env = home, env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	bin := filepath.Join(gopath, "bin", "sagachaos")
	t.Logf("go install into a fresh module cache: %s", time.Since(t0).Round(time.Millisecond))

	run := exec.Command(bin, "run", "--target", "reference", "--scenario", "calm", "--seed", "1")
	run.Dir, run.Env = work, env
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("sagachaos run from %s: %v\n%s", work, err, out)
	}
	if !strings.Contains(string(out), "VALID") {
		t.Fatalf("no VALID verdict:\n%s", out)
	}
	runs, _ := filepath.Glob(filepath.Join(work, "runs", "*-calm-1"))
	if len(runs) != 1 {
		t.Fatalf("run dirs under %s/runs: %v", work, runs)
	}
	assertNothingLeft(t, runs[0])
	b, _ := os.ReadFile(filepath.Join(runs[0], "scenario.json"))
	if !strings.Contains(string(b), filepath.Join(tmp, "modcache")) {
		t.Errorf("the reference did not come from the fresh module cache: %s", b)
	}
	fmt.Printf("installed with go install …@%s into a fresh GOPATH and module cache; from %s: sagachaos run --target reference --scenario calm --seed 1 exit 0 (VALID)\n", installVersion, work)
}
