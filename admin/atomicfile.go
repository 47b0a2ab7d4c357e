package admin

import (
	"fmt"
	"os"

	"sluice/internal/atomicfile"
)

// writeFileAtomic replaces the rules file at path with data, keeping its
// permission bits and owner; the file must exist (the editor only rewrites
// what it read). If the file no longer holds old when the new version is
// about to be renamed over it, nothing is written and the error wraps
// atomicfile.ErrChanged.
func writeFileAtomic(path string, data, old []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	if err := atomicfile.WriteIfUnchanged(path, data, old, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	return nil
}
