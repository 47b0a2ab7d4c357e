package window

import "unsafe"

var sizeofExact = int(unsafe.Sizeof(Exact{}))
