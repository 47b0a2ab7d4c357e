//go:build unix

package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives the temporary file f the owner and group of the file it
// replaces. Only root may give a file away; any other user keeps what the
// system allows (EPERM is not an error: the save still happens, as before).
func keepOwner(f *os.File, old fs.FileInfo) error {
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, syscall.EPERM) {
		return err
	}
	return nil
}
