package atomicfile

import (
	"io/fs"
	"os"
	"syscall"
)

// OpenForRead opens path for reading and returns what was opened, so that
// the caller judges the file it will read, not the one a Stat saw: a FIFO
// renamed over the path between a Stat and a plain open blocked that open
// until a writer came, for ever once the FIFO was unlinked (a reload, and
// every reload and readiness check after it). O_NONBLOCK makes the open of
// a FIFO return at once; it changes nothing for a regular file. The caller
// reads only a regular file (fi.Mode().IsRegular()) and closes f.
func OpenForRead(path string) (f *os.File, fi fs.FileInfo, err error) {
	f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
