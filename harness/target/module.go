package target

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"golang.org/x/mod/module"
)

// ModulePath is the module the harness (and its built-in targets) comes
// from.
const ModulePath = "github.com/sagachaos/sagachaos"

// EnvModuleDir names a sagachaos source tree to take the built-in targets
// from, for a binary built from a checkout (`go build` in it; its build info
// does not say where the checkout is) and run elsewhere.
const EnvModuleDir = "SAGACHAOS_MODULE_DIR"

// moduleSource finds the source tree of the sagachaos module this binary was
// built from, so that `sagachaos run --target reference` works from any
// directory after `go install github.com/sagachaos/sagachaos/cmd/sagachaos@v…`.
// In order:
//
//  0. $SAGACHAOS_MODULE_DIR, when set;
//  1. the build info's module entry (the main module after go install
//     …@version, a dependency when built from another module) replaced by a
//     local directory: that directory;
//  2. a released version: its directory in the module cache
//     ($GOMODCACHE/github.com/sagachaos/sagachaos@vX), downloaded with
//     `go mod download` if the cache was cleaned;
//  3. a development build: `go list -m` from the working directory (a module
//     that requires sagachaos, or the checkout itself).
func moduleSource(ctx context.Context) (string, error) {
	if d := os.Getenv(EnvModuleDir); d != "" {
		if !hasGoMod(d) {
			return "", fmt.Errorf("%s=%s has no go.mod", EnvModuleDir, d)
		}
		return filepath.Abs(d)
	}
	var tried []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		m := &bi.Main
		if m.Path != ModulePath {
			m = nil
			for _, d := range bi.Deps {
				if d.Path == ModulePath {
					m = d
				}
			}
		}
		if m != nil {
			path, version := m.Path, m.Version
			if r := m.Replace; r != nil && r.Version == "" {
				if filepath.IsAbs(r.Path) && hasGoMod(r.Path) {
					return r.Path, nil
				}
				tried = append(tried, "replace directory "+r.Path+" not usable")
				path, version = "", ""
			} else if r != nil {
				path, version = r.Path, r.Version
			}
			if path != "" {
				dir, err := moduleCacheDir(ctx, path, version)
				if err == nil {
					return dir, nil
				}
				tried = append(tried, err.Error())
			}
		}
	}
	dir, err := goListModule(ctx)
	if err == nil {
		return dir, nil
	}
	tried = append(tried, err.Error())
	return "", fmt.Errorf("the source of module %s was not found (%s; a binary built from a checkout: set %s to it)", ModulePath, strings.Join(tried, "; "), EnvModuleDir)
}

func hasGoMod(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// moduleCacheDir is path@version in the module cache, downloaded if absent.
func moduleCacheDir(ctx context.Context, path, version string) (string, error) {
	if version == "" || version == "(devel)" || strings.HasSuffix(version, "+dirty") {
		return "", fmt.Errorf("build info has no released version of %s (%q)", path, version)
	}
	if cache, err := goEnv(ctx, "GOMODCACHE"); err == nil && cache != "" {
		if ep, err := module.EscapePath(path); err == nil {
			if ev, err := module.EscapeVersion(version); err == nil {
				dir := filepath.Join(cache, ep+"@"+ev)
				if hasGoMod(dir) {
					return dir, nil
				}
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "go", "mod", "download", "-json", path+"@"+version)
	cmd.Dir = os.TempDir() // outside any module: the download stands alone
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	_ = json.Unmarshal(out, &info)
	if err != nil || info.Dir == "" {
		msg := info.Error
		if msg == "" && err != nil {
			msg = err.Error()
		}
		return "", fmt.Errorf("go mod download %s@%s: %s", path, version, msg)
	}
	return info.Dir, nil
}

// goListModule asks the go command where the module is, as the working
// directory's module sees it.
func goListModule(ctx context.Context) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "go", "list", "-m", "-json", ModulePath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %s", ModulePath, firstLine(stderr.String()+err.Error()))
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", errors.New("go list -m " + ModulePath + ": no directory (not downloaded)")
	}
	return m.Dir, nil
}

func goEnv(ctx context.Context, key string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", key).Output()
	return strings.TrimSpace(string(out)), err
}
