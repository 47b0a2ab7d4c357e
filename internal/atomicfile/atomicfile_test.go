package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"sluice/internal/atomicfile"
)

func TestWriteIfUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name     string
		onDisk   string // the file when the write renames
		basedOn  string // what the caller read
		wantErr  error
		wantFile string
	}{
		{"unchanged", "old\n", "old\n", nil, "new\n"},
		{"changed meanwhile", "theirs\n", "old\n", atomicfile.ErrChanged, "theirs\n"},
		{"emptied meanwhile", "", "old\n", atomicfile.ErrChanged, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "rules.yaml")
			if err := os.WriteFile(path, []byte(tc.onDisk), 0o640); err != nil {
				t.Fatal(err)
			}
			err := atomicfile.WriteIfUnchanged(path, []byte("new\n"), []byte(tc.basedOn), 0o600)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("WriteIfUnchanged: %v, want %v", err, tc.wantErr)
			}
			if got, _ := os.ReadFile(path); string(got) != tc.wantFile {
				t.Errorf("file %q, want %q", got, tc.wantFile)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("the directory holds %d files, want 1 (no temporary file left)", len(entries))
			}
		})
	}
}

func TestWriteKeepsMode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exists bool
		want   os.FileMode
	}{
		{"existing file keeps its mode", true, 0o640},
		{"new file gets perm", false, 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if tc.exists {
				if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, 0o640); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			if err := atomicfile.Write(path, []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != tc.want {
				t.Fatalf("mode %v (%v), want %v", fi.Mode().Perm(), err, tc.want)
			}
		})
	}
}
