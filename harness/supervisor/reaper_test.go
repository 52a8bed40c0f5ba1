package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReaperRemovesLabelledContainers runs the reaper against a stand-in
// docker CLI that records its arguments: when the reaper's stdin closes it
// lists and removes the containers and networks of every label still
// registered, on that label's engine, and leaves an unregistered one alone.
// (harness/env's docker-tagged tests do the same against a real engine,
// SIGKILL of the harness included.)
func TestReaperRemovesLabelledContainers(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := `#!/bin/sh
echo "$*" >> ` + calls + `
case "$*" in
  *" ps -aq "*) echo c1; echo c2 ;;
  *" network ls -q "*) echo n1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	r, err := StartReaper()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"sagachaos.run=aa", "sagachaos.run=bb"} {
		if err := r.AddDockerLabel("unix:///x/docker.sock", l); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.RemoveDockerLabel("unix:///x/docker.sock", "sagachaos.run=bb"); err != nil {
		t.Fatal(err)
	}
	if err := r.AddDockerLabel("unix:///x/docker.sock", "has space"); err == nil {
		t.Error("a label with a space was accepted")
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatalf("the reaper never ran docker: %v", err)
	}
	got := strings.TrimSpace(string(b))
	want := strings.Join([]string{
		"-H unix:///x/docker.sock ps -aq --filter label=sagachaos.run=aa",
		"-H unix:///x/docker.sock rm -f -v c1 c2",
		"-H unix:///x/docker.sock network ls -q --filter label=sagachaos.run=aa",
		"-H unix:///x/docker.sock network rm n1",
	}, "\n")
	if got != want {
		t.Errorf("docker calls:\n%s\nwant:\n%s", got, want)
	}
}
