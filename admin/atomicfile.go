package admin

import (
	"fmt"
	"os"

	"sluice/internal/atomicfile"
)

// writeFileAtomic replaces the rules file at path, keeping its permission
// bits; the file must exist (the editor only rewrites what it read).
func writeFileAtomic(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	if err := atomicfile.Write(path, data, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	return nil
}
