package target

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sagachaos/sagachaos/targets"
)

// Prepare builds the target into bin (empty: DefaultBin) and lists its
// failpoints: what a caller needs before generating a scenario. It returns
// the bin directory it used.
func Prepare(ctx context.Context, m *targets.Manifest, bin string) (string, []targets.Failpoint, error) {
	bin, err := Build(ctx, m, bin)
	if err != nil {
		return bin, nil, err
	}
	fps, err := FailpointCatalog(ctx, m, bin)
	return bin, fps, err
}

// Build runs the manifest's build command from the module root above the
// manifest (or, for a target outside any Go module, from the manifest's
// own directory), writing binaries to bin (empty: DefaultBin). It returns
// the bin directory it used. "{{bin}}" and "{{dir}}" (the manifest's
// directory) are filled in the command's arguments.
//
// A build that succeeded is not run again by the same process (the
// contract's "once before the first run": a sweep of seeds builds once),
// and builds of one bin directory are serialised across processes by a
// lock file in it: a build such as `npm ci` that rewrites its output in
// place must not run twice at once.
func Build(ctx context.Context, m *targets.Manifest, bin string) (string, error) {
	if bin == "" {
		bin = DefaultBin(m)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return bin, fmt.Errorf("bin dir: %w", err)
	}
	if m.Build == nil || len(m.Build.Command) == 0 {
		return bin, nil
	}
	root, err := buildRoot(m.Dir)
	if err != nil {
		return bin, &Error{Err: err}
	}
	args, err := commandArgs(m, m.Build.Command, bin)
	if err != nil {
		return bin, &Error{Err: err}
	}
	key := root + "\x00" + bin + "\x00" + strings.Join(args, "\x00")
	builtMu.Lock()
	defer builtMu.Unlock()
	if built[key] {
		return bin, nil
	}
	unlock, err := lockFile(filepath.Join(bin, ".build.lock"))
	if err != nil {
		return bin, &Error{Err: fmt.Errorf("build %s: lock: %w", m.Name, err)}
	}
	defer unlock()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return bin, &Error{Err: fmt.Errorf("build %s (%s): %w: %s", m.Name, strings.Join(args, " "), err, firstLine(string(out)))}
	}
	built[key] = true
	return bin, nil
}

var (
	builtMu sync.Mutex // held during a build: one build at a time per process
	built   = map[string]bool{}
)

// commandArgs fills {{bin}} and {{dir}} in a build or failpoint command.
func commandArgs(m *targets.Manifest, command []string, bin string) ([]string, error) {
	dir, err := filepath.Abs(m.Dir)
	if err != nil {
		return nil, err
	}
	args := make([]string, len(command))
	for i, a := range command {
		args[i] = strings.NewReplacer("{{bin}}", bin, "{{dir}}", dir).Replace(a)
	}
	return args, nil
}

// FailpointCatalog runs the manifest's failpoint listing command.
func FailpointCatalog(ctx context.Context, m *targets.Manifest, bin string) ([]targets.Failpoint, error) {
	if len(m.Failpoints) == 0 {
		return nil, nil
	}
	args, err := commandArgs(m, m.Failpoints, bin)
	if err != nil {
		return nil, &Error{Err: err}
	}
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
	if err != nil {
		return nil, &Error{Err: fmt.Errorf("list failpoints (%s): %w", strings.Join(args, " "), err)}
	}
	var fps []targets.Failpoint
	if err := json.Unmarshal(out, &fps); err != nil {
		return nil, &Error{Err: fmt.Errorf("list failpoints: output is not a JSON []Failpoint: %w", err)}
	}
	return fps, nil
}

// DefaultBin is where a target's binaries are built: a per-user cache dir
// keyed by the target and by the checkout it is built from, so two
// checkouts (a CI clone beside a working tree) never run each other's build.
func DefaultBin(m *targets.Manifest) string {
	root, err := moduleRoot(m.Dir)
	if err != nil {
		root = m.Dir
	}
	sum := sha256.Sum256([]byte(root))
	name := fmt.Sprintf("%s-%x", m.Name, sum[:6])
	if c, err := os.UserCacheDir(); err == nil {
		return filepath.Join(c, "sagachaos", "bin", name)
	}
	return filepath.Join(os.TempDir(), "sagachaos-bin", name)
}

// buildRoot is where the build runs: the module root above dir, or dir
// itself when no go.mod is above it (a target in another language, in its
// own repository).
func buildRoot(dir string) (string, error) {
	if root, err := moduleRoot(dir); err == nil {
		return root, nil
	}
	return filepath.Abs(dir)
}

func moduleRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod above %s to build the target from", dir)
		}
		d = parent
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
